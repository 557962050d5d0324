"""Failover at the defaults: what a client sees when the broker leading the most partitions is
killed (kill -9) during a keyed acks=all stream.

The cluster is what `roost up --brokers 3 --keepers 3` runs (three brokers at their default
settings, three keepers ticking 500 ms; `--zookeeper` puts a real Apache ZooKeeper 3.8 in place
of the keepers), a topic of 6 partitions with replication factor 3 and min.insync.replicas 2.
One client library at its defaults (acks=all; confluent-kafka also with enable.idempotence, as
the issue measured) sends keyed records at `--rate` per second. Per kill it prints:

- silence: the longest gap between two acknowledgements on any partition the victim led, from
  one second before the kill (what the client's application sees);
- kill -> leader: until Metadata names a live leader for every one of those partitions (what the
  cluster did).

Before each kill the cluster is healthy again (the victim restarted, every ISR full), and the
victim is whichever broker then leads the most partitions. At the end every acknowledged record
is read back: the bench reports any that is missing (none may be).

    .venv/bin/python bench/failover_bench.py --kills 20
    .venv/bin/python bench/failover_bench.py --kills 20 --producer kafka-python
    .venv/bin/python bench/failover_bench.py --kills 20 --zookeeper

Prints figures with their conditions; never passes or fails.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from client_streams import STREAMS, Plan, Stream
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import NewTopic
from process_cpu import cpu_seconds
from tests.support.cluster import TEST_BROKER_SETTINGS, LocalCluster

from roost.config import setting_for

TOPIC = "failover"
PARTITIONS = 6
KEEPER_TICK_MS = 500  # what roost up gives its keepers
STREAM_S = 8.0
# The test harness shortens some settings; the bench puts Kafka's (Roost's) defaults back.
DEFAULTS = {name: setting_for(name).default for name in TEST_BROKER_SETTINGS}  # type: ignore[union-attr]


def leaders(cluster: LocalCluster) -> dict[int, tuple[int, list[int], list[int]]]:
    return cluster.partitions(TOPIC)


def wait_healthy(cluster: LocalCluster, timeout: float = 120) -> dict[int, tuple[int, list[int], list[int]]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            state = leaders(cluster)
            if len(state) == PARTITIONS and all(leader > 0 and len(isr) == 3 for leader, _, isr in state.values()):
                return state
        time.sleep(0.2)
    raise RuntimeError("the topic did not get back a leader and a full ISR on every partition")


def watch_election(cluster: LocalCluster, dead: int, led: set[int], found: list[float]) -> None:
    """Note when Metadata first names a live leader for every partition `dead` led."""
    consumer = Consumer({"bootstrap.servers": cluster.running_bootstrap(), "group.id": "watch"})
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                parts = consumer.list_topics(TOPIC, timeout=2).topics[TOPIC].partitions
                if all(parts[p].leader not in (-1, dead) for p in led):
                    found.append(time.monotonic())
                    return
            except Exception:
                pass
            time.sleep(0.01)
    finally:
        consumer.close()


def read_back(bootstrap: str) -> dict[int, set[bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "read-back", "enable.partition.eof": True,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen: dict[int, set[bytes]] = {p: set() for p in range(PARTITIONS)}
    at_end: set[int] = set()
    deadline = time.monotonic() + 120
    try:
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if msg.error():
                    at_end.add(msg.partition())
                else:
                    seen[msg.partition()].add(msg.value())
    finally:
        consumer.close()
    return seen


def summary(name: str, values: list[float]) -> str:
    if not values:
        return f"  {name}: no figures"
    return (f"  {name} over {len(values)} kills: min {min(values):.2f} s  median {statistics.median(values):.2f} s  "
            f"max {max(values):.2f} s")


def bench(cluster: LocalCluster, args: argparse.Namespace, extra: dict[str, str]) -> None:
    stream_fn = STREAMS[args.producer]
    silences, to_leader = [], []
    acked_values: dict[int, set[bytes]] = {p: set() for p in range(PARTITIONS)}
    failed = 0
    for kill in range(args.kills):
        state = wait_healthy(cluster)
        counts: dict[int, int] = {}
        for leader, _, _ in state.values():
            counts[leader] = counts.get(leader, 0) + 1
        victim = max(counts, key=lambda b: counts[b])
        led = {p for p, (leader, _, _) in state.items() if leader == victim}
        was_controller = victim == cluster.controller()
        elected: list[float] = []
        killed: list[float] = []

        def kill_and_watch(v: int = victim, seen: list[float] = elected, at: list[float] = killed,
                           partitions: set[int] = led) -> None:
            at.append(time.monotonic())
            cluster.kill(v)
            threading.Thread(target=watch_election, args=(cluster, v, partitions, seen), daemon=True).start()

        # A random moment in the second third: clients poll on timers of their own, and a fixed
        # moment would always land at the same phase of them.
        plan = Plan(TOPIC, args.rate, STREAM_S, first=kill * int(args.rate * STREAM_S),
                    actions=[(STREAM_S / 3 + random.random(), kill_and_watch)])
        stream = Stream(PARTITIONS)
        survivors = [n for b, n in cluster.brokers.items() if b != victim]
        cpu_before = sum(cpu_seconds(n.process.popen.pid) for n in survivors)  # type: ignore[union-attr]
        stream_fn(cluster.bootstrap, plan, stream, extra)
        cpu = sum(cpu_seconds(n.process.popen.pid) for n in survivors) - cpu_before  # type: ignore[union-attr]
        killed_at = killed[0]
        silence = stream.longest_silence(led, killed_at - 1.0)
        silences.append(silence)
        if elected:
            to_leader.append(elected[0] - killed_at)
        for p in range(PARTITIONS):
            acked_values[p] |= stream.values[p]
        failed += stream.failed
        print(f"  kill {kill + 1}: broker {victim}{' (the controller)' if was_controller else ''} leading "
              f"{len(led)} partitions: new leaders in Metadata after "
              f"{f'{elected[0] - killed_at:.2f} s' if elected else '?'}, longest silence {silence:.2f} s, "
              f"{stream.failed} failed sends (survivors' CPU during the stream {cpu:.1f} s)", flush=True)
        cluster.restart(victim)
    wait_healthy(cluster)
    seen = read_back(cluster.bootstrap)
    missing = sum(len(acked_values[p] - seen[p]) for p in range(PARTITIONS))
    acked_total = sum(len(v) for v in acked_values.values())
    conditions = (f"3 brokers at their defaults (zookeeper.session.timeout.ms "
                  f"{setting_for('zookeeper.session.timeout.ms').default}), "  # type: ignore[union-attr]
                  f"{'a ZooKeeper 3.8 standalone' if args.zookeeper else '3 keepers'} ticking {KEEPER_TICK_MS} ms, "
                  f"{PARTITIONS} partitions RF 3 min.insync.replicas 2, {args.producer} "
                  f"{extra or 'defaults'} (acks=all{', idempotence' if args.producer == 'confluent-kafka' else ''}), "
                  f"{args.rate} keyed records/s, load average {os.getloadavg()[0]:.2f}")
    print(summary("longest silence on the victim's partitions", silences))
    print(summary("kill -> new leaders in Metadata", to_leader))
    print(f"  {acked_total} records acknowledged, {failed} sends failed, {missing} acknowledged records missing "
          f"when read back")
    print(f"  ({conditions})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--rate", type=int, default=500, help="keyed records per second")
    parser.add_argument("--producer", choices=sorted(STREAMS), default="confluent-kafka")
    parser.add_argument("--client", action="append", default=[], metavar="NAME=VALUE",
                        help="a client setting (librdkafka names, or the library's keyword arguments)")
    parser.add_argument("--zookeeper", action="store_true", help="a real Apache ZooKeeper 3.8 in place of the keepers")
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.client)
    print(f"roost failover benchmark — {platform.node()} {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}, load average {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="roost-failover-bench-") as root, contextlib.ExitStack() as stack:
        zookeeper = None
        if args.zookeeper:
            from tests.keeper.zkharness import zookeeper_standalone
            zookeeper = stack.enter_context(zookeeper_standalone(Path(root) / "zk", tick_ms=KEEPER_TICK_MS)).address
        cluster = LocalCluster.start(Path(root), brokers=3, keepers=3, zookeeper=zookeeper, settings=DEFAULTS,
                                     keeper_tick_ms=KEEPER_TICK_MS)
        stack.callback(cluster.close)
        admin = cluster.admin()
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
                            operation_timeout=60)[TOPIC].result(60)
        print(f"\n== kill -9 of the broker leading the most partitions, {args.kills} times, during a keyed acks=all "
              f"stream ==", flush=True)
        bench(cluster, args, extra)


if __name__ == "__main__":
    main()
