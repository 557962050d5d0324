"""The replicated cluster under failure, with real clients against real broker and keeper processes.

One cluster (three keepers, three brokers, fast-failover settings) is shared by the tests here;
each test leaves it healthy (every broker up, every replica in sync) for the next.

The seeds' experiment (issue 7), once per client library: a topic with 3 partitions, replication
factor 3, min.insync.replicas 2; a producer streams keyed messages with acks=all and idempotence
while a group of three consumers reads; the broker leading the most partitions is killed with
SIGKILL mid-stream. Every acknowledged message must be in the log exactly once and in order per
key, and every one must reach the group. The client-visible outage (kill -> first acknowledgement
on each partition the dead broker led) is printed. The killed broker is restarted, catches up,
rejoins every ISR, and the preferred leaders return.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic

from tests.cluster.clients import PRODUCERS, Acks, GroupMember, n_of
from tests.cluster.verify import check_log, read_log, stored_batches
from tests.support.cluster import LocalCluster
from tests.support.procs import wait_for
from tests.support.workload import messages

MESSAGES = int(os.environ.get("ROOST_FAILOVER_MESSAGES", "12000"))
RATE = 2000  # messages per second the producer offers


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster.start(tmp_path_factory.mktemp("failover"), brokers=3, keepers=3)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(autouse=True)
def every_broker_back(cluster: LocalCluster) -> Iterator[None]:
    """After each test every broker runs again, also after a test that failed before healing
    what it broke: one failure stays one failure instead of failing the module's next tests."""
    yield
    stopped = [broker_id for broker_id, node in cluster.brokers.items() if not node.running]
    for broker_id in stopped:
        cluster.restart(broker_id)
    if stopped:
        cluster.wait_for_brokers(set(cluster.brokers))


def create_topic(cluster: LocalCluster, name: str, partitions: int = 3, replication: int = 3,
                 min_isr: int = 2) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic(name, partitions, replication,
                                  config={"min.insync.replicas": str(min_isr)})])[name].result(30)
    cluster.wait_for_isr(name)


def stream(cluster: LocalCluster, library: str, topic: str, acks: Acks, count: int,
           during: list[tuple[int, object]]) -> None:
    """Send `count` messages at RATE per second; at message k of each (k, action), run action()."""
    producer = PRODUCERS[library](cluster.bootstrap, acks)
    actions = dict(during)
    start = time.monotonic()
    try:
        for n, message in enumerate(messages(count, topic)):
            if n in actions:
                actions[n]()  # type: ignore[operator]
            delay = start + n / RATE - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            producer.send(topic, message, n)
    finally:
        producer.close()


def run_group(cluster: LocalCluster, library: str, topic: str) -> tuple[list[GroupMember], threading.Event]:
    stop = threading.Event()
    members = [GroupMember(library, cluster.bootstrap, f"group-{topic}", topic, stop) for _ in range(3)]
    for member in members:
        member.start()
    return members, stop


def finish_group(members: list[GroupMember], stop: threading.Event, acked: set[int]) -> None:
    def all_seen() -> bool:
        got = {n_of(r.value) for m in members for r in list(m.received)}
        return acked <= got

    try:
        wait_for(all_seen, 180, interval=0.5, what="the group to receive every acknowledged message")
    finally:
        stop.set()
        for member in members:
            member.join(60)
    for member in members:
        assert not member.errors, member.errors
    for member in members:  # a group never moves a partition's committed offset back
        for before, after in zip(member.committed, member.committed[1:], strict=False):
            for partition, offset in after.items():
                assert offset >= before.get(partition, -1), (partition, before, after)


def heal(cluster: LocalCluster, broker: int, topic: str) -> None:
    """Restart `broker`; it catches up, is back in every ISR, and the preferred leaders return."""
    cluster.restart(broker)
    cluster.wait_for_brokers(set(cluster.brokers))
    cluster.wait_for_isr(topic, full=True, preferred=True, timeout=90)


