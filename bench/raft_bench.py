#!/usr/bin/env python3
"""Raft replication benchmark on loopback: proposals/s and commit latency, 1 and 3 members.

    python bench/raft_bench.py [--count 20000] [--concurrency 256] [--no-fsync] [--members 1,3]

1 member: a LocalReplicator in this process. 3 members: three processes (this script in `--member`
mode); the one that becomes leader runs the workload and reports. Figures are printed, never
asserted. Latency is measured with one proposal in flight at a time; throughput with
`--concurrency` proposals in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.support

from tests.support.procs import free_ports

from roost.raft.local import LocalReplicator
from roost.raft.node import RaftReplicator, ReplicatorConfig
from roost.raft.replicator import Replicator


async def workload(replicator: Replicator, count: int, concurrency: int, size: int) -> dict[str, float]:
    payload = b"x" * size
    latencies = []
    for _ in range(min(2000, count)):
        started = time.perf_counter()
        await replicator.propose(payload)
        latencies.append(time.perf_counter() - started)
    latencies.sort()
    cpu0 = time.process_time()
    started = time.perf_counter()
    remaining = count

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await replicator.propose(payload, timeout=60)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    return {
        "latency_p50_ms": 1000 * latencies[len(latencies) // 2],
        "latency_p99_ms": 1000 * latencies[int(len(latencies) * 0.99)],
        "latency_mean_ms": 1000 * statistics.fmean(latencies),
        "throughput_per_s": count / elapsed,
        "leader_cpu_s_per_1k": 1000 * (time.process_time() - cpu0) / count,
    }


async def bench_single(args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as directory:
        replicator = LocalReplicator(directory, fsync=args.fsync)
        applied = [0]
        replicator.set_state_machine(lambda i, e: applied.__setitem__(0, i), lambda: b"", lambda i, b: None)
        await replicator.start()
        try:
            result = await workload(replicator, args.count, args.concurrency, args.size)
            result["fsyncs"] = replicator.storage.fsyncs
            return result
        finally:
            await replicator.stop()


async def run_member(args: argparse.Namespace) -> None:
    peers = {i + 1: ("127.0.0.1", int(p)) for i, p in enumerate(args.ports.split(","))}
    config = ReplicatorConfig(fsync=args.fsync)
    member = RaftReplicator(args.member, peers, Path(args.dir) / f"m{args.member}", config)
    member.set_state_machine(lambda i, e: None, lambda: b"", lambda i, b: None)
    await member.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    deadline = time.monotonic() + 30
    while member.leader_id is None and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    if member.is_leader:
        result = await workload(member, args.count, args.concurrency, args.size)
        print("RESULT " + json.dumps(result), flush=True)
    await stop.wait()
    await member.stop()
    print(f"CPU {args.member} {time.process_time():.2f}", flush=True)


def bench_three(args: argparse.Namespace) -> dict[str, float]:
    ports = free_ports(3)
    with tempfile.TemporaryDirectory() as directory:
        base = [sys.executable, __file__, "--ports", ",".join(map(str, ports)), "--dir", directory,
                "--count", str(args.count), "--concurrency", str(args.concurrency), "--size", str(args.size)]
        if not args.fsync:
            base.append("--no-fsync")
        procs = [subprocess.Popen([*base, "--member", str(i)], stdout=subprocess.PIPE, text=True)
                 for i in (1, 2, 3)]
        lines: queue.Queue[str] = queue.Queue()
        for proc in procs:
            threading.Thread(target=lambda p=proc: [lines.put(line) for line in p.stdout], daemon=True).start()
        result: dict[str, float] = {}
        cpu: list[float] = []
        try:
            deadline = time.monotonic() + 600
            while not result and time.monotonic() < deadline:
                try:
                    line = lines.get(timeout=1)
                except queue.Empty:
                    continue
                if line.startswith("RESULT "):
                    result = json.loads(line[7:])
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            time.sleep(0.2)
            while not lines.empty():
                line = lines.get()
                if line.startswith("CPU "):
                    cpu.append(float(line.split()[2]))
        result["cpu_s_all_members"] = sum(cpu)
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--size", type=int, default=100, help="bytes per proposal")
    parser.add_argument("--no-fsync", dest="fsync", action="store_false")
    parser.add_argument("--members", default="1,3")
    parser.add_argument("--member", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--ports", help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    if args.member:
        asyncio.run(run_member(args))
        return
    print(f"raft bench: {args.count} proposals of {args.size} B, {args.concurrency} in flight, "
          f"fsync={'on' if args.fsync else 'off'}, {os.cpu_count()} CPUs")
    for members in (int(m) for m in args.members.split(",")):
        result = asyncio.run(bench_single(args)) if members == 1 else bench_three(args)
        figures = ", ".join(f"{k}={v:.2f}" for k, v in result.items())
        print(f"{members} member(s): {figures}", flush=True)


if __name__ == "__main__":
    main()
