"""The group coordinator's asyncio shell: its timers, its offset store, and offset expiry."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from roost.broker.group.coordinator import GroupCoordinator, GroupLimits, GroupState
from roost.broker.group.offsets import CommittedOffset, OffsetStore
from roost.broker.topics import OFFSETS_TOPIC

if TYPE_CHECKING:
    from roost.broker.state import BrokerState

log = logging.getLogger("roost.broker.group")

TICK_SECONDS = 0.1


def now_ms() -> int:
    return int(time.time() * 1000)


class GroupService:
    def __init__(self, state: BrokerState) -> None:
        config = state.config
        self.state = state
        self.coordinator = GroupCoordinator(GroupLimits(
            min_session_timeout_ms=config["group.min.session.timeout.ms"],
            max_session_timeout_ms=config["group.max.session.timeout.ms"],
            initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
            max_size=config["group.max.size"],
        ))
        if OFFSETS_TOPIC not in state.topics:
            state.create_topic(OFFSETS_TOPIC, config["offsets.topic.num.partitions"], {
                "cleanup.policy": "compact",
                "segment.bytes": config["offsets.topic.segment.bytes"],
                "retention.ms": -1,
            })
        info = state.topics.get(OFFSETS_TOPIC)
        assert info is not None
        self.offsets = OffsetStore([state.partitions[(OFFSETS_TOPIC, i)] for i in range(info.partitions)])
        self._retention_ms = config["offsets.retention.minutes"] * 60_000
        self._expiry_check_seconds = config["offsets.retention.check.interval.ms"] / 1000
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks.append(asyncio.ensure_future(self._tick_loop()))
        self._tasks.append(asyncio.ensure_future(self._expiry_loop()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            self.coordinator.tick(now_ms())

    async def _expiry_loop(self) -> None:
        while True:
            await asyncio.sleep(self._expiry_check_seconds)
            self.expire_offsets(now_ms())

    def expire_offsets(self, now: int) -> int:
        """Offsets of groups with no members expire `offsets.retention.minutes` after their commit."""
        removed = 0
        for group_id in self.offsets.groups():
            group = self.coordinator.groups.get(group_id)
            if group is not None and group.state != GroupState.EMPTY:
                continue
            stale = self.offsets.expired(group_id, now - self._retention_ms)
            if stale:
                self.offsets.commit(group_id, dict.fromkeys(stale), now)
                removed += len(stale)
                log.info("expired %d committed offsets of group %s", len(stale), group_id)
        return removed

    def forget_topic(self, topic: str) -> None:
        """A deleted topic's committed offsets go too (tombstones)."""
        now = now_ms()
        for group_id, keys in self.offsets.keys_for_topic(topic).items():
            self.offsets.commit(group_id, dict.fromkeys(keys), now)

    def commit(self, group_id: str, entries: dict[tuple[str, int], CommittedOffset]) -> asyncio.Future[None] | None:
        """Store commits; returns a future to wait for when the offsets topic fsyncs before acks."""
        partition = self.offsets.commit(group_id, dict(entries), now_ms())
        return self.state.flush_after_append(partition, 1)
