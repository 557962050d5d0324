"""A partition hosted by this broker: its log, its high watermark and the fetches waiting on it."""

from __future__ import annotations

import asyncio
from typing import Any

from roost.log import PartitionLog


class Partition:
    """One topic-partition's log on this broker (the single-broker case: it is the only replica)."""

    def __init__(self, topic: str, index: int, log: PartitionLog, topic_configs: dict[str, Any]) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.configs = topic_configs
        self.leader_epoch = 0
        self._waiters: set[asyncio.Future[None]] = set()
        self._unflushed_batches = 0

    @property
    def high_watermark(self) -> int:
        # With one replica every appended batch is fully replicated as soon as it is written.
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def fsync_each_append(self) -> bool:
        return self.configs["flush.messages"] <= 1

    def count_unflushed(self, batches: int) -> bool:
        """Account appended batches; True when `flush.messages` says a flush is due now."""
        self._unflushed_batches += batches
        if self._unflushed_batches >= self.configs["flush.messages"]:
            self._unflushed_batches = 0
            return True
        return False

    def add_waiter(self, waiter: asyncio.Future[None]) -> None:
        self._waiters.add(waiter)

    def remove_waiter(self, waiter: asyncio.Future[None]) -> None:
        self._waiters.discard(waiter)

    def wake_waiters(self) -> None:
        """New data is readable: every fetch waiting on this partition re-checks at once."""
        if not self._waiters:
            return
        waiters, self._waiters = self._waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
