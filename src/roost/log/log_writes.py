"""Writing a partition log: appends (offsets assigned by a leader, checked for a follower), segment
rolls, and truncation of its end (a follower's divergence, a replica that starts over)."""

from __future__ import annotations

import functools
import logging
import os
import random
from bisect import bisect_right
from collections.abc import Sequence
from typing import NamedTuple

from roost.log import producer_state as snapshots
from roost.log.config import LOG_APPEND_TIME
from roost.log.errors import MessageTooLarge, NonMonotonicAppend, RecordBatchTooLarge
from roost.log.files import fsync_directory, write_checkpoint
from roost.log.partition_state import LOG_START_FILE, PartitionLogState
from roost.log.segment import INT32_MAX, Segment
from roost.wire.kafka.records import (
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    LOG_OVERHEAD,
    BatchHeader,
    validate_batches,
)
from roost.wire.kafka.records import assign_offsets as assign_batch_offsets

logger = logging.getLogger("roost.log")


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the log stamps batches (message.timestamp.type=LogAppendTime)
    size_bytes: int


_make_header = BatchHeader._make


class LogWrites(PartitionLogState):
    """Appends, rolls and truncation of a partition log; see the module docstring."""

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
                self._track(producers, header, functools.partial(_slice, view, pos, header.size))
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
        if active.index_full(self.config.segment_index_bytes):
            return True
        return self._time_waited_for_roll(active, incoming_max_timestamp, now) >= self._roll_after_ms(active)

    def _roll_after_ms(self, segment: Segment) -> int:
        """segment_ms less this segment's jitter, drawn once per segment (below segment_ms)."""
        config = self.config
        if config.segment_jitter_ms == 0:
            return config.segment_ms
        if segment.roll_jitter_ms < 0:
            segment.roll_jitter_ms = random.randrange(min(config.segment_jitter_ms, config.segment_ms))
        return config.segment_ms - segment.roll_jitter_ms

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
        if self.active.size and now - self.active.created_ms >= self._roll_after_ms(self.active):
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


def _slice(view: memoryview, position: int, size: int) -> memoryview:
    return view[position:position + size]