@pytest.mark.parametrize("library", ["confluent", "kafka-python", "aiokafka"])
def test_seeds_experiment_leader_killed_mid_stream(cluster: LocalCluster, library: str) -> None:
    topic = f"seeds-{library}"
    create_topic(cluster, topic)
    led_by = cluster.led_partitions(topic)
    victim = max(led_by, key=lambda b: len(led_by[b]))
    led = led_by[victim]
    members, stop = run_group(cluster, library, topic)
    acks = Acks()
    killed_at: list[float] = []

    def kill() -> None:
        cluster.kill(victim)
        killed_at.append(time.monotonic())

    stream(cluster, library, topic, acks, MESSAGES, [(MESSAGES // 3, kill)])
    outage = acks.first_after(killed_at[0], led)
    print(f"\n{library}: killed broker {victim} leading partitions {sorted(led)}; outage until the first "
          f"acknowledgement per partition: " + ", ".join(f"p{p} {s:.2f} s" for p, s in sorted(outage.items())))
    assert not acks.failed, f"{len(acks.failed)} sends failed, e.g. {list(acks.failed.items())[:3]}"
    acked = set(acks.ok)
    assert len(acked) == MESSAGES
    assert led <= outage.keys(), "a partition of the dead leader never acknowledged again"
    finish_group(members, stop, acked)
    check_log(read_log(cluster, topic), acked, stored_batches(cluster, topic))
    heal(cluster, victim, topic)


def test_controlled_shutdown_of_a_leader_loses_and_fails_nothing(cluster: LocalCluster) -> None:
    topic = "controlled"
    create_topic(cluster, topic)
    led_by = cluster.led_partitions(topic)
    victim = max(led_by, key=lambda b: len(led_by[b]))
    acks = Acks()
    statuses: list[int] = []
    stopper = threading.Thread(target=lambda: statuses.append(cluster.stop_broker(victim)))
    stream(cluster, "confluent", topic, acks, MESSAGES // 2, [(MESSAGES // 6, stopper.start)])
    stopper.join(90)
    assert statuses == [0], cluster.broker_output(victim)[-3000:]
    assert "controlled shutdown done" in cluster.broker_output(victim) or \
        "leads nothing" in cluster.broker_output(victim), cluster.broker_output(victim)[-3000:]
    assert not acks.failed, list(acks.failed.items())[:3]
    check_log(read_log(cluster, topic), set(acks.ok), stored_batches(cluster, topic))
    heal(cluster, victim, topic)


def test_controller_killed_mid_stream_then_duties_resume(cluster: LocalCluster) -> None:
    topic = "controller-kill"
    create_topic(cluster, topic)
    controller = cluster.controller()
    acks = Acks()
    stream(cluster, "confluent", topic, acks, MESSAGES // 2, [(MESSAGES // 6, lambda: cluster.kill(controller))])
    assert not acks.failed, list(acks.failed.items())[:3]
    check_log(read_log(cluster, topic), set(acks.ok), stored_batches(cluster, topic))
    wait_for(lambda: cluster.controller() not in (controller, -1), 30, what="a new controller")
    # Controller duties resume: a new topic gets leaders on every partition.
    create_topic(cluster, "after-controller-kill", partitions=2, replication=2, min_isr=1)
    heal(cluster, controller, topic)


def test_keeper_leader_killed_mid_stream(cluster: LocalCluster) -> None:
    topic = "keeper-kill"
    create_topic(cluster, topic)
    from tests.keeper.zkharness import four_letter

    leaders = [k for k in cluster.keepers.values() if "Mode: leader" in four_letter(k.address, "srvr")]
    assert len(leaders) == 1
    keeper = leaders[0]
    acks = Acks()
    stream(cluster, "confluent", topic, acks, MESSAGES // 2, [(MESSAGES // 6, lambda: keeper.process.kill9())])
    assert not acks.failed, list(acks.failed.items())[:3]
    check_log(read_log(cluster, topic), set(acks.ok), stored_batches(cluster, topic))
    # Controller duties still work through the remaining two keepers.
    create_topic(cluster, "after-keeper-kill", partitions=1, replication=3, min_isr=2)
    from tests.support.procs import start_roost

    keeper.process = start_roost(["keeper", "--config", str(Path(keeper.config))], expect=("keeper",))


@pytest.mark.zookeeper
def test_seeds_experiment_with_apache_zookeeper(tmp_path: Path) -> None:
    """The same experiment with the brokers coordinated by a real Apache ZooKeeper."""
    from tests.keeper.zkharness import zookeeper_available, zookeeper_standalone
    from tests.support import referees

    if not zookeeper_available():
        referees.skip(referees.ZOOKEEPER)
    with zookeeper_standalone(tmp_path / "zk") as zookeeper:
        cluster = LocalCluster.start(tmp_path / "cluster", brokers=3, zookeeper=zookeeper.address)
        try:
            test_seeds_experiment_leader_killed_mid_stream(cluster, "confluent")
        finally:
            cluster.close()
