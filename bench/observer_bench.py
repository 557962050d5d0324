"""Observers benchmark: reads/s and write latency of 3 voters against 3 voters + 2 observers.

Two ensembles run side by side for the whole benchmark (3 voters; 3 voters + 2 observers), and
each round measures three layouts, in an order rotated per round so that a noisy machine favours
none:
  * 3 voters, and 3 voters + 2 observers: aggregate get/s of lean protocol clients (our codec, no
    kazoo), one per member, each pipelining a window of requests (with observers there are five
    members to read from); then the create latency (p50, p99) of one synchronous kazoo client
    connected to a voting follower while nothing else runs, and the CPU the voters and the
    observers spent per write;
  * 3 voters + 2 observers paused (SIGSTOP for the write measurement): the same creates while the
    observers can neither receive nor answer. If commits waited for an observer they would stall
    here; that they run as fast as with 3 voters alone shows observers are outside the quorum, and
    the difference between "observers" and "observers paused" is what the observers' own work
    (receiving, fsync, applying on the same CPUs and the same disk) costs the voters.

Prints figures and never passes or fails.

    python bench/observer_bench.py            # default: 3 rounds
    python bench/observer_bench.py --quick --repeat 1
    python bench/observer_bench.py --no-fsync # forceSync=no: CPU contention without the disk's

Conditions: loopback, tickTime 2000 ms, fsync on (ZooKeeper's forceSync default), servers and
clients on the same machine (print its core count: on few cores the extra members compete with
the clients and each other for CPU and the one disk, so reads cannot scale there as they would on
separate hosts, and writes pay for the observers' work).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from process_cpu import cpu_seconds

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


LAYOUTS = ("3 voters", "3 voters + 2 observers", "3 voters + 2 observers paused")


@contextlib.contextmanager
def paused(procs: list[RoostProcess]) -> Iterator[None]:
    """SIGSTOP `procs` for the block (SIGCONT after, whatever happens)."""
    for proc in procs:
        os.kill(proc.popen.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for proc in procs:
            os.kill(proc.popen.pid, signal.SIGCONT)


def _started(stack: contextlib.ExitStack, work: Path, observers: int) -> tuple[list[RoostProcess], RoostProcess]:
    """An ensemble of 3 voters and `observers` observers, its leader elected; returns its
    processes and a voting follower (where the write client connects)."""
    size = 3 + observers
    procs = stack.enter_context(keeper_ensemble(work, size=size, extra=SETTINGS,
                                                observers=frozenset(range(4, size + 1))))
    wait_until(lambda: sorted(_mode(p) for p in procs).count("leader") == 1, 60, "a leader")
    wait_until(lambda: all(_mode(p) for p in procs), 60, "every member serving")
    return procs, next(p for p in procs[:3] if _mode(p) == "follower")


def measure_reads(procs: list[RoostProcess], args: argparse.Namespace, tag: str) -> dict[str, float]:
    cpu_before = sum(cpu_seconds(p.popen.pid) for p in procs)
    reads = raw_throughput([p.address("keeper") for p in procs], "get", args.reads, args.window, tag)
    return {"reads/s": reads, "read server CPU s": sum(cpu_seconds(p.popen.pid) for p in procs) - cpu_before}


def measure_writes(procs: list[RoostProcess], follower: RoostProcess, args: argparse.Namespace,
                   tag: str) -> dict[str, float]:
    """Sync creates on the voting follower; the CPU the members spent per create."""
    cpu_before = {p.popen.pid: cpu_seconds(p.popen.pid) for p in procs}
    creates = sync_latency(follower.address("keeper"), args.writes, tag)["create"][0]
    spent = {pid: cpu_seconds(pid) - before for pid, before in cpu_before.items()}
    observer_pids = {p.popen.pid for p in procs[3:]}
    return {
        "create p50 ms": percentile(creates, 0.50),
        "create p99 ms": percentile(creates, 0.99),
        # sync_latency runs creates, sets and gets: 2 writes and a read per count
        "voters' CPU µs/write": sum(v for pid, v in spent.items() if pid not in observer_pids) * 1e6 / (2 * args.writes),
        "observers' CPU µs/write": sum(v for pid, v in spent.items() if pid in observer_pids) * 1e6 / (2 * args.writes),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (each runs every layout once)")
    parser.add_argument("--no-fsync", action="store_true", help="forceSync=no on every member")
    args = parser.parse_args()
    args.reads = 5_000 if args.quick else 20_000  # gets per client
    args.writes = 300 if args.quick else 1_000
    args.window = 64
    if args.no_fsync:
        SETTINGS["forceSync"] = False
    load = os.getloadavg()[0]
    print(f"observer bench: {os.cpu_count()} cores, load {load:.2f} at start, loopback, tickTime 2000 ms, "
          f"fsync {'off' if args.no_fsync else 'on'}; {args.reads} pipelined gets (window {args.window}) per "
          f"member-client, {args.writes} sync kazoo creates (then sets, gets) on a voting follower; "
          f"{args.repeat} rounds, layouts in a rotated order per round", flush=True)
    rows: dict[str, list[dict[str, float]]] = {layout: [] for layout in LAYOUTS}
    with tempfile.TemporaryDirectory(prefix="roost-observer-bench-") as tmp, contextlib.ExitStack() as stack:
        voters, voters_follower = _started(stack, Path(tmp) / "obs0", 0)
        mixed, mixed_follower = _started(stack, Path(tmp) / "obs2", 2)
        for round_no in range(args.repeat):
            order = LAYOUTS[round_no % 3:] + LAYOUTS[:round_no % 3]
            for layout in order:
                tag = f"r{round_no}-{LAYOUTS.index(layout)}"
                if layout == LAYOUTS[0]:
                    row = measure_reads(voters, args, tag) | measure_writes(voters, voters_follower, args, tag)
                elif layout == LAYOUTS[1]:
                    row = measure_reads(mixed, args, tag) | measure_writes(mixed, mixed_follower, args, tag)
                else:
                    with paused(mixed[3:]):
                        row = measure_writes(mixed, mixed_follower, args, tag)
                rows[layout].append(row)
                print(f"  round {round_no + 1} {layout}: "
                      + ", ".join(f"{k} {v:,.2f}" for k, v in row.items()), flush=True)
    print(f"\n  medians of {args.repeat} rounds (worst round in brackets: lowest reads/s, highest latency)")
    print(f"  {'':<24}" + "".join(f"{layout:>32}" for layout in LAYOUTS))
    for key in _keys(rows):
        cells = []
        for layout in LAYOUTS:
            values = [row[key] for row in rows[layout] if key in row]
            if not values:
                cells.append(f"{'-':>32}")
                continue
            worst = min(values) if key == "reads/s" else max(values)
            cells.append(f"{statistics.median(values):>20,.2f} [{worst:>9,.2f}]")
        print(f"  {key:<24}" + "".join(cells))
    print(f"  load {os.getloadavg()[0]:.2f} at the end")
    return 0


def _keys(rows: dict[str, list[dict[str, float]]]) -> list[str]:
    keys: list[str] = []
    for layout_rows in rows.values():
        for key in layout_rows[0] if layout_rows else ():
            if key not in keys:
                keys.append(key)
    return keys


if __name__ == "__main__":
    raise SystemExit(main())
