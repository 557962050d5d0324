"""Many topics: how fast a cluster creates them as their number grows, and what a Metadata request
for all of them costs at the end. Prints figures with their conditions and the brokers' and the
keeper's CPU time; never asserts.

A real cluster of processes (`roost keeper` and `roost broker`, tests/support/cluster.py) is
started for each shape asked for (default: 1 broker + 1 keeper, then 3 brokers + 1 keeper), and
N topics are created through confluent-kafka's AdminClient in batches. Each batch's row shows the
topics already there, the batch's wall time and topics/s, and the CPU the brokers and the keeper
spent on it: a rate that falls as the count grows (or CPU per batch that rises) is cost that grows
with the number of topics, which makes the whole run quadratic. Then every topic is deleted in one
DeleteTopics request. Beside each batch and the deletion, a probe sends ApiVersions to every broker
every 2 ms: the longest round trip is how long that broker's event loop was held.

    .venv/bin/python bench/topic_scale_bench.py                        # 2,000 topics, both shapes
    .venv/bin/python bench/topic_scale_bench.py --topics 10000 --shapes 1
    .venv/bin/python bench/topic_scale_bench.py --batch 100 --partitions 3 --replication 3 --shapes 3
    .venv/bin/python bench/topic_scale_bench.py --py-spy /tmp/prof     # flame graphs of every process

The machine is shared with other work: compare runs made one after the other, and prefer medians.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import process_cpu  # a sibling module
from confluent_kafka.admin import AdminClient, NewTopic
from tests.support.cluster import LocalCluster
from tests.support.kafka_wire import WireClient

from roost.wire.kafka import ApiKey

# As bench/cluster_bench.py runs a cluster of processes: failures noticed within seconds.
SETTINGS = {"zookeeper.session.timeout.ms": 6000, "replica.lag.time.max.ms": 10000,
            "replica.fetch.wait.max.ms": 500, "leader.imbalance.check.interval.seconds": 300}


def cpu_seconds(pid: int) -> float:
    """The process's CPU so far, 0 once it has gone (a broker stopped by the run)."""
    try:
        return process_cpu.cpu_seconds(pid)
    except FileNotFoundError:
        return 0.0


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def pids(cluster: LocalCluster) -> tuple[dict[int, int], int]:
    brokers = {b: n.process.popen.pid for b, n in cluster.brokers.items() if n.process is not None}
    keeper = next(iter(cluster.keepers.values())).process
    assert keeper is not None
    return brokers, keeper.popen.pid


