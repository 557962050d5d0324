"""The automatic balancer (`balancer.mode`) against real brokers, with no `roost balance` command:

- node_add: three brokers; a fourth started later receives its share of replicas by itself, in
  batches within balancer.moves.per.broker, and `roost balance status` says what was done and why;
- continuous: four brokers; one killed keeps its replicas while it is down for less than
  balancer.broker.unavailable.delay.ms (nothing moves: a reassignment seen then is a breach),
  and after it they are re-created on the three live brokers (RF 3 restored), while an acks=all
  producer writes and no acknowledged record is lost.

Each cluster is module-scoped and used by its one test.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from roost.admin.balancer import ClusterOps
from roost.cli.main import cli
from tests.support.cluster import LocalCluster
from tests.support.procs import wait_for

FAST = {"balancer.check.interval.ms": 300, "balancer.load.sample.interval.ms": 500, "balancer.load.windows": 2,
        "replica.lag.time.max.ms": 30_000}
MOVES_PER_BROKER = 2
DELAY_S = 6.0


def _start(root: Any, brokers: int, settings: dict[str, Any]) -> LocalCluster:
    return LocalCluster.start(root, brokers=brokers, keepers=1, settings={**FAST, **settings})


@pytest.fixture(scope="module")
def node_add_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = _start(tmp_path_factory.mktemp("auto-node-add"), 3, {
        "balancer.mode": "node_add", "balancer.moves.per.broker": MOVES_PER_BROKER,
        "auto.leader.rebalance.enable": False})
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def continuous_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = _start(tmp_path_factory.mktemp("auto-continuous"), 4, {
        "balancer.mode": "continuous", "balancer.broker.unavailable.delay.ms": int(DELAY_S * 1000),
        # Skew is not what this cluster shows: a high threshold keeps the load's noise from planning.
        "balancer.imbalance.threshold": 1.5, "balancer.moves.per.broker": 10})
    try:
        yield cluster
    finally:
        cluster.close()


def create(cluster: LocalCluster, name: str, assignment: list[list[int]], **configs: str) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic(name, len(assignment), replica_assignment=assignment,
                                  config=configs)])[name].result(timeout=30)
    cluster.wait_for_isr(name)


def status(cluster: LocalCluster) -> dict[str, Any]:
    ran = CliRunner().invoke(cli, ["balance", "status", "-b", cluster.running_bootstrap(), "--zookeeper",
                                   cluster.zookeeper, "--format", "json"], catch_exceptions=False)
    assert ran.exit_code == 0, ran.stdout + ran.stderr
    found: dict[str, Any] = json.loads(ran.stdout)
    return found


def _observe(cluster: LocalCluster, stop: threading.Event, most: dict[int, int], seen: list[float]) -> None:
    """The reassignments in progress, polled from outside: the most per broker at once, and
    when any was first seen."""
    ops = ClusterOps(cluster.running_bootstrap())
    while not stop.is_set():
        try:
            moving = ops.list_reassignments()
        except Exception:  # a broker or controller going: ask again
            time.sleep(0.05)
            ops = ClusterOps(cluster.running_bootstrap())
            continue
        if moving and not seen:
            seen.append(time.monotonic())
        counts: dict[int, int] = {}
        for entry in moving.values():
            for broker in entry["replicas"]:
                counts[broker] = counts.get(broker, 0) + 1
        for broker, count in counts.items():
            most[broker] = max(most.get(broker, 0), count)
        time.sleep(0.02)


def test_node_add_gives_a_broker_added_later_its_share_without_a_command(node_add_cluster: LocalCluster) -> None:
    cluster = node_add_cluster
    topics = {"left": 8, "right": 8}  # 16 partitions RF 2 on brokers 1-3
    for name, count in topics.items():
        create(cluster, name, [[1 + i % 3, 1 + (i + 1) % 3] for i in range(count)])
    wait_for(lambda: status(cluster)["balancer"][0]["decision"] == "balanced", 30, interval=0.3,
             what="the controller's balancer checking")
    assert status(cluster)["balancer"][0]["mode"] == "node_add"
    stop, most, seen = threading.Event(), {}, []
    observer = threading.Thread(target=_observe, args=(cluster, stop, most, seen), daemon=True)
    observer.start()
    started = time.monotonic()
    try:
        metrics_port = cluster.add_broker(4)

        def share() -> int:
            return sum(4 in rs and set(isr) == set(rs) for name in topics
                       for _l, rs, isr in cluster.partitions(name).values())
        total = 2 * sum(topics.values())
        wait_for(lambda: share() >= 0.2 * total, 60, interval=0.3, what="broker 4 holding 20 % of the replicas")
        took = time.monotonic() - started
        wait_for(lambda: status(cluster)["execution"][0]["phase"] == "COMPLETED", 30, interval=0.3,
                 what="the automatic execution completed")
    finally:
        stop.set()
        observer.join(10)
    print(f"broker 4: {share()} of {total} replicas of {sorted(topics)} (and its share of the internal topics) "
          f"{took:.1f} s after it started, moves per broker {MOVES_PER_BROKER}, no throttle")
    # Seen from outside too (moves of near-empty partitions may end between two polls).
    assert max(most.values(), default=0) <= MOVES_PER_BROKER, f"reassignments in progress per broker: {most}"
    found = status(cluster)
    balancer = found["balancer"][0]
    # The first plan was for broker 4; a later one may even out what it left (another broker one
    # replica under the mean), so the last action names broker 4 or came after its.
    assert balancer["last_action"] == "node_add" and " holds " in balancer["why"], balancer
    cluster.wait_for_output(cluster.controller(), "balancer: node_add: broker 4 holds 0 replicas, below its share",
                            "balancer: node_add execution ended COMPLETED")
    assert found["owner"].startswith(f"controller {cluster.controller()}"), found["owner"]
    detail = found["detail"]
    assert max(int(n) for n in detail["most_in_progress_per_broker"].values()) <= MOVES_PER_BROKER, detail
    # Every broker's /metrics says the mode; only the controller's balancer is active.
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as answer:
        metrics = answer.read().decode()
    assert 'roost_balancer_mode{mode="node_add"} 1.0' in metrics, metrics[-2000:]
    assert f"roost_balancer_active {float(cluster.controller() == 4)}" in metrics


def test_continuous_heals_a_dead_broker_after_the_delay_and_loses_nothing(continuous_cluster: LocalCluster) -> None:
    cluster = continuous_cluster
    controller = cluster.controller()
    victim = max(b for b in cluster.brokers if b != controller)
    others = sorted(b for b in cluster.brokers if b != victim)
    # 6 partitions RF 3, min ISR 2, every one with a replica on the victim, led by the others.
    create(cluster, "ledger", [[others[i % 3], victim, others[(i + 1) % 3]] for i in range(6)],
           **{"min.insync.replicas": "2"})
    wait_for(lambda: status(cluster)["balancer"][0]["decision"] == "balanced", 30, interval=0.3,
             what="the balancer idle before the kill")
    acked: list[bytes] = []
    errors: list[Any] = []
    stop = threading.Event()

    def keep_producing() -> None:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 2,
                             "enable.idempotence": True, "message.timeout.ms": 60_000})
        sent = 0
        while not stop.is_set() and sent < 20_000:
            producer.produce("ledger", f"entry-{sent:06d}".encode(), partition=sent % 6, on_delivery=lambda err, msg: (
                errors.append(err) if err else acked.append(msg.value())))
            producer.poll(0.003)
            sent += 1
        producer.flush(60)

    writer = threading.Thread(target=keep_producing, daemon=True)
    writer.start()
    watching, most, moved = threading.Event(), {}, []
    observer = threading.Thread(target=_observe, args=(cluster, watching, most, moved), daemon=True)
    try:
        wait_for(lambda: len(acked) > 200, 30, what="records acknowledged")
        observer.start()
        cluster.kill(victim)
        killed = time.monotonic()
        # Within the delay nothing moves: the victim keeps its replicas and no reassignment starts.
        while time.monotonic() - killed < DELAY_S * 0.7:
            held = [p for p, (_l, rs, _i) in cluster.partitions("ledger").items() if victim in rs]
            assert len(held) == 6 and not moved, (
                f"{time.monotonic() - killed:.1f} s after the kill, before the {DELAY_S:g} s delay: "
                f"ledger partitions on broker {victim}: {held}; reassignment seen: {bool(moved)}")
            time.sleep(0.2)

        def healed() -> bool:
            found = cluster.partitions("ledger")
            return len(found) == 6 and all(victim not in rs and len(rs) == 3 and set(isr) == set(rs)
                                           for _l, rs, isr in found.values())
        wait_for(healed, 60, interval=0.3, what=f"ledger re-replicated off broker {victim}")
        took = time.monotonic() - killed
        healed_at = len(acked)
        wait_for(lambda: len(acked) > healed_at + 100, 30, what="records acknowledged after the healing")
    finally:
        stop.set()
        watching.set()
        writer.join(90)
        observer.join(10)
    print(f"broker {victim} killed: its 6 ledger replicas re-created on {others} {took:.1f} s later "
          f"(delay {DELAY_S:g} s); first reassignment {moved[0] - killed:.1f} s after the kill")
    assert moved and moved[0] - killed >= DELAY_S, "a reassignment started before the delay"
    assert not errors, errors[:3]
    balancer = status(cluster)["balancer"][0]
    assert balancer["last_action"] == "heal" and f"brokers [{victim}]" in balancer["why"], balancer
    consumer = KafkaConsumer(bootstrap_servers=cluster.running_bootstrap().split(","), group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest")
    consumer.assign([KafkaTopicPartition("ledger", p) for p in range(6)])
    consumer.seek_to_beginning()
    seen: set[bytes] = set()
    wanted = set(acked)
    deadline = time.monotonic() + 60
    while not wanted <= seen and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500, max_records=5000).values():
            seen.update(record.value for record in records)
    consumer.close()
    lost = wanted - seen
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {sorted(lost)[:3]}"


def test_a_controller_taking_over_finishes_the_old_ones_moves_before_planning(node_add_cluster: LocalCluster) -> None:
    """What a controller that died mid-execution leaves: its state (owned by it, unfinished,
    naming a throttle it set) and a reassignment in progress. The controller now in charge takes
    the execution over (removes that throttle, says so) and starts no move of its own while the
    old one is in progress, though a new topic piled on brokers 1-2 wants moves: no move is
    made twice, none alongside a move it did not plan."""
    from roost.admin.balancer import BROKER_RESOURCE, TOPIC_RESOURCE, write_state

    cluster = node_add_cluster
    if 4 not in cluster.brokers:
        cluster.add_broker(4)
    create(cluster, "inflight", [[1, 2]])
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(85):  # 850 kB
        producer.produce("inflight", f"{i:06d}".encode().ljust(10_000, b"x"), partition=0)
    assert producer.flush(30) == 0
    ops = ClusterOps(cluster.bootstrap)
    ops.view()
    # The old controller's move, slowed by a throttle its state does not name (so it stays in
    # progress for seconds), and a throttle its state does name (the taking over removes it).
    # (replication.quota.window.num 11 x 1 s lets 660 kB through at once; the other 190 kB take seconds.)
    rate = {"leader.replication.throttled.rate": "60000", "follower.replication.throttled.rate": "60000"}
    for broker in (1, 3):
        assert ops.alter_configs(BROKER_RESOURCE, str(broker), rate, broker) is None
    lists = {"leader.replication.throttled.replicas": "0:1,0:3", "follower.replication.throttled.replicas": "0:1,0:3"}
    assert ops.alter_configs(TOPIC_RESOURCE, "inflight", lists) is None
    create(cluster, "named", [[3, 4]])  # one replica more on every broker: still balanced
    assert ops.alter_configs(TOPIC_RESOURCE, "named", lists) is None

    def idle() -> bool:
        found = status(cluster)
        return not found["reassignments"] \
            and found["execution"][0]["phase"] in ("COMPLETED", "STOPPED", "NO_TASK_IN_PROGRESS")
    # Idle for longer than one balancer round (about 3 s here): a read just after `named` was
    # created may come before the round that plans moves for it (seen once in a full run, with
    # earlier tests' topics leaving broker 3 below its share). Its decision is not asked for: in
    # that state it alternates between "below its share" and "balanced as far as the planner can".
    idle_since: list[float] = []

    def idle_for_a_round() -> bool:
        if not idle():
            idle_since.clear()
            return False
        idle_since[:] = idle_since or [time.monotonic()]
        return time.monotonic() - idle_since[0] >= 4.0
    wait_for(idle_for_a_round, 90, interval=0.3, what="the balancer idle for 4 s (its own executions done)")
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=cluster.zookeeper, timeout=10)
    zk.start(timeout=10)
    seen: dict[tuple[str, int], float] = {}  # partition -> first seen reassigning
    done: list[float] = []
    stop = threading.Event()

    def watch() -> None:
        watcher = ClusterOps(cluster.bootstrap)
        while not stop.is_set():
            try:
                moving = watcher.list_reassignments()
            except Exception:
                time.sleep(0.05)
                continue
            now = time.monotonic()
            for key in moving:
                seen.setdefault(key, now)
            if ("inflight", 0) in seen and ("inflight", 0) not in moving and not done:
                done.append(now)
            time.sleep(0.02)

    observer = threading.Thread(target=watch, daemon=True)
    try:
        write_state(zk, {"executor": {"phase": "INTER_BROKER_REPLICA_MOVEMENT_TASK_IN_PROGRESS", "stop_reason": "",
                                      "tasks": {"in_progress": 1}, "in_progress": ["inflight-0: [1, 2] -> [1, 3]"]},
                         "throttles": {"rate": 200000, "brokers": [],
                                       "topics": {"named": {"leader.replication.throttled.replicas": None,
                                                            "follower.replication.throttled.replicas": None}}},
                         "owner": {"controller": 99, "epoch": 1}, "started": time.time(), "updated": time.time()})
        assert not ops.reassign({("inflight", 0): [1, 3]})
        observer.start()
        # Brokers 3 and 4 now below their share: the balancer wants moves, once it may.
        create(cluster, "pile", [[1, 2]] * 8)
        controller = cluster.controller()
        cluster.wait_for_output(controller, "took over the execution of the controller on broker 99 (epoch 1) "
                                            "(throttles removed: True)", "reassignments in progress", timeout=30)
        named = {c: v for c, v in _topic_configs(ops, "named", list(lists)).items() if v}
        assert not named, f"the throttle the old execution named is still set: {named}"
        wait_for(lambda: bool(done), 60, interval=0.2, what="the old controller's move finished")
        wait_for(lambda: any(t == "pile" for t, _ in seen), 60, interval=0.2, what="the balancer moving pile")
    finally:
        stop.set()
        observer.join(10)
        for broker in (1, 3):
            ops.alter_configs(BROKER_RESOURCE, str(broker), dict.fromkeys(rate), broker)
        ops.alter_configs(TOPIC_RESOURCE, "inflight", dict.fromkeys(lists))
        zk.stop()
        zk.close()
    early = {key: round(done[0] - at, 2) for key, at in seen.items() if key != ("inflight", 0) and at < done[0]}
    assert not early, f"moves started while the old controller's was in progress (s before it ended): {early}"
    assert set(cluster.partitions("inflight")[0][1]) == {1, 3}
    print(f"the old controller's move ended {done[0] - seen[('inflight', 0)]:.1f} s after it started; the first "
          f"of the new one's {min(at for (t, _), at in seen.items() if t == 'pile') - done[0]:.1f} s after that")


def _topic_configs(ops: ClusterOps, topic: str, names: list[str]) -> dict[str, str | None]:
    return {name: ops.topic_configs([topic], name).get(topic) for name in names}


def test_roost_balance_stop_holds_the_automatic_balancer(node_add_cluster: LocalCluster) -> None:
    """After `roost balance stop` the controller's balancer plans nothing (for
    balancer STOP_HOLD_S), though a topic piled on two brokers wants moves."""
    cluster = node_add_cluster
    if 4 not in cluster.brokers:
        cluster.add_broker(4)
    wait_for(lambda: not status(cluster)["reassignments"], 60, interval=0.3, what="no reassignment in progress")
    ran = CliRunner().invoke(cli, ["balance", "stop", "-b", cluster.running_bootstrap(), "--zookeeper",
                                   cluster.zookeeper, "--format", "json"], catch_exceptions=False)
    assert ran.exit_code == 0, ran.stdout + ran.stderr
    create(cluster, "held", [[1, 2]] * 8)
    wait_for(lambda: "roost balance stop asked" in status(cluster)["balancer"][0]["decision"], 30, interval=0.3,
             what="the balancer holding after the stop")
    ops = ClusterOps(cluster.running_bootstrap())
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert not ops.list_reassignments(), "the automatic balancer moved after roost balance stop"
        time.sleep(0.1)
    assert all(set(rs) == {1, 2} for _l, rs, _i in cluster.partitions("held").values())
