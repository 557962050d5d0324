#!/usr/bin/env python3
"""Client quotas under load: a greedy tenant over its produce quota, and a well-behaved tenant
beside it.

Against one `roost up` (Kafka's quota windows: 11 x 1 s), two confluent-kafka producers in
processes of their own:
- tenant B ("steady") offers a fixed load (--steady-rate messages/s of --size bytes, acks=all)
  and records each message's acknowledgement latency;
- tenant A ("greedy") has `producer_byte_rate` = --quota and produces as fast as librdkafka lets it.

Phase 1: B alone (unloaded). Phase 2: B with A. Printed: A's rate over phase 2 after a warm-up
(the first --warmup seconds hold the allowance a fresh quota's windows give) against its quota,
and B's throughput and latency percentiles in both phases. Never passes or fails on a number.

    .venv/bin/python bench/quota_bench.py --repeat 3
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]


def _steady(bootstrap: str, rate: int, size: int, seconds: float, out: multiprocessing.Queue) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "tenant-steady", "acks": "all",
                         "linger.ms": 0, "batch.size": 16384})
    latencies: list[float] = []
    value = b"s" * size

    def delivered(error, message, sent: float) -> None:  # type: ignore[no-untyped-def]
        if error is None:
            latencies.append(time.perf_counter() - sent)

    start = time.perf_counter()
    sent = 0
    while (now := time.perf_counter()) - start < seconds:
        due = int((now - start) * rate)
        while sent < due:
            stamp = time.perf_counter()
            producer.produce("quota-bench", value, callback=lambda e, m, s=stamp: delivered(e, m, s))
            sent += 1
        producer.poll(0.0005)
    producer.flush(30)
    out.put(("steady", len(latencies) * size / seconds, latencies))


def _greedy(bootstrap: str, size: int, seconds: float, warmup: float, out: multiprocessing.Queue) -> None:
    from confluent_kafka import Producer

    acked: list[float] = []
    throttles: list[float] = []
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "tenant-greedy", "acks": "all",
                         "linger.ms": 5, "batch.size": 16384, "queue.buffering.max.kbytes": 1024,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    value = b"g" * size
    start = time.perf_counter()

    def delivered(error, message) -> None:  # type: ignore[no-untyped-def]
        if error is None:
            acked.append(time.perf_counter())

    while time.perf_counter() - start < seconds:
        try:
            producer.produce("quota-bench", value, callback=delivered)
        except BufferError:
            producer.poll(0.005)
        producer.poll(0)
    producer.flush(60)
    steady = sum(1 for at in acked if start + warmup <= at < start + seconds) * size / (seconds - warmup)
    out.put(("greedy", steady, throttles))


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")


def one_run(args: argparse.Namespace) -> dict[str, float]:
    from confluent_kafka.admin import AdminClient, NewTopic
    from tests.support.procs import start_roost

    with tempfile.TemporaryDirectory(prefix="roost-quota-bench-") as scratch:
        node = start_roost(["up", "--data-dir", scratch, "--kafka-port", "0"], expect=("kafka", "keeper"))
        try:
            bootstrap = node.address("kafka")
            admin = AdminClient({"bootstrap.servers": bootstrap})  # kept while its future is pending
            admin.create_topics([NewTopic("quota-bench", 2, 1)])["quota-bench"].result(timeout=30)
            quota_set = subprocess.run([sys.executable, "-m", "roost.cli.main", "quota", "set", "--client-id",
                                        "tenant-greedy", f"producer_byte_rate={args.quota}", "-b", bootstrap],
                                       capture_output=True, text=True, timeout=60)
            assert quota_set.returncode == 0, quota_set.stderr
            context = multiprocessing.get_context("spawn")
            results: dict[str, tuple[float, list[float]]] = {}
            queue: multiprocessing.Queue = context.Queue()
            alone = context.Process(target=_steady, args=(bootstrap, args.steady_rate, args.size, args.seconds, queue))
            alone.start()
            _, alone_rate, alone_latencies = queue.get(timeout=args.seconds + 120)
            alone.join()
            procs = [context.Process(target=_steady, args=(bootstrap, args.steady_rate, args.size, args.seconds, queue)),
                     context.Process(target=_greedy, args=(bootstrap, args.size, args.seconds, args.warmup, queue))]
            for proc in procs:
                proc.start()
            for _ in procs:
                name, rate, extra = queue.get(timeout=args.seconds + 180)
                results[name] = (rate, extra)
            for proc in procs:
                proc.join()
        finally:
            node.stop()
    greedy_rate, throttles = results["greedy"]
    steady_rate, steady_latencies = results["steady"]
    return {"greedy_rate": greedy_rate, "greedy_vs_quota": greedy_rate / args.quota,
            "throttle_events": len(throttles), "alone_rate": alone_rate, "loaded_rate": steady_rate,
            "alone_p50": _pct(alone_latencies, 0.5), "alone_p99": _pct(alone_latencies, 0.99),
            "loaded_p50": _pct(steady_latencies, 0.5), "loaded_p99": _pct(steady_latencies, 0.99)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quota", type=int, default=2_000_000, help="greedy tenant's producer_byte_rate (B/s)")
    parser.add_argument("--steady-rate", type=int, default=2000, help="steady tenant's messages per second")
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=45.0)
    parser.add_argument("--warmup", type=float, default=15.0)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    print(f"quota {args.quota} B/s for the greedy tenant; steady tenant {args.steady_rate} msg/s x {args.size} B, "
          f"acks=all; {args.seconds:.0f} s per phase, greedy measured after {args.warmup:.0f} s; 11 x 1 s windows")
    runs = []
    for index in range(args.repeat):
        run = one_run(args)
        runs.append(run)
        print(f"run {index + 1}: greedy {run['greedy_rate'] / 1e6:.3f} MB/s = {run['greedy_vs_quota']:.3f} x quota "
              f"({run['throttle_events']} throttle events); steady alone {run['alone_rate'] / 1e6:.3f} MB/s "
              f"p50 {run['alone_p50']:.2f} ms p99 {run['alone_p99']:.2f} ms; with greedy "
              f"{run['loaded_rate'] / 1e6:.3f} MB/s p50 {run['loaded_p50']:.2f} ms p99 {run['loaded_p99']:.2f} ms",
              flush=True)
    if len(runs) > 1:
        for key in ("greedy_vs_quota", "alone_rate", "loaded_rate", "alone_p99", "loaded_p99"):
            print(f"median {key}: {statistics.median(r[key] for r in runs):.3f}")


if __name__ == "__main__":
    main()
