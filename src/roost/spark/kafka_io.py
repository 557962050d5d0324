"""The thin network shell of the roost data source on confluent-kafka (librdkafka): the driver's
cluster queries and the tasks' reads when an option only librdkafka honours is given (see
`roost.spark.options.parse_consumer`; otherwise `roost.spark.driver_queries` and `record_reader`).

librdkafka finds partition leaders from Metadata and follows them when they move, so nothing here
assumes a single broker. Clients are created where they are used: on the driver lazily (and never
pickled), on executors inside `read()` / `write()`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import pyarrow as pa
from confluent_kafka import (
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition

from roost.client_settings import FAILOVER_SETTINGS
from roost.spark import driver_queries
from roost.spark.driver_queries import DRIVER_RETRY_SECONDS
from roost.spark.offsets import DataLossReporter, OffsetRange, TopicPartition
from roost.spark.options import Subscription
from roost.spark.schema import CREATE_TIME, LOG_APPEND_TIME, source_arrow_schema

log = logging.getLogger("roost.spark")

REQUEST_TIMEOUT_SECONDS = 10.0
ARROW_BATCH_ROWS = 8192

T = TypeVar("T")


def consumer_config(settings: dict[str, str]) -> dict[str, Any]:
    """A consumer that only ever `assign`s: it joins no group and commits nothing."""
    config: dict[str, Any] = {
        # librdkafka insists on a group id even for assign-only consumers; no group request is sent.
        "group.id": "roost-spark-unused",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",  # an out-of-range offset is data loss, never a silent jump
        "enable.partition.eof": False,
        "max.partition.fetch.bytes": 8 * 1024 * 1024,
        "fetch.wait.max.ms": 100,
        **FAILOVER_SETTINGS,
    }
    config.update(settings)
    return config


def retry(what: str, action: Callable[[], T], seconds: float = DRIVER_RETRY_SECONDS) -> T:
    """Run `action` until it stops raising KafkaException, for at most `seconds`."""
    return driver_queries.retry(what, action, KafkaException, seconds)


class ClusterView:
    """Driver-side questions about the cluster: which partitions exist, and their offsets."""

    def __init__(self, settings: dict[str, str]) -> None:
        self._settings = dict(settings)
        self._consumer: Consumer | None = None

    def _client(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(consumer_config(self._settings))
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def partitions(self, subscription: Subscription) -> list[TopicPartition]:
        metadata = retry("listing topics",
                         lambda: self._client().list_topics(timeout=REQUEST_TIMEOUT_SECONDS))
        found: list[TopicPartition] = []
        for name, topic in metadata.topics.items():
            if topic.error is not None and topic.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            if subscription.matches(name):
                found.extend(TopicPartition(name, index) for index in topic.partitions)
        return sorted(found)

    def watermarks(self, tps: Iterable[TopicPartition]) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """(earliest, latest) offset of each partition: log start offset and high watermark."""
        earliest: dict[TopicPartition, int] = {}
        latest: dict[TopicPartition, int] = {}
        for tp in tps:
            def query(tp: TopicPartition = tp) -> tuple[int, int]:
                low, high = self._client().get_watermark_offsets(
                    KafkaTopicPartition(tp.topic, tp.partition), timeout=REQUEST_TIMEOUT_SECONDS, cached=False)
                return low, high
            low, high = retry(f"reading the offsets of {tp}", query)
            assert 0 <= low <= high, (tp, low, high)
            earliest[tp], latest[tp] = low, high
        return earliest, latest


class _ColumnBuilder:
    """Accumulates fetched records of one partition into Arrow record batches.

    Fields are pulled out a consume() batch at a time with list comprehensions (the per-record
    Python cost is what bounds the source's speed); headers are converted only when present.
    """

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.clear()

    def clear(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.stamps: list[tuple[int, int]] = []
        self.headers: list[list[tuple[str, bytes | None]] | None] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add_many(self, messages: list[Any]) -> None:
        self.keys.extend([m.key() for m in messages])
        self.values.extend([m.value() for m in messages])
        self.offsets.extend([m.offset() for m in messages])
        self.stamps.extend([m.timestamp() for m in messages])
        self.headers.extend([m.headers() for m in messages])

    def _timestamps(self) -> tuple[list[int | None], list[int]]:
        micros = [millis * 1000 if kind != TIMESTAMP_NOT_AVAILABLE else None for kind, millis in self.stamps]
        kinds = [CREATE_TIME if kind != TIMESTAMP_LOG_APPEND_TIME else LOG_APPEND_TIME for kind, _ in self.stamps]
        if any(kind == TIMESTAMP_NOT_AVAILABLE for kind, _ in self.stamps):
            kinds = [-1 if kind == TIMESTAMP_NOT_AVAILABLE else k for (kind, _), k in zip(self.stamps, kinds, strict=True)]
        return micros, kinds

    def _header_array(self, list_type: pa.DataType) -> pa.Array:
        count = len(self.headers)
        if not any(self.headers):
            empty_values = pa.array([], list_type.value_type)
            return pa.ListArray.from_arrays(pa.array([0] * (count + 1), pa.int32()), empty_values, type=list_type)
        rows = [[{"key": k, "value": v} for k, v in h] if h else [] for h in self.headers]
        return pa.array(rows, list_type)

    def flush(self) -> pa.RecordBatch:
        schema = source_arrow_schema()
        count = len(self.offsets)
        micros, kinds = self._timestamps()
        batch = pa.RecordBatch.from_arrays([
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.array([self.tp.topic] * count, pa.string()),
            pa.array([self.tp.partition] * count, pa.int32()),
            pa.array(self.offsets, pa.int64()),
            pa.array(micros, schema.field("timestamp").type),
            pa.array(kinds, pa.int32()),
            self._header_array(schema.field("headers").type),
        ], schema=schema)
        self.clear()
        return batch


def read_range(settings: dict[str, str], offset_range: OffsetRange, fail_on_data_loss: bool,
               poll_timeout_ms: int) -> Iterator[pa.RecordBatch]:
    """Records [start, end) of one partition as Arrow batches, in offset order.

    Offsets that retention removed before they could be read are data loss (reported, or skipped
    when failOnDataLoss is false). A broker that is down makes the read wait for it, at most
    `poll_timeout_ms` without progress, and then fail the task, which Spark retries.
    """
    tp, end = offset_range.tp, offset_range.end
    reporter = DataLossReporter(fail_on_data_loss)
    builder = _ColumnBuilder(tp)
    consumer = Consumer(consumer_config(settings))
    try:
        next_offset = offset_range.start
        consumer.assign([KafkaTopicPartition(tp.topic, tp.partition, next_offset)])
        deadline = time.monotonic() + poll_timeout_ms / 1000
        while next_offset < end:
            messages = consumer.consume(num_messages=min(ARROW_BATCH_ROWS, end - next_offset), timeout=1.0)
            accepted: list[Any] = []
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                        next_offset = _skip_lost(consumer, tp, next_offset, end, reporter)
                        break
                    if error.fatal():
                        raise KafkaException(error)
                    log.warning("roost: reading %s: %s", tp, error)  # librdkafka retries these itself
                    continue
                offset = message.offset()
                if offset < next_offset:
                    continue  # re-delivered after a seek
                if offset >= end:
                    next_offset = end
                    break
                accepted.append(message)
                next_offset = offset + 1
            if accepted:
                builder.add_many(accepted)
                deadline = time.monotonic() + poll_timeout_ms / 1000
            for warning in reporter.warnings:
                log.warning("roost: %s", warning)
            reporter.warnings.clear()
            if len(builder) >= ARROW_BATCH_ROWS:
                yield builder.flush()
            if next_offset < end and time.monotonic() > deadline:
                raise TimeoutError(
                    f"roost: no record of {tp} at offset {next_offset} (reading up to {end}) within "
                    f"{poll_timeout_ms} ms; is the broker up? (option kafkaConsumer.pollTimeoutMs)")
        if len(builder):
            yield builder.flush()
    finally:
        consumer.close()


def _skip_lost(consumer: Consumer, tp: TopicPartition, next_offset: int, end: int,
               reporter: DataLossReporter) -> int:
    """The offset to go on from after `next_offset` turned out to be gone; reports the loss."""
    low, _high = retry(f"reading the offsets of {tp}", lambda: consumer.get_watermark_offsets(
        KafkaTopicPartition(tp.topic, tp.partition), timeout=REQUEST_TIMEOUT_SECONDS, cached=False))
    if low > next_offset:
        reporter.report(f"Cannot fetch offsets [{next_offset}, {min(low, end)}) of {tp}: the earliest "
                        f"offset is now {low}")
        resume = min(low, end)
    else:
        reporter.report(f"Cannot fetch offset {next_offset} of {tp}: the log now ends before it")
        resume = end
    if resume < end:
        consumer.assign([KafkaTopicPartition(tp.topic, tp.partition, resume)])
    return resume
