"""The share coordinator as a state machine (Kafka's ShareCoordinatorShard): the durable state of
every share-partition whose `__share_group_state` partition this broker leads.

No I/O and no clock: calls take `now` (ms). A request is decided against the loaded state and
returns a `Decision`: the answer's error and fields, and the record (if any) the shell must
append to `__share_group_state` with acks=all before answering. Once the append is replicated
the shell feeds the record back through `replay`, the same path a new coordinator loads the log
with, so what the coordinator answers from is exactly what the log holds.

Rules (ShareCoordinatorShard, KIP-932):
- InitializeShareGroupState writes a fresh ShareSnapshot (SnapshotEpoch + 1, no batches, leader
  epoch -1); a StateEpoch below the recorded one is FENCED_STATE_EPOCH.
- WriteShareGroupState appends a ShareUpdate with the request's batches, or a merged ShareSnapshot
  once `updates_per_snapshot` updates followed the last snapshot. An uninitialized key is
  INVALID_REQUEST; a LeaderEpoch (not -1) below the recorded one FENCED_LEADER_EPOCH; a StateEpoch
  (not -1) below the recorded one FENCED_STATE_EPOCH. StartOffset -1 leaves the start offset.
- ReadShareGroupState of an uninitialized key is INVALID_REQUEST; a lower LeaderEpoch is
  FENCED_LEADER_EPOCH; a higher one is recorded (a ShareUpdate with no batches) before the answer,
  which fences the previous leader's writes.
- ReadShareGroupStateSummary checks the leader epoch the same way and records nothing.
- DeleteShareGroupState writes the key's tombstone; deleting an unknown key succeeds.
- Replay: a snapshot replaces the state; an update merges (its batches overwrite the offsets they
  cover, batches below the start offset are dropped); a tombstone forgets the key.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from roost.broker.share.coordinator_records import ShareKey
from roost.broker.share.partition import StateBatch
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.schemas.share_state import SHARE_SNAPSHOT_TYPE, SHARE_UPDATE_TYPE

DEFAULT_UPDATES_PER_SNAPSHOT = 500  # share.coordinator.snapshot.update.records.per.snapshot
UNINITIALIZED = -1


@dataclass(frozen=True, slots=True)
class ShareGroupOffset:
    """A share-partition's durable state (Kafka's ShareGroupOffset)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    batches: tuple[StateBatch, ...]
    create_timestamp: int = 0
    write_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class StateRecord:
    """A record to append: its type (snapshot or update), key and value (None: tombstone)."""

    record_type: int
    key: ShareKey
    value: dict[str, Any] | None


@dataclass(slots=True)
class Decision:
    error: ErrorCode
    message: str | None = None
    record: StateRecord | None = None
    state: ShareGroupOffset | None = None  # what a read answers


def merge_batches(old: Iterable[StateBatch], new: Iterable[StateBatch], start_offset: int) -> tuple[StateBatch, ...]:
    """PersisterStateBatchCombiner: `new` overwrites the offsets it covers in `old`, everything
    below `start_offset` goes, neighbours with one state and count are joined."""
    pieces: list[StateBatch] = []
    incoming = list(new)  # in the writer's order: of two that overlap, the later one wins
    for batch in old:
        parts = [batch]
        for cover in incoming:
            cut: list[StateBatch] = []
            for part in parts:
                if cover.last_offset < part.first_offset or cover.first_offset > part.last_offset:
                    cut.append(part)
                    continue
                if part.first_offset < cover.first_offset:
                    cut.append(replace(part, last_offset=cover.first_offset - 1))
                if part.last_offset > cover.last_offset:
                    cut.append(replace(part, first_offset=cover.last_offset + 1))
            parts = cut
        pieces.extend(parts)
    # overlaps inside `new` itself: the later batch wins
    for i, batch in enumerate(incoming):
        parts = [batch]
        for cover in incoming[i + 1:]:
            cut = []
            for part in parts:
                if cover.last_offset < part.first_offset or cover.first_offset > part.last_offset:
                    cut.append(part)
                    continue
                if part.first_offset < cover.first_offset:
                    cut.append(replace(part, last_offset=cover.first_offset - 1))
                if part.last_offset > cover.last_offset:
                    cut.append(replace(part, first_offset=cover.last_offset + 1))
            parts = cut
        pieces.extend(parts)
    out: list[StateBatch] = []
    for batch in sorted(pieces, key=lambda b: b.first_offset):
        if batch.last_offset < start_offset:
            continue
        if batch.first_offset < start_offset:
            batch = replace(batch, first_offset=start_offset)
        last = out[-1] if out else None
        if (last is not None and last.last_offset + 1 == batch.first_offset
                and last.delivery_state == batch.delivery_state and last.delivery_count == batch.delivery_count):
            out[-1] = replace(last, last_offset=batch.last_offset)
        else:
            assert last is None or last.last_offset < batch.first_offset, "merged batches do not overlap"
            out.append(batch)
    return tuple(out)


