"""Share groups (KIP-932) against classic consumption, on one `roost up` node (broker + keeper).

Three figures, each printed per run (it never passes or fails on a time):

1. throughput: one ShareConsumer (implicit acknowledgement) against one classic Consumer reading
   the same one-partition topic of RECORDS records, records/s;
2. queue scaling: 8 ShareConsumers each spending 10 ms per record on one partition, against one
   doing the same; records/s and the ratio (the point of a queue: workers past partitions);
3. latency: records produced at 1,000 records/s for LATENCY_S seconds, each accepted by a
   ShareConsumer in explicit mode and committed; produce (delivery report) to acknowledged (the
   acknowledgement callback), p50 and p99, and the same split at the delivery report and at the
   record's arrival in poll.

Beside each figure: the broker's CPU seconds (from /proc) and the clients' (this process: the
consumers and producers are librdkafka threads in it), and the load average when the run began.
The classic consumer's rate is timed from its first record, so it mostly shows how fast Python
drains what librdkafka prefetched (the whole topic fits in its queue); a ShareConsumer cannot
prefetch (each ShareFetch carries the acknowledgements of the records before it), so it pays a
round trip, an acknowledgement's state write and an acquisition per `max.poll.records`
(500). `--max-poll-records N` adds a row with a larger batch. `--kafka` runs the same figures
against Apache Kafka 4 (the referee's KRaft node, one JVM with a 512 MiB heap and its normal JIT):
what the protocol allows on this machine with librdkafka's share consumer.

    PYTHONPATH=src .venv/bin/python bench/share_bench.py [--runs 3] [--max-poll-records 5000] [--kafka]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from process_cpu import cpu_seconds
from tests.support.kafka_referee import KAFKA_4, kafka_kraft
from tests.support.procs import start_roost

RECORDS = 20_000
SLOW_RECORDS = 800  # the 8 workers' share (100 each) outlasts their first fetch's wait
WORK_S = 0.010
LATENCY_S = 5
RATE = 1000


def make_topic(bootstrap: str, name: str, records: int, batch: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": batch})
    for i in range(records):
        producer.produce(name, value=b"%08d" % i)
        if i % 10_000 == 9_999:
            producer.flush(60)
    producer.flush(60)


def earliest(bootstrap: str, group: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def classic_rate(bootstrap: str, topic: str, records: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"classic-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": True})
    consumer.subscribe([topic])
    got, started = 0, None
    deadline = time.monotonic() + 120
    while got < records and time.monotonic() < deadline:
        for message in consumer.consume(500, 0.5):
            if message.error() is None:
                started = started or time.monotonic()
                got += 1
    elapsed = time.monotonic() - (started or time.monotonic())
    consumer.close()
    return got / elapsed if elapsed > 0 else 0.0


def share_rate(bootstrap: str, topic: str, records: int, max_poll_records: int = 500) -> float:
    group = f"share-{uuid.uuid4().hex[:6]}"
    earliest(bootstrap, group)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "max.poll.records": max_poll_records})
    consumer.subscribe([topic])
    got, started = 0, None
    deadline = time.monotonic() + 120
    while got < records and time.monotonic() < deadline:
        for message in consumer.poll(0.5) or []:
            if message.error() is None:
                started = started or time.monotonic()
                got += 1
    elapsed = time.monotonic() - (started or time.monotonic())
    consumer.commit_sync(30)
    consumer.close()
    return got / elapsed if elapsed > 0 else 0.0


def slow_workers(bootstrap: str, topic: str, records: int, workers: int) -> float:
    """records/s of `workers` ShareConsumers each sleeping WORK_S per record (max.poll.records 1:
    each worker takes one record at a time, as a work queue does). The workers join first, then
    the records are produced one per log batch (a share fetch acquires whole batches)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    group = f"slow-{workers}-{uuid.uuid4().hex[:6]}"
    earliest(bootstrap, group)
    done: set[int] = set()
    finished: list[float] = []  # when the last record was done (closing the consumers is not timed)
    lock = threading.Lock()
    ready = threading.Barrier(workers + 1)

    def work() -> None:
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "max.poll.records": 1})
        consumer.subscribe([topic])
        consumer.poll(2.0)  # joined and fetching
        ready.wait(60)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            with lock:
                if len(done) >= records:
                    break
            for message in consumer.poll(0.2) or []:
                if message.error() is None:
                    time.sleep(WORK_S)
                    with lock:
                        done.add(message.offset())
                        if len(done) >= records and not finished:
                            finished.append(time.monotonic())
        consumer.commit_sync(30)
        consumer.close()

    threads = [threading.Thread(target=work) for _ in range(workers)]
    for thread in threads:
        thread.start()
    ready.wait(120)
    started = time.monotonic()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(records):
        producer.produce(topic, value=b"%08d" % i)
    producer.flush(60)
    for thread in threads:
        thread.join(360)
    elapsed = (finished[0] if finished else time.monotonic()) - started
    return len(done) / elapsed if elapsed > 0 else 0.0


def percentiles(delays: list[float]) -> tuple[float, float]:
    ordered = sorted(delays)
    return statistics.median(ordered), ordered[max(0, int(len(ordered) * 0.99) - 1)]


