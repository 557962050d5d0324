"""How long the roost.testing fixtures take to give a test a node (and, with --cluster, a
cluster): wall time from the start call to ready (both listeners printed; for a cluster, every
broker registered), the started processes' CPU time to get there, and the time to stop. Prints
figures with their conditions; never asserts.

    .venv/bin/python bench/testing_bench.py                 # 10 node starts
    .venv/bin/python bench/testing_bench.py --starts 20 --cluster 3
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from process_cpu import cpu_seconds

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from roost.testing.cluster import RoostCluster
from roost.testing.node import RoostNode


def summary(name: str, values: list[float], unit: str = "s") -> str:
    ordered = sorted(values)
    return (f"{name}: median {statistics.median(ordered):.3f} {unit}, min {ordered[0]:.3f}, "
            f"max {ordered[-1]:.3f} (n={len(ordered)})")


def bench_node(starts: int) -> None:
    ready, cpu, stop = [], [], []
    for index in range(starts):
        with tempfile.TemporaryDirectory(prefix="roost-testing-bench-") as directory:
            begun = time.perf_counter()
            node = RoostNode.start(Path(directory) / f"node-{index}")
            ready.append(time.perf_counter() - begun)
            assert node.process is not None
            cpu.append(cpu_seconds(node.process.pid))
            begun = time.perf_counter()
            node.stop()
            stop.append(time.perf_counter() - begun)
    print(summary("roost_node start to ready (roost up: broker + keeper listening)", ready))
    print(summary("  the node's CPU time (user+system) at ready", cpu))
    print(summary("  stop (SIGTERM to exit)", stop))


def bench_cluster(starts: int) -> None:
    ready, cpu = [], []
    for _ in range(starts):
        with tempfile.TemporaryDirectory(prefix="roost-testing-bench-") as directory:
            begun = time.perf_counter()
            cluster = RoostCluster.start(Path(directory), brokers=3, keepers=1)
            ready.append(time.perf_counter() - begun)
            cpu.append(sum(cpu_seconds(member.pid) for member in cluster.members() if member.pid is not None))
            cluster.close()
    print(summary("roost_cluster (3 brokers, 1 keeper) start to every broker registered", ready))
    print(summary("  the four processes' CPU time (user+system) at ready", cpu))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=10, help="node starts to measure (default 10)")
    parser.add_argument("--cluster", type=int, default=0, metavar="N", help="also measure N cluster starts")
    args = parser.parse_args()
    print(f"roost.testing start-up — {platform.node()} {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}, load average {os.getloadavg()[0]:.2f}; loopback, a fresh data "
          f"directory per start, wall time from the fixture's start call (includes the interpreter's start "
          f"and Roost's imports)", flush=True)
    bench_node(args.starts)
    if args.cluster:
        bench_cluster(args.cluster)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
