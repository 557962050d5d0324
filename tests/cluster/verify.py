"""Reading a whole topic back and checking it against what the producer was told, and watching
per-partition figures that must never go back."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import Consumer, TopicPartition

from tests.cluster.clients import n_of
from tests.support.cluster import LocalCluster
from tests.support.kafka_wire import stored_batch_headers
from tests.support.workload import Received


def read_log(cluster: LocalCluster, topic: str, partitions: int = 3) -> list[Received]:
    """Everything in the topic, partition by partition, from offset 0 to the end."""
    consumer = Consumer({"bootstrap.servers": cluster.running_bootstrap(), "group.id": f"reader-{topic}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        records: list[Received] = []
        done: set[int] = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + 60
        while len(done) < partitions and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if msg.error():
                    continue
                records.append(Received(msg.key(), msg.value(), msg.partition(), msg.offset()))
                if msg.offset() + 1 >= ends[msg.partition()]:
                    done.add(msg.partition())
        assert len(done) == partitions, f"could not read partitions {set(range(partitions)) - done} to the end"
        return records
    finally:
        consumer.close()


def stored_batches(cluster: LocalCluster, topic: str) -> Callable[[Received], str]:
    """For a failure message: the stored batch holding a record (producer id, epoch and sequences,
    read from the partition's leader), which tells a retry the broker failed to recognise from a
    client that re-sent under a new producer epoch."""
    def describe(record: Received) -> str:
        leader = cluster.partitions(topic)[record.partition][0]
        address = cluster.brokers[leader].address
        for header in stored_batch_headers(address, topic, record.partition):
            if header.base_offset <= record.offset <= header.last_offset:
                return (f"batch {header.base_offset}-{header.last_offset} producer {header.producer_id} "
                        f"epoch {header.producer_epoch} sequences {header.base_sequence}-{header.last_sequence}")
        return "no stored batch holds it"
    return describe


def check_log(records: list[Received], acked: set[int],
              explain: Callable[[Received], str] | None = None) -> None:
    """Every acknowledged message once in the log, and each key's messages in order."""
    seen: dict[int, Received] = {}
    last: dict[bytes, tuple[int, int]] = {}
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        n = n_of(record.value)
        if n in seen:
            first = seen[n]
            where = f" (in {explain(first)}; and in {explain(record)})" if explain is not None else ""
            raise AssertionError(f"message {n} is in the log twice: {first} and {record}{where}")
        seen[n] = record
        previous = last.get(record.key)
        if previous is not None:
            assert previous[0] == record.partition, f"key {record.key!r} in two partitions"
            assert previous[1] < n, f"key {record.key!r}: message {n} after {previous[1]}"
        last[record.key] = (record.partition, n)
    lost = acked - seen.keys()
    assert not lost, f"{len(lost)} acknowledged messages lost, e.g. {sorted(lost)[:10]}"


class NeverBack:
    """The highest `what` (a committed offset, an LSO) seen per partition; a sample below it is a
    regression, kept for the test to report."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.highest: dict[int, int] = {}
        self.regressions: list[str] = []
        self.samples = 0

    def see(self, partition: int, value: int) -> None:
        before = self.highest.get(partition, -1)
        if value < before:
            self.regressions.append(f"partition {partition}: {self.what} {before} -> {value} "
                                    f"at {time.strftime('%H:%M:%S')}")
        self.highest[partition] = max(before, value)
        self.samples += 1
