"""Roost beside Apache Kafka on this machine, in one run: the same confluent-kafka load against
Apache Kafka 3.9 (ZooKeeper mode, on Apache ZooKeeper 3.8) and against Roost (brokers on its own
keepers), one broker and three, the two systems alternating run by run so that a noisy machine
favours neither; then the keeper against Apache ZooKeeper 3.9 and 3.8.

Figures (each system at its own defaults unless a row says otherwise):

- batched produce: 100 B records, batch.size 64 KiB, linger 5 ms, acks=1, 6 partitions (RF 1 on
  one broker; acks=all and RF 3 on three), msg/s and MB/s, broker CPU per message;
- unbatched produce: one record per request (a synchronous producer, linger 0, acks=1), broker
  CPU per request;
- end-to-end latency at 5,000 msg/s, acks=all, RF 3, three brokers: p50 and p99;
- caught-up consume: 64 KiB records, one confluent-kafka consumer, GB/s;
- the client-visible silence after kill -9 of a partition leader (the longest gap between two
  acknowledgements on the partitions it led; three brokers at each system's defaults);
- broker start to first produce acknowledged (the coordination service already running);
- resident memory of a broker at rest and under the batched load;
- bytes on disk per 100 B record;
- keeper and ZooKeeper: kazoo create/get latency (p50, p99) on a standalone server.

    .venv/bin/python bench/vs_kafka.py               # 3 runs of everything (~25 minutes)
    .venv/bin/python bench/vs_kafka.py --runs 1 --only produce,latency

Ratios are Roost / Kafka (for rates, above 1 means Roost is faster; for times, CPU, memory and
bytes, above 1 means Roost needs more). Prints figures with their conditions; never passes or
fails.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from client_streams import Plan, Stream, stream_confluent
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from paced_latency import paced_latencies
from process_cpu import cpu_seconds

PARTITIONS = 6


# ------------------------------------------------------------------------------ the systems


@dataclass
class Brokers:
    """What a measurement needs of either system: where to connect, the broker processes (for
    CPU, memory, kill -9 and restart) and where their data lives."""

    system: str
    bootstrap: str
    pid_of: Callable[[int], int]  # broker id -> process id
    broker_ids: list[int]
    data_dirs: list[Path]
    kill: Callable[[int], None]
    restart: Callable[[int], None]
    close: Callable[[], None]

    def cpu(self) -> float:
        return sum(cpu_seconds(self.pid_of(b)) for b in self.broker_ids)

    def rss_mb(self) -> float:
        return sum(rss_kib(self.pid_of(b)) for b in self.broker_ids) / 1024

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


STARTERS: dict[str, Callable[[Path, int], Brokers]] = {}


def system(name: str) -> Callable[[Callable[[Path, int], Brokers]], Callable[[Path, int], Brokers]]:
    def register(starter: Callable[[Path, int], Brokers]) -> Callable[[Path, int], Brokers]:
        STARTERS[name] = starter
        return starter
    return register


@system("Roost")
def start_roost_brokers(root: Path, count: int) -> Brokers:
    from tests.support.cluster import TEST_BROKER_SETTINGS, LocalCluster

    from roost.config import setting_for
    # The test harness shortens some settings; the benchmark puts the defaults back.
    defaults = {name: setting_for(name).default for name in TEST_BROKER_SETTINGS}  # type: ignore[union-attr]
    cluster = LocalCluster.start(root, brokers=count, keepers=1, settings=defaults)

    def pid_of(broker_id: int) -> int:
        process = cluster.brokers[broker_id].process
        assert process is not None
        return process.popen.pid

    return Brokers("Roost", cluster.bootstrap, pid_of, sorted(cluster.brokers),
                   [root / f"broker-{b}" for b in cluster.brokers], cluster.kill, cluster.restart,
                   cluster.close)


@system("Kafka 3.9")
def start_kafka_brokers(root: Path, count: int) -> Brokers:
    """Apache Kafka 3.9 in ZooKeeper mode on its own ZooKeeper 3.8 (Kafka 3.9's jars), at its
    defaults: the heap its start script gives (-Xmx1G -Xms1G), its JVM flags, no test tuning."""
    from tests.support.kafka_referee import kafka_zk

    stack = contextlib.ExitStack()
    cluster = stack.enter_context(kafka_zk(root, brokers=count, heap="1g", tuned_for_tests=False))

    def pid_of(node_id: int) -> int:
        process = cluster.nodes[node_id].process
        assert process is not None
        return process.popen.pid

    return Brokers("Kafka 3.9", cluster.bootstrap, pid_of, sorted(cluster.nodes),
                   [node.directory / "data" for node in cluster.nodes.values()], cluster.kill9,
                   cluster.restart, stack.close)


# ------------------------------------------------------------------------------ measurements


def create_topic(brokers: Brokers, name: str, partitions: int, rf: int, **config: str) -> None:
    admin = brokers.admin()  # held: a client collected while its future waits cancels it
    admin.create_topics([NewTopic(name, partitions, rf, config=config)])[name].result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # every partition led before the clock starts
        meta = admin.list_topics(name, timeout=10).topics[name]
        if len(meta.partitions) == partitions and all(p.leader >= 0 for p in meta.partitions.values()):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{name}: partitions without a leader after 60 s")


@dataclass
class Figures:
    """One run's figures for one system and cluster size, by row name."""

    values: dict[str, float] = field(default_factory=dict)


QUIET = {"log.connection.close": False}  # the stops and kills below close connections on purpose


def warm_up(brokers: Brokers) -> None:
    """A JVM runs interpreted until its JIT has seen the hot paths: half a minute of the rows'
    kinds of load before any clock starts, so Kafka is measured warm (Roost has nothing to warm;
    it gets the same, so both have the same page cache and file history)."""
    create_topic(brokers, "warm-up", PARTITIONS, min(3, len(brokers.broker_ids)))
    producer = Producer({"bootstrap.servers": brokers.bootstrap, **QUIET, "linger.ms": 5, "acks": "all"})
    deadline = time.monotonic() + 30
    sent = 0
    while time.monotonic() < deadline and sent < 3_000_000:
        for _ in range(10_000):
            try:
                producer.produce("warm-up", b"w" * 100)
            except BufferError:
                producer.poll(0.01)
        sent += 10_000
        producer.poll(0)
        if sent % 200_000 == 0:  # unbatched requests too
            for _ in range(200):
                producer.produce("warm-up", b"u" * 100)
                producer.flush(10)
    producer.flush(60)
    consumer = Consumer({"bootstrap.servers": brokers.bootstrap, **QUIET, "group.id": "warm", "enable.auto.commit": False})
    consumer.assign([TopicPartition("warm-up", p, 0) for p in range(PARTITIONS)])
    read_until = time.monotonic() + 15
    while time.monotonic() < read_until and consumer.consume(10_000, 0.5):
        pass
    consumer.close()


def batched_produce(brokers: Brokers, figures: Figures, rf: int) -> None:
    topic = f"batched-{rf}"
    create_topic(brokers, topic, PARTITIONS, rf)
    count, size = 500_000, 100
    payload = os.urandom(size // 2).hex().encode()
    producer = Producer({"bootstrap.servers": brokers.bootstrap, **QUIET, "linger.ms": 5, "batch.size": 65536,
                         "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
                         "acks": "all" if rf > 1 else 1})
    producer.list_topics(topic, timeout=30)
    peak_rss = [0.0]
    done = threading.Event()

    def sample_rss() -> None:
        while not done.wait(0.2):
            peak_rss[0] = max(peak_rss[0], brokers.rss_mb())

    sampler = threading.Thread(target=sample_rss, daemon=True)
    sampler.start()
    cpu0, wall0 = brokers.cpu(), time.perf_counter()
    for _ in range(count):
        try:
            producer.produce(topic, payload)
        except BufferError:
            producer.poll(0.01)
            producer.produce(topic, payload)
    assert producer.flush(120) == 0
    seconds, cpu = time.perf_counter() - wall0, brokers.cpu() - cpu0
    done.set()
    sampler.join(5)
    figures.values["batched produce msg/s"] = count / seconds
    figures.values["batched produce MB/s"] = count * size / seconds / 1e6
    figures.values["broker CPU per batched record µs"] = cpu / count * 1e6
    figures.values["broker RSS under load MB"] = peak_rss[0] / len(brokers.broker_ids)
    if rf == 1:
        time.sleep(2)  # let both flush their indexes' views of the segments
        used = sum(du(d, topic) for d in brokers.data_dirs)
        figures.values["bytes on disk per 100 B record"] = used / count


def du(data_dir: Path, topic: str) -> int:
    total = 0
    for path in data_dir.glob(f"**/{topic}-[0-9]*/*"):  # Roost keeps partitions under logs/
        with contextlib.suppress(OSError):
            total += path.stat().st_blocks * 512
    return total


def unbatched_produce(brokers: Brokers, figures: Figures) -> None:
    topic = "unbatched"
    create_topic(brokers, topic, 1, 1)
    producer = Producer({"bootstrap.servers": brokers.bootstrap, **QUIET, "linger.ms": 0, "acks": 1})
    producer.list_topics(topic, timeout=30)
    count = 3000
    for _ in range(200):  # warm
        producer.produce(topic, b"w" * 100)
        producer.flush(10)
    cpu0, wall0 = brokers.cpu(), time.perf_counter()
    for _ in range(count):
        producer.produce(topic, b"x" * 100)
        producer.flush(10)
    seconds, cpu = time.perf_counter() - wall0, brokers.cpu() - cpu0
    figures.values["broker CPU per unbatched produce µs"] = cpu / count * 1e6
    figures.values["unbatched produce round trip ms"] = seconds / count * 1e3


def end_to_end_latency(brokers: Brokers, figures: Figures, rate: int = 5000, seconds: float = 10.0) -> None:
    topic = "latency"
    create_topic(brokers, topic, 1, len(brokers.broker_ids), **{"min.insync.replicas": "2"})
    latencies = paced_latencies(brokers.bootstrap, topic, rate, seconds, producer_config=QUIET, consumer_config=QUIET)
    if latencies:
        figures.values["end-to-end p50 ms"] = latencies[len(latencies) // 2]
        figures.values["end-to-end p99 ms"] = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]


def caught_up_consume(brokers: Brokers, figures: Figures) -> None:
    topic, size, count = "consume", 65536, 8000  # 524 MB
    create_topic(brokers, topic, PARTITIONS, 1)
    payload = os.urandom(size)
    producer = Producer({"bootstrap.servers": brokers.bootstrap, **QUIET, "linger.ms": 20, "batch.size": 1 << 20,
                         "queue.buffering.max.kbytes": 1_048_576, "acks": 1})
    for _ in range(count):
        try:
            producer.produce(topic, payload)
        except BufferError:
            producer.poll(0.05)
            producer.produce(topic, payload)
    assert producer.flush(120) == 0
    consumer = Consumer({"bootstrap.servers": brokers.bootstrap, **QUIET, "group.id": "bench", "fetch.max.bytes": 16 << 20,
                         "max.partition.fetch.bytes": 2 << 20, "queued.max.messages.kbytes": 1 << 20,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    received = len(consumer.consume(1, 30))
    started = time.perf_counter()
    deadline = time.monotonic() + 300
    while received < count and time.monotonic() < deadline:
        received += len(consumer.consume(250, 0.5))
    seconds = time.perf_counter() - started
    consumer.close()
    figures.values["caught-up consume GB/s"] = (received - 1) * size / seconds / 1e9


def failover_silence(brokers: Brokers, figures: Figures) -> None:
    topic = "failover"
    create_topic(brokers, topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    meta = brokers.admin().list_topics(topic, timeout=10).topics[topic].partitions
    counts: dict[int, int] = {}
    for p in meta.values():
        counts[p.leader] = counts.get(p.leader, 0) + 1
    victim = max(counts, key=lambda b: counts[b])
    led = {p for p, m in meta.items() if m.leader == victim}
    killed: list[float] = []

    def kill() -> None:
        killed.append(time.monotonic())
        brokers.kill(victim)

    stream_s = 40.0  # longer than either system's default session timeout (18 s) and election
    plan = Plan(topic, 500, stream_s, actions=[(5.0, kill)])
    stream = Stream(PARTITIONS)
    stream_confluent(brokers.bootstrap, plan, stream, {})
    figures.values["kill -9 leader: client silence s"] = stream.longest_silence(led, killed[0] - 1.0)
    brokers.restart(victim)


def start_to_first_produce(start: Callable[[Path, int], Brokers], root: Path, figures: Figures) -> None:
    """Broker start to first produce acknowledged, the coordination service running: the whole
    starter's time minus nothing (each starter starts its ZooKeeper or keeper too, so this row
    times a fresh one-broker system from nothing to the first acknowledged record)."""
    started = time.perf_counter()
    brokers = start(root, 1)
    try:
        producer = Producer({"bootstrap.servers": brokers.bootstrap, **QUIET, "acks": 1, "linger.ms": 0,
                             "allow.auto.create.topics": True})
        producer.produce("first", b"hello")
        deadline = time.monotonic() + 60
        while producer.flush(1) and time.monotonic() < deadline:
            pass
        figures.values["start to first produce s"] = time.perf_counter() - started
        time.sleep(3)
        figures.values["broker RSS at rest MB"] = brokers.rss_mb()
    finally:
        brokers.close()


# ------------------------------------------------------------------------------ keeper and ZooKeeper


@contextlib.contextmanager
def zookeeper_from(jars: list[str], directory: Path) -> Iterator[str]:
    """A standalone Apache ZooKeeper from `jars`, configured as keeper_bench.py configures its
    own (tickTime 2000, forceSync on: ZooKeeper's defaults), at the JVM's defaults."""
    import subprocess

    from tests.keeper.zkharness import _zk_config, serving
    from tests.support.procs import free_ports, stop_process
    (port,) = free_ports(1)
    conf = _zk_config(directory, port, tick_ms=2000)
    popen = subprocess.Popen(["java", "-cp", ":".join([str(conf), *jars]),
                              "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(conf / "zoo.cfg")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=directory)
    try:
        address = f"127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while not serving(address):
            if popen.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ZooKeeper from {jars[0]} did not start")
            time.sleep(0.2)
        yield address
    finally:
        stop_process(popen, timeout=20)


def keeper_beside_zookeeper(runs: int, ops: int = 2000) -> None:
    """kazoo create and get latency from one synchronous client against the keeper, ZooKeeper 3.9
    (Maven) and ZooKeeper 3.8 (Debian), each standalone with fsync on, taking turns `runs` times."""
    from keeper_bench import KEEPER_SETTINGS, percentile, sync_latency
    from tests.keeper.zkharness import ZK_JARS, keeper_process
    from tests.support.jvm import referee_libs
    zk39 = sorted(str(jar) for jar in referee_libs("zookeeper-3.9").glob("*.jar"))
    samples: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="roost-vs-zk-") as root, contextlib.ExitStack() as stack:
        servers = {"keeper": stack.enter_context(keeper_process(Path(root, "keeper"), KEEPER_SETTINGS)).address("keeper"),
                   "ZooKeeper 3.9": stack.enter_context(zookeeper_from(zk39, Path(root, "zk39"))),
                   "ZooKeeper 3.8": stack.enter_context(zookeeper_from(ZK_JARS, Path(root, "zk38")))}
        for name, host in servers.items():  # warm: the JVMs' JIT, the keeper's caches
            sync_latency(host, 500, f"warm-{name}")
        for run in range(runs):
            for name, host in (servers.items() if run % 2 == 0 else reversed(servers.items())):
                for op, (latencies, _) in sync_latency(host, ops, f"{name}-{run}".replace(" ", "")).items():
                    samples.setdefault(name, {}).setdefault(op, []).extend(latencies)
    print(f"\n| kazoo, one synchronous client, standalone, fsync on ({runs} alternating runs of {ops} ops) "
          "| keeper | ZooKeeper 3.9 | ZooKeeper 3.8 | keeper / 3.9 | keeper / 3.8 |")
    print("|---|---|---|---|---|---|")
    for op in ("create", "set", "get"):
        for label, fraction in (("p50", 0.5), ("p99", 0.99)):
            k, z9, z8 = (percentile(samples[n][op], fraction) for n in servers)
            print(f"| {op} {label} ms | {k:.3f} | {z9:.3f} | {z8:.3f} | {k / z9:.2f} | {k / z8:.2f} |")


# ------------------------------------------------------------------------------ the run


ROWS: dict[str, tuple[str, bool]] = {  # row -> (unit shown, higher is better)
    "batched produce msg/s": ("msg/s", True),
    "batched produce MB/s": ("MB/s", True),
    "broker CPU per batched record µs": ("µs", False),
    "broker CPU per unbatched produce µs": ("µs", False),
    "unbatched produce round trip ms": ("ms", False),
    "end-to-end p50 ms": ("ms", False),
    "end-to-end p99 ms": ("ms", False),
    "caught-up consume GB/s": ("GB/s", True),
    "kill -9 leader: client silence s": ("s", False),
    "start to first produce s": ("s", False),
    "broker RSS at rest MB": ("MB", False),
    "broker RSS under load MB": ("MB", False),
    "bytes on disk per 100 B record": ("B", False),
}

SECTIONS = ("produce", "unbatched", "latency", "consume", "failover", "start", "keeper")


def one_run(name: str, size: int, only: set[str], root: Path, results: dict[tuple[str, int], list[Figures]]) -> None:
    start = STARTERS[name]
    figures = Figures()
    if size == 1 and "start" in only:
        start_to_first_produce(start, root / "start", figures)
    measured = {"produce", "unbatched", "latency", "consume", "failover"} & only
    if measured:
        brokers = start(root / "cluster", size)
        try:
            warm_up(brokers)
            if "produce" in only:
                batched_produce(brokers, figures, rf=min(3, size))
            if "unbatched" in only and size == 1:
                unbatched_produce(brokers, figures)
            if "latency" in only and size == 3:
                end_to_end_latency(brokers, figures)
            if "consume" in only and size == 1:
                caught_up_consume(brokers, figures)
            if "failover" in only and size == 3:
                failover_silence(brokers, figures)
        finally:
            brokers.close()
    results.setdefault((name, size), []).append(figures)
    shown = ", ".join(f"{k} {v:,.3g}" for k, v in figures.values.items())
    print(f"  {name}, {size} broker{'s' if size > 1 else ''}: {shown}", flush=True)


def table(results: dict[tuple[str, int], list[Figures]], systems: list[str]) -> None:
    roost, kafka = systems
    print(f"\n| figure | brokers | {roost} (median [worst]) | {kafka} (median [worst]) | {roost} / {kafka} |")
    print("|---|---|---|---|---|")
    for size in (1, 3):
        for row, (_, higher) in ROWS.items():
            cells = []
            medians = []
            for name in systems:
                values = [f.values[row] for f in results.get((name, size), []) if row in f.values]
                if not values:
                    cells.append("")
                    medians.append(None)
                    continue
                worst = min(values) if higher else max(values)
                median = statistics.median(values)
                medians.append(median)
                cells.append(f"{median:,.3g} [{worst:,.3g}]")
            if not any(cells):
                continue
            ratio = f"{medians[0] / medians[1]:.2f}" if medians[0] is not None and medians[1] else ""
            print(f"| {row} | {size} | {cells[0]} | {cells[1]} | {ratio} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated from {','.join(SECTIONS)}")
    parser.add_argument("--sizes", default="1,3", help="cluster sizes (brokers)")
    args = parser.parse_args()
    only = set(args.only.split(","))
    sizes = [int(s) for s in args.sizes.split(",")]
    systems = ["Roost", "Kafka 3.9"]
    print(f"Roost beside Apache Kafka — {platform.node()} {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}, load average {os.getloadavg()[0]:.2f}", flush=True)
    results: dict[tuple[str, int], list[Figures]] = {}
    for run in range(args.runs):
        order = systems if run % 2 == 0 else systems[::-1]
        print(f"\nrun {run + 1} of {args.runs} (order: {' then '.join(order)}), load {os.getloadavg()[0]:.2f}",
              flush=True)
        for size in sizes:
            for name in order:
                with tempfile.TemporaryDirectory(prefix="roost-vs-kafka-") as root:
                    one_run(name, size, only, Path(root), results)
    if results:
        table(results, systems)
    if "keeper" in only:
        keeper_beside_zookeeper(args.runs)


if __name__ == "__main__":
    main()
