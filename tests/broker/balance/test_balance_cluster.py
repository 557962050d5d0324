"""The balancer against real brokers: four `roost broker` processes and a keeper, shared by every
test here (module scope), broker 4 holding nothing at first (a broker just added).

- the KIP-73 throttle holds a reassignment to its rate: the move takes at least (bytes - the
  window's allowance) / rate, and a move without the throttle does not;
- `roost balance run` gives the new broker its share (>= 20 % of replicas and leaders) in
  batches within the per-broker bound (an independent observer polls the reassignments), the
  ISR of a moving partition never below its replication factor, every throttle removed after;
- a broker killed mid-execution stops it cleanly: moves cancelled, throttles removed, the
  state saying why;
- `roost broker decommission` drains a broker to zero replicas while an acks=all producer
  writes through it, and no acknowledged record is lost.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kazoo.client import KazooClient

from roost.admin.balancer import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    ClusterOps,
    execute,
    read_state,
    remove_throttles,
)
from roost.broker.balance.executor import Phase
from roost.cli.main import cli
from tests.support.cluster import LocalCluster
from tests.support.procs import wait_for

WINDOW_NUM = 2  # replication.quota.window.num: the rate is measured over 1-2 s, not Kafka's 10-11
FETCH_BYTES = 65_536  # replica.fetch.max.bytes: a fetch's records past the quota are one partition's at most
SETTINGS = {"replication.quota.window.num": WINDOW_NUM, "replica.fetch.max.bytes": FETCH_BYTES, "balancer.load.sample.interval.ms": 500,
            "balancer.load.windows": 2, "auto.leader.rebalance.enable": False,
            # Under a loaded machine a follower may lag past 6 s; here an ISR shrinks only when a
            # broker dies, so the ISR seen during a move is the executor's doing.
            "replica.lag.time.max.ms": 30_000}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster.start(tmp_path_factory.mktemp("balance"), brokers=4, keepers=1, settings=SETTINGS)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def zk(cluster: LocalCluster) -> Iterator[Any]:
    client = KazooClient(hosts=cluster.zookeeper, timeout=10)
    client.start(timeout=10)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def create(cluster: LocalCluster, name: str, assignment: list[list[int]], **configs: str) -> None:
    admin = cluster.admin()  # kept: the futures fail once their client is gone
    futures = admin.create_topics([NewTopic(name, len(assignment), replica_assignment=assignment, config=configs)])
    futures[name].result(timeout=30)
    cluster.wait_for_isr(name)


def produce(cluster: LocalCluster, topic: str, count: int, size: int, partitions: int = 1,
            batch_bytes: int | None = None) -> list[bytes]:
    settings: dict[str, Any] = {"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5}
    if batch_bytes is not None:
        settings["batch.size"] = batch_bytes
    producer = Producer(settings)
    values = [f"{topic}-{i:08d}-".encode().ljust(size, b"x") for i in range(count)]
    failures: list[Any] = []
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % partitions,
                         on_delivery=lambda err, _msg: failures.append(err) if err else None)
        producer.poll(0)
    assert producer.flush(60) == 0 and not failures, failures
    return values


def describe(cluster: LocalCluster, resource_type: int, name: str, keys: list[str]) -> dict[str, str | None]:
    ops = ClusterOps(cluster.bootstrap)
    ops.view()
    from roost.wire.kafka import ApiKey

    target = ops.known[int(name)] if resource_type == BROKER_RESOURCE else ops.seeds[0]
    from roost.admin.balancer import ask

    answer = ask(target, ApiKey.DESCRIBE_CONFIGS, 1, {"resources": [
        {"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}]}, 10)
    return {c["name"]: c["value"] for r in answer["results"] for c in r["configs"]}


def no_throttles_left(cluster: LocalCluster, topics: list[str]) -> None:
    for broker in cluster.brokers:
        if cluster.brokers[broker].running:
            rates = describe(cluster, BROKER_RESOURCE, str(broker), ["leader.replication.throttled.rate",
                                                                     "follower.replication.throttled.rate"])
            assert set(rates.values()) == {str(2**63 - 1)}, f"broker {broker} still throttled: {rates}"
    for topic in topics:
        lists = describe(cluster, TOPIC_RESOURCE, topic, ["leader.replication.throttled.replicas",
                                                          "follower.replication.throttled.replicas"])
        assert not any(lists.values()), f"{topic} still throttled: {lists}"


def wait_moved(cluster: LocalCluster, topic: str, replicas: set[int], timeout: float = 90.0) -> None:
    def moved() -> bool:
        found = cluster.partitions(topic)
        return bool(found) and all(set(r) == replicas and set(i) == replicas for _, r, i in found.values()) \
            and not ClusterOps(cluster.bootstrap).list_reassignments()
    wait_for(moved, timeout, interval=0.05, what=f"{topic} moved to {sorted(replicas)}")


def _lowest_isr(cluster: LocalCluster, topic: str, stop: threading.Event, lowest: list[int]) -> None:
    """The smallest ISR `topic`'s partition 0 shows while `stop` is not set (Metadata, polled)."""
    while not stop.is_set():
        found = cluster.partitions(topic)
        if 0 in found:
            lowest.append(len(found[0][2]))
        time.sleep(0.02)


