"""Real partition logs for the simulated brokers, and what a crash does to them.

Every broker-partition is a real `roost.log.PartitionLog` in a directory of its own (on tmpfs
when there is one): appends, reads, truncations, epoch caches and crash recovery are Roost's
own. Why the real log rather than an in-memory model: the leader-epoch cache is fed by the
batches' epochs as the log appends them, truncation trims it, and recovery rebuilds what a crash
left; a model would re-implement exactly the parts whose mistakes lose data.

`SimPartitionLog` only watches: after each append or truncation it updates a shadow of the
batches it holds, (base, next, epoch, crc), with a running digest, so that the checker compares
two logs' prefixes in O(log n) instead of reading them.

Durability: the group committer here is the real one's rules (one fsync round at a time; a
round covers what was appended when it started, and marks it flushed when it ends, after a
simulated fsync latency). What `mark_flushed` reached (the log's recovery point) is what a
power loss keeps. Two kinds of crash:
- kill -9 (`abandon`): the process's fds go, no clean-shutdown marker; the files (page cache)
  stay whole, and the next open runs the real recovery;
- power loss (`lose_unsynced`): also cuts every segment file somewhere at or after the durable
  point (a random prefix of the unsynced bytes survives, so a batch may be torn; the recovery's
  CRC check must cut it).
"""

from __future__ import annotations

import os
import shutil
from bisect import bisect_left
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from roost.log import AppendInfo, PartitionLog
from roost.storage.directories import deleted_name
from roost.storage.log_manager import log_config_from_topic
from roost.wire.kafka.records import iter_batch_headers
from tests.sim.replication.runtime import SimFuture, World


class Shadow:
    """The batches of one log as (base, next, epoch, crc), with a digest of every prefix."""

    def __init__(self, start: int = 0) -> None:
        self.start = start
        self.ends: list[int] = []  # next offset of each batch
        self.entries: list[tuple[int, int, int, int]] = []
        self.digests: list[int] = []

    @property
    def end(self) -> int:
        return self.ends[-1] if self.ends else self.start

    def add(self, base: int, next_offset: int, epoch: int, crc: int) -> None:
        assert base == self.end, f"shadow: batch at {base} after end {self.end}"
        previous = self.digests[-1] if self.digests else 0
        self.ends.append(next_offset)
        self.entries.append((base, next_offset, epoch, crc))
        self.digests.append(hash((previous, base, next_offset, epoch, crc)))

    def cut(self, end: int) -> None:
        keep = bisect_left(self.ends, end + 1)  # batches ending at or before `end`
        del self.ends[keep:], self.entries[keep:], self.digests[keep:]
        assert self.end == end or (not self.ends and end <= self.start) or self.end < end, (self.end, end)

    def digest_at(self, offset: int) -> int | None:
        """The digest of everything below `offset`, if a batch ends exactly there (0 for the
        empty prefix); None when this log does not reach it or has no batch boundary there."""
        if offset <= self.start:
            return 0 if offset == self.start else None
        index = bisect_left(self.ends, offset)
        if index == len(self.ends) or self.ends[index] != offset:
            return None
        return self.digests[index]

    def batch_at(self, offset: int) -> tuple[int, int, int, int] | None:
        index = bisect_left(self.ends, offset + 1)
        if index == len(self.entries):
            return None
        entry = self.entries[index]
        return entry if entry[0] <= offset else None


class SimPartitionLog(PartitionLog):
    """A real PartitionLog that keeps a shadow of its batches (see the module docstring)."""

    shadow: Shadow
    truncations: int
    recovery_problem: str | None = None
    # Told (LEO before, LEO after) when a truncation cut records: the simulation's transcript.
    on_cut: Callable[[int, int], None] | None = None

    def _rebuild_shadow(self) -> str | None:
        """Read the batches back; returns what is wrong when they do not cover the offsets from
        the log start to the log end without a hole (no topic here is compacted)."""
        self.shadow = Shadow(self.log_start_offset)
        self.truncations = getattr(self, "truncations", 0)
        for segment in self.segments:
            for _pos, header in segment.scan(0):
                if header.next_offset <= self.log_start_offset:
                    continue
                if header.base_offset != self.shadow.end:
                    return (f"offsets [{self.shadow.end}, {header.base_offset}) are missing, yet the log holds "
                            f"batches after them, up to its end {self.log_end_offset}")
                self.shadow.add(header.base_offset, header.next_offset, header.partition_leader_epoch, header.crc)
        if self.shadow.end != self.log_end_offset:
            return f"its batches end at {self.shadow.end} but its log end offset is {self.log_end_offset}"
        return None

    def append(self, records: Any, batches: Any = None, *, assign_offsets: bool = True,
               leader_epoch: int | None = None) -> AppendInfo:
        info = super().append(records, batches, assign_offsets=assign_offsets, leader_epoch=leader_epoch)
        # The caller's buffer holds the batches as appended (a leader's are rewritten in place).
        headers = list(iter_batch_headers(memoryview(records)))
        assert headers and headers[0][1].base_offset == info.first_offset, (headers, info)
        for _pos, header in headers:
            self.shadow.add(header.base_offset, header.next_offset, header.partition_leader_epoch, header.crc)
        assert self.shadow.end == self.log_end_offset
        return info

    def truncate_to(self, offset: int) -> None:
        before = self.log_end_offset
        super().truncate_to(offset)
        self.truncations += 1
        if self.log_end_offset < before and self.on_cut is not None:
            self.on_cut(before, self.log_end_offset)
        self.shadow.cut(self.log_end_offset)
        assert self.shadow.end == self.log_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        super().truncate_fully_and_start_at(offset)
        self.truncations += 1
        self.shadow = Shadow(offset)


