"""KIP-848 with a real client: confluent-kafka consumers with `group.protocol=consumer` against a
real `roost up` (the module's shared broker, heartbeats every 500 ms as FAST_GROUPS sets).

- Three members join and leave during a steady stream: every record is consumed, the group's
  committed offsets never go back, and while a member joins the others keep their unaffected
  partitions (never revoked) and keep receiving their records.
- A static member (`group.instance.id`) that closes and comes back gets its partitions back.
- The two protocols side by side: a classic group with members refuses consumer-protocol
  heartbeats other than a join (GROUP_ID_NOT_FOUND; a join converts it, tests/broker/
  test_group_migration.py), a consumer group with members refuses a JoinGroup whose metadata is
  no consumer subscription (INCONSISTENT_GROUP_PROTOCOL), an empty group switches; ListGroups v5 and
  ConsumerGroupDescribe tell the kinds apart; OffsetCommit v9 and OffsetFetch v9 check the member
  epoch.
- A subscription by pattern is matched by the broker, `group.remote.assignor` picks `range`, and
  `roost group describe` shows the protocol and the epochs.
- (tests/cluster/test_consumer_protocol_failover.py: the group survives its coordinator's death.)
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cli.kafka_cli import run_json
from tests.support.kafka_wire import WireClient
from tests.support.procs import RoostProcess, wait_for

PARTITIONS = 6
RATE = 1500  # records per second, the steady stream
RUN_LIMIT_S = 90
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE, JOIN_GROUP, LIST_GROUPS = 68, 69, 11, 16
OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_GROUPS = 8, 9, 15
GROUP_ID_NOT_FOUND, INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH = 69, 23, 25, 113
MEMBER_ID_REQUIRED = 79


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    wait_for(lambda: len(admin.list_topics(topic, timeout=5).topics[topic].partitions) == partitions,
             what=f"{topic} known")


def consumer_config(bootstrap: str, group: str, **extra: object) -> dict[str, object]:
    return {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": True, "auto.commit.interval.ms": 200,
            **extra}


class SteadyProducer(threading.Thread):
    """Produces {"n": i} round-robin over the partitions at RATE per second until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic = topic
        self.stop = threading.Event()
        self.sent = 0

    def run(self) -> None:
        started = time.monotonic()
        while not self.stop.is_set() and time.monotonic() - started < RUN_LIMIT_S:
            due = int((time.monotonic() - started) * RATE)
            while self.sent < due:
                self.producer.produce(self.topic, json.dumps({"n": self.sent}).encode(),
                                      partition=self.sent % PARTITIONS)
                self.sent += 1
            self.producer.poll(0)
            time.sleep(0.01)
        assert self.producer.flush(30) == 0


class Member(threading.Thread):
    """One consumer of the group, recording its assignments, revocations and deliveries."""

    def __init__(self, bootstrap: str, group: str, topic: str, label: str, seen: set[int], lock: threading.Lock,
                 extra: dict[str, object] | None = None) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.group, self.topic, self.label = bootstrap, group, topic, label
        self.seen, self.lock, self.extra = seen, lock, extra or {}
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.revoked: list[tuple[float, set[int]]] = []
        self.assigned: list[tuple[float, set[int]]] = []
        self.deliveries: dict[int, list[float]] = {}  # partition -> monotonic times of records
        self.first_record_at: float | None = None

    def run(self) -> None:
        consumer = Consumer(consumer_config(self.bootstrap, self.group, **self.extra))

        def on_assign(_: Consumer, partitions: list[TopicPartition]) -> None:
            self.assigned.append((time.monotonic(), {p.partition for p in partitions}))

        def on_revoke(_: Consumer, partitions: list[TopicPartition]) -> None:
            self.revoked.append((time.monotonic(), {p.partition for p in partitions}))

        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        deadline = time.monotonic() + RUN_LIMIT_S
        try:
            while not self.stop.is_set() and time.monotonic() < deadline:
                for msg in consumer.consume(500, 0.1):
                    if msg.error():
                        if msg.error().code() != KafkaError._PARTITION_EOF:
                            self.errors.append(str(msg.error()))
                        continue
                    now = time.monotonic()
                    self.first_record_at = self.first_record_at or now
                    self.deliveries.setdefault(msg.partition(), []).append(now)
                    with self.lock:
                        self.seen.add(json.loads(msg.value())["n"])
        except Exception as error:  # surfaced by the test
            self.errors.append(repr(error))
        finally:
            consumer.close()

    def owned(self) -> set[int]:
        owned: set[int] = set()
        events = sorted([(t, "+", p) for t, p in self.assigned] + [(t, "-", p) for t, p in self.revoked])
        for _, kind, partitions in events:
            owned = owned | partitions if kind == "+" else owned - partitions
        return owned


