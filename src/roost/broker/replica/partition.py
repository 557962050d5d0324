"""A partition hosted by this broker: its log, its replication state, and who waits on it.

Three kinds of waiters, woken by different events:
- follower fetches wait for appends (they read up to the log end);
- consumer fetches wait for the high watermark to move (they read below it);
- delayed operations (acks=all produces) are re-checked when the high watermark moves or the
  partition's leadership changes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from roost.broker.replica.state import PartitionState
from roost.log import PartitionLog, ReadResult
from roost.log.producer_state import CheckResult, ProducerEntry
from roost.storage.log_manager import reconfigured
from roost.wire.kafka.records import BatchHeader

Watcher = Callable[[], None]
Waiter = Callable[[], None]


class Partition:
    """One topic-partition's replica on this broker."""

    def __init__(self, topic: str, index: int, log: PartitionLog, topic_configs: dict[str, Any],
                 state: PartitionState, topic_id: uuid.UUID | None = None) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.configs = topic_configs
        self.state = state
        self.topic_id = topic_id
        # One-shot callbacks of parked fetches (each is called once, then forgotten), and the
        # delayed operations' watchers. Dicts, not sets: they are called in the order they came,
        # whatever their hashes (a bound method hashes by address), so a simulated run is its
        # seed's alone.
        self._consumer_waiters: dict[Waiter, None] = {}
        self._follower_waiters: dict[Waiter, None] = {}
        self._watchers: dict[Watcher, None] = {}
        self._unflushed_batches = 0
        self.closed = False
        # What this replica did as leader, all time: the balancer's load sample reads these.
        self.bytes_in = 0  # record batch bytes produced to it
        self.messages_in = 0
        self.bytes_out = 0  # record batch bytes consumers fetched from it
        state.check(log.log_end_offset)

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index})"

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def mirror_link(self) -> str:
        """The cluster link whose mirror this partition is ("" for a writable topic)."""
        return self.configs.get("roost.mirror.link") or ""

    @property
    def write_epoch(self) -> int:
        """The epoch a leader stamps on what it writes: its own, or the log's latest when that is
        later (a promoted mirror writes above every epoch it mirrored)."""
        return max(self.state.leader_epoch, self.log.leader_epochs.latest_epoch)

    @property
    def is_leader(self) -> bool:
        return self.state.is_leader and not self.closed

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
        every: int = self.configs["flush.messages"]
        return every <= 1

    # questions (what handlers and the door ask instead of reading the log or the state) --------
    @property
    def size_bytes(self) -> int:
        return self.log.size_bytes

    @property
    def log_directory(self) -> Path:
        return self.log.directory

    @property
    def leader_epoch_start_offset(self) -> int:
        """Where this leader's epoch began: below it, its high watermark is not yet known."""
        return self.state.leader_epoch_start_offset

    def has_replica(self, broker_id: int) -> bool:
        return broker_id in self.state.replicas

    def replicas(self) -> tuple[int, ...]:
        return tuple(self.state.replicas)

    def isr(self) -> frozenset[int]:
        return frozenset(self.state.isr)

    @property
    def under_replicated(self) -> bool:
        """Fewer in-sync replicas than replicas."""
        return len(self.state.isr) < len(self.state.replicas)

    def isr_below_min(self) -> bool:
        """Fewer in-sync replicas than `min.insync.replicas`: an acks=all append is refused."""
        minimum: int = self.configs["min.insync.replicas"]
        return len(self.state.isr) < minimum

    def committed_below_min_isr(self) -> bool:
        """The ISR a commit counted (the maximal ISR, with members being added) is smaller than
        `min.insync.replicas`: an acks=all append the high watermark covers is
        NOT_ENOUGH_REPLICAS_AFTER_APPEND."""
        minimum: int = self.configs["min.insync.replicas"]
        return len(self.state.maximal_isr) < minimum

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (the largest epoch <= `leader_epoch`, where it ends)."""
        return self.log.leader_epochs.end_offset_for(leader_epoch, self.log.log_end_offset)

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(the largest timestamp, its offset), or None for an empty log."""
        return self.log.max_timestamp_offset()

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(the first offset whose timestamp is >= `timestamp`, that timestamp), or None."""
        return self.log.offset_for_timestamp(timestamp)

    @property
    def last_stable_offset(self) -> int:
        """The LSO: where a read_committed consumer stops (the high watermark without open
        transactions)."""
        return self.log.last_stable_offset(self.state.high_watermark)

    def aborted_transactions(self, fetch_offset: int, upper: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions with data in [fetch_offset, upper)."""
        return [(t.producer_id, t.first_offset) for t in self.log.aborted_transactions(fetch_offset, upper)]

    def producers(self) -> list[ProducerEntry]:
        """The idempotent producers this log knows (DescribeProducers)."""
        return list(self.log.producer_state.producers.values())

    def oldest_open_transaction_timestamp(self) -> int | None:
        """The last write time of the producer whose open transaction here is the quietest (Kafka's
        oldestTxnLastTimestamp, for PartitionsWithLateTransactionsCount), None without one."""
        state = self.log.producer_state
        stamps = [entry.last_timestamp for pid in state.ongoing if (entry := state.entry(pid)) is not None]
        return min(stamps) if stamps else None

    def producer_verdict(self, first: BatchHeader) -> CheckResult:
        """The producer state's verdict on a produced batch: OK, Duplicate, or an error code."""
        return self.log.producer_state.check(first)

    def read_to_log_end(self, offset: int, max_bytes: int) -> ReadResult:
        """Whole batches from `offset` up to the log end, uncommitted ones too (what a new group
        coordinator replays). Raises OffsetOutOfRange."""
        return self.log.read(offset, max_bytes)

    def reconfigure(self, topic_configs: dict[str, Any]) -> None:
        """Take the topic's changed configs (AlterConfigs): produce checks (max.message.bytes,
        min.insync.replicas), the flush policy and the upkeep loops read `configs` each time, and
        the log reads its LogConfig on each append, roll and retention pass."""
        self.configs = topic_configs
        self.log.config = reconfigured(self.log.config, topic_configs)

    # events -----------------------------------------------------------------------------------
    def appended(self) -> None:
        """Records were appended on the leader: followers may fetch them, and the HW moves if
        the ISR allows it (with no other ISR member, at once)."""
        _wake(self._follower_waiters)
        if self.state.advance_high_watermark(self.log.log_end_offset):
            self.high_watermark_moved()

    def follower_fetched(self, replica: int, fetch_offset: int, now_ms: int) -> None:
        """On the leader: a follower holds everything below `fetch_offset`."""
        self.state.record_follower_fetch(replica, fetch_offset, self.log.log_end_offset, now_ms)
        if self.state.advance_high_watermark(self.log.log_end_offset):
            self.high_watermark_moved()

    def high_watermark_moved(self) -> None:
        _wake(self._consumer_waiters)
        self._notify_watchers()

    def state_changed(self) -> None:
        """Leadership or the ISR changed: every waiter and delayed operation looks again."""
        _wake(self._consumer_waiters)
        _wake(self._follower_waiters)
        self._notify_watchers()

    def _notify_watchers(self) -> None:
        if self._watchers:
            for watcher in list(self._watchers):
                watcher()

    # flush policy -----------------------------------------------------------------------------
    def count_unflushed(self, batches: int) -> bool:
        """Account appended batches; True when `flush.messages` says a flush is due now."""
        self._unflushed_batches += batches
        if self._unflushed_batches >= self.configs["flush.messages"]:
            self._unflushed_batches = 0
            return True
        return False

    # waiting ----------------------------------------------------------------------------------
    def add_waiter(self, waiter: Waiter, follower: bool = False) -> None:
        """Call `waiter()` once when a fetch of this kind may find more (an append wakes
        followers, a high watermark move consumers); a state change wakes both."""
        (self._follower_waiters if follower else self._consumer_waiters)[waiter] = None

    def remove_waiter(self, waiter: Waiter) -> None:
        self._consumer_waiters.pop(waiter, None)
        self._follower_waiters.pop(waiter, None)

    def watch(self, watcher: Watcher) -> None:
        self._watchers[watcher] = None

    def unwatch(self, watcher: Watcher) -> None:
        self._watchers.pop(watcher, None)

    def close(self) -> None:
        """Stop serving (deleted or no longer hosted); waiters see it is gone."""
        self.closed = True
        self.state_changed()


def _wake(waiters: dict[Waiter, None]) -> None:
    if not waiters:
        return
    woken = list(waiters)
    waiters.clear()
    for waiter in woken:
        waiter()
