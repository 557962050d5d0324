"""Observers benchmark: reads/s and write latency of 3 voters against 3 voters + 2 observers.

For each layout (one keeper ensemble each, started afresh):
  * aggregate get/s of lean protocol clients (our codec, no kazoo), one per member, each
    pipelining a window of requests: with observers there are five members to read from;
  * create latency (p50, p99) of one synchronous kazoo client connected to a voting follower,
    while nothing else runs: observers must not slow writes, since they are not in the quorum;
  * the CPU time the keeper processes and this benchmark's clients spent.

Prints figures and never passes or fails.

    python bench/observer_bench.py            # default counts
    python bench/observer_bench.py --quick

Conditions: loopback, tickTime 2000 ms, fsync on (ZooKeeper's forceSync default), servers and
clients on the same machine (print its core count: on few cores the extra members compete with
the clients and each other for CPU, so reads cannot scale there as they would on separate hosts).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from keeper_bench import percentile, raw_throughput, sync_latency
from tests.keeper.zkharness import four_letter, keeper_ensemble, wait_until
from tests.support.procs import RoostProcess

SETTINGS = {"tickTime": 2000, "forceSync": True}


def _mode(proc: RoostProcess) -> str:
    try:
        text = four_letter(proc.address("keeper"), "srvr", timeout=5.0)
    except OSError:
        return ""
    return next((line[6:] for line in text.splitlines() if line.startswith("Mode: ")), "")


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process from /proc (Linux), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(work: Path, observers: int, args: argparse.Namespace) -> dict[str, float]:
    size = 3 + observers
    observer_ids = frozenset(range(4, size + 1))
    with keeper_ensemble(work, size=size, extra=SETTINGS, observers=observer_ids) as procs:
        wait_until(lambda: sorted(_mode(p) for p in procs).count("leader") == 1, 60, "a leader")
        addresses = [p.address("keeper") for p in procs]
        follower = next(p for p in procs[:3] if _mode(p) == "follower")
        cpu_before = sum(_cpu_seconds(p.popen.pid) for p in procs)
        client_before = os.times()
        wall = time.perf_counter()
        reads = raw_throughput(addresses, "get", args.reads, args.window, f"obs{observers}")
        samples = sync_latency(follower.address("keeper"), args.writes, f"obs{observers}")
        wall = time.perf_counter() - wall
        client_after = os.times()
        cpu_servers = sum(_cpu_seconds(p.popen.pid) for p in procs) - cpu_before
        client_cpu = (client_after.children_user + client_after.children_system + client_after.user
                      + client_after.system - client_before.children_user - client_before.children_system
                      - client_before.user - client_before.system)
        creates = samples["create"][0]
        return {
            "reads/s": reads,
            "create p50 ms": percentile(creates, 0.50),
            "create p99 ms": percentile(creates, 0.99),
            "server CPU s": cpu_servers,
            "client CPU s": client_cpu,
            "wall s": wall,
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    args.reads = 5_000 if args.quick else 20_000  # gets per client
    args.writes = 300 if args.quick else 1_000
    args.window = 64
    print(f"observer bench: {os.cpu_count()} cores, loopback, tickTime 2000 ms, fsync on; "
          f"{args.reads} pipelined gets (window {args.window}) per member-client, "
          f"{args.writes} sync kazoo creates on a voting follower", flush=True)
    results = {}
    with tempfile.TemporaryDirectory(prefix="roost-observer-bench-") as tmp:
        for observers in (0, 2):
            results[observers] = measure(Path(tmp) / f"obs{observers}", observers, args)
    print(f"\n  {'':<16} {'3 voters':>12} {'3 voters + 2 observers':>24}")
    for key in results[0]:
        print(f"  {key:<16} {results[0][key]:>12,.2f} {results[2][key]:>24,.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
