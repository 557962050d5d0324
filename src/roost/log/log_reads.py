"""Reading a partition log: whole batches from an offset, and searches by time."""

from __future__ import annotations

import logging
import struct
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import NamedTuple

from roost.log.errors import CorruptLog, OffsetOutOfRange
from roost.log.partition_state import PartitionLogState
from roost.log.segment import BatchScan, Segment
from roost.log.transactions import AbortedTxn
from roost.wire.kafka.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    InvalidRecordBatch,
    batch_crc,
    check_header,
    decode_batch_records,
    parse_header,
    validate_batches,
)

logger = logging.getLogger("roost.log")


_OFFSET_AND_LENGTH = struct.Struct(">qi")  # baseOffset, batchLength


_LAST_OFFSET_DELTA = struct.Struct(">i")


_LAST_OFFSET_DELTA_AT = 23


def checked_prefix(data: memoryview) -> tuple[int, int, str | None]:
    """(bytes of the whole batches at the start of `data` whose headers and CRC-32C check, the
    next offset after them (-1 if none), why the next one does not check, or None if all do)."""
    try:  # the produce path's own check first (fields by position): the common case, all good
        batches = validate_batches(data)
    except InvalidRecordBatch:
        pass
    else:
        return len(data), batches[-1][1].next_offset if batches else -1, None
    position, next_offset = 0, -1
    while position < len(data):
        try:
            header = parse_header(data, position)
            check_header(header, len(data) - position)
        except InvalidRecordBatch as error:
            return position, next_offset, str(error)
        if batch_crc(data, position, header.size) != header.crc:
            return position, next_offset, f"CRC-32C does not match the batch at offset {header.base_offset}"
        position += header.size
        next_offset = header.next_offset
    return position, next_offset, None


class ReadResult(NamedTuple):
    buffers: list[bytes | memoryview]  # whole batches, in offset order
    size: int
    first_offset: int  # base offset of the first batch returned (the requested offset if none)
    next_offset: int  # one past the last offset returned (the requested offset if none)


