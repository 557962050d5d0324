"""Seek by offset and by timestamp (ListOffsets) with confluent-kafka and kafka-python."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from tests.support.procs import RoostProcess

COUNT = 200
STEP_MS = 1000


def produce_with_timestamps(bootstrap: str, topic: str, base_ms: int) -> None:
    # Small batches so the time index and batch scan both take part in the lookup.
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 7})
    for n in range(COUNT):
        producer.produce(topic, f"v{n}".encode(), partition=0, timestamp=base_ms + n * STEP_MS)
    assert producer.flush(30) == 0


def first_value(consumer: Consumer, timeout: float = 30.0) -> tuple[int, bytes]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            return msg.offset(), msg.value()
    raise AssertionError("no message")


def test_seek_by_offset_and_timestamp_confluent(broker: RoostProcess) -> None:
    bootstrap = broker.address("kafka")
    topic = "seek-cf"
    base = int(time.time() * 1000) - COUNT * STEP_MS
    produce_with_timestamps(bootstrap, topic, base)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "seek-cf", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 42)])
        assert first_value(consumer) == (42, b"v42")
        consumer.seek(TopicPartition(topic, 0, 10))
        assert first_value(consumer) == (10, b"v10")

        found = consumer.offsets_for_times([TopicPartition(topic, 0, base + 50 * STEP_MS)], timeout=30)
        assert found[0].offset == 50
        found = consumer.offsets_for_times([TopicPartition(topic, 0, base + 50 * STEP_MS - 1)], timeout=30)
        assert found[0].offset == 50  # the first record at or after the time
        found = consumer.offsets_for_times([TopicPartition(topic, 0, base + COUNT * STEP_MS)], timeout=30)
        assert found[0].offset == -1  # nothing that late: Kafka's "no offset"
        found = consumer.offsets_for_times([TopicPartition(topic, 0, base - 10_000)], timeout=30)
        assert found[0].offset == 0

        consumer.seek(TopicPartition(topic, 0, 123))
        assert first_value(consumer) == (123, b"v123")
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        assert (low, high) == (0, COUNT)
    finally:
        consumer.close()


def test_seek_by_offset_and_timestamp_kafka_python(broker: RoostProcess) -> None:
    bootstrap = broker.address("kafka")
    topic = "seek-kp"
    base = int(time.time() * 1000) - COUNT * STEP_MS
    produce_with_timestamps(bootstrap, topic, base)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=10000)
    try:
        tp = KpTopicPartition(topic, 0)
        consumer.assign([tp])
        found = consumer.offsets_for_times({tp: base + 77 * STEP_MS - 300})
        assert found[tp].offset == 77 and found[tp].timestamp == base + 77 * STEP_MS
        assert consumer.offsets_for_times({tp: base + COUNT * STEP_MS})[tp] is None
        consumer.seek(tp, found[tp].offset)
        record = next(consumer)
        assert (record.offset, record.value, record.timestamp) == (77, b"v77", base + 77 * STEP_MS)
        consumer.seek_to_beginning(tp)
        assert next(consumer).offset == 0
        assert consumer.end_offsets([tp])[tp] == COUNT
        assert consumer.beginning_offsets([tp])[tp] == 0
    finally:
        consumer.close()
