"""The broker's local state: topics, the partitions it hosts, their logs, and the upkeep loops.

Handlers (roost.broker.handlers) read and change this; it knows nothing about the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from pathlib import Path
from typing import Any

from roost.broker.flusher import GroupCommitter
from roost.broker.partition import Partition
from roost.broker.producer_ids import ProducerIdAllocator
from roost.broker.topics import TopicInfo, TopicStore
from roost.config import BrokerConfig
from roost.log import CleanStats, LogConfig, PartitionLog

log = logging.getLogger("roost.broker")


def now_ms() -> int:
    return int(time.time() * 1000)


def log_config_from_topic(configs: dict[str, Any]) -> LogConfig:
    return LogConfig(
        segment_bytes=configs["segment.bytes"],
        segment_ms=configs["segment.ms"],
        retention_ms=configs["retention.ms"],
        retention_bytes=configs["retention.bytes"],
        index_interval_bytes=configs["index.interval.bytes"],
        max_message_bytes=configs["max.message.bytes"],
        flush_interval_messages=configs["flush.messages"],
        flush_interval_ms=configs["flush.ms"],
        message_timestamp_type=configs["message.timestamp.type"],
    )


class BrokerState:
    def __init__(self, config: BrokerConfig, data_dir: Path) -> None:
        self.config = config
        self.data_dir = data_dir
        self.broker_id: int = config["broker.id"]
        self.topics = TopicStore(data_dir / "meta" / "topics.json")
        self.producer_ids = ProducerIdAllocator(data_dir / "meta" / "producer-id-block")
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.committer = GroupCommitter()
        self._upkeep: list[asyncio.Task[None]] = []
        for info in self.topics:
            self._open_partitions(info, range(info.partitions))

    # topics -----------------------------------------------------------------------------------
    def effective_configs(self, info: TopicInfo) -> dict[str, Any]:
        configs = self.config.topic_defaults()
        configs.update(info.configs)
        return configs

    def _partition_dir(self, topic: str, index: int) -> Path:
        return self.data_dir / "logs" / f"{topic}-{index}"

    def _open_partitions(self, info: TopicInfo, indexes: range) -> None:
        configs = self.effective_configs(info)
        log_config = log_config_from_topic(configs)
        for index in indexes:
            plog = PartitionLog.open(self._partition_dir(info.name, index), log_config, now_ms)
            self.partitions[(info.name, index)] = Partition(info.name, index, plog, configs)

    def create_topic(self, name: str, partitions: int, configs: dict[str, Any]) -> TopicInfo:
        info = self.topics.add(name, partitions, configs)
        self._open_partitions(info, range(partitions))
        log.info("created topic %s with %d partitions %s", name, partitions, configs or "")
        return info

    def add_partitions(self, name: str, total: int) -> None:
        info = self.topics.get(name)
        assert info is not None and total > info.partitions
        old = info.partitions
        self.topics.set_partitions(name, total)
        self._open_partitions(info, range(old, total))
        log.info("topic %s now has %d partitions", name, total)

    def delete_topic(self, name: str) -> None:
        info = self.topics.remove(name)
        for index in range(info.partitions):
            partition = self.partitions.pop((name, index), None)
            if partition is not None:
                partition.wake_waiters()
                partition.log.close()
            shutil.rmtree(self._partition_dir(name, index), ignore_errors=True)
        log.info("deleted topic %s", name)

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def flush_after_append(self, partition: Partition, batches: int) -> asyncio.Future[None] | None:
        """Apply the flush policy to `batches` just appended: start a group-commit fsync when
        `flush.messages` says one is due, and return its future when the acknowledgement must
        wait for it (fsync before ack); None when the ack may go now."""
        if not partition.count_unflushed(batches):
            return None
        flushed = self.committer.request(partition.log)
        return flushed if partition.fsync_each_append else None

    # upkeep -----------------------------------------------------------------------------------
    def start_upkeep(self) -> None:
        self._upkeep.append(asyncio.ensure_future(self._retention_loop()))
        self._upkeep.append(asyncio.ensure_future(self._periodic_flush_loop()))
        self._upkeep.append(asyncio.ensure_future(self._cleaner_loop()))

    async def _cleaner_loop(self) -> None:
        interval = self.config["log.cleaner.backoff.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            self.clean_one()

    def clean_one(self) -> CleanStats | None:
        """Compact the compacted partition that most needs it, if any does (one per call: a
        pass runs on the event loop, so passes are spread out)."""
        now = now_ms()
        for partition in self._compacted_by_dirtiness():
            try:
                stats = partition.log.clean(
                    now, delete_retention_ms=partition.configs["delete.retention.ms"],
                    min_cleanable_ratio=partition.configs["min.cleanable.dirty.ratio"],
                    high_watermark=partition.high_watermark)
            except OSError:
                log.exception("cleaning %s-%d failed", partition.topic, partition.index)
                continue
            if stats.cleaned:
                log.info("cleaned %s-%d: %d -> %d bytes, %d records and %d tombstones removed in %.3f s",
                         partition.topic, partition.index, stats.bytes_before, stats.bytes_after,
                         stats.records_removed, stats.tombstones_removed, stats.duration_s)
                return stats
        return None

    def _compacted_by_dirtiness(self) -> list[Partition]:
        compacted = [p for p in self.partitions.values() if "compact" in p.configs["cleanup.policy"]]
        # Roll due segments first: only closed segments can be cleaned.
        for partition in compacted:
            partition.log.roll_if_due()
        return sorted(compacted, key=lambda p: p.log.size_bytes, reverse=True)

    async def _retention_loop(self) -> None:
        interval = self.config["log.retention.check.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            self.apply_retention()

    def apply_retention(self) -> int:
        deleted = 0
        for partition in list(self.partitions.values()):
            if "delete" not in partition.configs["cleanup.policy"]:
                continue  # compact-only topics keep their history; the cleaner trims it
            try:
                partition.log.roll_if_due()
                deleted += partition.log.apply_retention(high_watermark=partition.high_watermark)
            except OSError:
                log.exception("retention failed for %s-%d", partition.topic, partition.index)
        return deleted

    async def _periodic_flush_loop(self) -> None:
        # flush.ms: every partition whose interval is finite is flushed at least that often.
        while True:
            intervals = [p.configs["flush.ms"] for p in self.partitions.values()]
            finite = [i for i in intervals if i < 2**62]
            await asyncio.sleep(min([*finite, 1000]) / 1000)
            due = [self.committer.request(p.log) for p in list(self.partitions.values())
                   if p.configs["flush.ms"] < 2**62]
            if due:
                await asyncio.gather(*due, return_exceptions=True)

    async def close(self) -> None:
        for task in self._upkeep:
            task.cancel()
        for task in self._upkeep:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for partition in self.partitions.values():
            partition.wake_waiters()
            partition.log.close()
        self.partitions.clear()
