"""A task's records [start, end) of one partition, read with Roost's own client into Arrow.

The per-record path has no Python object per record: a Fetch response's bytes are walked batch by
batch (header checks and CRC-32C of each batch), control batches and aborted transactions are
skipped (read_committed, as librdkafka's consumers), compressed payloads are decompressed whole,
and `decode_records_into` (compiled when built) appends the records to column buffers that become
an Arrow batch with a fixed number of pyarrow calls.

Semantics are the librdkafka reader's (roost.spark.kafka_io.read_range): offsets removed before
they were read are data loss (reported, or skipped when failOnDataLoss is false); a broker that is
down, restarting or no longer the leader makes the read wait and look the leader up again, at
most `poll_timeout_ms` without progress, then fail the task (Spark retries it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import crc32c
import pyarrow as pa

from roost.spark.arrow_columns import to_record_batch
from roost.spark.fetch_client import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, ClusterClient, Retriable
from roost.spark.offsets import DataLossReporter, OffsetRange, TopicPartition
from roost.wire.kafka import ErrorCode
from roost.wire.kafka.record_columns import RecordColumns, decode_records_into
from roost.wire.kafka.records import (
    COMPRESSION_ZSTD,
    CRC_START,
    HEADER_SIZE,
    MAGIC,
    MIN_BATCH_LENGTH,
    UNSUPPORTED_COMPRESSION_TYPE,
    UNSUPPORTED_FOR_MESSAGE_FORMAT,
    BatchHeader,
    InvalidRecordBatch,
    decode_batch_records,
    decompress,
    parse_header,
)

log = logging.getLogger("roost.spark")

ARROW_BATCH_ROWS = 8192
FLUSH_DATA_BYTES = 64 * 1024 * 1024  # far below Arrow's 2 GiB per binary column
FETCH_MAX_WAIT_MS = 100  # the librdkafka reader's fetch.wait.max.ms
PARTITION_MAX_BYTES = 8 * 1024 * 1024  # and its max.partition.fetch.bytes
MAX_PARTITION_MAX_BYTES = 256 * 1024 * 1024
FIRST_BACKOFF_SECONDS = 0.05
MAX_BACKOFF_SECONDS = 1.0
CONTROL_ABORT = 0  # control record key: version int16, type int16 (0 abort, 1 commit)

T = TypeVar("T")


class AbortedTransactions:
    """Which batches of a read_committed fetch belong to aborted transactions.

    Kafka's consumer rule: a transactional batch of producer P is skipped while P has an aborted
    transaction that started at or before it and whose abort marker has not been passed yet.
    Fed every batch in offset order.
    """

    def __init__(self, aborted: list[tuple[int, int]]) -> None:
        self._pending = sorted(aborted, key=lambda entry: entry[1])  # (producer id, first offset)
        self._open: set[int] = set()

    def skips(self, header: BatchHeader, batch: memoryview) -> bool:
        while self._pending and self._pending[0][1] <= header.last_offset:
            self._open.add(self._pending.pop(0)[0])
        if header.is_control:
            if header.producer_id in self._open and _is_abort_marker(batch):
                self._open.discard(header.producer_id)
            return True
        return header.is_transactional and header.producer_id in self._open


def _is_abort_marker(batch: memoryview) -> bool:
    records = decode_batch_records(batch, verify_crc=False)
    key = records[0].key if records else None
    return key is not None and len(key) >= 4 and int.from_bytes(key[2:4], "big", signed=True) == CONTROL_ABORT


class FetchWalk:
    """The whole record batches of one fetched partition, appended to columns batch by batch.

    `append` takes the records with offsets in [next_offset, end) and returns the next offset to
    read; it stops before a batch once the columns hold `max_rows` records or `max_bytes` of data
    (call it again after flushing them), and `done` tells when the fetched bytes are used up. A
    batch with nothing wanted in it (skipped, compacted away) still moves the next offset past it.
    `cut` is the size of a batch the fetch response ended in the middle of (0 if none).
    """

    def __init__(self, records: memoryview, aborted: list[tuple[int, int]]) -> None:
        self.records = records
        self.aborted = AbortedTransactions(aborted)
        self.pos = 0
        self.cut = 0
        self.done = False

    def append(self, columns: RecordColumns, next_offset: int, end: int, max_rows: int = 1 << 62,
               max_bytes: int = 1 << 62) -> int:
        records, size = self.records, len(self.records)
        while not self.done:
            if self.pos + HEADER_SIZE > size or next_offset >= end:
                self.done = True
                break
            header = parse_header(records, self.pos)
            available = size - self.pos
            if header.size > available and header.batch_length >= MIN_BATCH_LENGTH:
                self.cut, self.done = header.size, True  # a fetch response may end inside a batch
                break
            _check_header(header, available)
            if header.next_offset <= next_offset:  # wholly before the range: only its markers count
                self.aborted.skips(header, records[self.pos:self.pos + header.size])
                self.pos += header.size
                continue
            if header.base_offset >= end:
                self.done = True
                return end
            if len(columns) >= max_rows or columns.data_bytes() >= max_bytes:
                break  # full: the caller flushes, then calls again
            batch = records[self.pos:self.pos + header.size]
            self.pos += header.size
            if crc32c.crc32c(batch[CRC_START:]) != header.crc:
                raise InvalidRecordBatch(f"record batch at offset {header.base_offset}: CRC does not match")
            if not self.aborted.skips(header, batch):
                payload = batch[HEADER_SIZE:]
                if header.compression:
                    payload = decompress(header.compression, bytes(payload))
                decode_records_into(columns, header, payload, next_offset, end)
            next_offset = min(header.next_offset, end)
        return next_offset


def _check_header(header: BatchHeader, available: int) -> None:
    """What reading needs of a batch header. Looser than the broker's produce checks: a batch that
    Apache Kafka's compaction emptied or thinned keeps its lastOffsetDelta, so recordsCount may
    be smaller than lastOffsetDelta + 1, or 0."""
    if header.magic != MAGIC:
        raise InvalidRecordBatch(f"unsupported record batch magic {header.magic}", UNSUPPORTED_FOR_MESSAGE_FORMAT)
    if header.batch_length < MIN_BATCH_LENGTH or header.size > available:
        raise InvalidRecordBatch(f"record batch at offset {header.base_offset} has a bad length "
                                 f"{header.batch_length}")
    if header.compression > COMPRESSION_ZSTD:
        raise InvalidRecordBatch(f"unknown compression codec {header.compression}", UNSUPPORTED_COMPRESSION_TYPE)
    if header.records_count < 0 or header.last_offset_delta < 0:
        raise InvalidRecordBatch(f"record batch at offset {header.base_offset} has "
                                 f"{header.records_count} records, last offset delta {header.last_offset_delta}")


class _Deadline:
    """`poll_timeout_ms` without progress, restarted by every step forward."""

    def __init__(self, poll_timeout_ms: int) -> None:
        self.seconds = poll_timeout_ms / 1000
        self.restart()

    def restart(self) -> None:
        self.at = time.monotonic() + self.seconds
        self.backoff = FIRST_BACKOFF_SECONDS

    def passed(self) -> bool:
        return time.monotonic() > self.at

    def wait(self) -> None:
        time.sleep(max(0.0, min(self.backoff, self.at - time.monotonic())))
        self.backoff = min(self.backoff * 2, MAX_BACKOFF_SECONDS)


def read_range(settings: dict[str, str], offset_range: OffsetRange, fail_on_data_loss: bool,
               poll_timeout_ms: int) -> Iterator[pa.RecordBatch]:
    """Records [start, end) of one partition as Arrow batches, in offset order."""
    tp, end = offset_range.tp, offset_range.end
    reporter = DataLossReporter(fail_on_data_loss)
    client = ClusterClient(settings["bootstrap.servers"], settings.get("client.id", "roost-spark"))
    deadline = _Deadline(poll_timeout_ms)

    def patiently(what: str, action: Callable[[], T]) -> T:
        while True:
            try:
                return action()
            except Retriable as error:
                if deadline.passed():
                    raise TimeoutError(
                        f"roost: no record of {tp} at offset {next_offset} (reading up to {end}) within "
                        f"{poll_timeout_ms} ms; is the broker up? (option kafkaConsumer.pollTimeoutMs; "
                        f"last error while {what}: {error})") from error
                log.info("roost: %s: %s; retrying", what, error)
                deadline.wait()

    try:
        columns = RecordColumns()
        next_offset = offset_range.start
        max_bytes = PARTITION_MAX_BYTES
        while next_offset < end:
            fetched_from = next_offset
            fetched = patiently(f"fetching {tp}", lambda offset=next_offset, size=max_bytes: client.fetch(
                tp, offset, FETCH_MAX_WAIT_MS, size))
            if fetched.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                moved = _skip_lost(client, tp, next_offset, end, reporter, patiently)
                for warning in reporter.warnings:
                    log.warning("roost: %s", warning)
                reporter.warnings.clear()
                if moved == next_offset:
                    deadline.wait()  # in range again by now (a new leader catching up): fetch again
                if moved > next_offset:
                    next_offset = moved
                    deadline.restart()
            else:
                walk = FetchWalk(fetched.records, fetched.aborted)
                while not walk.done:
                    moved = walk.append(columns, next_offset, end, ARROW_BATCH_ROWS, FLUSH_DATA_BYTES)
                    if moved > next_offset:
                        next_offset = moved
                        deadline.restart()
                    if len(columns) >= ARROW_BATCH_ROWS or columns.data_bytes() >= FLUSH_DATA_BYTES:
                        yield to_record_batch(columns, tp)
                        columns = RecordColumns()
                if walk.cut > max_bytes and next_offset == fetched_from:  # a batch larger than asked for
                    max_bytes = min(walk.cut, MAX_PARTITION_MAX_BYTES)
            if next_offset < end and deadline.passed():
                raise TimeoutError(
                    f"roost: no record of {tp} at offset {next_offset} (reading up to {end}) within "
                    f"{poll_timeout_ms} ms; is the broker up? (option kafkaConsumer.pollTimeoutMs)")
        if len(columns):
            yield to_record_batch(columns, tp)
    finally:
        client.close()


def _skip_lost(client: ClusterClient, tp: TopicPartition, next_offset: int, end: int,
               reporter: DataLossReporter, patiently: Callable[[str, Callable[[], int]], int]) -> int:
    """The offset to go on from after `next_offset` turned out to be gone; reports the loss."""
    low = patiently(f"reading the offsets of {tp}", lambda: client.list_offset(tp, EARLIEST_TIMESTAMP))
    if low > next_offset:
        reporter.report(f"Cannot fetch offsets [{next_offset}, {min(low, end)}) of {tp}: the earliest "
                        f"offset is now {low}")
        return min(low, end)
    high = patiently(f"reading the offsets of {tp}", lambda: client.list_offset(tp, LATEST_TIMESTAMP))
    if high > next_offset:
        return next_offset  # out of range a moment ago, in range now (a new leader catching up)
    reporter.report(f"Cannot fetch offset {next_offset} of {tp}: the log now ends before it")
    return end
