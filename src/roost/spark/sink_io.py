"""The sink's network shell: an idempotent producer, the commit-log topic, and name scans.

See `roost.spark.exactly_once` for the protocol these serve. Created inside a task's `write()`
(or the driver's `commit()`), used, and closed there: nothing here is pickled.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from roost.client_settings import FAILOVER_SETTINGS
from roost.spark.exactly_once import RECORD_NAME_HEADER, Marker
from roost.spark.kafka_io import REQUEST_TIMEOUT_SECONDS, consumer_config, retry

# What a broker restart or a controller move looks like to an admin call: worth another try.
TRANSIENT_ADMIN_ERRORS = frozenset({KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN,
                                    KafkaError.NOT_CONTROLLER, KafkaError.REQUEST_TIMED_OUT})

log = logging.getLogger("roost.spark")

# How long one read of the commit log or one name scan may wait for a record that should be there.
SCAN_TIMEOUT_SECONDS = 120.0
# The backward search for a batch's markers starts with this many records from the end.
FIRST_TAIL_WINDOW = 64


def producer_config(settings: dict[str, str]) -> dict[str, Any]:
    config: dict[str, Any] = {
        "enable.idempotence": True,  # librdkafka's retries (a broker restart) land once
        "acks": "all",
        "linger.ms": 5,
        "batch.size": 1024 * 1024,
        "message.timeout.ms": 300_000,  # rides out a broker restart or a leader election
        "partitioner": "murmur2_random",  # Java Kafka's key partitioning, so keys land alike
        **FAILOVER_SETTINGS,
    }
    config.update(settings)
    return config


def produce_one(producer: Producer, topic: str, key: bytes | None, value: bytes | None, partition: int | None,
                headers: list[tuple[str, bytes | None]] | None, on_delivery: Any) -> None:
    """Hand one row to the producer (to `partition`, or the key's, when None), waiting while its
    local queue is full."""
    kwargs: dict[str, Any] = {"key": key, "value": value, "headers": headers or None, "on_delivery": on_delivery}
    if partition is not None:
        kwargs["partition"] = partition
    while True:
        try:
            producer.produce(topic, **kwargs)
            break
        except BufferError:
            producer.poll(0.1)  # the local queue is full: let deliveries drain
    producer.poll(0)


class SinkClient:
    """Producer, consumer and admin client of one task (or of the driver's commit)."""

    def __init__(self, settings: dict[str, str]) -> None:
        self.settings = dict(settings)
        self.producer = Producer(producer_config(self.settings))
        self._consumer: Consumer | None = None
        self._errors: list[str] = []
        self.delivered = 0

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(consumer_config(self.settings))
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    # -- writing -------------------------------------------------------------------------------

    def _on_delivery(self, error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            self._errors.append(str(error))
        else:
            self.delivered += 1

    def produce(self, topic: str, key: bytes | None, value: bytes | None, partition: int | None,
                headers: list[tuple[str, bytes | None]]) -> None:
        produce_one(self.producer, topic, key, value, partition, headers, self._on_delivery)

    def flush(self) -> None:
        """Wait until every produced record is acknowledged; raise if any failed."""
        remaining = self.producer.flush(SCAN_TIMEOUT_SECONDS * 3)
        if remaining:
            raise RuntimeError(f"roost sink: {remaining} records not acknowledged in time")
        if self._errors:
            errors, self._errors = self._errors, []
            raise RuntimeError(f"roost sink: {len(errors)} records failed, first: {errors[0]}")

    def ensure_log_topic(self, topic: str) -> None:
        """Create `topic` unless it exists; retried like the other calls, since a broker that
        restarts under this task leaves the admin client waiting out its reconnect backoff."""
        admin = AdminClient(self.settings)

        def create() -> None:
            futures = admin.create_topics([NewTopic(topic, num_partitions=1)], request_timeout=REQUEST_TIMEOUT_SECONDS)
            try:
                futures[topic].result(timeout=REQUEST_TIMEOUT_SECONDS * 3)
            except KafkaException as error:
                code = error.args[0].code()
                if code == KafkaError.TOPIC_ALREADY_EXISTS:
                    return
                if error.args[0].retriable() or code in TRANSIENT_ADMIN_ERRORS:
                    raise
                raise RuntimeError(f"roost sink: creating {topic} failed: {error}") from error

        retry(f"creating {topic}", create)

    def append_marker(self, topic: str, marker: Marker) -> None:
        """Append a marker and wait for its acknowledgement (it must precede what it announces)."""
        self.produce(topic, marker.sink.encode(), marker.encode(), 0, [])
        self.flush()

    # -- reading -------------------------------------------------------------------------------

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        return retry(f"reading the offsets of {topic}-{partition}", lambda: self.consumer.get_watermark_offsets(
            KafkaTopicPartition(topic, partition), timeout=REQUEST_TIMEOUT_SECONDS, cached=False))

    def partitions_of(self, topic: str) -> list[int]:
        metadata = retry(f"describing {topic}",
                         lambda: self.consumer.list_topics(topic, timeout=REQUEST_TIMEOUT_SECONDS))
        found = metadata.topics.get(topic)
        if found is None or (found.error is not None and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            return []
        return sorted(found.partitions)

    def end_offsets(self, topic: str) -> dict[int, int]:
        return {p: self.watermarks(topic, p)[1] for p in self.partitions_of(topic)}

    def read(self, topic: str, partition: int, start: int, end: int) -> Iterator[Any]:
        """Records [start, end) of a partition (those still there), in order."""
        if start >= end:
            return
        consumer = self.consumer
        consumer.assign([KafkaTopicPartition(topic, partition, start)])
        next_offset = start
        deadline = time.monotonic() + SCAN_TIMEOUT_SECONDS
        while next_offset < end:
            for message in consumer.consume(num_messages=min(10_000, end - next_offset), timeout=1.0):
                error = message.error()
                if error is not None:
                    if error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                        low, _ = self.watermarks(topic, partition)
                        if low <= next_offset:
                            return  # the log was cut back: nothing more to find
                        next_offset = low
                        consumer.assign([KafkaTopicPartition(topic, partition, low)])
                        break
                    continue
                if message.offset() < next_offset:
                    continue
                if message.offset() >= end:
                    return
                next_offset = message.offset() + 1
                deadline = time.monotonic() + SCAN_TIMEOUT_SECONDS
                yield message
            if time.monotonic() > deadline:
                raise TimeoutError(f"roost sink: reading {topic}-{partition} stalled at {next_offset}")
        consumer.unassign()

    def markers_at_tail(self, topic: str, batch_id: int) -> list[Marker]:
        """Markers of batches >= batch_id, found by reading backwards from the end of the log.

        Spark re-runs only its last batch, so they sit after the last commit of an earlier batch;
        windows double until such a commit (or the log start) is in view.
        """
        low, high = self.watermarks(topic, 0)
        window = FIRST_TAIL_WINDOW
        while True:
            start = max(low, high - window)
            markers = [Marker.decode(m.value()) for m in self.read(topic, 0, start, high)]
            earlier_commit = any(m.kind == "commit" and m.batch < batch_id for m in markers)
            if earlier_commit or start == low:
                return [m for m in markers if m.batch >= batch_id]
            window *= 2

    def markers_since(self, topic: str, timestamp_ms: int) -> list[Marker]:
        """Markers written at or after `timestamp_ms` (by the broker's timestamp index)."""
        def lookup() -> int:
            found = self.consumer.offsets_for_times([KafkaTopicPartition(topic, 0, timestamp_ms)],
                                                    timeout=REQUEST_TIMEOUT_SECONDS)
            return found[0].offset
        start = retry(f"looking up {topic} by time", lookup)
        low, high = self.watermarks(topic, 0)
        if start < 0:  # no record that recent
            return []
        return [Marker.decode(m.value()) for m in self.read(topic, 0, max(start, low), high)]

    def names_written(self, topic: str, scan_from: dict[int, int], prefix: str) -> set[str]:
        """Names (header `roost-sink-record`) starting with `prefix` in `topic` after `scan_from`."""
        names: set[str] = set()
        wanted = prefix.encode()
        for partition in self.partitions_of(topic):
            low, high = self.watermarks(topic, partition)
            start = max(low, scan_from.get(partition, low))
            for message in self.read(topic, partition, start, high):
                for key, value in message.headers() or ():
                    if key == RECORD_NAME_HEADER and value is not None and value.startswith(wanted):
                        names.add(value.decode())
        return names
