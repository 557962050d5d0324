"""The life of a partition log's segment files: flushes (fds handed to the flusher thread and marked
done), the recovery-point checkpoint, removal of segments whose fds a running fsync may still
hold, and shutting the log down."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from roost.log import producer_state as snapshots
from roost.log.files import (
    atomic_write,
    fsync_directory,
    write_checkpoint,
)
from roost.log.partition_state import (
    CLEAN_SHUTDOWN_FILE,
    RECOVERY_POINT_FILE,
    PartitionLogState,
    _PendingFlush,
)
from roost.log.segment import Segment

logger = logging.getLogger("roost.log")


class SegmentLifecycle(PartitionLogState):
    """Flushes, removal and shutdown of a partition log's segments; see the module docstring."""

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