def open_log(directory: Path, configs: dict[str, Any], clock_ms: Callable[[], int]) -> SimPartitionLog:
    plog = SimPartitionLog.open(directory, log_config_from_topic(configs), clock_ms)
    assert isinstance(plog, SimPartitionLog)
    plog.recovery_problem = plog._rebuild_shadow()
    return plog


class SimCommitter:
    """roost.storage.flusher.GroupCommitter's rules on the simulated clock: one fsync round at a
    time, covering what each log held when the round started."""

    def __init__(self, world: World, alive: Callable[[], bool], fsync_ms: Callable[[], int]) -> None:
        self.world = world
        self.alive = alive
        self.fsync_ms = fsync_ms
        self._pending: dict[int, tuple[PartitionLog, list[SimFuture]]] = {}
        self._running = False
        self.rounds = 0

    def request(self, partition_log: PartitionLog) -> SimFuture:
        future = SimFuture()
        entry = self._pending.get(id(partition_log))
        if entry is None:
            self._pending[id(partition_log)] = (partition_log, [future])
        else:
            entry[1].append(future)
        if not self._running:
            self._running = True
            self.world.after(0, self._round)
        return future

    def _round(self) -> None:
        if not self.alive():
            return
        if not self._pending:
            self._running = False
            return
        batch = list(self._pending.values())
        self._pending = {}
        handles = [(plog, plog.flush_handle()) for plog, _ in batch]
        self.world.after(self.fsync_ms(), self._round_done, handles, batch)

    def _round_done(self, handles: list[tuple[PartitionLog, tuple[list[int], int]]],
                    batch: list[tuple[PartitionLog, list[SimFuture]]]) -> None:
        if not self.alive():
            return  # the process died with the fsync in flight: nothing was marked
        self.rounds += 1
        for (plog, (_fds, end)), (_, futures) in zip(handles, batch, strict=True):
            plog.mark_flushed(end)
            for future in futures:
                future.set_result(None)
        self._round()


class SimLogManager:
    """What ReplicaManager and ReplicaFetchers need of roost.storage.log_manager.LogManager."""

    def __init__(self, data_dir: Path, committer: SimCommitter, clock_ms: Callable[[], int],
                 on_open: Callable[[str, int, SimPartitionLog], None]) -> None:
        self.logs_dir = data_dir / "logs"
        self.committer = committer
        self.clock_ms = clock_ms
        self.on_open = on_open
        self._hosted: Callable[[], Iterable[Any]] = tuple

    def host(self, hosted: Callable[[], Iterable[Any]]) -> None:
        self._hosted = hosted

    def partition_dir(self, topic: str, index: int) -> Path:
        return self.logs_dir / f"{topic}-{index}"

    def open_log(self, topic: str, index: int, configs: dict[str, Any], may_create: bool = True) -> PartitionLog:
        plog = open_log(self.partition_dir(topic, index), configs, self.clock_ms)
        self.on_open(topic, index, plog)
        return plog

    def checkpoint_dirs(self) -> list[Path]:
        return [self.logs_dir]

    def logs_dir_of(self, partition_log: PartitionLog) -> Path:
        return self.logs_dir

    def storage_failed(self, partition_log: PartitionLog, error: OSError) -> None:
        raise error  # the simulation has one log directory, which never fails

    def delete_log(self, topic: str, index: int, partition_log: PartitionLog | None) -> None:
        # The real one renames the log and removes it on the deleter's thread; the simulation
        # has no threads, so the renamed log goes at once.
        if partition_log is not None:
            shutil.rmtree(partition_log.retire(deleted_name(topic, index)), ignore_errors=True)
        else:
            shutil.rmtree(self.partition_dir(topic, index), ignore_errors=True)

    def flush_after_append(self, hosted: Any, batches: int) -> SimFuture | None:
        # LogManager.flush_after_append, word for word.
        if not hosted.count_unflushed(batches):
            return None
        flushed = self.committer.request(hosted.log)
        return flushed if hosted.fsync_each_append else None


def abandon(plog: PartitionLog) -> None:
    """kill -9: the process's fds are gone; nothing is flushed, no clean-shutdown marker."""
    if plog._closed:
        return
    for segment in plog.segments:
        segment.close()
    for fd in plog._fds_to_close:
        os.close(fd)
    plog._fds_to_close = []
    plog._closed = True


def lose_unsynced(plog: PartitionLog, keep_fraction: Callable[[int], int]) -> int:
    """Power loss, after `abandon`: cut each segment file at the durable point plus a random
    prefix of what follows (`keep_fraction(unsynced_bytes)` bytes). Returns the bytes lost."""
    durable = plog.recovery_point
    lost = 0
    for segment in plog.segments:
        path = segment.log_path
        if not path.exists():
            continue
        size = path.stat().st_size
        cut_at: int | None = None
        if segment.base_offset >= durable:
            cut_at = 0
        else:
            with open(path, "rb") as handle:
                data = handle.read()
            for position, header in iter_batch_headers(memoryview(data)):
                if header.base_offset >= durable:
                    cut_at = position
                    break
        if cut_at is None:
            continue
        keep = cut_at + keep_fraction(size - cut_at)
        if keep < size:
            os.truncate(path, keep)
            lost += size - keep
    return lost
