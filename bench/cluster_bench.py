"""The replicated cluster's benchmark: latency and throughput with replication, controlled-shutdown
pauses, and a thousand partitions. Prints figures with their conditions and
the brokers' CPU time; never asserts. Three brokers (and one keeper) share this machine's cores
with the clients: that is the condition the figures hold for.

    .venv/bin/python bench/cluster_bench.py                 # everything (~5-8 minutes)
    .venv/bin/python bench/cluster_bench.py latency         # or: throughput, shutdown, scale
    .venv/bin/python bench/cluster_bench.py shutdown --shutdowns 5

Failover after a kill -9 at the defaults is bench/failover_bench.py's.

Rows to compare are measured in the same run, alternating where it matters (the machine is shared
and noisy).
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
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from paced_latency import Hooks, paced_latencies
from process_cpu import cpu_seconds

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from client_streams import STREAMS, Plan, Stream
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic
from tests.support.cluster import LocalCluster
from tests.support.procs import wait_for

KEEPER_TICK_MS = [500]
KEEPERS = [1]  # --keepers: the size of the keeper ensemble  # --keeper-tick-ms: the keepers' tickTime (sessions from 2 ticks)
CLIENT_EXTRA: dict[str, str] = {}  # --client NAME=VALUE: client settings for the shutdown stream
PRODUCER = ["confluent-kafka"]  # --producer: the shutdown stream's client library (client_streams.py)
ZOOKEEPER: list[str | None] = [None]  # --zookeeper: a real Apache ZooKeeper's address, in place of the keepers
# The README's fast-failover settings, as a cluster of processes uses them (--session-ms changes the
# session timeout; the keepers tick every 500 ms, so they grant sessions from 1000 ms).
FAST = {"zookeeper.session.timeout.ms": 2000, "replica.lag.time.max.ms": 10000,
        "replica.fetch.wait.max.ms": 500, "leader.imbalance.check.interval.seconds": 30}


def brokers_cpu(cluster: LocalCluster) -> float:
    return sum(cpu_seconds(n.process.popen.pid) for n in cluster.brokers.values() if n.running)  # type: ignore[union-attr]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@contextmanager
def cluster_of(brokers: int = 3, **settings: object) -> Iterator[LocalCluster]:
    with tempfile.TemporaryDirectory(prefix="roost-cluster-bench-") as root:
        cluster = LocalCluster.start(Path(root), brokers=brokers, keepers=KEEPERS[0], settings={**FAST, **settings},
                                     keeper_tick_ms=KEEPER_TICK_MS[0], zookeeper=ZOOKEEPER[0])
        try:
            yield cluster
        finally:
            cluster.close()


def create(cluster: LocalCluster, name: str, partitions: int, replication: int, min_isr: int = 1,
           timeout: float = 120) -> float:
    admin = cluster.admin()
    started = time.monotonic()
    admin.create_topics([NewTopic(name, partitions, replication, config={"min.insync.replicas": str(min_isr)})],
                        operation_timeout=timeout)[name].result(timeout)
    cluster.wait_for_isr(name, full=True, timeout=timeout)
    return time.monotonic() - started


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


# ------------------------------------------------------------------------------------- latency
def latency_run(cluster: LocalCluster, topic: str, acks: str, rate: int, seconds: float) -> str:
    """End-to-end latency of 100 B messages sent one at a time (linger 0) at `rate` per second,
    producer and consumer in this process."""
    readings: list[float] = []
    hooks = Hooks(started=lambda _: readings.append(brokers_cpu(cluster)),
                  ended=lambda _: readings.append(brokers_cpu(cluster)))
    latencies = paced_latencies(cluster.bootstrap, topic, rate, seconds, acks=acks, hooks=hooks)
    cpu = readings[-1] - readings[0]
    if not latencies:
        return "no message came back"
    return (f"n={len(latencies)}  p50 {pct(latencies, 50):6.2f} ms  p99 {pct(latencies, 99):6.2f} ms  "
            f"max {max(latencies):7.2f} ms   brokers {cpu:.2f} s CPU ({cpu / len(latencies) * 1e6:.0f} µs/msg)")


def bench_latency(rate: int, seconds: float) -> None:
    print(f"\n== end-to-end latency: {rate} msg/s for {seconds:.0f} s, 100 B, linger.ms 0, 1 partition, "
          "3 brokers + 1 keeper + this client on the machine ==", flush=True)
    with cluster_of() as cluster:
        create(cluster, "rf1", 1, 1)
        create(cluster, "rf3", 1, 3, min_isr=2)
        for label, topic, acks in (("RF 1, acks=all", "rf1", "all"), ("RF 3, acks=1", "rf3", "1"),
                                   ("RF 3, acks=all", "rf3", "all")):
            print(f"  {label:<16} {latency_run(cluster, topic, acks, rate, seconds)}", flush=True)


# ---------------------------------------------------------------------------------- throughput
def bench_throughput(count: int, rounds: int) -> None:
    print(f"\n== produce throughput: {count} messages of 100 B, batch.size 64 KiB, linger 5 ms, 6 partitions, "
          f"{rounds} alternating rounds ==", flush=True)
    with cluster_of() as cluster:
        create(cluster, "tp-rf1", 6, 1)
        create(cluster, "tp-rf3", 6, 3, min_isr=2)
        results: dict[str, list[tuple[float, float]]] = {}
        payload = os.urandom(50).hex().encode()
        for _ in range(rounds):
            for label, topic, acks in (("RF 1, acks=1", "tp-rf1", "1"), ("RF 3, acks=1", "tp-rf3", "1"),
                                       ("RF 3, acks=all", "tp-rf3", "all")):
                producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5,
                                     "batch.size": 65536, "acks": acks, "queue.buffering.max.messages": 1_000_000})
                producer.list_topics(topic, timeout=30)
                cpu0, start = brokers_cpu(cluster), time.perf_counter()
                for _ in range(count):
                    while True:
                        try:
                            producer.produce(topic, payload)
                            break
                        except BufferError:
                            producer.poll(0.01)
                assert producer.flush(120) == 0
                seconds = time.perf_counter() - start
                results.setdefault(label, []).append((count / seconds, (brokers_cpu(cluster) - cpu0) / count))
        base = statistics.median(r for r, _ in results["RF 1, acks=1"])
        for label, runs in results.items():
            rate = statistics.median(r for r, _ in runs)
            worst = min(r for r, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            print(f"  {label:<16} median {rate:10,.0f} msg/s (worst {worst:,.0f})  {rate / base:5.0%} of RF 1  "
                  f"brokers {cpu * 1e6:.1f} µs/msg CPU", flush=True)


# ------------------------------------------------------------------------------------ shutdown
# (Failover after a kill -9 is bench/failover_bench.py's: the defaults, 20 kills, a keyed stream.)
def bench_shutdown(times: int) -> None:
    print(f"\n== controlled shutdown (SIGTERM) of the leader of the most partitions, {times} times; pause = the "
          f"longest gap between acknowledgements on its partitions around it ({PRODUCER[0]}, keyed acks=all, "
          f"500 msg/s) ==", flush=True)
    pauses = []
    with cluster_of() as cluster:
        create(cluster, "cs", 6, 3, min_isr=2)
        for round_number in range(times):
            state = cluster.partitions("cs")
            counts = Counter(leader for leader, _, _ in state.values())
            victim = counts.most_common(1)[0][0]
            led = {p for p, (leader, _, _) in state.items() if leader == victim}
            stopper = threading.Thread(target=cluster.stop_broker, args=(victim,))
            acted: list[float] = []

            def stop(at: list[float] = acted, thread: threading.Thread = stopper) -> None:
                at.append(time.monotonic())
                thread.start()

            stream = Stream(6)
            plan = Plan("cs", 500, 8.0, first=round_number * 4000, actions=[(8.0 / 3 + random.random(), stop)])
            STREAMS[PRODUCER[0]](cluster.bootstrap, plan, stream, CLIENT_EXTRA)
            stopper.join(120)
            pause = stream.longest_silence(led, acted[0] - 1.0)
            pauses.append(pause)
            print(f"  stopped broker {victim} (leading {len(led)} partitions): pause {pause * 1000:.0f} ms, "
                  f"{stream.failed} failed sends", flush=True)
            cluster.restart(victim)
            cluster.wait_for_isr("cs", full=True, timeout=120)
    print(f"  pause over {len(pauses)} shutdowns: min {min(pauses) * 1000:.0f} ms  median "
          f"{statistics.median(pauses) * 1000:.0f} ms  max {max(pauses) * 1000:.0f} ms", flush=True)


# --------------------------------------------------------------------------------------- scale
def bench_scale(partitions: int) -> None:
    print(f"\n== scale: one topic of {partitions} partitions, replication factor 3, on 3 brokers ==", flush=True)
    with cluster_of() as cluster:
        took = create(cluster, "big", partitions, 3, timeout=600)
        print(f"  create: {took:.1f} s until every partition has a leader and a full ISR", flush=True)
        for broker, node in sorted(cluster.brokers.items()):
            print(f"  broker {broker}: RSS {rss_mb(node.process.popen.pid):.0f} MB", flush=True)  # type: ignore[union-attr]
        controller = cluster.controller()
        led_by_controller = {p for p, (leader, _, _) in cluster.partitions("big").items() if leader == controller}
        killed_at = time.monotonic()
        cluster.kill(controller)

        def recovered() -> bool:
            if cluster.controller() in (controller, -1):
                return False
            parts = cluster.partitions("big")
            return all(parts[p][0] not in (controller, -1) for p in led_by_controller)

        wait_for(recovered, 300, interval=0.1, what="a new controller and new leaders")
        print(f"  controller (broker {controller}, leading {len(led_by_controller)} partitions) killed: "
              f"{time.monotonic() - killed_at:.1f} s until a new controller had given each of them a new leader",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", nargs="*", default=["latency", "throughput", "shutdown", "scale"],
                        choices=["latency", "throughput", "shutdown", "scale"])
    parser.add_argument("--rate", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--count", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shutdowns", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--session-ms", type=int, default=FAST["zookeeper.session.timeout.ms"],
                        help="the brokers' zookeeper.session.timeout.ms")
    parser.add_argument("--client", action="append", default=[], metavar="NAME=VALUE",
                        help="a client setting for the shutdown stream (librdkafka names, or the library's "
                             "keyword arguments)")
    parser.add_argument("--keeper-tick-ms", type=int, default=500)
    parser.add_argument("--keepers", type=int, default=1, help="keepers in the ensemble (roost up uses 3)")
    parser.add_argument("--producer", choices=sorted(STREAMS), default="confluent-kafka",
                        help="the shutdown stream's client (its defaults, acks=all)")
    parser.add_argument("--zookeeper", action="store_true",
                        help="a real Apache ZooKeeper 3.8 (standalone, tickTime --keeper-tick-ms) in place of the keepers")
    args = parser.parse_args()
    PRODUCER[0] = args.producer
    KEEPERS[0] = args.keepers
    FAST["zookeeper.session.timeout.ms"] = args.session_ms
    KEEPER_TICK_MS[0] = args.keeper_tick_ms
    CLIENT_EXTRA.update(item.split("=", 1) for item in args.client)
    print(f"roost cluster benchmark — {platform.node()} {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}, load average {os.getloadavg()[0]:.2f}", flush=True)
    with contextlib.ExitStack() as stack:
        if args.zookeeper:
            from tests.keeper.zkharness import zookeeper_standalone
            scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="roost-bench-zk-")))
            ZOOKEEPER[0] = stack.enter_context(zookeeper_standalone(scratch, tick_ms=args.keeper_tick_ms)).address
        run(args)


def run(args: argparse.Namespace) -> None:
    if "latency" in args.what:
        bench_latency(args.rate, args.seconds)
    if "throughput" in args.what:
        bench_throughput(args.count, args.rounds)
    if "shutdown" in args.what:
        bench_shutdown(args.shutdowns)
    if "scale" in args.what:
        bench_scale(args.partitions)


if __name__ == "__main__":
    main()
