"""What a partition log is made of: its segments, offsets, producer state, leader epochs and the
bookkeeping of its flushes. Each job's methods live in a module of their own, and
roost.log.partition_log.PartitionLog joins them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from roost.log.cleaner import CleanerCheckpoint
from roost.log.config import LogConfig
from roost.log.leader_epochs import LeaderEpochCache
from roost.log.producer_state import ProducerStateManager
from roost.log.segment import Segment
from roost.log.transactions import AbortedIndex, AbortedTxn, read_marker
from roost.wire.kafka.records import BatchHeader

CLEAN_SHUTDOWN_FILE = ".clean-shutdown"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"


@dataclass
class _PendingFlush:
    end_offset: int
    cap: int  # lowered by a truncation while the fsync ran: data above it is newer than the fsync


class PartitionLogState:
    """The state every job of a partition log shares; see the module docstring."""

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

    # What one job calls on another, declared here so that each job's module is checked on its own
    # (mypy strict); the job named beside each defines it, and PartitionLog joins them.
    if TYPE_CHECKING:
        def _rebuild_producer_state(self) -> None: ...  # log_loading

        def _lower_clean_point(self, end: int) -> None: ...  # log_retention

        def _write_recovery_checkpoint(self, *, force: bool) -> None: ...  # segment_lifecycle

        def _remove_segments(self, doomed: list[Segment]) -> None: ...  # segment_lifecycle

        def _remove_segments_files(self, doomed: list[Segment]) -> None: ...  # segment_lifecycle

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

    def _track(self, state: ProducerStateManager, header: BatchHeader,
               batch: Callable[[], bytes | memoryview]) -> None:
        """Feed one batch to the producer state (loading and appending alike); an ABORT marker
        ending a transaction with data here goes into the aborted-transaction index."""
        marker = read_marker(header, batch()) if header.is_control else None
        completed = state.update(header, header.base_offset, marker)
        if completed is not None and completed.aborted:
            self.aborted_index.append(AbortedTxn(
                completed.producer_id, completed.first_offset, completed.last_offset,
                state.stable_offset_after_marker(completed.last_offset)))