def start_profilers(cluster: LocalCluster, directory: Path, label: str) -> list[subprocess.Popen[bytes]]:
    """`py-spy record` on every broker and the keeper until stopped (SIGINT writes the graph)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    directory.mkdir(parents=True, exist_ok=True)
    brokers, keeper = pids(cluster)
    targets = {**{f"{label}-broker{b}": pid for b, pid in brokers.items()}, f"{label}-keeper": keeper}
    return [subprocess.Popen([spy, "record", "--pid", str(pid), "--rate", "50", "--format", "speedscope",
                              "--output", str(directory / f"{name}.speedscope.json")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for name, pid in targets.items()]


def stop_profilers(profilers: list[subprocess.Popen[bytes]]) -> None:
    for profiler in profilers:
        profiler.send_signal(signal.SIGINT)
    for profiler in profilers:
        try:
            profiler.wait(60)
        except subprocess.TimeoutExpired:
            profiler.kill()
            profiler.wait()


def create_batch(admin: AdminClient, names: list[str], partitions: int, replication: int,
                 timeout: float) -> tuple[float, int]:
    """Create `names` in one CreateTopics request; (seconds, topics that failed)."""
    started = time.monotonic()
    futures = admin.create_topics([NewTopic(n, partitions, replication) for n in names],
                                  operation_timeout=timeout, request_timeout=timeout + 10)
    failed = failures(futures.values(), timeout + 30)
    return time.monotonic() - started, failed


def failures(futures: Iterable[Future[None]], timeout: float) -> int:
    """Wait for an admin request's futures; how many failed (the first one's error is shown)."""
    failed = 0
    for future in futures:
        try:
            future.result(timeout)
        except Exception as error:  # counted and shown; the run goes on
            failed += 1
            if failed == 1:
                print(f"    first failure: {error}", flush=True)
    return failed


def metadata_all(admin: AdminClient, rounds: int) -> tuple[list[float], int, int, int]:
    """Times of `rounds` Metadata requests for all topics; (times, topics, partitions, leaderless)."""
    times = []
    answer = None
    for _ in range(rounds):
        started = time.monotonic()
        answer = admin.list_topics(timeout=120)
        times.append(time.monotonic() - started)
    assert answer is not None
    ours = [t for name, t in answer.topics.items() if name.startswith("scale-")]
    partitions = sum(len(t.partitions) for t in ours)
    leaderless = sum(1 for t in ours for p in t.partitions.values() if p.leader < 0)
    return times, len(ours), partitions, leaderless


def show_trouble(who: str, output: str, shown: int = 5) -> None:
    """How many warnings and errors a process logged, and the first few."""
    lines = [line for line in output.splitlines() if " WARNING " in line or " ERROR " in line]
    print(f"  {who}: {len(lines)} warnings and errors logged", flush=True)
    for line in lines[:shown]:
        print(f"    {line[:300]}", flush=True)


def metadata_wire(address: str, rounds: int) -> tuple[list[float], int]:
    """Times of `rounds` raw Metadata v12 requests for all topics, from sending the request to
    the last byte of the answer (the broker's share, without a client's parsing); answer bytes."""
    client = WireClient(address, timeout=120)
    times, size = [], 0
    try:
        for _ in range(rounds):
            started = time.monotonic()
            client.send(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                              "include_topic_authorized_operations": False})
            size = len(client.read_frame())
            times.append(time.monotonic() - started)
    finally:
        client.close()
    return times, size


class LoopProbe:
    """ApiVersions round trips to every broker, one every 2 ms per broker, on threads of their own:
    the longest round trip while an admin operation runs is how long that broker's event loop was
    held (other clients wait as long)."""

    def __init__(self, addresses: list[str]) -> None:
        self._addresses = addresses
        self._longest: dict[str, float] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> LoopProbe:
        self._longest = dict.fromkeys(self._addresses, 0.0)
        self._stop.clear()
        self._threads = [threading.Thread(target=self._probe, args=(a,), daemon=True) for a in self._addresses]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def _probe(self, address: str) -> None:
        client = WireClient(address, timeout=120)
        try:
            for _ in range(10_000_000):  # bounded; ends when the operation does
                if self._stop.is_set():
                    return
                started = time.monotonic()
                client.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "probe",
                                                        "client_software_version": "1"})
                self._longest[address] = max(self._longest[address], time.monotonic() - started)
                time.sleep(0.002)
        finally:
            client.close()

    def longest_ms(self) -> str:
        return ", ".join(f"{1000 * self._longest[a]:.0f}" for a in self._addresses) + " ms"


def delete_all(admin: AdminClient, names: list[str], timeout: float) -> tuple[float, int]:
    """Delete `names` in one DeleteTopics request (as `kafka-topics --delete` with a pattern does);
    (seconds until every one is gone from Metadata, topics that failed)."""
    started = time.monotonic()
    futures = admin.delete_topics(names, operation_timeout=timeout, request_timeout=timeout + 10)
    failed = failures(futures.values(), timeout + 30)
    left = set(names)
    for _ in range(600):  # bounded: at most about a minute more
        left &= set(admin.list_topics(timeout=60).topics)
        if not left:
            break
        time.sleep(0.1)
    return time.monotonic() - started, failed


def files_left(root: Path) -> int:
    """Partition directories of our topics (live or renamed for deletion) still on disk."""
    return sum(1 for path in root.rglob("scale-*") if path.is_dir())


def run_shape(brokers: int, args: argparse.Namespace) -> None:
    replication = args.replication if args.replication else min(3, brokers)
    print(f"\n== {brokers} broker(s) + 1 keeper: {args.topics} topics, {args.partitions} partition(s) each, "
          f"replication factor {replication}, batches of {args.batch} ==", flush=True)
    with tempfile.TemporaryDirectory(prefix="roost-topic-scale-") as root:
        cluster = LocalCluster.start(Path(root), brokers=brokers, keepers=1, settings=SETTINGS)
        profilers: list[subprocess.Popen[bytes]] = []
        try:
            broker_pids, keeper_pid = pids(cluster)
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "socket.timeout.ms": 120_000})
            if args.py_spy:
                profilers = start_profilers(cluster, Path(args.py_spy), f"b{brokers}")
            probe = LoopProbe([node.address for _, node in sorted(cluster.brokers.items())])
            print(f"  {'topics':>7} {'batch s':>8} {'topics/s':>9} {'brokers cpu s':>14} {'keeper cpu s':>13}"
                  f" {'failed':>6}  longest round trip per broker", flush=True)
            rates: list[float] = []
            started = time.monotonic()
            broker_cpu0 = sum(cpu_seconds(p) for p in broker_pids.values())
            keeper_cpu0 = cpu_seconds(keeper_pid)
            failed_total = 0
            for first in range(0, args.topics, args.batch):
                names = [f"scale-{i:06d}" for i in range(first, min(args.topics, first + args.batch))]
                before_b = sum(cpu_seconds(p) for p in broker_pids.values())
                before_k = cpu_seconds(keeper_pid)
                with probe:
                    took, failed = create_batch(admin, names, args.partitions, replication, args.timeout)
                failed_total += failed
                rates.append(len(names) / took)
                print(f"  {first + len(names):>7} {took:>8.2f} {len(names) / took:>9.1f} "
                      f"{sum(cpu_seconds(p) for p in broker_pids.values()) - before_b:>14.2f} "
                      f"{cpu_seconds(keeper_pid) - before_k:>13.2f} {failed:>6}  {probe.longest_ms()}", flush=True)
            wall = time.monotonic() - started
            print(f"  all: {args.topics} topics in {wall:.1f} s = {args.topics / wall:.1f} topics/s "
                  f"(median batch {statistics.median(rates):.1f} topics/s, first {rates[0]:.1f}, last "
                  f"{rates[-1]:.1f}); {failed_total} failed; CPU brokers "
                  f"{sum(cpu_seconds(p) for p in broker_pids.values()) - broker_cpu0:.1f} s, keeper "
                  f"{cpu_seconds(keeper_pid) - keeper_cpu0:.1f} s", flush=True)
            times, topics, partitions, leaderless = metadata_all(admin, args.metadata_rounds)
            print(f"  Metadata (all topics): median {1000 * statistics.median(times):.0f} ms over {len(times)} "
                  f"requests (min {1000 * min(times):.0f} ms); it named {topics} of our topics, {partitions} "
                  f"partitions, {leaderless} without a leader", flush=True)
            wire_times, size = metadata_wire(cluster.brokers[min(cluster.brokers)].address, args.metadata_rounds)
            print(f"  Metadata v12 (all topics) over a raw socket, the broker's share: median "
                  f"{1000 * statistics.median(wire_times):.0f} ms (min {1000 * min(wire_times):.0f} ms), "
                  f"{size / 1e6:.2f} MB answer", flush=True)
            print("  RSS: " + ", ".join(f"broker {b} {rss_mb(p):.0f} MB" for b, p in sorted(broker_pids.items()))
                  + f", keeper {rss_mb(keeper_pid):.0f} MB", flush=True)
            before_b = sum(cpu_seconds(p) for p in broker_pids.values())
            with probe:
                took, failed = delete_all(admin, [f"scale-{i:06d}" for i in range(args.topics)], args.timeout)
            print(f"  delete all {args.topics} topics in one request: gone from Metadata in {took:.1f} s, "
                  f"{failed} failed, brokers' CPU {sum(cpu_seconds(p) for p in broker_pids.values()) - before_b:.1f} s; "
                  f"longest round trip per broker {probe.longest_ms()}", flush=True)
            for _ in range(300):  # the files go in the background: bounded wait of about 30 s
                if not files_left(Path(root)):
                    break
                time.sleep(0.1)
            print(f"  partition directories of deleted topics still on disk: {files_left(Path(root))}", flush=True)
            for broker, node in sorted(cluster.brokers.items()):
                show_trouble(f"broker {broker}", node.process.text() if node.process else "")
            del admin  # closed before the cluster, so that it does not log the brokers going away
        finally:
            stop_profilers(profilers)
            cluster.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=2000, help="how many topics to create")
    parser.add_argument("--batch", type=int, default=200, help="topics per CreateTopics request")
    parser.add_argument("--partitions", type=int, default=1, help="partitions per topic")
    parser.add_argument("--replication", type=int, default=0, help="replication factor (default: min(3, brokers))")
    parser.add_argument("--shapes", default="1,3", help="broker counts to run, comma-separated (one keeper each)")
    parser.add_argument("--timeout", type=float, default=60.0, help="CreateTopics operation timeout, seconds")
    parser.add_argument("--metadata-rounds", type=int, default=5)
    parser.add_argument("--py-spy", metavar="DIR", help="record each process with py-spy into DIR (speedscope)")
    args = parser.parse_args()
    print(f"conditions: {platform.python_implementation()} {platform.python_version()} on {platform.machine()}, "
          f"{os.cpu_count()} cores shared by the cluster, the client and any other work on the machine; "
          f"keeper forceSync on (an fsync per write); loopback sockets", flush=True)
    for shape in (int(s) for s in args.shapes.split(",") if s.strip()):
        run_shape(shape, args)


if __name__ == "__main__":
    main()