def batches_to_wire(batches: Iterable[StateBatch]) -> list[dict[str, Any]]:
    return [{"first_offset": b.first_offset, "last_offset": b.last_offset, "delivery_state": b.delivery_state,
             "delivery_count": b.delivery_count} for b in batches]


def batches_from_wire(entries: Iterable[dict[str, Any]]) -> tuple[StateBatch, ...]:
    return tuple(StateBatch(e["first_offset"], e["last_offset"], e["delivery_state"], e["delivery_count"])
                 for e in entries)


def check_batches(batches: Sequence[StateBatch]) -> str | None:
    """Why a write's batches are malformed (INVALID_REQUEST), or None."""
    for b in batches:
        if b.first_offset < 0 or b.last_offset < b.first_offset:
            return f"bad state batch {b.first_offset}-{b.last_offset}"
        if b.delivery_state not in (0, 2, 4):
            return f"bad delivery state {b.delivery_state}"
        if b.delivery_count < 0:
            return f"bad delivery count {b.delivery_count}"
    return None


@dataclass
class ShareCoordinatorCore:
    updates_per_snapshot: int = DEFAULT_UPDATES_PER_SNAPSHOT
    states: dict[ShareKey, ShareGroupOffset] = field(default_factory=dict)
    updates_since_snapshot: dict[ShareKey, int] = field(default_factory=dict)
    # where each key's last snapshot lies in its log (what pruning must keep), by key
    snapshot_offsets: dict[ShareKey, int] = field(default_factory=dict)

    # replay -----------------------------------------------------------------------------------
    def replay(self, record: StateRecord, offset: int = -1) -> None:
        key, value = record.key, record.value
        if value is None:
            self.forget([key])
            return
        batches = batches_from_wire(value["state_batches"])
        if record.record_type == SHARE_SNAPSHOT_TYPE:
            start = value["start_offset"]
            self.states[key] = ShareGroupOffset(
                value["snapshot_epoch"], value["state_epoch"], value["leader_epoch"], start,
                value.get("delivery_complete_count", -1), merge_batches((), batches, start),
                value["create_timestamp"], value["write_timestamp"])
            self.updates_since_snapshot[key] = 0
            self.snapshot_offsets[key] = offset
            return
        current = self.states.get(key)
        if current is None:
            return  # an update without its snapshot (pruned or foreign): nothing to merge into
        start = current.start_offset if value["start_offset"] == -1 else value["start_offset"]
        leader_epoch = current.leader_epoch if value["leader_epoch"] == -1 else value["leader_epoch"]
        self.states[key] = replace(current, start_offset=start, leader_epoch=leader_epoch,
                                   delivery_complete_count=value.get("delivery_complete_count", -1),
                                   batches=merge_batches(current.batches, batches, start))
        self.updates_since_snapshot[key] = self.updates_since_snapshot.get(key, 0) + 1

    def forget(self, keys: Iterable[ShareKey]) -> None:
        """Unload (the partition moved away) or a tombstone."""
        for key in keys:
            self.states.pop(key, None)
            self.updates_since_snapshot.pop(key, None)
            self.snapshot_offsets.pop(key, None)

    # requests ---------------------------------------------------------------------------------
    def initialize(self, key: ShareKey, state_epoch: int, start_offset: int, now: int) -> Decision:
        current = self.states.get(key)
        if current is not None and state_epoch != -1 and current.state_epoch > state_epoch:
            return Decision(ErrorCode.FENCED_STATE_EPOCH, f"state epoch {state_epoch} below {current.state_epoch}")
        snapshot_epoch = current.snapshot_epoch + 1 if current is not None else 0
        value = {"snapshot_epoch": snapshot_epoch, "state_epoch": state_epoch, "leader_epoch": UNINITIALIZED,
                 "start_offset": start_offset, "delivery_complete_count": -1, "create_timestamp": now,
                 "write_timestamp": now, "state_batches": []}
        return Decision(ErrorCode.NONE, record=StateRecord(SHARE_SNAPSHOT_TYPE, key, value))

    def write(self, key: ShareKey, *, state_epoch: int, leader_epoch: int, start_offset: int,
              delivery_complete_count: int, batches: Sequence[StateBatch], now: int) -> Decision:
        current = self.states.get(key)
        if current is None:
            return Decision(ErrorCode.INVALID_REQUEST, "write to an uninitialized share partition")
        problem = check_batches(batches)
        if problem is not None:
            return Decision(ErrorCode.INVALID_REQUEST, problem)
        if leader_epoch != -1 and current.leader_epoch > leader_epoch:
            return Decision(ErrorCode.FENCED_LEADER_EPOCH,
                            f"leader epoch {leader_epoch} below {current.leader_epoch}")
        if state_epoch != -1 and current.state_epoch > state_epoch:
            return Decision(ErrorCode.FENCED_STATE_EPOCH, f"state epoch {state_epoch} below {current.state_epoch}")
        return Decision(ErrorCode.NONE, record=self._state_record(key, current, leader_epoch, start_offset,
                                                                  delivery_complete_count, batches, now))

    def _state_record(self, key: ShareKey, current: ShareGroupOffset, leader_epoch: int, start_offset: int,
                      delivery_complete_count: int, batches: Sequence[StateBatch], now: int) -> StateRecord:
        new_leader_epoch = current.leader_epoch if leader_epoch == -1 else leader_epoch
        if self.updates_since_snapshot.get(key, 0) >= self.updates_per_snapshot:
            start = current.start_offset if start_offset == -1 else start_offset
            value = {"snapshot_epoch": current.snapshot_epoch + 1, "state_epoch": current.state_epoch,
                     "leader_epoch": new_leader_epoch, "start_offset": start,
                     "delivery_complete_count": delivery_complete_count, "create_timestamp": now,
                     "write_timestamp": now,
                     "state_batches": batches_to_wire(merge_batches(current.batches, batches, start))}
            return StateRecord(SHARE_SNAPSHOT_TYPE, key, value)
        floor = start_offset if start_offset != -1 else current.start_offset
        value = {"snapshot_epoch": current.snapshot_epoch, "leader_epoch": new_leader_epoch,
                 "start_offset": start_offset, "delivery_complete_count": delivery_complete_count,
                 "state_batches": batches_to_wire(merge_batches((), batches, floor))}
        return StateRecord(SHARE_UPDATE_TYPE, key, value)

    def read(self, key: ShareKey, leader_epoch: int, now: int) -> Decision:
        current = self.states.get(key)
        if current is None:
            return Decision(ErrorCode.INVALID_REQUEST, "read of an uninitialized share partition")
        if current.leader_epoch > leader_epoch:
            return Decision(ErrorCode.FENCED_LEADER_EPOCH, f"leader epoch {leader_epoch} below {current.leader_epoch}")
        record = None
        if leader_epoch != -1 and leader_epoch != current.leader_epoch:
            record = self._state_record(key, current, leader_epoch, current.start_offset,
                                        current.delivery_complete_count, (), now)
        return Decision(ErrorCode.NONE, record=record, state=current)

    def summary(self, key: ShareKey, leader_epoch: int) -> Decision:
        current = self.states.get(key)
        if current is None:
            return Decision(ErrorCode.INVALID_REQUEST, "read of an uninitialized share partition")
        if current.leader_epoch > leader_epoch and leader_epoch != -1:
            return Decision(ErrorCode.FENCED_LEADER_EPOCH, f"leader epoch {leader_epoch} below {current.leader_epoch}")
        return Decision(ErrorCode.NONE, state=current)

    def delete(self, key: ShareKey) -> Decision:
        if key not in self.states:
            return Decision(ErrorCode.NONE)
        return Decision(ErrorCode.NONE, record=StateRecord(SHARE_SNAPSHOT_TYPE, key, None))

    # pruning ----------------------------------------------------------------------------------
    def prune_offset(self, keys: Iterable[ShareKey]) -> int | None:
        """The offset below which the log of a coordinator partition holding `keys` is no longer
        needed: the earliest of their last snapshots (None: a key whose snapshot offset is unknown)."""
        offsets = [self.snapshot_offsets.get(k, -1) for k in keys]
        if not offsets or min(offsets) < 0:
            return None
        return min(offsets)
