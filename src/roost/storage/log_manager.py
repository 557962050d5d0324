"""The log manager: the partition logs on this broker's disk and the work they need over time.

It opens, creates and deletes partition logs (one directory per partition under a log directory's
`logs/`; `roost.storage.directories` says which directory), applies
the flush policy after appends (group commit), and runs the upkeep loops: retention, periodic
flush (`flush.ms`) and compaction. It knows logs and topic configs, not replication: the replica
manager tells it which logs are hosted and their high watermarks (`HostedLog`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import logging
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from roost.clock import Clock, now_ms
from roost.log import CleanStats, CompactionLags, LogConfig, PartitionLog
from roost.storage.directories import LogDir, LogDirs, configured_log_dirs, deleted_name, partition_name
from roost.storage.flusher import GroupCommitter
from roost.storage.log_deleter import LogDeleter
from roost.storage.settings import Settings

log = logging.getLogger("roost.broker")



def log_config_from_topic(configs: dict[str, Any]) -> LogConfig:
    return LogConfig(**_topic_log_fields(configs))


def reconfigured(old: LogConfig, configs: dict[str, Any]) -> LogConfig:
    """`old` with the fields that topic configs decide taken from `configs` (a live change: the
    log's other settings stay)."""
    return dataclasses.replace(old, **_topic_log_fields(configs))


def _topic_log_fields(configs: dict[str, Any]) -> dict[str, Any]:
    # A compacted log's active segment rolls by max.compaction.lag.ms at the latest: only closed
    # segments are cleaned, so a record could otherwise outlive the lag (Kafka does the same).
    compacted = "compact" in configs["cleanup.policy"]
    return dict(
        segment_bytes=configs["segment.bytes"],
        segment_ms=min(configs["segment.ms"], configs["max.compaction.lag.ms"]) if compacted else configs["segment.ms"],
        segment_jitter_ms=configs["segment.jitter.ms"],
        retention_ms=configs["retention.ms"],
        retention_bytes=configs["retention.bytes"],
        index_interval_bytes=configs["index.interval.bytes"],
        segment_index_bytes=configs["segment.index.bytes"],
        max_message_bytes=configs["max.message.bytes"],
        flush_interval_messages=configs["flush.messages"],
        flush_interval_ms=configs["flush.ms"],
        message_timestamp_type=configs["message.timestamp.type"],
    )


class HostedLog(Protocol):
    """A partition log as the upkeep sees it: its log, topic configs and high watermark."""

    topic: str
    index: int
    log: PartitionLog
    configs: dict[str, Any]

    @property
    def high_watermark(self) -> int: ...

    @property
    def fsync_each_append(self) -> bool: ...

    def count_unflushed(self, batches: int) -> bool: ...


class LogDirOffline(OSError):
    """The partition's log directory has failed (Kafka's KafkaStorageException)."""


class LogUnavailable(OSError):
    """This one log could not be opened for a reason of the process, not of its directory
    (answered as KAFKA_STORAGE_ERROR for the partition; the directory stays online)."""


# Errors that say the process hit a limit, not that the disk failed.
PROCESS_LIMITS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})


