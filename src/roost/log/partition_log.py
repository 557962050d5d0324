"""The log of one partition: a directory of segments, appended and read as whole batches.

Threading: every method runs on one thread (the broker's event loop). The only thing another
thread may do is fsync the fds that `flush_handle` returns; fds of segments deleted meanwhile are
closed only once that flush is marked done, so the flusher never fsyncs a closed or reused fd.

Durability bookkeeping: the recovery point is the offset below which everything (batches and the
segments' indexes) is known to be on disk. After a crash (no clean-shutdown marker) every segment
from the one holding the recovery point on is re-read with CRC checks and cut at the first bad
batch, so a torn tail is never served.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from roost.log import producer_state as snapshots
from roost.log.cleaner import (
    DEFAULT_DELETE_RETENTION_MS,
    DEFAULT_MAX_KEYS,
    DEFAULT_MIN_CLEANABLE_RATIO,
    CleanerCheckpoint,
    CleanStats,
    clean_log,
    read_cleaner_checkpoint,
    write_cleaner_checkpoint,
)
from roost.log.config import LOG_APPEND_TIME, LogConfig
from roost.log.errors import MessageTooLarge, NonMonotonicAppend, OffsetOutOfRange, RecordBatchTooLarge
from roost.log.files import (
    TEMP_SUFFIX,
    atomic_write,
    fsync_directory,
    parse_offset_file_name,
    read_checkpoint,
    write_checkpoint,
)
from roost.log.leader_epochs import CHECKPOINT_FILE as EPOCH_CHECKPOINT_FILE
from roost.log.leader_epochs import EpochEntry, LeaderEpochCache
from roost.log.producer_state import ProducerStateManager
from roost.log.segment import INDEX_SUFFIX, INT32_MAX, LOG_SUFFIX, TIME_INDEX_SUFFIX, Segment
from roost.log.transactions import AbortedIndex, AbortedTxn, read_marker
from roost.wire.kafka.records import (
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    InvalidRecordBatch,
    decode_batch_records,
    parse_header,
    validate_batches,
)
from roost.wire.kafka.records import assign_offsets as assign_batch_offsets

logger = logging.getLogger("roost.log")

CLEAN_SHUTDOWN_FILE = ".clean-shutdown"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"


_OFFSET_AND_LENGTH = struct.Struct(">qi")  # baseOffset, batchLength
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the log stamps batches (message.timestamp.type=LogAppendTime)
    size_bytes: int


_make_header = BatchHeader._make


class ReadResult(NamedTuple):
    buffers: list[bytes | memoryview]  # whole batches, in offset order
    size: int
    first_offset: int  # base offset of the first batch returned (the requested offset if none)
    next_offset: int  # one past the last offset returned (the requested offset if none)


@dataclass
class _PendingFlush:
    end_offset: int
    cap: int  # lowered by a truncation while the fsync ran: data above it is newer than the fsync


class PartitionLog:
    """Segments of one partition; see the module docstring. Create with `PartitionLog.open`."""

    def __init__(self, directory: Path, config: LogConfig, clock_ms: Callable[[], int]) -> None:
        self.directory = directory
        self.config = config
        self.clock_ms = clock_ms
        self.segments: list[Segment] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.recovery_point = 0
        self.producer_state = ProducerStateManager()
        self.aborted_index = AbortedIndex(directory)  # loaded by open(); see roost.log.transactions
        self.leader_epochs = LeaderEpochCache(directory, persist=False)  # loaded by open()
        self._unsynced_directories: list[Path] = []  # of a new log: synced by its first flush
        self._closed = False
        self._pending_flushes: list[_PendingFlush] = []
        self._fds_to_close: list[int] = []
        self._checkpointed_recovery_point = -1
        self._last_checkpoint_ms = 0
        self._last_flush_ms = clock_ms()
        # Where compaction stands (only compacted topics ever write it); see roost.log.cleaner.
        self.cleaner_checkpoint = CleanerCheckpoint()
        self._cleaner_failed = False  # a pass broke off mid-swap: memory and disk may differ
        # Times the log end went back (truncate_to, truncate_fully_and_start_at): a copy of the
        # log being made elsewhere (a move between log directories) must start over.
        self.truncations = 0

    # ------------------------------------------------------------------------------------------
    # opening and recovery

    @classmethod
    def open(cls, directory: Path, config: LogConfig, clock_ms: Callable[[], int]) -> PartitionLog:
        """Create the partition directory, or load it, recovering from a crash if needed."""
        started = time.monotonic()
        log = cls(Path(directory), config, clock_ms)
        created = not log.directory.is_dir()
        if created:
            log.directory.mkdir(parents=True)
        clean = (log.directory / CLEAN_SHUTDOWN_FILE).exists()
        recovered = log._load(clean)
        # From here on a crash must look unclean: drop the marker durably before any append.
        if clean:
            (log.directory / CLEAN_SHUTDOWN_FILE).unlink()
        if created:
            # A new, empty log: the names of its directory and files become durable with its
            # first flush (which fsyncs these directories before any data counts as durable):
            # an empty log lost to a power cut loses nothing, and a topic of a thousand new
            # partitions need not cost two thousand fsyncs in a row.
            log._unsynced_directories = [log.directory.parent, log.directory]
        else:
            fsync_directory(log.directory)
        logger.info(
            "opened partition log %s: %d segments, offsets [%d, %d), %s in %.3fs",
            log.directory,
            len(log.segments),
            log.log_start_offset,
            log.log_end_offset,
            "clean shutdown" if clean else f"recovered {recovered} segments",
            time.monotonic() - started,
        )
        return log

    def _load(self, clean: bool) -> int:
        """Load segments; returns how many were re-read with CRC checks."""
        for name in os.listdir(self.directory):
            if name.endswith(TEMP_SUFFIX):
                (self.directory / name).unlink()
        bases = sorted(
            offset
            for offset in (parse_offset_file_name(name, LOG_SUFFIX) for name in os.listdir(self.directory))
            if offset is not None
        )
        self._delete_orphan_indexes(set(bases))
        now = self.clock_ms()
        self.log_start_offset = read_checkpoint(self.directory / LOG_START_FILE) or 0
        recovery_point = read_checkpoint(self.directory / RECOVERY_POINT_FILE) or 0
        recovered: list[Segment] = []
        # After a crash, scan from the segment holding the recovery point (or the first one).
        first_unflushed = len(bases) if clean else max(0, bisect_right(bases, recovery_point) - 1)
        for position, base in enumerate(bases):
            if self.segments and base < self.segments[-1].next_offset:
                # Only a compaction swap cut short by a crash leaves segments that start inside
                # the one before: that one is the merged, cleaned segment and holds what they had.
                self._drop_covered_segment_files(base, self.segments[-1])
                continue
            segment = Segment.open_existing(self.directory, base, now)
            self.segments.append(segment)
            trusted = position < first_unflushed and segment.load_trusted()
            if trusted:
                continue
            if position < first_unflushed and segment.indexes_were_missing:
                logger.warning("segment %s: index files missing; rebuilding them", segment.log_path)
            elif position < first_unflushed:
                logger.warning("segment %s: indexes do not match the log; rebuilding them", segment.log_path)
            recovered.append(segment)
            size_before = segment.size
            cut, problem = segment.recover(self.config.index_interval_bytes)
            if cut:
                logger.warning(
                    "recovery: cut %d bytes from %s at position %d (%s); they were never acknowledged "
                    "as durable",
                    cut,
                    segment.log_path,
                    size_before - cut,
                    problem,
                )
                for later in bases[position + 1 :]:
                    self._drop_later_segment_files(later)
                break
        if not self.segments:
            self.segments.append(Segment.create(self.directory, self.log_start_offset, now))
        self.log_end_offset = self.active.next_offset if self.active.size else self.active.base_offset
        self._settle_log_start(now)
        # What recovery kept may still be only in the page cache (a process crash, not a power
        # cut): make it durable before the recovery point moves past it.
        for segment in recovered:
            if segment in self.segments:
                for fd in segment.fds:
                    os.fsync(fd)
        self.recovery_point = self.log_end_offset
        self._write_recovery_checkpoint(force=True)
        self.aborted_index = AbortedIndex.load(self.directory, self.log_start_offset, self.log_end_offset)
        self._rebuild_producer_state()
        self.leader_epochs = self._load_leader_epochs()
        self.cleaner_checkpoint = read_cleaner_checkpoint(self.directory)
        self._lower_clean_point(self.log_end_offset)
        return len(recovered)

    def _load_leader_epochs(self) -> LeaderEpochCache:
        """The leader-epoch checkpoint, cut to the log's range; rebuilt from the batch headers
        when it is missing (a log written before it existed, or a lost file)."""
        if (self.directory / EPOCH_CHECKPOINT_FILE).exists() or self.log_end_offset == self.log_start_offset:
            cache = LeaderEpochCache.load(self.directory)
        else:
            entries: list[EpochEntry] = []
            for segment in self.segments:
                for _pos, header in segment.scan(0):
                    if header.partition_leader_epoch > (entries[-1].epoch if entries else -1):
                        entries.append(EpochEntry(header.partition_leader_epoch, header.base_offset))
            cache = LeaderEpochCache(self.directory, entries)
            cache.save()
            logger.info("rebuilt the leader-epoch cache of %s from its batches: %s", self.directory, entries)
        cache.truncate_from_end(self.log_end_offset)
        cache.truncate_from_start(self.log_start_offset)
        return cache

    def _delete_orphan_indexes(self, bases: set[int]) -> None:
        for name in os.listdir(self.directory):
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                offset = parse_offset_file_name(name, suffix)
                if offset is not None and offset not in bases:
                    (self.directory / name).unlink()

    def _drop_covered_segment_files(self, base: int, merged: Segment) -> None:
        doomed = Segment.open_existing(self.directory, base, self.clock_ms())
        logger.warning(
            "deleting %s: it starts inside %s (offsets up to %d), the result of a compaction whose "
            "swap a crash interrupted",
            doomed.log_path,
            merged.log_path,
            merged.next_offset - 1,
        )
        doomed.close()
        doomed.delete_files()

    def _drop_later_segment_files(self, base: int) -> None:
        doomed = Segment.open_existing(self.directory, base, self.clock_ms())
        logger.warning("recovery: deleting %s (%d bytes) after the cut", doomed.log_path, doomed.size)
        doomed.close()
        doomed.delete_files()

    def _settle_log_start(self, now: int) -> None:
        """Reconcile the persisted log start with the segments found."""
        if self.log_start_offset > self.log_end_offset:
            # Everything left is below the log start (records deleted, then unflushed data lost):
            # start afresh there, as Kafka does.
            logger.warning(
                "log start %d is beyond the log end %d in %s: starting an empty log there",
                self.log_start_offset,
                self.log_end_offset,
                self.directory,
            )
            self._remove_segments(list(self.segments))
            self.segments = [Segment.create(self.directory, self.log_start_offset, now)]
            self.log_end_offset = self.log_start_offset
        while len(self.segments) > 1 and self.segments[1].base_offset <= self.log_start_offset:
            self._remove_segments([self.segments[0]])
        settled = max(self.log_start_offset, self.segments[0].base_offset)
        if settled != read_checkpoint(self.directory / LOG_START_FILE) and (settled or self.log_end_offset):
            # Written only when it says something: a new, empty log starts at 0 without it (an
            # fsynced write per new partition adds up when a topic has a thousand).
            write_checkpoint(self.directory / LOG_START_FILE, settled)
        self.log_start_offset = settled

    def _rebuild_producer_state(self) -> None:
        """Latest snapshot at or below the log end, then the batch headers after it."""
        state = snapshots.load_latest_snapshot(self.directory, self.log_end_offset)
        first_base = self.segments[0].base_offset
        if state is None or state.map_end_offset < first_base:
            state = ProducerStateManager()
            state.map_end_offset = first_base
        start = state.map_end_offset
        for segment in self.segments:
            if segment.next_offset <= start or segment.size == 0:
                continue
            position = segment.offset_index.lookup(start) if start > segment.base_offset else 0
            for pos, header in segment.scan(position):
                if header.base_offset >= state.map_end_offset:
                    self._track(state, header, lambda p=pos, h=header, s=segment: s.read(p, h.size))
        state.remove_before(self.log_start_offset)
        self.producer_state = state

    def _track(self, state: ProducerStateManager, header: BatchHeader,
               batch: Callable[[], bytes | memoryview]) -> None:
        """Feed one batch to the producer state; an ABORT marker ending a transaction with data
        here goes into the aborted-transaction index."""
        marker = read_marker(header, batch()) if header.is_control else None
        completed = state.update(header, header.base_offset, marker)
        if completed is not None and completed.aborted:
            self.aborted_index.append(AbortedTxn(
                completed.producer_id, completed.first_offset, completed.last_offset,
                state.stable_offset_after_marker(completed.last_offset)))

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO: the first offset of the earliest undecided transaction (or decided one whose
        marker `high_watermark` does not cover), else the high watermark; never below the log
        start (Kafka's rule: DeleteRecords may cut under an open transaction)."""
        return max(self.producer_state.last_stable_offset(high_watermark), self.log_start_offset)

    def aborted_transactions(self, fetch_offset: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions with data in [fetch_offset, upper) (a read_committed fetch)."""
        return self.aborted_index.collect(fetch_offset, upper)

    # ------------------------------------------------------------------------------------------
    # properties

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    @property
    def segment_count(self) -> int:
        return len(self.segments)

    def _check_open(self) -> None:
        assert not self._closed, f"partition log {self.directory} is closed"

    # ------------------------------------------------------------------------------------------
    # appending

    def append(
        self,
        records: memoryview | bytearray | bytes,
        batches: Sequence[tuple[int, BatchHeader]] | None = None,
        *,
        assign_offsets: bool = True,
        leader_epoch: int | None = None,
    ) -> AppendInfo:
        """Append whole batches (one or more, back to back; validated here when `batches` is None).

        assign_offsets=True (the leader) rewrites base offsets from the log end, and stamps
        `leader_epoch` into each batch when given. False (a follower) keeps the offsets and
        checks that they follow the log end. Rolls the segment first when due.
        """
        self._check_open()
        view = memoryview(records)
        if batches is None:
            batches = validate_batches(view)
        assert batches and batches[0][0] == 0, "batches must start at position 0"
        assert batches[-1][0] + batches[-1][1].size == len(view), "batches must cover the records exactly"
        config = self.config
        # Header fields by name once per batch, not through the properties: this is the path of
        # every produced batch.
        largest = max([header.batch_length for _pos, header in batches]) + LOG_OVERHEAD
        if largest > config.max_message_bytes:
            raise MessageTooLarge(
                f"batch of {largest} bytes is larger than max.message.bytes {config.max_message_bytes}")
        if largest > config.segment_bytes:
            raise RecordBatchTooLarge(f"batch of {largest} bytes is larger than segment.bytes {config.segment_bytes}")
        now = self.clock_ms()
        log_append_time = -1
        if assign_offsets:
            if view.readonly:
                view = memoryview(bytearray(view))
            if config.message_timestamp_type == LOG_APPEND_TIME:
                log_append_time = now
            batches = self._assign(view, batches, log_append_time, leader_epoch)
        else:
            self._check_follower_offsets(batches)

        first = batches[0][1].base_offset
        last_header = batches[-1][1]
        last = last_header.base_offset + last_header.last_offset_delta
        # The largest timestamp and the last offset of the first batch that has it, as Kafka reports.
        max_timestamp, offset_of_max = -1, first
        for _pos, header in batches:
            if header.max_timestamp > max_timestamp:
                max_timestamp = header.max_timestamp
                offset_of_max = header.base_offset + header.last_offset_delta
        if self._should_roll(len(view), last, max_timestamp, now):
            self._roll(first, now)
        self.active.append(view, batches, config.index_interval_bytes)
        self.log_end_offset = last + 1
        epochs = self.leader_epochs
        producers = self.producer_state
        for pos, header in batches:
            if header.attributes & ATTR_CONTROL:
                self._track(producers, header, lambda p=pos, h=header: view[p:p + h.size])
            else:
                producers.update(header, header.base_offset)
            if header.partition_leader_epoch > epochs.latest_epoch:
                epochs.assign(header.partition_leader_epoch, header.base_offset)
        return AppendInfo(first, last, max_timestamp, offset_of_max, log_append_time, len(view))

    def _assign(
        self,
        view: memoryview,
        batches: Sequence[tuple[int, BatchHeader]],
        log_append_time: int,
        leader_epoch: int | None,
    ) -> list[tuple[int, BatchHeader]]:
        """Rewrite base offsets from the log end (and stamp LogAppendTime); headers to match."""
        end = assign_batch_offsets(
            view,
            batches,
            self.log_end_offset,
            log_append_time if log_append_time >= 0 else None,
            partition_leader_epoch=leader_epoch,
        )
        assigned: list[tuple[int, BatchHeader]] = []
        next_offset = self.log_end_offset
        for pos, header in batches:
            # One new header per batch (fields by position: base offset 0, leader epoch 2,
            # attributes 5, max timestamp 8), as the bytes now say.
            fields = list(header)
            fields[0] = next_offset
            if leader_epoch is not None:
                fields[2] = leader_epoch
            if log_append_time >= 0:
                fields[5] = header.attributes | ATTR_TIMESTAMP_TYPE
                fields[8] = log_append_time
            assigned.append((pos, _make_header(fields)))
            next_offset += header.last_offset_delta + 1
        assert next_offset == end
        return assigned

    def _check_follower_offsets(self, batches: Sequence[tuple[int, BatchHeader]]) -> None:
        expected = self.log_end_offset
        for _pos, header in batches:
            if header.base_offset < expected:
                raise NonMonotonicAppend(
                    f"batch at offset {header.base_offset} does not follow offset {expected - 1} in {self.directory}"
                )
            expected = header.next_offset

    def _should_roll(self, size: int, last_offset: int, incoming_max_timestamp: int, now: int) -> bool:
        active = self.active
        if last_offset - active.base_offset > INT32_MAX:
            return True  # relative offsets in the indexes are int32
        if active.size == 0:
            return False
        if active.size + size > self.config.segment_bytes:
            return True
        if active.size + size > INT32_MAX:
            return True  # index positions are int32
        return self._time_waited_for_roll(active, incoming_max_timestamp, now) >= self.config.segment_ms

    @staticmethod
    def _time_waited_for_roll(segment: Segment, incoming_timestamp: int, now: int) -> int:
        # Kafka measures a segment's age in record time when records carry timestamps, so that
        # a replayed or lagging stream rolls by its own clock; else in wall time since creation.
        if segment.first_batch_timestamp >= 0 and incoming_timestamp >= 0:
            return incoming_timestamp - segment.first_batch_timestamp
        return now - segment.created_ms

    def roll_if_due(self) -> None:
        """Roll the active segment once it has existed for segment_ms (so retention can reach its
        data even when no more records arrive to trigger a roll)."""
        self._check_open()
        now = self.clock_ms()
        # No record is arriving to measure record time by, so this uses the segment's wall age.
        if self.active.size and now - self.active.created_ms >= self.config.segment_ms:
            self._roll(self.log_end_offset, now)

    def _roll(self, new_base: int, now: int) -> None:
        old = self.active
        assert new_base >= old.next_offset
        old.on_roll()
        # The old segment reaches the disk before the new one takes a byte. Otherwise a power cut
        # could keep a later segment's records (the kernel writes dirty pages back in any order)
        # while this one lost its tail at a batch boundary: a hole below the log end that
        # recovery cannot tell from the offset gaps compaction and replication of compacted logs
        # leave between segments. Found by the replication simulation. One fsync per segment:
        # what it writes is mostly on the disk already (the kernel's writeback), and its indexes
        # are trusted after a crash once the recovery point passes it.
        if old.size:
            os.fsync(old.log_fd)
        os.fsync(old.offset_index.fd)
        os.fsync(old.time_index.fd)
        if old.size:
            self.aborted_index.sync()  # the snapshot says its markers were applied
            snapshots.write_snapshot(self.directory, self.producer_state)
        else:
            # An empty active segment (only after truncation in an offset gap) is replaced.
            self.segments.pop()
            self._remove_segments_files([old])
        self.segments.append(Segment.create(self.directory, new_base, now))
        fsync_directory(self.directory)
        # Every segment before the new one was made durable at its own roll (or by recovery, or by
        # the cleaner's fsynced swap), so everything below the new base is.
        if new_base > self.recovery_point:
            self.recovery_point = new_base
            self._write_recovery_checkpoint(force=False)
        logger.debug("rolled %s at offset %d", self.directory, new_base)

    # ------------------------------------------------------------------------------------------
    # reading

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
        """One segment's share of a read: (bytes, first offset, next offset), or None."""
        if segment.size == 0 or segment.next_offset <= offset:
            return None
        recent = segment.recent
        if recent.bases and recent.bases[0] <= offset and recent.positions[-1] == segment.size:
            return self._read_recent(segment, offset, budget, limit, must_take_one)
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
        assert last_start + last.size == end, "read must end on a batch boundary"
        first_offset, next_offset = first.base_offset, last.next_offset
        if end - start_hint <= len(chunk):
            data = memoryview(chunk)[start - start_hint : end - start_hint]
        else:
            data = memoryview(segment.read(start, end - start))
        return data, first_offset, next_offset

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

    # ------------------------------------------------------------------------------------------
    # durability

    def flush_due(self) -> bool:
        """Whether flush_interval_messages or flush_interval_ms asks for a flush now."""
        unflushed = self.log_end_offset - self.recovery_point
        if unflushed <= 0:
            return False
        if unflushed >= self.config.flush_interval_messages:
            return True
        return self.clock_ms() - self._last_flush_ms >= self.config.flush_interval_ms

    def flush_handle(self) -> tuple[list[int], int]:
        """The fds to fsync so that everything below the returned end offset is durable. Call
        `mark_flushed(end)` once they are fsynced: the fds stay open until then, even if their
        segments are deleted or the log is closed meanwhile."""
        if self._closed:
            return [], self.log_end_offset  # e.g. the topic was deleted while a flush was queued
        fds = [s.log_fd for s in self.segments if s.size and s.next_offset > self.recovery_point]
        if self._unsynced_directories:
            # Directories first in the list: the fsyncs run in order on the flusher's thread.
            directory_fds = [os.open(d, os.O_RDONLY | os.O_DIRECTORY) for d in self._unsynced_directories]
            self._unsynced_directories = []
            self._fds_to_close.extend(directory_fds)
            fds = directory_fds + fds
        self._pending_flushes.append(_PendingFlush(self.log_end_offset, self.log_end_offset))
        return fds, self.log_end_offset

    def mark_flushed(self, end_offset: int) -> None:
        """The fds of the `flush_handle` that returned `end_offset` are fsynced."""
        pending = next((p for p in self._pending_flushes if p.end_offset == end_offset), None)
        if self._closed and pending is None:
            return  # a handle from after close(), or one close() found nothing pending for
        assert pending is not None, f"mark_flushed({end_offset}) without a matching flush_handle"
        # Handles taken before this one and never marked (a failed fsync) are dropped with it.
        del self._pending_flushes[: self._pending_flushes.index(pending) + 1]
        if not self._pending_flushes:
            self._close_retired_fds()
        if self._closed:
            return  # close() flushed everything itself
        self._last_flush_ms = self.clock_ms()
        durable = min(end_offset, pending.cap, self.log_end_offset)
        if durable > self.recovery_point:
            self.recovery_point = durable
            self._write_recovery_checkpoint(force=False)

    def flush(self) -> None:
        """fsync everything now (shutdown, tests)."""
        fds, end = self.flush_handle()
        for fd in fds:
            os.fsync(fd)
        for fd in self.active.fds[1:]:
            os.fsync(fd)
        self.mark_flushed(end)
        self._write_recovery_checkpoint(force=True)

    def _write_recovery_checkpoint(self, *, force: bool) -> None:
        if self.recovery_point == self._checkpointed_recovery_point:
            return
        now = self.clock_ms()
        if not force and now - self._last_checkpoint_ms < self.config.recovery_checkpoint_interval_ms:
            return
        # A hint, written on the event loop after every flush round: no fsync. Losing it (or
        # finding it unreadable) only leaves an older recovery point or none: recovery scans more.
        # It is written only after the data it covers was fsynced, so it never claims too much.
        write_checkpoint(self.directory / RECOVERY_POINT_FILE, self.recovery_point, durable=False)
        self._checkpointed_recovery_point = self.recovery_point
        self._last_checkpoint_ms = now

    def _close_retired_fds(self) -> None:
        fds, self._fds_to_close = self._fds_to_close, []
        for fd in fds:
            os.close(fd)

    # ------------------------------------------------------------------------------------------
    # removing data

    def _remove_segments(self, doomed: list[Segment]) -> None:
        for segment in doomed:
            self.segments.remove(segment)
        self._remove_segments_files(doomed)

    def _remove_segments_files(self, doomed: list[Segment]) -> None:
        for segment in doomed:
            segment.delete_files()
            if self._pending_flushes:
                self._fds_to_close.extend(segment.fds)  # a flusher thread may be fsyncing them
            else:
                segment.close()
        snapshots.delete_snapshots(
            self.directory, below=self.segments[0].base_offset if self.segments else None
        )

    def truncate_to(self, offset: int) -> None:
        """Drop every batch holding an offset >= `offset` (a follower diverging from its leader).
        The new log end is `offset`, or the base of the batch `offset` falls inside. When that
        would fall below the log start, the log is emptied and starts afresh at `offset`."""
        self._check_open()
        if offset >= self.log_end_offset:
            # Nothing to cut, but the epoch cache may end with an epoch that starts at the log
            # end and holds no batch: this broker led in it and appended nothing before another
            # leader took over. Left there, it would be the follower's LastFetchedEpoch forever,
            # an epoch the leader never had: DivergingEpoch on every fetch, no progress (Kafka's
            # UnifiedLog.truncateTo trims the cache here too).
            self.leader_epochs.truncate_from_end(self.log_end_offset)
            return
        self.truncations += 1
        now = self.clock_ms()
        old_end = self.log_end_offset
        if self._end_after_truncation(offset) < self.log_start_offset:
            self._remove_segments(list(self.segments))
            self.segments = [Segment.create(self.directory, offset, now)]
            self.log_start_offset = offset
            write_checkpoint(self.directory / LOG_START_FILE, offset)
            self.log_end_offset = offset
        else:
            doomed = [s for s in self.segments[1:] if s.base_offset >= offset]
            self._remove_segments(doomed)
            self.log_end_offset = self.active.truncate_to_offset(offset)
            if self.active.next_offset < self.log_end_offset:
                # The new active segment was compacted: its last records are gone, so its last
                # batch ends before the log end. Opening the log derives the end from the active
                # segment, so give it one that starts there (else the end would go back, and
                # offsets be handed out twice). An empty one is replaced (see _roll).
                self._roll(self.log_end_offset, now)
                if self.segments[0].base_offset > self.log_start_offset:
                    self.log_start_offset = self.segments[0].base_offset  # nothing was below it
                    write_checkpoint(self.directory / LOG_START_FILE, self.log_start_offset)
        for fd in self.active.fds:
            os.fsync(fd)
        fsync_directory(self.directory)
        for pending in self._pending_flushes:
            pending.cap = min(pending.cap, self.log_end_offset)
        if self.recovery_point > self.log_end_offset:
            # Must be on disk before new appends: a stale higher point would skip their checks.
            self.recovery_point = self.log_end_offset
            self._write_recovery_checkpoint(force=True)
        self.aborted_index.truncate(self.log_end_offset)
        self._rebuild_producer_state()
        self.leader_epochs.truncate_from_end(self.log_end_offset)
        self.leader_epochs.truncate_from_start(self.log_start_offset)
        self._lower_clean_point(self.log_end_offset)
        logger.info("truncated %s from offset %d to %d", self.directory, old_end, self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop everything and start an empty log at `offset` (a follower whose log lies wholly
        before its leader's log start)."""
        self._check_open()
        self.truncations += 1
        now = self.clock_ms()
        self._remove_segments(list(self.segments))
        self.segments = [Segment.create(self.directory, offset, now)]
        self.log_start_offset = self.log_end_offset = offset
        write_checkpoint(self.directory / LOG_START_FILE, offset)
        fsync_directory(self.directory)
        for pending in self._pending_flushes:
            pending.cap = min(pending.cap, offset)
        self.recovery_point = offset
        self._write_recovery_checkpoint(force=True)
        self.aborted_index.truncate(0)
        self._rebuild_producer_state()
        self.leader_epochs.clear()
        self._lower_clean_point(offset)
        logger.info("emptied %s: it now starts at offset %d", self.directory, offset)

    def _end_after_truncation(self, offset: int) -> int:
        slot = max(0, bisect_right(self.segments, offset, key=lambda s: s.base_offset) - 1)
        found = self.segments[slot].find_batch(offset)
        if found is not None and found[1].base_offset < offset:
            return found[1].base_offset
        return offset

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start up to `offset` (persisted) and delete the segments
        wholly below it. Returns the new log start offset."""
        self._check_open()
        if offset > self.log_end_offset:
            raise OffsetOutOfRange(offset, self.log_start_offset, self.log_end_offset)
        if offset <= self.log_start_offset:
            return self.log_start_offset
        self.log_start_offset = offset
        write_checkpoint(self.directory / LOG_START_FILE, offset)
        doomed = [
            s
            for s, after in zip(self.segments, self.segments[1:], strict=False)
            if after.base_offset <= offset
        ]
        self._remove_segments(doomed)
        self.producer_state.remove_before(offset)
        self.aborted_index.trim_below(offset)
        self.leader_epochs.truncate_from_start(offset)
        logger.info(
            "log start of %s moved to %d (DeleteRecords); %d segments deleted",
            self.directory,
            offset,
            len(doomed),
        )
        return self.log_start_offset

    def apply_retention(self, high_watermark: int | None = None) -> int:
        """Delete the oldest segments that retention_ms or retention_bytes no longer keeps; the
        active segment always stays, and with `high_watermark` only segments wholly below it go.
        Returns how many segments were deleted."""
        self._check_open()
        now = self.clock_ms()
        candidates = self.segments[:-1]
        if high_watermark is not None:
            candidates = [
                s
                for s, after in zip(candidates, self.segments[1:], strict=False)
                if after.base_offset <= high_watermark
            ]
        doomed: list[Segment] = []
        reasons: list[str] = []
        if self.config.retention_ms >= 0:
            for segment in candidates:
                age = now - segment.largest_timestamp()
                if age <= self.config.retention_ms:
                    break
                doomed.append(segment)
                reasons.append(f"{segment.log_path.name} is {age} ms old")
        if self.config.retention_bytes >= 0:
            excess = self.size_bytes - sum(s.size for s in doomed) - self.config.retention_bytes
            for segment in candidates[len(doomed) :]:
                if excess - segment.size < 0:
                    break
                doomed.append(segment)
                excess -= segment.size
                reasons.append(f"{segment.log_path.name} exceeds retention.bytes")
        if not doomed:
            return 0
        self._remove_segments(doomed)
        new_start = max(self.log_start_offset, self.segments[0].base_offset)
        if new_start != self.log_start_offset:
            self.log_start_offset = new_start
            write_checkpoint(self.directory / LOG_START_FILE, new_start)
        self.producer_state.remove_before(self.log_start_offset)
        self.aborted_index.trim_below(self.log_start_offset)
        self.leader_epochs.truncate_from_start(self.log_start_offset)
        logger.info(
            "retention deleted %d segments of %s (%s); log start now %d",
            len(doomed),
            self.directory,
            "; ".join(reasons),
            self.log_start_offset,
        )
        return len(doomed)

    # ------------------------------------------------------------------------------------------
    # compaction (cleanup.policy=compact)

    def clean(
        self,
        now_ms: int,
        *,
        delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS,
        min_cleanable_ratio: float = DEFAULT_MIN_CLEANABLE_RATIO,
        high_watermark: int | None = None,
        max_keys: int = DEFAULT_MAX_KEYS,
    ) -> CleanStats:
        """Compact the segments before the active one when the dirty ratio reaches
        `min_cleanable_ratio` (or a kept tombstone grew older than `delete_retention_ms`): for
        every key only its latest record stays; keyless records stay; tombstones go once older
        than `delete_retention_ms`. Offsets never change. Cheap when there is nothing to do.

        Pass the partition's `high_watermark` on a replicated log: records at or above it may
        still be truncated away, so they must not count as the newer value of a key. At most
        `max_keys` keys are mapped per pass (a pass then cleans the prefix of the log its map
        covers). See roost.log.cleaner for the rules and the crash-safety argument."""
        self._check_open()
        if self._cleaner_failed:
            return CleanStats(reason="an earlier pass failed mid-swap; reopen the log to clean again")
        try:
            return clean_log(
                self,
                now_ms,
                delete_retention_ms=delete_retention_ms,
                min_cleanable_ratio=min_cleanable_ratio,
                high_watermark=high_watermark,
                max_keys=max_keys,
            )
        except BaseException:
            # The files are consistent (opening the log resolves any half-done swap), but this
            # object may still hold segments whose names now belong to new files.
            self._cleaner_failed = True
            raise

    def replace_segments(self, old: list[Segment], new: Segment | None) -> None:
        """Put `new` (or nothing) where the consecutive segments `old` were (their files are
        already gone or replaced: only their fds are closed here, or once a pending flush is
        marked done)."""
        first = self.segments.index(old[0])
        assert self.segments[first : first + len(old)] == old, "replaced segments must be consecutive"
        assert old[-1] is not self.active, "the active segment is never replaced"
        if new is None:
            assert first > 0, "the first segment holds the log start: it stays, even empty"
            self.segments[first : first + len(old)] = []
        else:
            assert new.base_offset == old[0].base_offset
            self.segments[first : first + len(old)] = [new]
        for segment in old:
            if self._pending_flushes:
                self._fds_to_close.extend(segment.fds)  # a flusher thread may be fsyncing them
            else:
                segment.close()

    def _lower_clean_point(self, end: int) -> None:
        """After a truncation (or a cut by recovery) nothing past the log end is clean."""
        if self.cleaner_checkpoint.clean_point > end:
            self.cleaner_checkpoint = CleanerCheckpoint(end, self.cleaner_checkpoint.oldest_tombstone_ms)
            write_cleaner_checkpoint(self.directory, self.cleaner_checkpoint)

    # ------------------------------------------------------------------------------------------
    # shutting down

    def close(self) -> None:
        """Flush, write the producer snapshot and the clean-shutdown marker, close the files."""
        if self._closed:
            return
        for directory in self._unsynced_directories:
            fsync_directory(directory)
        self._unsynced_directories = []
        self.active.on_roll()  # the final time-index entry, so a reopen knows the maximum
        for segment in self.segments:
            if segment.next_offset > self.recovery_point or segment is self.active:
                for fd in segment.fds:
                    os.fsync(fd)
        self.recovery_point = self.log_end_offset
        self._write_recovery_checkpoint(force=True)
        self.aborted_index.sync()
        snapshots.write_snapshot(self.directory, self.producer_state)
        atomic_write(self.directory / CLEAN_SHUTDOWN_FILE, b"")
        self._release_fds()

    def abandon(self) -> None:
        """Let go of the files without writing anything: the directory failed, so a flush or a
        marker written now would fail too (the next start recovers the log as after a crash)."""
        if not self._closed:
            self._release_fds()

    def retire(self, name: str) -> Path:
        """Topic deletion: let go of the files without writing and rename the partition directory
        to `name` beside it, for its removal off the event loop; returns the new path."""
        if not self._closed:
            self._release_fds()
        retired = self.directory.with_name(name)
        self.directory.rename(retired)
        logger.info("deleted partition log %s (its files go in the background)", self.directory)
        return retired

    def _release_fds(self) -> None:
        self.aborted_index.close()
        for segment in self.segments:
            if self._pending_flushes:
                self._fds_to_close.extend(segment.fds)  # a flusher thread may be fsyncing them
            else:
                segment.close()
        if not self._pending_flushes:
            self._close_retired_fds()
        self._closed = True
