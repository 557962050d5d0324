"""Opening a partition log: loading its segments and, after a crash, recovering them (CRC checks
from the recovery point on, a torn tail cut), then the log start, producer state and leader
epochs that follow from what was kept."""

from __future__ import annotations

import functools
import logging
import os
import time
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path
from typing import Self

from roost.log import producer_state as snapshots
from roost.log.cleaner import read_cleaner_checkpoint
from roost.log.config import LogConfig
from roost.log.files import (
    TEMP_SUFFIX,
    fsync_directory,
    parse_offset_file_name,
    read_checkpoint,
    write_checkpoint,
)
from roost.log.leader_epochs import EpochEntry, LeaderEpochCache
from roost.log.partition_state import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_FILE,
    RECOVERY_POINT_FILE,
    PartitionLogState,
)
from roost.log.producer_state import ProducerStateManager
from roost.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, Segment
from roost.log.transactions import AbortedIndex

logger = logging.getLogger("roost.log")


class LogLoading(PartitionLogState):
    """Opening and crash recovery of a partition log; see the module docstring."""

    @classmethod
    def open(cls, directory: Path, config: LogConfig, clock_ms: Callable[[], int]) -> Self:
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
        when it is missing (a log written before it existed, or a lost file) or damaged (found
        by tests/log/test_corruption.py: a damaged file used to leave the cache empty)."""
        if self.log_end_offset == self.log_start_offset or LeaderEpochCache.readable(self.directory):
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
                    self._track(state, header, functools.partial(segment.read, pos, header.size))
        state.remove_before(self.log_start_offset)
        self.producer_state = state
