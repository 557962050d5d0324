"""Membership with a real client: static members come back without a rebalance; a consumer
killed with SIGKILL is removed after its session timeout and its partitions move; a group full
at `group.max.size` turns the next member away until a seat frees up."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from confluent_kafka import Consumer, KafkaError
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.conftest import StartBroker
from tests.support.procs import RoostProcess


class Tracked:
    """A consumer whose rebalance callbacks are counted; polled by the test thread."""

    def __init__(self, bootstrap: str, group: str, topic: str, **extra: object) -> None:
        self.assigned: list[int] = []
        self.errors: list[KafkaError] = []
        self.assign_calls = 0
        self.revoke_calls = 0
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "session.timeout.ms": 3000, "heartbeat.interval.ms": 300, **extra})
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, _consumer: Consumer, partitions: list) -> None:
        self.assign_calls += 1
        self.assigned = sorted(p.partition for p in partitions)

    def _on_revoke(self, _consumer: Consumer, _partitions: list) -> None:
        self.revoke_calls += 1
        self.assigned = []

    def poll(self, seconds: float = 0.2) -> None:
        message = self.consumer.poll(seconds)
        if message is not None and message.error() is not None:
            self.errors.append(message.error())


def poll_all(consumers: list[Tracked], until, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not until():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for consumer in consumers:
            consumer.poll(0.05)


def make_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)


def test_static_member_restart_keeps_its_partitions_without_a_rebalance(broker: RoostProcess) -> None:
    bootstrap = broker.address("kafka")
    make_topic(bootstrap, "static-topic", 4)
    static = Tracked(bootstrap, "static-group", "static-topic", **{"group.instance.id": "worker-1"})
    dynamic = Tracked(bootstrap, "static-group", "static-topic")
    poll_all([static, dynamic], lambda: len(static.assigned) + len(dynamic.assigned) == 4
             and static.assigned and dynamic.assigned, what="both members assigned")
    kept = static.assigned
    # Counted from here: the group's formation may already have rebalanced the dynamic member
    # (when it joined first, got every partition, and gave some back as the static one joined).
    dynamic_assigns, dynamic_revokes = dynamic.assign_calls, dynamic.revoke_calls
    static.consumer.close()  # a static member leaves no LeaveGroup behind: its seat stays
    restarted = Tracked(bootstrap, "static-group", "static-topic", **{"group.instance.id": "worker-1"})
    poll_all([restarted, dynamic], lambda: restarted.assigned == kept, what="the restarted member's partitions")
    for _ in range(10):
        dynamic.poll(0.1)
    assert dynamic.assign_calls == dynamic_assigns and dynamic.revoke_calls == dynamic_revokes, \
        "the other member saw a rebalance"
    restarted.consumer.close()
    dynamic.consumer.close()


CHILD = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Consumer, KafkaError
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "killed-group", "session.timeout.ms": 3000,
                  "heartbeat.interval.ms": 300})
    c.subscribe(["killed-topic"], on_assign=lambda _c, ps: print("assigned", len(ps), flush=True))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        c.poll(0.1)
""")


def test_killed_consumer_is_dropped_after_its_session_timeout(broker: RoostProcess) -> None:
    bootstrap = broker.address("kafka")
    make_topic(bootstrap, "killed-topic", 4)
    survivor = Tracked(bootstrap, "killed-group", "killed-topic")
    poll_all([survivor], lambda: len(survivor.assigned) == 4, what="the first member's assignment")
    child = subprocess.Popen([sys.executable, "-c", CHILD, bootstrap], stdout=subprocess.PIPE, text=True)
    try:
        poll_all([survivor], lambda: len(survivor.assigned) == 2, what="the partitions to be shared")
        child.kill()  # no LeaveGroup, no more heartbeats
        child.wait(10)
        poll_all([survivor], lambda: len(survivor.assigned) == 4, timeout=60,
                 what="the dead member's partitions to come back")
        assert "missed its session timeout" in broker.text()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        survivor.consumer.close()


def test_a_member_past_group_max_size_is_refused(start_broker: StartBroker) -> None:
    broker = start_broker("--group.max.size", "2")
    bootstrap = broker.address("kafka")
    make_topic(bootstrap, "full-topic", 4)
    first = Tracked(bootstrap, "full-group", "full-topic")
    second = Tracked(bootstrap, "full-group", "full-topic")
    poll_all([first, second], lambda: len(first.assigned) + len(second.assigned) == 4
             and first.assigned and second.assigned, what="two members sharing the partitions")
    # Counted from here: the group's formation may already have rebalanced the first member.
    revokes = first.revoke_calls, second.revoke_calls
    third = Tracked(bootstrap, "full-group", "full-topic")
    poll_all([first, second, third], lambda: third.errors, what="the third member to be refused")
    assert {e.code() for e in third.errors} == {KafkaError.GROUP_MAX_SIZE_REACHED}, third.errors
    assert third.assign_calls == 0
    # The two members keep their partitions: the refused join started no rebalance.
    assert sorted(first.assigned + second.assigned) == [0, 1, 2, 3]
    assert (first.revoke_calls, second.revoke_calls) == revokes
    # Once a member leaves, the one turned away gets in (librdkafka keeps trying to join).
    first.consumer.close()
    poll_all([second, third], lambda: third.assigned and len(second.assigned) + len(third.assigned) == 4,
             what="the refused member to join once a seat is free")
    second.consumer.close()
    third.consumer.close()
