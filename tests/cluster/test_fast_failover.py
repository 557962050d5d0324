"""Fast failure detection with real processes (issue 22; roost.broker.controller.liveness).

One cluster for the module: 3 brokers and a keeper, with a **long** ZooKeeper session timeout
(10 s), so that a leader replaced sooner can only be the fast signal's doing (a dead process's
port refuses connections at once), never the session's expiry. Behaviour only: how fast is
`bench/failover_bench.py`'s business.

- A broker paused with SIGSTOP for 1.5 s keeps every leadership: its port still accepts
  connections (the kernel does), so nothing declares it dead.
- kill -9 of a leader during a keyed acks=all idempotent stream: new leaders before the session
  could have expired; the producer carries on; every acknowledged message is in the log; a
  broker that does not lead a partition hands the new leader to a Produce v10 (KIP-951), and
  every broker's Metadata names it.
- kill -9 of the controller: a new controller, and new leaders for what it led, before its
  session could have expired.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import build_batch
from tests.support.cluster import LocalCluster
from tests.support.kafka_wire import WireClient
from tests.support.procs import wait_for

SESSION_MS = 10_000
SETTINGS = {"zookeeper.session.timeout.ms": SESSION_MS, "replica.lag.time.max.ms": 20_000,
            # No preferred-leader moves while a test watches the leaders.
            "leader.imbalance.check.interval.seconds": 600}
TOPIC = "fast"
PARTITIONS = 6
DEAD = "declared dead before its session expired"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root: Path = tmp_path_factory.mktemp("fast-failover")
    cluster = LocalCluster.start(root, brokers=3, keepers=1, settings=SETTINGS)
    try:
        admin = cluster.admin()  # kept: the futures need their client alive
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
                            operation_timeout=30)[TOPIC].result(60)
        cluster.wait_for_isr(TOPIC, full=True, timeout=60)
        yield cluster
    finally:
        cluster.close()


def leaders(cluster: LocalCluster) -> dict[int, int]:
    return {p: leader for p, (leader, _, _) in cluster.partitions(TOPIC).items()}


def restore(cluster: LocalCluster, broker: int) -> None:
    cluster.restart(broker)
    cluster.wait_for_brokers(set(cluster.brokers))
    cluster.wait_for_isr(TOPIC, full=True, timeout=60)


def replaced_within_the_session(cluster: LocalCluster, dead: int, partitions: set[int], since: float) -> float:
    """Seconds until Metadata names a live leader other than `dead` for each of `partitions`;
    fails if that took as long as the session timeout (only the session's expiry could explain it)."""
    def replaced() -> bool:
        try:
            found = leaders(cluster)
        except Exception:
            return False
        return all(found.get(p, -1) not in (-1, dead) for p in partitions)

    wait_for(replaced, SESSION_MS / 1000 * 3, interval=0.05, what=f"new leaders for broker {dead}'s partitions")
    took = time.monotonic() - since
    assert took < SESSION_MS / 1000, f"new leaders after {took:.1f} s: no sooner than the session's expiry"
    return took


def test_a_broker_paused_for_a_moment_keeps_its_leaderships(cluster: LocalCluster) -> None:
    before = leaders(cluster)
    controller = cluster.controller()
    victim = next(b for b in sorted(set(before.values())) if b != controller)
    process = cluster.brokers[victim].process
    assert process is not None
    process.popen.send_signal(signal.SIGSTOP)
    try:
        time.sleep(1.5)
    finally:
        process.popen.send_signal(signal.SIGCONT)
    time.sleep(1.0)  # what a wrong verdict would have set off has happened by now
    assert leaders(cluster) == before
    for broker in cluster.brokers:
        output = cluster.broker_output(broker)
        assert DEAD not in output and "looks dead" not in output, f"broker {broker} declared someone dead"
    assert "registering again" not in cluster.broker_output(victim)


class KeyedStream:
    """A keyed acks=all idempotent stream in a thread; remembers what was acknowledged."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 5})
        self.acked: dict[int, set[bytes]] = {}
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _delivered(self, error: object, message: object) -> None:
        if error is not None:
            self.failed.append(str(error))
        else:
            self.acked.setdefault(message.partition(), set()).add(message.value())  # type: ignore[attr-defined]

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set() and n < 200_000:
            self.producer.produce(TOPIC, key=f"k{n % 60}".encode(), value=f"m{n}".encode(),
                                  on_delivery=self._delivered)
            self.producer.poll(0)
            n += 1
            time.sleep(0.002)

    def count(self) -> int:
        return sum(len(values) for values in self.acked.values())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self.producer.flush(60) == 0, "messages still unacknowledged a minute after the stream stopped"


def read_all(cluster: LocalCluster) -> dict[int, set[bytes]]:
    consumer = Consumer({"bootstrap.servers": cluster.running_bootstrap(), "group.id": "fast-failover-check",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=15)[1] for p in range(PARTITIONS)}
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        found: dict[int, set[bytes]] = {p: set() for p in range(PARTITIONS)}
        positions = dict.fromkeys(range(PARTITIONS), 0)
        deadline = time.monotonic() + 60
        while any(positions[p] < ends[p] for p in positions) and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=1):
                if message.error() is None:
                    found[message.partition()].add(message.value())
                    positions[message.partition()] = message.offset() + 1
        return found
    finally:
        consumer.close()


def test_a_killed_leader_is_replaced_before_its_session_expires_and_nothing_acknowledged_is_lost(
        cluster: LocalCluster) -> None:
    controller = cluster.controller()
    led = cluster.led_partitions(TOPIC)
    victim = max((b for b in led if b != controller), key=lambda b: len(led[b]))
    stream = KeyedStream(cluster)
    try:
        wait_for(lambda: stream.count() > 200, 30, interval=0.05, what="the stream under way")
        killed_at = time.monotonic()
        cluster.kill(victim)
        replaced_within_the_session(cluster, victim, led[victim], killed_at)
        cluster.wait_for_output(controller, DEAD)
        before = stream.count()
        wait_for(lambda: stream.count() > before + 200, 30, interval=0.05, what="acknowledgements after the kill")
    finally:
        stream.stop()
    assert not stream.failed, stream.failed[:3]

    # KIP-951: a broker that does not lead a partition names its new leader, with its endpoint.
    now = leaders(cluster)
    partition = next(iter(led[victim]))
    new_leader = now[partition]
    other = next(b for b in cluster.brokers if b not in (victim, new_leader))
    client = WireClient(cluster.brokers[other].address)
    try:
        body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [{"name": TOPIC, "partition_data": [
            {"index": partition, "records": bytearray(build_batch([(b"k", b"hint")], timestamp_ms=0))}]}]}
        answer = client.request(ApiKey.PRODUCE, 10, body)
    finally:
        client.close()
    entry = answer["responses"][0]["partition_responses"][0]
    assert entry["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert entry["current_leader"]["leader_id"] == new_leader
    assert [e["port"] for e in answer["node_endpoints"]] == [cluster.brokers[new_leader].advertised_port]

    # Every live broker's Metadata names the new leaders.
    for broker in cluster.brokers:
        if broker == victim:
            continue
        single = AdminClient({"bootstrap.servers": cluster.brokers[broker].address})
        wait_for(lambda admin=single: {p.id: p.leader for p in admin.list_topics(TOPIC, timeout=10)
                                       .topics[TOPIC].partitions.values()} == now,
                 10, interval=0.05, what=f"broker {broker}'s Metadata naming the new leaders")

    stored = read_all(cluster)
    for partition_id, values in stream.acked.items():
        missing = values - stored[partition_id]
        assert not missing, f"partition {partition_id}: {len(missing)} acknowledged messages missing"
    restore(cluster, victim)
    assert "registering again" not in cluster.broker_output(victim)


def test_a_killed_controller_is_replaced_before_its_session_expires(cluster: LocalCluster) -> None:
    controller = cluster.controller()
    led = cluster.led_partitions(TOPIC).get(controller, set())
    killed_at = time.monotonic()
    cluster.kill(controller)
    wait_for(lambda: cluster.controller() not in (-1, controller), SESSION_MS / 1000 * 3, interval=0.05,
             what="a new controller")
    took = time.monotonic() - killed_at
    assert took < SESSION_MS / 1000, f"a new controller after {took:.1f} s: no sooner than the session's expiry"
    if led:
        replaced_within_the_session(cluster, controller, led, killed_at)
    restore(cluster, controller)
