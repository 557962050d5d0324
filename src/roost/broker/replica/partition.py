"""A partition hosted by this broker: its log, its replication state and the fetches waiting on it."""

from __future__ import annotations

import asyncio
from typing import Any

from roost.broker.replica.state import PartitionState
from roost.log import PartitionLog


class Partition:
    """One topic-partition's replica on this broker."""

    def __init__(self, topic: str, index: int, log: PartitionLog, topic_configs: dict[str, Any],
                 state: PartitionState) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.configs = topic_configs
        self.state = state
        self._waiters: set[asyncio.Future[None]] = set()
        self._unflushed_batches = 0
        state.check(log.log_end_offset)

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def high_watermark(self) -> int:
        return self.state.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def fsync_each_append(self) -> bool:
        return self.configs["flush.messages"] <= 1

    def appended(self) -> None:
        """Records were appended on the leader: move the HW if the ISR allows it, and wake the
        fetches waiting for data."""
        self.state.advance_high_watermark(self.log.log_end_offset)
        self.wake_waiters()

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