def test_the_replication_throttle_holds_a_move_to_its_rate(cluster: LocalCluster) -> None:
    """Also: a replica is removed only once its replacement is in the ISR (a polled observer
    never sees the ISR of a moving RF 2 partition below 2)."""
    rate = 200_000
    create(cluster, "throttled", [[1, 3]], **{"min.insync.replicas": "2"})
    create(cluster, "unthrottled", [[1, 3]])
    # Batches well under the fetch bound, so that no fetch carries more than FETCH_BYTES (the
    # allowance below counts on it). A leader returns a batch larger than the fetch bound whole
    # (as Kafka does: replica.fetch.max.bytes is not an absolute maximum), so with librdkafka's
    # default batch.size (1 MB) the 1.5 MB went as two batches (991 kB and 511 kB seen), and the
    # throttle could only hold back the second: the move's time then hung on the windows'
    # alignment, not on the rate (3.5-4.7 s seen against the 3.8 s bound, failing 4 runs in 6).
    batch = FETCH_BYTES // 4
    size = len(b"".join(produce(cluster, "throttled", 150, 10_000, batch_bytes=batch)))
    produce(cluster, "unthrottled", 150, 10_000, batch_bytes=batch)
    ops = ClusterOps(cluster.bootstrap)
    ops.view()
    for broker in (1, 2):
        assert ops.alter_configs(BROKER_RESOURCE, str(broker), {"leader.replication.throttled.rate": str(rate),
                                                                "follower.replication.throttled.rate": str(rate)},
                                 broker) is None
    assert ops.alter_configs(TOPIC_RESOURCE, "throttled", {"leader.replication.throttled.replicas": "0:1,0:2,0:3",
                                                           "follower.replication.throttled.replicas": "0:2"}) is None
    stop, lowest = threading.Event(), []
    try:
        # Unthrottled first (its topic lists no replica): the rates alone hold nothing back.
        start = time.monotonic()
        assert ops.reassign({("unthrottled", 0): [1, 2]}) == {}
        wait_moved(cluster, "unthrottled", {1, 2})
        free = time.monotonic() - start
        observer = threading.Thread(target=_lowest_isr, args=(cluster, "throttled", stop, lowest), daemon=True)
        observer.start()
        start = time.monotonic()
        assert ops.reassign({("throttled", 0): [1, 2]}) == {}
        wait_moved(cluster, "throttled", {1, 2})
        held = time.monotonic() - start
    finally:
        stop.set()
        remove_throttles(ops, {"rate": rate, "brokers": [1, 2],
                               "topics": {"throttled": {"leader.replication.throttled.replicas": None,
                                                        "follower.replication.throttled.replicas": None}}})
    assert lowest and min(lowest) >= 2, f"the ISR of the moving partition fell to {min(lowest)}"
    # Kafka's windowed Rate measures the live windows only: over a short move it lets through
    # some windows' worth beyond the rate (a window's bytes are forgotten when it is replaced),
    # plus the fetch read when the quota bites (checked before the read, as Kafka's). With 2
    # windows of 1 s, 1.5 MB moves here at 1.3-1.7x the rate; over 20 MB at 1.05x (simulated with
    # ReplicationQuota); bench/RESULTS.md has the figures.
    allowance = rate * (WINDOW_NUM + 1) + 2 * FETCH_BYTES
    print(f"throttle {rate} B/s: {size} bytes moved in {held:.1f} s ({size / held:.0f} B/s); unthrottled {free:.2f} s")
    assert held >= (size - allowance) / rate, f"{size} bytes at {rate} B/s moved in {held:.1f} s"
    assert free < (size - allowance) / rate, "the unthrottled move was as slow: the check proves nothing"
    no_throttles_left(cluster, ["throttled"])