class LogReads(PartitionLogState):
    """Reads and time searches of a partition log; see the module docstring."""

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO: the first offset of the earliest undecided transaction (or decided one whose
        marker `high_watermark` does not cover), else the high watermark; never below the log
        start (a follower's start follows its leader's, which never passes it)."""
        return max(self.producer_state.last_stable_offset(high_watermark), self.log_start_offset)

    def first_damage(self, path: object) -> tuple[int, int, str]:
        """Where the damage a read reported in segment file `path` starts: (byte position, the
        first offset not known good, why), by walking that segment from its start with full
        checks (the read's own offset may only be near it). A segment whose batches all check
        now (the damage was elsewhere) answers its end."""
        for segment in self.segments:
            if segment.log_path == path:
                scan = BatchScan(segment.log_fd, 0, segment.size, verify_crc=True)
                good = segment.base_offset
                for _position, header in scan:
                    good = header.next_offset
                return scan.stop.position, good, scan.stop.problem or "no damage found on a second walk"
        raise ValueError(f"{path} is not a segment of {self.directory}")

    def aborted_transactions(self, fetch_offset: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions with data in [fetch_offset, upper) (a read_committed fetch)."""
        return self.aborted_index.collect(fetch_offset, upper)

    def read(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_batch: bool = True
    ) -> ReadResult:
        """Whole batches from the one holding `offset`: at most `max_bytes` (but at least one
        batch when `min_one_batch`), none reaching `max_offset` (exclusive, the high watermark)."""
        self._check_open()
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRange(offset, self.log_start_offset, self.log_end_offset)
        limit = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        empty = ReadResult([], 0, offset, offset)
        if offset >= limit:
            return empty
        buffers: list[bytes | memoryview] = []
        size = 0
        first_offset = -1
        next_offset = offset
        slot = max(0, bisect_right(self.segments, offset, key=lambda s: s.base_offset) - 1)
        for segment in self.segments[slot:]:
            must_take_one = min_one_batch and not buffers
            if size >= max_bytes and not must_take_one:
                break
            part = self._read_segment(segment, next_offset, max_bytes - size, limit, must_take_one)
            if part is None:
                if segment.next_offset > next_offset and segment.size:
                    break  # stopped by the limit or the byte budget inside this segment
                continue
            data, part_first, part_next = part
            buffers.append(data)
            size += len(data)
            if first_offset < 0:
                first_offset = part_first
            next_offset = part_next
            if part_next < segment.next_offset:
                break  # this segment had more: the budget or the limit stopped us
        if not buffers:
            return empty
        return ReadResult(buffers, size, first_offset, next_offset)

    @staticmethod
    def _read_recent(segment: Segment, offset: int, budget: int, limit: int,
                     must_take_one: bool) -> tuple[memoryview, int, int] | None:
        """`_read_segment` for an offset among the segment's most recent batches: every batch
        boundary is known, so nothing is walked (the same answer, found by bisection)."""
        recent = segment.recent
        lasts, positions = recent.lasts, recent.positions
        first = bisect_left(lasts, offset)
        if first == len(lasts) or lasts[first] >= limit:
            return None
        start = positions[first]
        budget_end = start + max(budget, 0)
        stop = bisect_left(lasts, limit, lo=first)  # the first batch reaching the limit
        end_index = bisect_right(positions, budget_end, lo=first + 1, hi=stop + 1) - 1
        if end_index <= first:
            if not must_take_one:
                return None
            end_index = first + 1
        end = positions[end_index]
        data = segment.read(start, end - start)
        return memoryview(data), recent.bases[first], lasts[end_index - 1] + 1

    def _read_segment(
        self, segment: Segment, offset: int, budget: int, limit: int, must_take_one: bool
    ) -> tuple[memoryview, int, int] | None:
        """One segment's share of a read: (bytes, first offset, next offset), or None. Raises
        CorruptLog for bytes that fail their checks: never served."""
        if segment.size == 0 or segment.next_offset <= offset:
            return None
        recent = segment.recent
        if recent.bases and recent.bases[0] <= offset and recent.positions[-1] == segment.size:
            # Batches this process appended: their headers and CRCs were checked on the way in.
            return self._read_recent(segment, offset, budget, limit, must_take_one)
        try:
            found = self._read_stored(segment, offset, budget, limit, must_take_one)
        except CorruptLog:
            raise
        except (InvalidRecordBatch, struct.error, ValueError) as error:
            # The walk from the index read a header that is not one (a zeroed or cut range).
            raise CorruptLog(segment.log_path, segment.offset_index.lookup(offset), offset, str(error)) from error
        if found is None:
            return None
        data, start, first_offset, next_offset = found
        # Batches read back from disk (written by an earlier process, or by a follower's fetch
        # long ago): their CRC-32C is checked before they leave, on every such read. The cost is
        # a hardware CRC over the bytes served (see docs/hostile-storage.md).
        good, next_good, damage = checked_prefix(data)
        if damage is not None:
            if good == 0:
                raise CorruptLog(segment.log_path, start, first_offset, damage)
            return data[:good], first_offset, next_good  # the good batches before it; the next read fails
        return data, first_offset, next_offset

    def _read_stored(
        self, segment: Segment, offset: int, budget: int, limit: int, must_take_one: bool
    ) -> tuple[memoryview, int, int, int] | None:
        """`_read_segment` by walking the headers from the sparse index: (bytes, their position,
        first offset, next offset), or None."""
        start_hint = segment.offset_index.lookup(offset)
        # One pread that covers the way from the index entry to the wanted batch (at most about
        # one index interval) plus the budget; more preads only for batches beyond it.
        want = min(
            segment.size - start_hint,
            max(budget, HEADER_SIZE) + 2 * self.config.index_interval_bytes + HEADER_SIZE,
        )
        chunk = segment.read(start_hint, want)

        def header_at(position: int) -> BatchHeader:
            relative = position - start_hint
            if relative + HEADER_SIZE <= len(chunk):
                return parse_header(chunk, relative)
            return segment.header_at(position)

        def span_at(position: int) -> tuple[int, int]:
            """(last offset, size) of the batch at `position`: all a walk needs, cheaply."""
            relative = position - start_hint
            if relative + HEADER_SIZE <= len(chunk):
                base_offset, batch_length = _OFFSET_AND_LENGTH.unpack_from(chunk, relative)
                (last_delta,) = _LAST_OFFSET_DELTA.unpack_from(chunk, relative + _LAST_OFFSET_DELTA_AT)
                return base_offset + last_delta, batch_length + LOG_OVERHEAD
            header = segment.header_at(position)
            return header.last_offset, header.size

        def walk_until(position: int, stop: Callable[[int, int, int], bool]) -> int:
            """From a batch boundary, skip batches until stop(position, last offset, size)."""
            while position < segment.size:
                last_offset, size = span_at(position)
                if size < HEADER_SIZE:  # a zeroed or flipped length: the walk would not advance
                    raise CorruptLog(segment.log_path, position, offset, f"batch length {size - LOG_OVERHEAD}")
                if stop(position, last_offset, size):
                    break
                position += size
            return position

        # Walking every header in Python is the cost of a read, so each walk starts from the
        # sparse index and covers about one index interval, not the whole range returned.
        start = walk_until(start_hint, lambda _pos, last, _size: last >= offset)
        if start >= segment.size:
            return None
        first = header_at(start)
        if first.last_offset >= limit:
            return None  # the batch holding `offset` reaches the high watermark: not yet
        budget_end = start + max(budget, 0)
        # Where the limit cuts: before the first batch that reaches it.
        if segment.next_offset <= limit:
            limit_end = segment.size
        else:
            from_index = max(start, segment.offset_index.lookup(limit))
            if from_index >= budget_end:
                limit_end = from_index  # the budget cuts first; the exact spot does not matter
            else:
                limit_end = walk_until(from_index, lambda _pos, last, _size: last >= limit)
        # Where the budget cuts: at the last batch boundary at or below budget_end.
        if limit_end <= budget_end:
            end = limit_end
        else:
            from_index = max(start, segment.offset_index.floor_position(budget_end))
            end = walk_until(from_index, lambda pos, _last, size: pos + size > budget_end or pos >= limit_end)
            end = min(end, limit_end)
        if end == start:
            if not must_take_one:
                return None
            end = start + first.size
        # The last batch returned, for the next offset: a short walk from the index again.
        last_start = walk_until(
            max(start, segment.offset_index.floor_position(end - 1)),
            lambda pos, _last, size: pos + size >= end,
        )
        last = header_at(last_start)
        if last_start + last.size != end:  # the headers' lengths do not chain: not what was written
            raise CorruptLog(segment.log_path, last_start, last.base_offset, "batch lengths do not meet the read's end")
        first_offset, next_offset = first.base_offset, last.next_offset
        if end - start_hint <= len(chunk):
            data = memoryview(chunk)[start - start_hint : end - start_hint]
        else:
            data = memoryview(segment.read(start, end - start))
        return data, start, first_offset, next_offset

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the earliest record at or after the log start whose timestamp
        is >= `timestamp_ms` (Kafka ListOffsets); None if there is none. The timestamp is that
        record's own, as Kafka answers (the batch is decoded to find it; if its codec is not
        installed, the batch's first offset and max timestamp are answered instead)."""
        self._check_open()
        for segment in self.segments:
            if segment.size == 0 or segment.max_timestamp < timestamp_ms:
                continue
            start = 0
            hint = segment.time_index.lookup_before(timestamp_ms)
            if hint is not None:
                start = segment.offset_index.lookup(hint)
            for position, header in segment.scan(start):
                if header.max_timestamp < timestamp_ms or header.last_offset < self.log_start_offset:
                    continue
                found = self._first_record_at_or_after(segment, position, header, timestamp_ms)
                if found is not None:
                    return found
        return None

    def _first_record_at_or_after(
        self, segment: Segment, position: int, header: BatchHeader, timestamp_ms: int
    ) -> tuple[int, int] | None:
        try:
            records = decode_batch_records(segment.read(position, header.size), verify_crc=False)
        except InvalidRecordBatch as error:
            # E.g. a codec library that is not installed: answer at batch granularity.
            logger.warning(
                "offset_for_timestamp: cannot decode the batch at %d: %s", header.base_offset, error
            )
            return max(header.base_offset, self.log_start_offset), header.max_timestamp
        for record in records:
            if record.offset >= self.log_start_offset and record.timestamp >= timestamp_ms:
                return record.offset, record.timestamp
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the earliest record with the largest timestamp (ListOffsets -3).

        Note the order: the maximum timestamp first, as the name says (offset_for_timestamp
        answers (offset, timestamp))."""
        self._check_open()
        best: Segment | None = None
        for segment in self.segments:
            holds_data = segment.size and segment.next_offset > self.log_start_offset
            if holds_data and (best is None or segment.max_timestamp > best.max_timestamp):
                best = segment
        if best is None or best.max_timestamp < 0:
            return None
        found = best.find_batch(best.offset_of_max_timestamp)
        assert found is not None, "the segment's max timestamp points at a batch it holds"
        position, header = found
        record = self._first_record_at_or_after(best, position, header, header.max_timestamp)
        if record is None:
            return None
        offset, timestamp = record
        return timestamp, offset