def latency(bootstrap: str, topic: str) -> tuple[float, float, int, str]:
    """p50 and p99 of produce -> acknowledged, the count, and where the time went: produce ->
    delivered (the producer's delivery report), produce -> received (poll returned the record),
    received -> acknowledged (the commit_async answered)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    group = f"latency-{uuid.uuid4().hex[:6]}"
    earliest(bootstrap, group)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit", "fetch.wait.max.ms": 100})
    produced: dict[int, float] = {}
    delivered_at: dict[int, float] = {}
    received: dict[int, float] = {}
    acked: dict[int, float] = {}

    def on_commit(offsets: dict[Any, set[int]], error: Any) -> None:
        now = time.monotonic()
        if error is None:
            for values in offsets.values():
                for offset in values:
                    acked.setdefault(offset, now)
    consumer.set_acknowledgement_commit_callback(on_commit)
    consumer.subscribe([topic])
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    stop = threading.Event()

    def produce() -> None:
        sent = 0
        start = time.monotonic()
        while not stop.is_set() and sent < RATE * LATENCY_S:
            at = time.monotonic()

            def delivered(err: Any, msg: Any, at: float = at) -> None:
                if err is None:
                    produced[msg.offset()] = at
                    delivered_at[msg.offset()] = time.monotonic()
            producer.produce(topic, value=b"x", on_delivery=delivered)
            producer.poll(0)
            sent += 1
            pause = start + sent / RATE - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        producer.flush(30)

    # Join before producing: the group's first fetch fixes where it starts.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        consumer.poll(0.2)
    thread = threading.Thread(target=produce)
    thread.start()
    deadline = time.monotonic() + LATENCY_S + 30
    while time.monotonic() < deadline and (thread.is_alive() or len(acked) < len(produced)):
        batch = [m for m in consumer.poll(0.1) or [] if m.error() is None]
        now = time.monotonic()
        for message in batch:
            received.setdefault(message.offset(), now)
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        if batch:
            consumer.commit_async()
    stop.set()
    thread.join(30)
    consumer.commit_sync(30)
    consumer.close()
    done = [o for o in produced if o in acked and o in received]
    if not done:
        return 0.0, 0.0, 0, ""
    p50, p99 = percentiles([(acked[o] - produced[o]) * 1000 for o in done])
    parts = []
    for name, since, until in (("delivered", produced, delivered_at), ("received", produced, received),
                               ("received->acknowledged", received, acked)):
        part50, part99 = percentiles([(until[o] - since[o]) * 1000 for o in done])
        parts.append(f"{name} {part50:.1f}/{part99:.1f}")
    return p50, p99, len(done), "p50/p99 ms: " + ", ".join(parts)


class Meter:
    """CPU seconds of the broker and of this process (the clients) over one phase."""

    def __init__(self, broker_pid: int) -> None:
        self.pid = broker_pid
        self.broker, self.clients = cpu_seconds(broker_pid), time.process_time()

    def __str__(self) -> str:
        return f"cpu broker {cpu_seconds(self.pid) - self.broker:.1f} s, clients {time.process_time() - self.clients:.1f} s"


@contextlib.contextmanager
def server(directory: str, kafka: bool) -> Iterator[tuple[str, int]]:
    """(bootstrap, pid) of one `roost up` node, or of one Apache Kafka 4 KRaft node."""
    if kafka:
        with kafka_kraft(Path(directory), version=KAFKA_4, tuned_for_tests=False) as cluster:
            process = cluster.nodes[1].process
            assert process is not None
            yield cluster.bootstrap, process.pid
        return
    proc = start_roost(["up", "--data-dir", directory, "--kafka-port", "0"])
    try:
        yield proc.address("kafka"), proc.popen.pid
    finally:
        proc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--max-poll-records", type=int, default=0,
                        help="also time one ShareConsumer with this max.poll.records")
    parser.add_argument("--kafka", action="store_true", help="against Apache Kafka 4 (KRaft) instead of Roost")
    args = parser.parse_args()
    for run in range(1, args.runs + 1):
        load = os.getloadavg()[0]
        started = time.strftime("%H:%M:%S")
        with tempfile.TemporaryDirectory(prefix="share-bench-") as directory, \
                server(directory, args.kafka) as (bootstrap, pid):
            make_topic(bootstrap, "bench-bulk", RECORDS, batch=500)
            meter = Meter(pid)
            classic = classic_rate(bootstrap, "bench-bulk", RECORDS)
            classic_cpu, meter = str(meter), Meter(pid)
            share = share_rate(bootstrap, "bench-bulk", RECORDS)
            share_cpu, meter = str(meter), Meter(pid)
            big = ""
            if args.max_poll_records:
                rate = share_rate(bootstrap, "bench-bulk", RECORDS, args.max_poll_records)
                big = (f"share (max.poll.records {args.max_poll_records}) {rate:,.0f} rec/s "
                       f"({rate / classic:.0%}; {meter}); ")
                meter = Meter(pid)
            one = slow_workers(bootstrap, "bench-slow", SLOW_RECORDS // 4, 1)
            one_cpu, meter = str(meter), Meter(pid)
            eight = slow_workers(bootstrap, "bench-slow8", SLOW_RECORDS, 8)
            eight_cpu, meter = str(meter), Meter(pid)
            p50, p99, count, breakdown = latency(bootstrap, "bench-latency")
            latency_cpu = str(meter)
        print(f"run {run} ({'Apache Kafka 4, ' if args.kafka else ''}{started}, load average {load:.1f}): classic {classic:,.0f} rec/s ({classic_cpu}), "
              f"share {share:,.0f} rec/s ({share / classic:.0%}; {share_cpu}); {big}"
              f"10 ms/record: 1 worker {one:.1f} rec/s ({one_cpu}), 8 workers {eight:.1f} rec/s "
              f"({eight / one:.1f}x; {eight_cpu}); "
              f"produce->acknowledged at {RATE} rec/s: p50 {p50:.1f} ms, p99 {p99:.1f} ms ({count} records; "
              f"{breakdown}; {latency_cpu})", flush=True)


if __name__ == "__main__":
    main()