def _observe_reassignments(cluster: LocalCluster, stop: threading.Event, most: dict[int, int]) -> None:
    ops = ClusterOps(cluster.bootstrap)
    while not stop.is_set():
        try:
            moving = ops.list_reassignments()
        except Exception:  # a controller moving: ask again
            time.sleep(0.05)
            continue
        counts: dict[int, int] = {}
        for entry in moving.values():
            for broker in entry["replicas"]:
                counts[broker] = counts.get(broker, 0) + 1
        for broker, count in counts.items():
            most[broker] = max(most.get(broker, 0), count)
        time.sleep(0.02)


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def _roost(*args: str) -> Ran:
    """The `roost` command, run in this process (click's runner: the same code as the installed
    command, without a Python start per call, which costs seconds on a loaded machine)."""
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return Ran(result.exit_code, result.stdout, result.stderr)


def test_a_new_broker_takes_its_share_in_bounded_batches(cluster: LocalCluster, zk: Any) -> None:
    topics = {"hot": 10, "warm": 10, "cold": 10}  # 30 partitions RF 3 on brokers 1-3
    for name, count in topics.items():
        create(cluster, name, [[1 + (i + k) % 3 for k in range(3)] for i in range(count)],
               **{"min.insync.replicas": "2"})
    produce(cluster, "hot", 600, 1000, partitions=10)
    produce(cluster, "warm", 100, 1000, partitions=10)
    wait_for(lambda: len(json.loads(zk.get("/roost/balancer/load/1")[0]).get("partitions", [])) > 0
             if zk.exists("/roost/balancer/load/1") else False, 30, what="broker 1's load sample")
    plan = _roost("balance", "plan", "-b", cluster.bootstrap, "--zookeeper", cluster.zookeeper, "--format", "json")
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["proposals"], "the plan moves nothing to the empty broker"
    stop, most = threading.Event(), {}
    observer = threading.Thread(target=_observe_reassignments, args=(cluster, stop, most), daemon=True)
    observer.start()
    try:
        run = _roost("balance", "run", "-b", cluster.bootstrap, "--zookeeper", cluster.zookeeper,
                     "--throttle", "2000000", "--moves-per-broker", "3", "--poll", "0.2", "--format", "json")
    finally:
        stop.set()
        observer.join(10)
    assert run.returncode == 0, run.stdout + run.stderr
    status = json.loads(_roost("balance", "status", "-b", cluster.bootstrap, "--zookeeper", cluster.zookeeper,
                               "--format", "json").stdout)["detail"]
    assert status["phase"] == Phase.COMPLETED.value, status
    # The batch bound, seen from outside: a broker in more than 3 reassignments at once is a
    # breach (each counts against its old and new replicas).
    assert most and max(most.values()) <= 3, f"reassignments in progress per broker: {most}"
    assert max(int(n) for n in status["most_in_progress_per_broker"].values()) <= 3, status
    # Never below min.insync.replicas (2) while moving (the executor's own observations).
    assert status["lowest_isr_seen"] and min(status["lowest_isr_seen"].values()) >= 2, status["lowest_isr_seen"]
    # The executor saw every move finish; a broker's metadata cache learns the final replica
    # lists from the controller's UpdateMetadata a moment later (one run read a partition's
    # in-between [4, 2, 3, 1] just after the run returned): bounded wait for it to settle.
    def settled() -> bool:
        return all(len(rs) == 3 and set(isr) == set(rs)
                   for name in topics for _leader, rs, isr in cluster.partitions(name).values())
    wait_for(settled, 30, interval=0.2, what="the final replica lists in the brokers' metadata")
    replicas = leaders = total = 0
    for name in topics:
        for leader, rs, isr in cluster.partitions(name).values():
            total += 1
            replicas += 4 in rs
            leaders += leader == 4
            assert set(isr) == set(rs), (name, rs, isr)
    print(f"broker 4: {replicas} of {3 * total} replicas, {leaders} of {total} leaders")
    assert replicas >= 0.2 * 3 * total and leaders >= 0.2 * total, (replicas, leaders)
    no_throttles_left(cluster, list(topics))


