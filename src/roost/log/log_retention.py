"""Removing data from a partition log's start: DeleteRecords, retention by time and size, and
compaction's hooks (the cleaner's pass and its swap of segments)."""

from __future__ import annotations

import logging

from roost.log.cleaner import (
    DEFAULT_DELETE_RETENTION_MS,
    DEFAULT_MAX_KEYS,
    DEFAULT_MIN_CLEANABLE_RATIO,
    NO_LAGS,
    CleanerCheckpoint,
    CleanStats,
    CompactionLags,
    clean_log,
    write_cleaner_checkpoint,
)
from roost.log.errors import OffsetOutOfRange
from roost.log.files import write_checkpoint
from roost.log.partition_state import LOG_START_FILE, PartitionLogState
from roost.log.segment import Segment

logger = logging.getLogger("roost.log")


class LogRetention(PartitionLogState):
    """Retention, DeleteRecords and compaction of a partition log; see the module docstring."""

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start up to `offset` (persisted) and delete the segments
        wholly below it. Returns the new log start offset. The leader bounds `offset` by its last
        stable offset (ReplicaManager.delete_records); a follower follows the leader's start."""
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
        active segment always stays, and with `high_watermark` only segments wholly below it go;
        none that holds a record of an undecided transaction goes (its first records would be
        gone when it commits: read_committed consumers would see part of it). Returns how many
        segments were deleted."""
        self._check_open()
        now = self.clock_ms()
        bound = self.producer_state.last_stable_offset(
            self.log_end_offset if high_watermark is None else high_watermark)
        candidates = [
            s for s, after in zip(self.segments[:-1], self.segments[1:], strict=False) if after.base_offset <= bound
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

    def clean(
        self,
        now_ms: int,
        *,
        delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS,
        min_cleanable_ratio: float = DEFAULT_MIN_CLEANABLE_RATIO,
        high_watermark: int | None = None,
        max_keys: int = DEFAULT_MAX_KEYS,
        lags: CompactionLags = NO_LAGS,
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
                lags=lags,
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
