"""Cluster link figures (docs/cluster-links.md), both clusters on this machine: a keeper and one
broker each, a link between them.

1. Steady load: a producer offers RATE MB/s of 1 KiB records to the source for SECONDS; every
   0.25 s the mirror's lag is sampled as records (the source's high watermark minus the
   mirror's) and as seconds (that many records at the offered rate). Printed: the rate reached,
   the lag's median, p99 and maximum.
2. Catch-up after a cut: the link is deleted, CUT_MB are produced, the link is created again:
   the time until the mirror holds it all, and the catch-up rate in MB/s.
3. The destination broker's CPU seconds per MB mirrored during the catch-up.

    .venv/bin/python bench/link_bench.py [--rate 20] [--seconds 20] [--cut-mb 100]

It prints figures and never passes or fails on a time.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.process_cpu import cpu_seconds
from tests.support.cluster import LocalCluster
from tests.support.procs import ROOST, wait_for

TOPIC = "load"
RECORD = 1024


def roost(*args: str) -> None:
    subprocess.run([*ROOST, *args], check=True, capture_output=True, timeout=60)


def high_watermark(bootstrap: str, partitions: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(partitions))
    finally:
        consumer.close()


def produce(bootstrap: str, rate_mb: float, seconds: float, stop: threading.Event | None = None) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, "batch.size": 262144,
                         "queue.buffering.max.kbytes": 262144})
    value = b"x" * RECORD
    per_second = rate_mb * 1024 * 1024 / RECORD
    sent, start = 0, time.monotonic()
    while time.monotonic() - start < seconds and not (stop and stop.is_set()):
        due = int((time.monotonic() - start) * per_second)
        while sent < due:
            try:
                producer.produce(TOPIC, value=value)
                sent += 1
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
        time.sleep(0.002)
    producer.flush(60)
    return sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=20.0, help="MB/s offered to the source")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--cut-mb", type=float, default=100.0)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--partition-fetch-bytes", type=int, default=8_388_608,
                        help="the link's max.partition.fetch.bytes")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="link-bench-") as directory:
        root = Path(directory)
        source = LocalCluster.start(root / "source", brokers=1)
        destination = LocalCluster.start(root / "destination", brokers=1)
        try:
            admin = source.admin()
            admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])[TOPIC].result(30)
            link = ["--zookeeper", destination.zookeeper, "--source-bootstrap", source.bootstrap, "-c", "topics=literal:load",
                    "-c", "metadata.max.age.ms=1000", "-c", "consumer.offset.sync.enable=false",
                    "-c", f"max.partition.fetch.bytes={args.partition_fetch_bytes}"]
            roost("link", "create", "bench", *link)
            wait_for(lambda: TOPIC in destination.metadata().topics, 60, what="the mirror topic")
            # 1. steady load
            lags: list[int] = []
            done = threading.Event()

            def sample() -> None:
                while not done.is_set():
                    try:
                        lags.append(high_watermark(source.bootstrap, args.partitions)
                                    - high_watermark(destination.bootstrap, args.partitions))
                    except Exception:
                        pass
                    time.sleep(0.25)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            start = time.monotonic()
            sent = produce(source.bootstrap, args.rate, args.seconds)
            took = time.monotonic() - start
            done.set()
            sampler.join(10)
            reached = sent * RECORD / 1024 / 1024 / took
            per_second = max(1.0, sent / took)
            ordered = sorted(max(0, lag) for lag in lags) or [0]
            p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
            print(f"steady load: offered {args.rate:g} MB/s, reached {reached:.1f} MB/s for {took:.0f} s; "
                  f"mirror lag median {statistics.median(ordered):.0f} records "
                  f"({statistics.median(ordered) / per_second:.2f} s), p99 {p99} ({p99 / per_second:.2f} s), "
                  f"max {ordered[-1]} ({ordered[-1] / per_second:.2f} s)")
            wait_for(lambda: high_watermark(destination.bootstrap, args.partitions)
                     >= high_watermark(source.bootstrap, args.partitions), 300, what="caught up")
            # 2. catch-up after a cut
            roost("link", "delete", "bench", "--zookeeper", destination.zookeeper)
            time.sleep(3)
            produce(source.bootstrap, 1000.0, args.cut_mb / 50, None)  # as fast as it goes, about CUT_MB
            backlog = high_watermark(source.bootstrap, args.partitions) - \
                high_watermark(destination.bootstrap, args.partitions)
            pid = destination.brokers[1].process.popen.pid  # type: ignore[union-attr]
            cpu_before = cpu_seconds(pid)
            start = time.monotonic()
            roost("link", "create", "bench", *link)
            wait_for(lambda: high_watermark(destination.bootstrap, args.partitions)
                     >= high_watermark(source.bootstrap, args.partitions), 600, interval=0.1, what="caught up")
            took = time.monotonic() - start
            megabytes = backlog * RECORD / 1024 / 1024
            cpu = cpu_seconds(pid) - cpu_before
            print(f"catch-up after a cut: {megabytes:.0f} MB ({backlog} records) in {took:.1f} s = "
                  f"{megabytes / took:.1f} MB/s (from the link's re-creation; includes its first metadata round)")
            print(f"destination broker CPU: {cpu:.1f} s for {megabytes:.0f} MB = {cpu / max(megabytes, 1e-9) * 1000:.1f} "
                  "ms per MB mirrored")
        finally:
            destination.close()
            source.close()


if __name__ == "__main__":
    main()
