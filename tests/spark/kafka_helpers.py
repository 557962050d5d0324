"""Producing and reading back test records with confluent-kafka, independently of the connector."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic


@dataclass(frozen=True)
class Produced:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int


def create_topics(bootstrap: str, partitions: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, count, 1) for name, count in partitions.items()])
    for future in futures.values():
        future.result(timeout=30)


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(topic, total)])[topic].result(timeout=30)


def delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(timeout=30)


def delete_records_before(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([KafkaTopicPartition(topic, partition, offset)])
    for future in futures.values():
        future.result(timeout=30)


class RecordingProducer:
    """An idempotent producer that remembers where each acknowledged record landed."""

    def __init__(self, bootstrap: str, **settings: object) -> None:
        config: dict[str, object] = {"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                     "linger.ms": 2, "message.timeout.ms": 120_000}
        config.update(settings)
        self.producer = Producer(config)
        self.acked: list[Produced] = []
        self.errors: list[str] = []

    def send(self, topic: str, value: bytes, key: bytes | None = None,
             headers: Iterable[tuple[str, bytes | None]] = (), partition: int | None = None,
             timestamp_ms: int | None = None) -> None:
        header_tuple = tuple(headers)

        def delivered(error: KafkaError | None, message: object) -> None:
            if error is not None:
                self.errors.append(str(error))
                return
            _kind, ts = message.timestamp()  # type: ignore[attr-defined]
            self.acked.append(Produced(message.topic(), message.partition(), message.offset(),  # type: ignore[attr-defined]
                                       key, value, header_tuple, ts))

        kwargs: dict[str, object] = {"key": key, "value": value, "on_delivery": delivered,
                                     "headers": list(header_tuple) or None}
        if partition is not None:
            kwargs["partition"] = partition
        if timestamp_ms is not None:
            kwargs["timestamp"] = timestamp_ms
        self.producer.produce(topic, **kwargs)
        self.producer.poll(0)

    def flush(self, timeout: float = 120.0) -> None:
        assert self.producer.flush(timeout) == 0, "records still unacknowledged"
        assert not self.errors, self.errors[:3]


def read_all(bootstrap: str, topic: str, timeout: float = 60.0) -> list[Produced]:
    """Every record of `topic` up to its current end, read with a plain consumer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-reader-unused",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        metadata = consumer.list_topics(topic, timeout=30)
        records: list[Produced] = []
        for partition in sorted(metadata.topics[topic].partitions):
            low, high = consumer.get_watermark_offsets(KafkaTopicPartition(topic, partition), timeout=30, cached=False)
            if high <= low:
                continue
            consumer.assign([KafkaTopicPartition(topic, partition, low)])
            deadline = time.monotonic() + timeout
            next_offset = low
            while next_offset < high:
                assert time.monotonic() < deadline, f"reading {topic}-{partition} timed out at {next_offset}"
                for message in consumer.consume(1000, 1.0):
                    if message.error() is not None:
                        continue
                    next_offset = message.offset() + 1
                    records.append(Produced(topic, partition, message.offset(), message.key(), message.value(),
                                            tuple(message.headers() or ()), message.timestamp()[1]))
        return records
    finally:
        consumer.close()
