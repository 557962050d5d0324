"""What Prometheus metrics cost a broker: produce throughput and broker CPU with metrics off and
on (`--metrics-port 0`), run by run in turn against two `roost up --no-keeper` brokers of this
tree, and the time one scrape of /metrics takes. Prints figures with conditions; never asserts.

    PYTHONPATH=src .venv/bin/python bench/metrics_bench.py [--repeat 3] [--count 300000]

With metrics off a broker keeps no counts at all (Broker.stats is None), so the difference is
the whole hot-path cost: per produce partition a few integer additions, per request two clock
reads and a deque append (request times), per fetch response a few dict updates.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker_bench import Measured, create_topic, produce_run, running_broker
from prometheus_client.parser import text_string_to_metric_families

# (record bytes, batch.size, linger.ms): from many small requests (the per-request cost shows) to few large.
CASES = [(100, 1024, 0), (100, 16384, 0), (100, 65536, 5)]


def scrape_ms(address: str, times: int = 20) -> tuple[float, int]:
    """Median milliseconds of one GET /metrics, and the size of the answer."""
    durations = []
    size = 0
    for _ in range(times):
        start = time.perf_counter()
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=30) as response:
            size = len(response.read())
        durations.append((time.perf_counter() - start) * 1000)
    return statistics.median(durations), size


def produce_requests(address: str) -> float:
    """Produce requests the broker has timed so far (from its own /metrics)."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=30) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "kafka_network_requestmetrics_totaltimems_count" \
                    and sample.labels.get("request") == "Produce":
                return sample.value
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--count", type=int, default=300_000)
    args = parser.parse_args()
    print("== produce with metrics off and on: confluent-kafka, acks=1, 1 producer, 6 partitions, "
          f"no compression, no fsync, {args.count:,} records per run, median of {args.repeat} runs, "
          "variants alternating run by run ==")
    with ExitStack() as stack:
        brokers = {"metrics off": stack.enter_context(running_broker()),
                   "metrics on": stack.enter_context(running_broker("--metrics-port", "0"))}
        metrics_address = brokers["metrics on"].metrics_address
        assert metrics_address is not None
        for broker in brokers.values():
            create_topic(broker.bootstrap, "metrics-bench", 6)
        for size, batch_size, linger in CASES:
            runs: dict[str, list[Measured]] = {name: [] for name in brokers}
            requests = []
            for _ in range(args.repeat):
                for name, broker in brokers.items():
                    before = produce_requests(metrics_address) if name == "metrics on" else 0.0
                    runs[name].append(produce_run(broker, "metrics-bench", args.count, size, batch_size, linger))
                    if name == "metrics on":
                        requests.append(produce_requests(metrics_address) - before)
            rates = {}
            cpus = {}
            for name in brokers:
                seconds = statistics.median(m.seconds for m in runs[name])
                cpus[name] = statistics.median(m.broker_cpu for m in runs[name])
                rates[name] = args.count / seconds
                print(f"  {size} B, batch.size {batch_size // 1024} KiB, linger {linger} ms, {name:<11}"
                      f" {rates[name]:>10,.0f} msg/s   broker {cpus[name]:5.2f} s CPU"
                      f" ({cpus[name] / args.count * 1e6:5.2f} µs/msg)", flush=True)
            per_request = statistics.median(requests)
            extra_us = (cpus["metrics on"] - cpus["metrics off"]) / per_request * 1e6
            print(f"  -> on/off: throughput x{rates['metrics on'] / rates['metrics off']:.3f}, "
                  f"broker CPU x{cpus['metrics on'] / cpus['metrics off']:.3f}; {per_request:,.0f} produce "
                  f"requests per run, {extra_us:+.1f} µs broker CPU per request", flush=True)
        ms, size = scrape_ms(metrics_address)
        print(f"\n== one scrape of /metrics (the bench topic's 6 partitions and __consumer_offsets'): "
              f"{ms:.2f} ms median over 20, {size:,} bytes ==")


if __name__ == "__main__":
    main()
