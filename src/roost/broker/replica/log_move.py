"""Moving a partition's log to another log directory while it serves (AlterReplicaLogDirs).

Kafka's way: a future copy, `<topic>-<partition>.<id>-future` in the destination, is filled from
the current log batch by batch as a follower would be (offsets, leader epochs and producer state
kept), keeps catching up with the appends that go on meanwhile, and when it has everything it
takes the current log's place. The swap runs without yielding to the event loop, so no append,
fetch or roll runs between the last copied batch and the swap: that is the partition's lock, and
its cost is the pause of appends while the two logs are closed and renamed.

Crash safety, step by step (see `roost.storage.directories` for what a restart makes of each state):
1. copying: the current log is untouched; a crash leaves a future copy, discarded at start;
2. the future copy is flushed (off the event loop), caught up again, and closed (its last
   fsyncs, clean-shutdown marker); the current log is let go without writing;
3. the current log is renamed `.<id>-delete`: both whole copies exist, the future one is finished
   at start;
4. the future copy is renamed to the plain name in the destination: the move is done; the
   -delete copy is removed next (off the event loop), or at the next start.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

from roost.broker.replica.partition import Partition
from roost.log import PartitionLog
from roost.log.files import fsync_directory
from roost.storage.directories import LogDir, LogDirs, moving_name, partition_name
from roost.storage.log_manager import log_config_from_topic

log = logging.getLogger("roost.broker.log_move")

CHUNK_BYTES = 1 << 20  # one read from the current log per step; the loop runs between steps


class _TargetFailed(Exception):
    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


class LogMove:
    """One partition's move to `target`, run as a task by `LogMoves`."""

    def __init__(self, partition: Partition, target: LogDir, dirs: LogDirs, bytes_per_second: int,
                 on_failure: Callable[[PartitionLog, OSError], None]) -> None:
        self.partition = partition
        self.target = target
        self.dirs = dirs
        self.bytes_per_second = bytes_per_second
        self.on_failure = on_failure
        self.move_id = uuid.uuid4().hex
        self.future: PartitionLog | None = None
        self._started = False
        self._truncations_seen = 0

    @property
    def lag(self) -> int:
        """How many offsets the future copy is behind the current log (Kafka's OffsetLag)."""
        if self.future is None:
            return self.partition.log_end_offset
        return max(0, self.partition.log_end_offset - self.future.log_end_offset)

    async def run(self) -> None:
        partition = self.partition
        name = partition_name(partition.topic, partition.index)
        path = self.target.logs / moving_name(partition.topic, partition.index, self.move_id, "future")
        try:
            try:
                self.future = PartitionLog.open(path, log_config_from_topic(partition.configs), partition.log.clock_ms)
            except OSError as error:
                raise _TargetFailed(error) from error
            while not self._copy_step():
                await asyncio.sleep(self._pause())
            # Caught up once: make the copy durable off the event loop (nothing else touches the
            # future log meanwhile), so that the swap fsyncs only what was appended since.
            await asyncio.to_thread(self.future.flush)
            while not self._copy_step():
                await asyncio.sleep(self._pause())
            doomed = self._swap()
            log.info("moved %s to %s", name, self.target.path)
            # The old copy's files go after the swap, off the event loop (unlinking a large
            # segment takes a while); a crash before then leaves it to the next start.
            await asyncio.to_thread(_remove, doomed)
        except _TargetFailed as failed:
            # The destination's disk failed: it goes offline; the current log keeps serving.
            log.error("moving %s to %s failed: %s", name, self.target.path, failed.error)
            self.discard()
            self.dirs.fail(self.target, failed.error)
        except OSError as error:
            # Reading the current log failed: its own directory is the one failing.
            log.error("moving %s to %s failed reading the current log: %s", name, self.target.path, error)
            self.discard()
            self.on_failure(partition.log, error)
        except asyncio.CancelledError:
            self.discard()
            raise

    def _pause(self) -> float:
        # Throttled (replica.alter.log.dirs.io.max.bytes.per.second): 1/16 of a second's bytes a step.
        return 0.0 if self.bytes_per_second >= CHUNK_BYTES * 16 else 1 / 16

    def _start_over(self, current: PartitionLog) -> None:
        """Empty the future copy and start it at the current log's first batch (the log start
        may be inside a batch after DeleteRecords; the swap trims to it)."""
        assert self.future is not None
        start = current.log_start_offset
        if start < current.log_end_offset:
            start = current.read(start, 1, min_one_batch=True).first_offset
        self.future.truncate_fully_and_start_at(start)
        self._truncations_seen = current.truncations

    def _copy_step(self) -> bool:
        """Copy the next batches; True when the future copy has everything (then swap at once)."""
        current, future = self.partition.log, self.future
        assert future is not None
        if self.partition.closed:
            raise asyncio.CancelledError  # the partition went away: nothing to move
        if not self._started or current.truncations != self._truncations_seen \
                or future.log_end_offset < current.log_start_offset:
            # New, or the current log was truncated (a follower's divergence: what we copied may
            # differ from what is there now), or retention trimmed it past what we have.
            self._start_over(current)
            self._started = True
        if future.log_end_offset == current.log_end_offset:
            return True
        budget = CHUNK_BYTES if self._pause() == 0.0 else max(1, self.bytes_per_second // 16)
        result = current.read(future.log_end_offset, budget, min_one_batch=True)
        if result.size:
            try:
                future.append(bytearray(b"".join(result.buffers)), assign_offsets=False)
            except OSError as error:
                raise _TargetFailed(error) from error
        return future.log_end_offset == current.log_end_offset

    def _swap(self) -> Path:
        """Make the future copy the partition's log (no await: nothing else runs meanwhile);
        returns where the old copy now is, to be removed."""
        partition, future = self.partition, self.future
        assert future is not None and future.log_end_offset == partition.log_end_offset
        current = partition.log
        try:
            if current.log_start_offset > future.log_start_offset:
                future.delete_records_before(current.log_start_offset)
            future.close()
        except OSError as error:
            raise _TargetFailed(error) from error
        # The current copy is let go without its fsyncs: from here a restart takes the future
        # copy, closed whole above, and discards this one.
        current.abandon()
        doomed = current.directory.with_name(moving_name(partition.topic, partition.index, self.move_id, "delete"))
        current.directory.rename(doomed)
        fsync_directory(doomed.parent)
        live = self.target.logs / partition_name(partition.topic, partition.index)
        try:
            future.directory.rename(live)
            fsync_directory(live.parent)
            partition.log = PartitionLog.open(live, current.config, current.clock_ms)
        except OSError as error:
            # Put the current copy back under its name and serve it again (recovered as after a
            # crash, since it was let go without its clean-shutdown marker).
            doomed.rename(current.directory)
            partition.log = PartitionLog.open(current.directory, current.config, current.clock_ms)
            raise _TargetFailed(error) from error
        self.dirs.moved(partition.topic, partition.index, self.target)
        self.future = None
        return doomed

    def discard(self) -> None:
        """Drop the future copy (the current log is untouched)."""
        if self.future is not None:
            directory = self.future.directory
            self.future.abandon()
            self.future = None
            shutil.rmtree(directory, ignore_errors=True)


def _remove(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    fsync_directory(directory.parent)


class LogMoves:
    """The moves in progress on this broker, one at most per partition."""

    def __init__(self, dirs: LogDirs, bytes_per_second: int,
                 on_failure: Callable[[PartitionLog, OSError], None]) -> None:
        self.dirs = dirs
        self.bytes_per_second = bytes_per_second
        self.on_failure = on_failure
        self._moves: dict[tuple[str, int], tuple[LogMove, asyncio.Task[None]]] = {}

    def start(self, partition: Partition, target: LogDir) -> None:
        """Move `partition` to `target` (a move already going elsewhere is replaced; a move to
        where it already is cancels the one in progress)."""
        key = (partition.topic, partition.index)
        self.cancel(key)
        if self.dirs.dir_of(*key) is target:
            return
        move = LogMove(partition, target, self.dirs, self.bytes_per_second, self.on_failure)
        task = asyncio.ensure_future(move.run())
        self._moves[key] = (move, task)
        task.add_done_callback(lambda _task: self._finished(key, move))

    def _finished(self, key: tuple[str, int], move: LogMove) -> None:
        current = self._moves.get(key)
        if current is not None and current[0] is move:
            del self._moves[key]

    def cancel(self, key: tuple[str, int]) -> None:
        found = self._moves.pop(key, None)
        if found is not None:
            move, task = found
            task.cancel()
            move.discard()

    def futures(self) -> list[LogMove]:
        """The moves whose future copy exists (DescribeLogDirs reports them)."""
        return [move for move, _task in self._moves.values() if move.future is not None]

    async def close(self) -> None:
        for key in list(self._moves):
            _move, task = self._moves[key]
            self.cancel(key)
            try:
                await task
            except asyncio.CancelledError:
                pass