class LogManager:
    def __init__(self, config: Settings, data_dir: Path, clock_ms: Clock = now_ms) -> None:
        self.config = config
        self.clock_ms = clock_ms  # the one clock (roost.clock): the logs' and the cleaner's
        self.dirs = LogDirs(configured_log_dirs(config, data_dir), int(config["broker.id"]))
        self.committer = GroupCommitter()
        self.deleter = LogDeleter()
        self._hosted: Callable[[], Iterable[HostedLog]] = tuple
        self._upkeep: list[asyncio.Task[None]] = []

    def host(self, hosted: Callable[[], Iterable[HostedLog]]) -> None:
        """Tell the upkeep loops where to find the hosted logs (the replica manager)."""
        self._hosted = hosted

    # opening and deleting ---------------------------------------------------------------------
    def open_log(self, topic: str, index: int, configs: dict[str, Any], may_create: bool = True) -> PartitionLog:
        """Open the partition's log, creating it (in the directory with the fewest partitions)
        or recovering it after a crash; LogDirOffline when its directory has failed (an I/O
        error here takes the directory offline). Kafka's rule for a log not found while a
        directory is offline: it may be on that directory, so it is created only when
        `may_create` says it is new (LeaderAndIsr's IsNew)."""
        offline = [str(d.path) for d in self.dirs.dirs if not d.online]
        if offline and not may_create and self.dirs.dir_of(topic, index) is None:
            raise LogDirOffline(f"{partition_name(topic, index)} is not in the online log directories "
                                f"and may be in offline {', '.join(offline)}")
        log_dir = self.dirs.place(topic, index)
        if not log_dir.online:
            raise LogDirOffline(f"{partition_name(topic, index)} is in offline log directory {log_dir.path}")
        try:
            return PartitionLog.open(log_dir.logs / partition_name(topic, index), log_config_from_topic(configs),
                                     self.clock_ms)
        except OSError as error:
            if error.errno in PROCESS_LIMITS:
                # The process ran out of file descriptors (or memory), not the disk: this log
                # cannot open now, the directory and its other logs are fine. (Kafka takes the
                # whole directory offline here, a known way to lose a broker's partitions.)
                log.error("cannot open %s: %s; raise the open-files limit (ulimit -n)",
                          partition_name(topic, index), error)
                raise LogUnavailable(f"{partition_name(topic, index)}: {error}") from error
            self.dirs.fail(log_dir, error)
            raise LogDirOffline(f"{partition_name(topic, index)}: {error}") from error

    def delete_log(self, topic: str, index: int, partition_log: PartitionLog | None) -> None:
        """Let go of a partition's log (if open) and rename its directory out of the live names
        at once; its files are removed by the deleter's thread (`roost.storage.log_deleter`)."""
        log_dir = self.dirs.dir_of(topic, index)
        self.dirs.forget(topic, index)
        name = deleted_name(topic, index)
        if partition_log is not None:
            directory = partition_log.directory
        elif log_dir is not None:
            directory = log_dir.logs / partition_name(topic, index)
            if not directory.is_dir():
                return
        else:
            return
        try:
            retired = partition_log.retire(name) if partition_log is not None else \
                directory.rename(directory.with_name(name))
        except OSError as error:
            # A failed directory: remove what can be removed, as before the deleter.
            log.warning("cannot rename the deleted log %s for removal (%s); removing it in place", directory, error)
            shutil.rmtree(directory, ignore_errors=True)
            return
        self.deleter.remove(retired)

    def dir_of_log(self, partition_log: PartitionLog) -> LogDir:
        found = self.dirs.dir_holding(partition_log.directory)
        assert found is not None, f"{partition_log.directory} is in no log directory"
        return found

    def checkpoint_dirs(self) -> list[Path]:
        """The `logs/` of every online log directory: where the HW checkpoints are."""
        return [log_dir.logs for log_dir in self.dirs.dirs if log_dir.online]

    def logs_dir_of(self, partition_log: PartitionLog) -> Path:
        return partition_log.directory.parent

    def storage_failed(self, partition_log: PartitionLog, error: OSError) -> None:
        """An I/O error on `partition_log`: its directory goes offline."""
        self.dirs.fail(self.dir_of_log(partition_log), error)

    # durability -------------------------------------------------------------------------------
    def flush_after_append(self, hosted: HostedLog, batches: int) -> asyncio.Future[None] | None:
        """Apply the flush policy to `batches` just appended: start a group-commit fsync when
        `flush.messages` says one is due, and return its future when the acknowledgement must
        wait for it (fsync before ack); None when the ack may go now."""
        if not hosted.count_unflushed(batches):
            return None
        flushed = self._flush(hosted.log)
        return flushed if hosted.fsync_each_append else None

    def _flush(self, partition_log: PartitionLog) -> asyncio.Future[None]:
        """A group-commit fsync of `partition_log`; one that fails takes its directory offline."""
        flushed = self.committer.request(partition_log)

        def failed(done: asyncio.Future[None]) -> None:
            error = None if done.cancelled() else done.exception()
            if isinstance(error, OSError):
                self.storage_failed(partition_log, error)
        flushed.add_done_callback(failed)
        return flushed

    # upkeep -----------------------------------------------------------------------------------
    def start_upkeep(self) -> None:
        self._upkeep.append(asyncio.ensure_future(self._retention_loop()))
        self._upkeep.append(asyncio.ensure_future(self._periodic_flush_loop()))
        self._upkeep.append(asyncio.ensure_future(self._cleaner_loop()))

    async def stop_upkeep(self) -> None:
        for task in self._upkeep:
            task.cancel()
        for task in self._upkeep:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._upkeep.clear()

    def close(self) -> None:
        """Stop the group committer's thread (after the logs are closed: closing flushes them) and
        the deleter's (after the deletions queued so far, bounded)."""
        self.committer.close()
        self.deleter.close()

    async def _cleaner_loop(self) -> None:
        interval = self.config["log.cleaner.backoff.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            self.clean_one()

    def clean_one(self) -> CleanStats | None:
        """Compact the compacted partition that most needs it, if any does (one per call: a
        pass runs on the event loop, so passes are spread out)."""
        now = self.clock_ms()
        for hosted in self._compacted_by_dirtiness():
            try:
                stats = hosted.log.clean(
                    now, delete_retention_ms=hosted.configs["delete.retention.ms"],
                    min_cleanable_ratio=hosted.configs["min.cleanable.dirty.ratio"],
                    high_watermark=hosted.high_watermark,
                    lags=CompactionLags(hosted.configs["min.compaction.lag.ms"], hosted.configs["max.compaction.lag.ms"]))
            except OSError as error:
                log.exception("cleaning %s-%d failed", hosted.topic, hosted.index)
                self.storage_failed(hosted.log, error)
                continue
            if stats.cleaned:
                log.info("cleaned %s-%d: %d -> %d bytes, %d records and %d tombstones removed in %.3f s",
                         hosted.topic, hosted.index, stats.bytes_before, stats.bytes_after,
                         stats.records_removed, stats.tombstones_removed, stats.duration_s)
                return stats
        return None

    def _compacted_by_dirtiness(self) -> list[HostedLog]:
        compacted = [h for h in self._hosted() if "compact" in h.configs["cleanup.policy"]]
        # Roll due segments first: only closed segments can be cleaned.
        for hosted in compacted:
            hosted.log.roll_if_due()
        return sorted(compacted, key=lambda h: h.log.size_bytes, reverse=True)

    async def _retention_loop(self) -> None:
        interval = self.config["log.retention.check.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            self.apply_retention()

    def apply_retention(self) -> int:
        deleted = 0
        for hosted in list(self._hosted()):
            if "delete" not in hosted.configs["cleanup.policy"]:
                continue  # compact-only topics keep their history; the cleaner trims it
            try:
                hosted.log.roll_if_due()
                deleted += hosted.log.apply_retention(high_watermark=hosted.high_watermark)
            except OSError as error:
                log.exception("retention failed for %s-%d", hosted.topic, hosted.index)
                self.storage_failed(hosted.log, error)
        return deleted

    async def _periodic_flush_loop(self) -> None:
        # flush.ms: every partition whose interval is finite is flushed at least that often.
        while True:
            hosted = list(self._hosted())
            finite = [i for i in (h.configs["flush.ms"] for h in hosted) if i < 2**62]
            await asyncio.sleep(min([*finite, 1000]) / 1000)
            due = [self._flush(h.log) for h in list(self._hosted()) if h.configs["flush.ms"] < 2**62]
            if due:
                await asyncio.gather(*due, return_exceptions=True)