class CommitWatch(threading.Thread):
    """Samples the group's committed offsets (OffsetFetch) and notes any that went back."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        self.partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        self.stop = threading.Event()
        self.last: dict[int, int] = {}
        self.went_back: list[str] = []
        self.samples = 0

    def run(self) -> None:
        deadline = time.monotonic() + RUN_LIMIT_S
        try:
            while not self.stop.is_set() and time.monotonic() < deadline:
                for tp in self.consumer.committed(self.partitions, timeout=10):
                    if tp.offset < 0:
                        continue
                    if tp.offset < self.last.get(tp.partition, -1):
                        self.went_back.append(f"{tp.partition}: {self.last[tp.partition]} -> {tp.offset}")
                    self.last[tp.partition] = tp.offset
                self.samples += 1
                time.sleep(0.2)
        finally:
            self.consumer.close()


def holders(members: list[Member]) -> list[set[int]]:
    return [m.owned() for m in members if m.is_alive()]


def test_members_join_and_leave_during_a_stream(shared_broker: RoostProcess) -> None:
    bootstrap = shared_broker.address("kafka")
    topic, group = "kip848-stream", "kip848-stream-group"
    create_topic(bootstrap, topic)
    seen: set[int] = set()
    lock = threading.Lock()
    producer = SteadyProducer(bootstrap, topic)
    watch = CommitWatch(bootstrap, group, topic)
    first, second, third = (Member(bootstrap, group, topic, name, seen, lock) for name in ("first", "second", "third"))
    threads: list[threading.Thread] = [producer, watch, first, second]
    try:
        producer.start()
        first.start()
        second.start()
        wait_for(lambda: sorted(len(h) for h in holders([first, second])) == [3, 3], timeout=30,
                 what="two members holding three partitions each")
        wait_for(lambda: first.first_record_at and second.first_record_at, timeout=30, what="both consuming")
        watch.start()
        time.sleep(0.5)
        before = {m.label: m.owned() for m in (first, second)}
        joined_at = time.monotonic()
        threads.append(third)
        third.start()
        wait_for(lambda: third.first_record_at is not None, timeout=30, what="the third member consuming")
        settled_at = third.first_record_at
        assert settled_at is not None
        wait_for(lambda: sorted(len(h) for h in holders([first, second, third])) == [2, 2, 2], timeout=30,
                 what="three members holding two partitions each")
        # While the third member joined, the others kept what they did not give up: never revoked,
        # and their records kept coming.
        for member in (first, second):
            kept = before[member.label] & member.owned()
            assert len(kept) == 2, (member.label, before[member.label], member.owned())
            for _, revoked in member.revoked:
                assert not revoked & kept, f"{member.label} had {revoked} revoked; it kept {kept}"
            during = [t for p in kept for t in member.deliveries.get(p, []) if joined_at <= t <= settled_at]
            assert during, f"{member.label} received nothing from {kept} during the join"
        # The second member leaves: its partitions go to the others.
        second.stop.set()
        second.join(30)
        wait_for(lambda: sorted(len(h) for h in holders([first, third])) == [3, 3], timeout=30,
                 what="the two remaining members holding three partitions each")
        time.sleep(0.5)
        producer.stop.set()
        producer.join(60)
        wait_for(lambda: len(seen) >= producer.sent, timeout=60, what="every record consumed")
        assert seen == set(range(producer.sent))
        time.sleep(0.5)  # a last commit round (auto-commit every 200 ms)
    finally:
        for thread in threads:
            thread.stop.set()  # type: ignore[attr-defined]
        for thread in threads:
            thread.join(30)
    for member in (first, second, third):
        assert member.errors == [], (member.label, member.errors[:5])
    assert watch.samples > 5 and watch.went_back == []
    assert sum(watch.last.values()) > 0


def test_a_static_member_closing_and_coming_back_keeps_its_partitions(shared_broker: RoostProcess) -> None:
    bootstrap = shared_broker.address("kafka")
    topic, group = "kip848-static", "kip848-static-group"
    create_topic(bootstrap, topic, 4)
    seen: set[int] = set()
    lock = threading.Lock()
    static = {"group.instance.id": "kip848-instance"}
    dynamic = Member(bootstrap, group, topic, "dynamic", seen, lock)
    first = Member(bootstrap, group, topic, "static", seen, lock, extra=static)
    again = Member(bootstrap, group, topic, "static again", seen, lock, extra=static)
    threads = [dynamic, first, again]
    try:
        dynamic.start()
        first.start()
        wait_for(lambda: sorted(len(h) for h in holders([dynamic, first])) == [2, 2], timeout=30,
                 what="two members holding two partitions each")
        kept, others = first.owned(), dynamic.owned()
        revocations = len(dynamic.revoked)
        first.stop.set()
        first.join(30)
        time.sleep(1.0)  # two heartbeat intervals: nothing moves to the dynamic member
        assert dynamic.owned() == others
        again.start()
        wait_for(lambda: again.owned() == kept, timeout=30, what="the static member's partitions back")
        assert dynamic.owned() == others and len(dynamic.revoked) == revocations, "the dynamic member was untouched"
    finally:
        for member in threads:
            member.stop.set()
        for member in threads:
            if member.is_alive() or member.ident:
                member.join(30)


def _heartbeat(client: WireClient, group: str, topic: str, epoch: int = 0) -> dict[str, object]:
    return client.request(CONSUMER_GROUP_HEARTBEAT, 0, {
        "group_id": group, "member_id": str(uuid.uuid4()), "member_epoch": epoch, "rebalance_timeout_ms": 30000,
        "subscribed_topic_names": [topic], "topic_partitions": []})


def test_the_two_protocols_side_by_side(shared_broker: RoostProcess) -> None:
    bootstrap = shared_broker.address("kafka")
    topic = "kip848-sides"
    create_topic(bootstrap, topic, 2)
    classic_group, consumer_group = "kip848-classic", "kip848-modern"
    classic = Consumer({"bootstrap.servers": bootstrap, "group.id": classic_group, "auto.offset.reset": "earliest"})
    classic.subscribe([topic])
    wait_for(lambda: (classic.poll(0.2), classic.assignment())[1], timeout=30, what="the classic member assigned")
    client = WireClient(bootstrap)
    try:
        coordinator_error = None
        for _ in range(50):  # the raw client asks the one broker, which coordinates everything
            answer = _heartbeat(client, classic_group, topic, epoch=1)
            coordinator_error = answer["error_code"]
            if coordinator_error == GROUP_ID_NOT_FOUND:
                break
            time.sleep(0.1)
        assert coordinator_error == GROUP_ID_NOT_FOUND
        joined = _heartbeat(client, consumer_group, topic)
        assert joined["error_code"] == 0 and joined["member_epoch"] > 0
        # Offsets name the member and its epoch (OffsetCommit v9, OffsetFetch v9).
        member_id, epoch = joined["member_id"], joined["member_epoch"]
        for committer, member_epoch, code in ((member_id, epoch, 0), (member_id, epoch - 1, STALE_MEMBER_EPOCH),
                                              ("stranger", epoch, UNKNOWN_MEMBER_ID), ("", -1, UNKNOWN_MEMBER_ID)):
            committed = client.request(OFFSET_COMMIT, 9, {
                "group_id": consumer_group, "generation_id_or_member_epoch": member_epoch, "member_id": committer,
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                            "committed_metadata": ""}]}]})
            assert committed["topics"][0]["partitions"][0]["error_code"] == code, (committer, member_epoch)
            fetched = client.request(OFFSET_FETCH, 9, {"groups": [{
                "group_id": consumer_group, "member_id": committer or None, "member_epoch": member_epoch,
                "topics": [{"name": topic, "partition_indexes": [0]}]}], "require_stable": False})
            (group_answer,) = fetched["groups"]
            expected = 0 if committer == "" else code  # no member named: an admin's read
            assert group_answer["error_code"] == expected, (committer, member_epoch)
            if expected == 0:
                assert group_answer["topics"][0]["partitions"][0]["committed_offset"] == 5
        join = {"group_id": consumer_group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                "member_id": "", "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}
        named = client.request(JOIN_GROUP, 7, join)  # a classic member may join (online migration)...
        assert named["error_code"] == MEMBER_ID_REQUIRED and named["member_id"]
        refused = client.request(JOIN_GROUP, 7, {**join, "member_id": named["member_id"]})
        assert refused["error_code"] == INCONSISTENT_GROUP_PROTOCOL  # ...with a consumer subscription
        listed = client.request(LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
        kinds = {g["group_id"]: (g["group_type"], g["protocol_type"]) for g in listed["groups"]}
        assert kinds[classic_group] == ("classic", "consumer") and kinds[consumer_group] == ("consumer", "consumer")
        only = client.request(LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["consumer"]})
        assert consumer_group in {g["group_id"] for g in only["groups"]}
        assert classic_group not in {g["group_id"] for g in only["groups"]}
        described = client.request(CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [consumer_group, classic_group],
                                                                 "include_authorized_operations": False})
        modern, old = described["groups"]
        assert modern["error_code"] == 0 and modern["group_epoch"] >= 1 and len(modern["members"]) == 1
        assert modern["members"][0]["subscribed_topic_names"] == [topic]
        assert old["error_code"] == GROUP_ID_NOT_FOUND
        classic_view = client.request(DESCRIBE_GROUPS, 5, {"groups": [consumer_group],
                                                           "include_authorized_operations": False})
        assert classic_view["groups"][0]["error_code"] == 0 and classic_view["groups"][0]["group_state"] == "Dead"
        # The consumer member leaves: the empty group may become classic.
        member = modern["members"][0]
        left = client.request(CONSUMER_GROUP_HEARTBEAT, 0, {
            "group_id": consumer_group, "member_id": member["member_id"], "member_epoch": -1})
        assert left["error_code"] == 0 and left["member_epoch"] == -1
        switched = Consumer({"bootstrap.servers": bootstrap, "group.id": consumer_group,
                             "auto.offset.reset": "earliest"})
        switched.subscribe([topic])
        wait_for(lambda: (switched.poll(0.2), switched.assignment())[1], timeout=30, what="the group now classic")
        switched.close()
    finally:
        client.close()
        classic.close()


def test_a_regex_subscription_a_server_assignor_and_roost_group_describe(
        shared_broker: RoostProcess) -> None:
    bootstrap = shared_broker.address("kafka")
    topic, group = "kip848-range", "kip848-range-group"
    create_topic(bootstrap, topic, 4)
    consumer = Consumer(consumer_config(bootstrap, group, **{"group.remote.assignor": "range"}))
    try:
        consumer.subscribe(["^kip848-ran.*"])  # a pattern: librdkafka sends it for the broker to match
        wait_for(lambda: (consumer.poll(0.2), len(consumer.assignment()) == 4)[1], timeout=30, what="assigned")
        described = run_json("group", "describe", group, "-b", bootstrap)
        listed = run_json("group", "list", "-b", bootstrap)
    finally:
        consumer.close()
    assert described["protocol"] == "consumer" and described["group_epoch"] >= 1
    assert next(g for g in listed if g["group"] == group)["protocol"] == "consumer"
    (member,) = described["members"]
    assert member["member_epoch"] == described["assignment_epoch"]
    assert member["assignment"] == member["target"] == f"{topic}:0,1,2,3"
    client = WireClient(bootstrap)
    try:
        answer = client.request(CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [group],
                                                             "include_authorized_operations": False})
    finally:
        client.close()
    assert answer["groups"][0]["assignor_name"] == "range"


def describe_group(bootstrap: str, group: str) -> dict[str, Any]:
    client = WireClient(bootstrap)
    try:
        answer = client.request(CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [group],
                                                             "include_authorized_operations": False})
    finally:
        client.close()
    return answer["groups"][0]