def test_a_broker_dying_mid_execution_stops_it_cleanly(cluster: LocalCluster, zk: Any) -> None:
    create(cluster, "doomed", [[1, 2]])
    produce(cluster, "doomed", 200, 10_000)
    ops = ClusterOps(cluster.bootstrap)
    # A plan of one slow move to broker 3, throttled to 100 kB/s: ~20 s, time to kill broker 3.
    from roost.broker.balance.planner import Plan, Proposal

    move = Proposal(("doomed", 0), (1, 2), (1, 3), 1, 1)
    slow = Plan((), (move,), {}, {}, {}, {}, False)
    result: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: result.update(executor=execute(
        ops, zk, slow, throttle=100_000, poll_s=0.2, timeout_s=120)), daemon=True)
    runner.start()
    try:
        wait_for(lambda: ("doomed", 0) in ClusterOps(cluster.bootstrap).list_reassignments(), 30,
                 what="the move started")
        cluster.kill(3)
        runner.join(60)
        assert not runner.is_alive(), "the execution did not stop"
        executor = result["executor"]
        assert executor.phase == Phase.STOPPED and "died" in executor.stop_reason, executor.status()
        state = read_state(zk)
        assert state is not None and state["executor"]["phase"] == Phase.STOPPED.value
        assert "died" in state["executor"]["stop_reason"]
        wait_for(lambda: ("doomed", 0) not in ClusterOps(cluster.bootstrap).list_reassignments(), 30,
                 what="the move cancelled")
        # The cancelled move's replica list reaches the brokers' metadata through the
        # controller's UpdateMetadata a moment after ZooKeeper (one run read [1, 2, 3]): bounded.
        wait_for(lambda: set(cluster.partitions("doomed").get(0, (-1, [], []))[1]) == {1, 2}, 30, interval=0.2,
                 what="the cancelled move's replicas [1, 2] in the brokers' metadata")
        no_throttles_left(cluster, ["doomed"])
    finally:
        if not cluster.brokers[3].running:
            cluster.restart(3)
        cluster.wait_for_brokers(set(cluster.brokers))


def test_decommission_drains_a_broker_and_loses_no_acknowledged_record(cluster: LocalCluster) -> None:
    create(cluster, "orders", [[2, 3, 4], [3, 4, 2], [4, 2, 3]], **{"min.insync.replicas": "2"})
    acked: list[bytes] = []
    errors: list[Any] = []
    stop = threading.Event()

    def keep_producing() -> None:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 2,
                             "enable.idempotence": True, "message.timeout.ms": 60_000})
        sent = 0
        while not stop.is_set() and sent < 20_000:  # about 300 a second: a load, not a flood
            value = f"order-{sent:06d}".encode()
            producer.produce("orders", value, on_delivery=lambda err, msg: (
                errors.append(err) if err else acked.append(msg.value())))
            producer.poll(0.003)
            sent += 1
        producer.flush(60)

    writer = threading.Thread(target=keep_producing, daemon=True)
    writer.start()
    try:
        wait_for(lambda: len(acked) > 200, 30, what="records acknowledged")
        drain = _roost("broker", "decommission", "4", "-b", cluster.running_bootstrap(), "--zookeeper",
                       cluster.zookeeper, "--poll", "0.2", "--moves-per-broker", "10", "--format", "json")
        drained_at = len(acked)
        wait_for(lambda: len(acked) > drained_at + 100, 30, what="records acknowledged after the drain")
    finally:
        stop.set()
        writer.join(90)
    assert drain.returncode == 0, drain.stdout + drain.stderr
    assert not errors, errors[:3]
    metadata = cluster.metadata()
    held = [(t, p.id) for t in metadata.topics.values() for p in t.partitions.values() if 4 in p.replicas]
    assert not held, f"broker 4 still holds {held[:5]}"
    cluster.stop_broker(4)
    try:
        wait_for(lambda: all(set(i) == set(r) for _, r, i in cluster.partitions("orders").values()), 30,
                 what="orders fully in sync without broker 4")
        # No group (kafka-python's group_id=None): a group would have the brokers create the 50
        # partitions of __consumer_offsets, seconds of work on a loaded machine, for nothing here.
        consumer = KafkaConsumer(bootstrap_servers=cluster.running_bootstrap().split(","), group_id=None,
                                 enable_auto_commit=False, auto_offset_reset="earliest")
        consumer.assign([KafkaTopicPartition("orders", p) for p in range(3)])
        consumer.seek_to_beginning()
        seen: set[bytes] = set()
        deadline = time.monotonic() + 60
        wanted = set(acked)
        while not wanted <= seen and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500, max_records=5000).values():
                seen.update(record.value for record in records)
        consumer.close()
        lost = wanted - seen
        assert not lost, f"{len(lost)} acknowledged records lost, e.g. {sorted(lost)[:3]}"
    finally:
        cluster.start_broker(4)


def test_throttle_configs_are_checked(cluster: LocalCluster) -> None:
    # Its own topic: the throttle test that also creates one may be deselected (-k).
    create(cluster, "throttle-checks", [[1, 2]])
    ops = ClusterOps(cluster.bootstrap)
    ops.view()
    refused = ops.alter_configs(TOPIC_RESOURCE, "throttle-checks",
                                {"leader.replication.throttled.replicas": "zero:one"})
    assert refused is not None and "partition:broker" in refused
    refused = ops.alter_configs(BROKER_RESOURCE, "1", {"leader.replication.throttled.rate": "-5"}, 1)
    assert refused is not None



