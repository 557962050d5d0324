"""Reading a topic back with a real confluent-kafka consumer, as tests check what was written:
every value from offset 0 up to each partition's end — for read_committed its last stable offset,
which is where librdkafka reports the end — with the isolation level given."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaException, TopicPartition

PARTITION_EOF = -191  # librdkafka's _PARTITION_EOF: the consumer reached the partition's end


def read_to_end(bootstrap: str, topic: str, partitions: int, isolation: str, *,
                until: Callable[[list[bytes]], bool] | None = None, timeout: float = 15.0,
                must_reach_end: bool = False) -> list[bytes]:
    """The values of partitions 0..`partitions`-1 of `topic`, read until every partition is at
    its end and `until` (if given) holds of what was read, or `timeout` passes (then what came so
    far; with `must_reach_end` an AssertionError instead)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                         "isolation.level": isolation, "enable.partition.eof": True,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() != PARTITION_EOF:
                    raise KafkaException(message.error())
                at_end.add(message.partition())
                if len(at_end) == partitions and (until is None or until(values)):
                    return values
                continue
            values.append(message.value())
            at_end.discard(message.partition())
    finally:
        consumer.close()
    assert not must_reach_end, f"{topic} not read to its end ({isolation}) in {timeout} s"
    return values
