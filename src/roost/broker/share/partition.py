"""One share-partition (a share group's view of one topic partition, KIP-932) as a pure object.

Kafka's SharePartition without its I/O: the record states, the in-flight window, the acquisition
locks, delivery counts and the delivery limit. No I/O and no clock of its own: every call that
needs the time takes `now` (milliseconds); the shell on the partition leader reads the log, talks
to the share coordinator (through the persister) and acts on what the methods return.

Record states (persisted ids): AVAILABLE 0 -> ACQUIRED 1 -> ACKNOWLEDGED 2 | ARCHIVED 4, or back
to AVAILABLE. ACKNOWLEDGED and ARCHIVED are terminal. A record that would return to AVAILABLE
with `delivery_count >= delivery_limit` becomes ARCHIVED instead, so a record is delivered at most
`delivery_limit` times. The delivery count is incremented at acquisition (the first delivery is 1).

The window: `start_offset` (SPSO) is the first offset not known to be terminal; it never goes
back. `end_offset` (SPEO) is the last offset acquired so far (SPSO - 1 when nothing is in
flight). Records in [SPSO, SPEO] are tracked as runs: consecutive offsets in one state with one
delivery count, holder, lock deadline and pending write (Kafka's SharePartition keeps its
cachedState by batch the same way, with per-offset state only where a batch was split), so a
fetch of a 500-record log batch and its acknowledgement cost a few steps, not 500. A run is split
where a change covers part of it and merged again with a neighbour in the same state; the
terminal prefix is dropped as SPSO moves. At most `max_record_locks` offsets are in the window (Kafka's
`group.share.partition.max.record.locks`): at the cap only AVAILABLE records inside the window
can be acquired.

The contract with the shell:

- `fetch_offset()` says where to read the log from (None: nothing to fetch, the window is at
  its cap with nothing available). The shell reads batches from there and passes
  `acquire(member, batches, ...)` their bounds as `LogBatch`es with the high watermark, the last
  stable offset and the aborted transactions of the read; it gets the acquired ranges back
  (`AcquiredRange(first, last, delivery_count)`) to put in the ShareFetch response, plus a
  `StateChange` when the acquisition archived something (aborted transactions in
  read_committed): persist it, nobody waits on it.
- `acknowledge(member, batches, now)` validates and answers per partition: an error code
  (INVALID_REQUEST for a malformed batch or one past the window, INVALID_RECORD_STATE for a
  record not acquired by that member or whose lock has expired), atomically (the first error
  changes nothing), or NONE with a `StateChange` that is *pending*: the records keep their
  state (and are locked against any other ack or expiry) until the shell has made the change
  durable in the share coordinator and calls `complete(change)`; only then may it answer the
  acknowledgement. `complete` may return a start-only `StateChange` to persist (in the
  background) when SPSO passed every start written so far. If the write fails it calls
  `fail(change)`: the records return to ACQUIRED by the same member under their lock (and
  expire at its deadline).
- `release_member(member, now)` (session close, disconnect), `tick(now)` (lock expiry at
  `next_deadline()`) and `advance_log_start(offset)` take effect at once and return a
  `StateChange` to persist (or None).
- Every `StateChange` is to be written in the order it was returned (`change.seq` grows by one
  per change): each carries only the batches it changed, and the coordinator merges writes with
  newer batches overwriting older ones. `complete` is harmless for a change that was not pending.
- `dead_letters` on a change lists the ranges it archives because they were rejected or hit the
  delivery limit, so a shell with a dead-letter topic writes them there before the change.
- Loading: `SharePartition.load(start_offset, state_batches, config)` from the coordinator's
  state. Acquisitions are never persisted: an offset in [SPSO, last persisted offset] with no
  terminal persisted state is AVAILABLE again with its persisted delivery count (0 if none).
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from itertools import pairwise
from operator import attrgetter

from roost.wire.kafka.errors import ErrorCode

# Kafka's defaults (GroupCoordinatorConfig / ShareGroupConfig).
DEFAULT_DELIVERY_LIMIT = 5
DEFAULT_MAX_RECORD_LOCKS = 2000
DEFAULT_LOCK_DURATION_MS = 30_000


class RecordState(IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4

    @property
    def terminal(self) -> bool:
        return self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class AckType(IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # ShareFetch/ShareAcknowledge v2 with IsRenewAck only


class AcquireMode(IntEnum):
    BATCH_OPTIMIZED = 0  # whole log batches, may exceed max_records to finish one (v1)
    RECORD_LIMIT = 1  # at most max_records (v2, KIP-1206)


class Isolation(IntEnum):
    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class DeadLetterReason(str):
    """Why a range was archived for the dead-letter topic."""


REJECTED = DeadLetterReason("rejected")
DELIVERY_LIMIT = DeadLetterReason("delivery_limit")


@dataclass(frozen=True, slots=True)
class ShareConfig:
    delivery_limit: int = DEFAULT_DELIVERY_LIMIT  # group.share.delivery.count.limit
    max_record_locks: int = DEFAULT_MAX_RECORD_LOCKS  # group.share.partition.max.record.locks
    lock_duration_ms: int = DEFAULT_LOCK_DURATION_MS  # share.record.lock.duration.ms
    isolate_poison: bool = True  # a record on its last delivery attempt is delivered alone

    def __post_init__(self) -> None:
        assert self.delivery_limit >= 1 and self.max_record_locks >= 1 and self.lock_duration_ms > 0


@dataclass(frozen=True, slots=True)
class LogBatch:
    """The bounds of one log batch as the fetch read it (no records: the core never parses)."""

    base_offset: int
    last_offset: int
    is_control: bool = False
    producer_id: int = -1
    is_transactional: bool = False


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """Kafka's FetchResponse AbortedTransaction: the producer's aborted transaction starts at
    `first_offset` and ends at that producer's next control batch (its abort marker)."""

    producer_id: int
    first_offset: int


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AckBatch:
    """A ShareFetch/ShareAcknowledge AcknowledgementBatch: one type for the whole range, or one
    per offset."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class StateBatch:
    """What `__share_group_state` holds for a range (DeliveryState is 0, 2 or 4: ACQUIRED is
    never persisted)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class DeadLetter:
    first_offset: int
    last_offset: int
    delivery_count: int
    reason: DeadLetterReason


Target = tuple[int, int, RecordState, int]  # first offset, last offset, state, delivery count


@dataclass(slots=True)
class StateChange:
    """A write for the share coordinator (WriteShareGroupState): the new start offset (-1:
    unchanged), the changed batches, the count of terminal records in the window
    (DeliveryCompleteCount)."""

    seq: int
    start_offset: int
    batches: tuple[StateBatch, ...]
    delivery_complete_count: int
    dead_letters: tuple[DeadLetter, ...] = ()
    pending: bool = False  # an acknowledgement: applied only at complete()
    # what complete() applies: (first, last, target state, delivery count), ascending
    targets: tuple[Target, ...] = field(default=(), repr=False)


@dataclass(slots=True)
class AcquireResult:
    ranges: list[AcquiredRange]
    change: StateChange | None = None

    @property
    def count(self) -> int:
        return sum(r.last_offset - r.first_offset + 1 for r in self.ranges)


@dataclass(slots=True)
class AckResult:
    error: ErrorCode
    change: StateChange | None = None
    message: str | None = None


@dataclass(slots=True)
class _Run:
    """Offsets `first`..`last` (inclusive) of the window, all in one state."""

    first: int
    last: int
    state: RecordState
    delivery_count: int
    member: str | None = None  # the holder, while ACQUIRED
    deadline: int = 0  # lock expiry (ms), while ACQUIRED
    pending: StateChange | None = None  # an acknowledgement being written

    def same_as(self, other: _Run) -> bool:
        """Whether `other` could be one run with this one (settled writes only: a pending run
        keeps the bounds of its acknowledgement)."""
        return (self.state == other.state and self.delivery_count == other.delivery_count
                and self.member == other.member and self.deadline == other.deadline
                and self.pending is None and other.pending is None)


_FIRST = attrgetter("first")
_TERMINAL = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})
Piece = tuple[int, int, int]  # first offset, last offset, delivery count


def validate_ack_batches(batches: Sequence[AckBatch], *, renew_allowed: bool = False) -> str | None:
    """Kafka's KafkaApis.validateAcknowledgementBatches: None when well formed, else why the
    partition answers INVALID_REQUEST."""
    previous_last = -1
    max_type = AckType.RENEW if renew_allowed else AckType.REJECT
    for batch in batches:
        if batch.first_offset > batch.last_offset:
            return f"first offset {batch.first_offset} above last offset {batch.last_offset}"
        if batch.first_offset < previous_last:
            return "acknowledgement batches not in ascending order"
        if not batch.types:
            return "empty acknowledge types"
        if len(batch.types) > 1 and len(batch.types) != batch.last_offset - batch.first_offset + 1:
            return "acknowledge types do not match the batch's offsets"
        if any(t < 0 or t > max_type for t in batch.types):
            return f"invalid acknowledge type in {list(batch.types)}"
        previous_last = batch.last_offset
    return None


class SharePartition:
    def __init__(self, start_offset: int, config: ShareConfig | None = None) -> None:
        assert start_offset >= 0
        self.config = config or ShareConfig()
        self.start_offset = start_offset
        self.end_offset = start_offset - 1
        self._runs: list[_Run] = []  # ascending and contiguous, covering exactly [SPSO, SPEO]
        self._locks: list[tuple[int, int, int]] = []  # heap of (deadline, first, last)
        self._seq = 0
        self._written_start = -1  # the highest StartOffset a change carried (load: the persisted one)
        self._start_unsure = False  # the write that carried _written_start failed: it may not be persisted

    # loading ----------------------------------------------------------------------------------
    @classmethod
    def load(cls, start_offset: int, batches: Iterable[StateBatch],
             config: ShareConfig | None = None) -> SharePartition:
        """From the share coordinator's state (ReadShareGroupState)."""
        part = cls(start_offset, config)
        kept = [b for b in sorted(batches, key=lambda b: b.first_offset) if b.last_offset >= start_offset]
        if kept:
            part.end_offset = max(b.last_offset for b in kept)
            part._runs = [_Run(start_offset, part.end_offset, RecordState.AVAILABLE, 0)]
            for b in kept:  # later batches overwrite earlier ones where they overlap
                state = RecordState(b.delivery_state)
                assert state != RecordState.ACQUIRED, "acquisitions are never persisted"
                first = max(b.first_offset, start_offset)
                i, j = part._slice(first, b.last_offset)
                part._runs[i:j] = [_Run(first, b.last_offset, state, b.delivery_count)]
            for run in part._runs:
                if run.state == RecordState.AVAILABLE and run.delivery_count >= part.config.delivery_limit:
                    run.state = RecordState.ARCHIVED
        part._written_start = start_offset
        part._advance_start()
        part._merge()
        part._check()
        return part

    # runs -------------------------------------------------------------------------------------
    def _index(self, offset: int) -> int:
        """The index of the run holding `offset` (inside the window)."""
        return bisect_right(self._runs, offset, key=_FIRST) - 1

    def _run_at(self, offset: int) -> _Run | None:
        if offset < self.start_offset or offset > self.end_offset:
            return None
        return self._runs[self._index(offset)]

    def _split(self, offset: int) -> int:
        """Make a run begin at `offset` (SPSO <= offset <= SPEO + 1); its index (the number of
        runs for SPEO + 1)."""
        if offset > self.end_offset:
            return len(self._runs)
        i = self._index(offset)
        run = self._runs[i]
        if run.first == offset:
            return i
        tail = _Run(offset, run.last, run.state, run.delivery_count, run.member, run.deadline, run.pending)
        run.last = offset - 1
        self._runs.insert(i + 1, tail)
        return i + 1

    def _slice(self, first: int, last: int) -> tuple[int, int]:
        """Split so that runs [i, j) cover exactly `first`..`last` (inside the window)."""
        assert self.start_offset <= first <= last <= self.end_offset
        i = self._split(first)
        return i, self._split(last + 1)

    def _merge(self) -> None:
        """Join neighbouring runs in the same settled state (undoing splits that no longer matter)."""
        runs = self._runs
        if len(runs) < 2:
            return
        out = [runs[0]]
        for run in runs[1:]:
            last = out[-1]
            if last.same_as(run):
                last.last = run.last
            else:
                out.append(run)
        if len(out) != len(runs):
            self._runs = out

    # queries ----------------------------------------------------------------------------------
    @property
    def window_size(self) -> int:
        return self.end_offset - self.start_offset + 1

    def state_of(self, offset: int) -> RecordState:
        """The record's state now (below SPSO: terminal, shown as ACKNOWLEDGED; past SPEO:
        AVAILABLE, not fetched yet)."""
        if offset < self.start_offset:
            return RecordState.ACKNOWLEDGED
        run = self._run_at(offset)
        return RecordState.AVAILABLE if run is None else run.state

    def delivery_count(self, offset: int) -> int:
        run = self._run_at(offset)
        return 0 if run is None else run.delivery_count

    def holder(self, offset: int) -> str | None:
        run = self._run_at(offset)
        return run.member if run is not None and run.state == RecordState.ACQUIRED else None

    def acquired_count(self) -> int:
        return sum(r.last - r.first + 1 for r in self._runs if r.state == RecordState.ACQUIRED)

    def delivery_complete_count(self) -> int:
        return sum(r.last - r.first + 1 for r in self._runs if r.state in _TERMINAL)

    def delivery_counts(self) -> dict[int, int]:
        """The in-flight records not yet complete (available again or acquired), by how many
        times each has been delivered: the retries a group is working through. Records of the
        window never delivered are not counted (the window's size says how many there are)."""
        out: dict[int, int] = {}
        for run in self._runs:
            if run.state not in _TERMINAL and run.delivery_count > 0:
                out[run.delivery_count] = out.get(run.delivery_count, 0) + run.last - run.first + 1
        return out

    def counts(self) -> dict[RecordState, int]:
        out = dict.fromkeys(RecordState, 0)
        for run in self._runs:
            out[run.state] += run.last - run.first + 1
        return out

    def run_count(self) -> int:
        """How many runs hold the window (Kafka's InFlightBatchCount)."""
        return len(self._runs)

    def _available(self, run: _Run) -> bool:
        return run.state == RecordState.AVAILABLE and run.pending is None

    def fetch_offset(self) -> int | None:
        """Where the next acquisition reads the log from: the first AVAILABLE offset in the
        window, else SPEO + 1; None when the window is at its cap with nothing available."""
        for run in self._runs:
            if self._available(run):
                return run.first
        if self.window_size >= self.config.max_record_locks:
            return None
        return self.end_offset + 1

    def next_deadline(self) -> int | None:
        """The earliest lock deadline (ms) to call tick() at (may be one already released)."""
        return self._locks[0][0] if self._locks else None

    # acquisition ------------------------------------------------------------------------------
    def acquire(self, member: str, batches: Iterable[LogBatch], *, now: int, max_records: int,
                high_watermark: int, last_stable_offset: int | None = None,
                isolation: Isolation = Isolation.READ_UNCOMMITTED,
                aborted: Sequence[AbortedTxn] = (), lock_ms: int | None = None,
                mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED) -> AcquireResult:
        """Acquire for `member` what `batches` (read from fetch_offset(), in offset order; taken
        one at a time, and no further than needed, so a lazy iterator is read only so far) hold:
        AVAILABLE records inside the window and new records past SPEO, up to the high watermark
        (read_uncommitted) or the last stable offset (read_committed, where aborted
        transactions and their markers are archived without delivery)."""
        assert member, "a share member has an id"
        assert max_records > 0
        lock = self.config.lock_duration_ms if lock_ms is None else lock_ms
        limit = high_watermark
        if isolation == Isolation.READ_COMMITTED:
            assert last_stable_offset is not None, "read_committed needs the LSO"
            limit = min(limit, last_stable_offset)
        aborted_starts: dict[int, list[int]] = {}
        for txn in aborted:
            aborted_starts.setdefault(txn.producer_id, []).append(txn.first_offset)
        for starts in aborted_starts.values():
            starts.sort()
        aborting: set[int] = set()
        taking = _Taking(member, now + lock, max_records, mode)
        archived: list[Piece] = []
        for batch in batches:
            if taking.stop or batch.base_offset >= limit:
                break
            if batch.last_offset >= limit:
                break  # a batch is acquired whole or not at all; the rest is past the limit
            if batch.last_offset > self.end_offset and self.window_size >= self.config.max_record_locks:
                break  # at the cap: only records already in the window (may overshoot by a batch)
            if batch.base_offset > self.end_offset + 1:
                # offsets the log no longer holds (compaction): nothing to deliver there
                hole = self.end_offset + 1
                self._runs.append(_Run(hole, batch.base_offset - 1, RecordState.ARCHIVED, 0))
                archived.append((hole, batch.base_offset - 1, 0))
                self.end_offset = batch.base_offset - 1
            skip = False
            if isolation == Isolation.READ_COMMITTED and batch.producer_id >= 0:
                txn_starts = aborted_starts.get(batch.producer_id)
                while txn_starts and txn_starts[0] <= batch.base_offset:
                    txn_starts.pop(0)
                    aborting.add(batch.producer_id)
                if batch.producer_id in aborting:
                    if batch.is_control:
                        aborting.discard(batch.producer_id)  # the abort marker ends it
                        skip = True
                    elif batch.is_transactional:
                        skip = True
            self._acquire_batch(max(batch.base_offset, self.start_offset), batch.last_offset, skip, taking,
                                archived)
            if taking.count >= max_records:
                break
        ranges = [AcquiredRange(first, last, count) for first, last, count in taking.pieces]
        for r in ranges:
            heapq.heappush(self._locks, (now + lock, r.first_offset, r.last_offset))
        change = None
        if archived:
            self._advance_start()
            change = self._change([(first, last, RecordState.ARCHIVED, count) for first, last, count in archived])
        self._merge()
        self._check()
        return AcquireResult(ranges, change)

    def _acquire_batch(self, first: int, last: int, skip: bool, taking: _Taking, archived: list[Piece]) -> None:
        """Offsets `first`..`last` of one log batch: the AVAILABLE runs inside the window and the
        new records past SPEO, taken for `taking.member` (or archived when `skip`), run by run."""
        offset = first
        while offset <= last and not taking.stop:
            if offset > self.end_offset:  # new records: one run past SPEO
                upto = last if skip else min(last, offset + taking.room() - 1)
                self._runs.append(_Run(offset, upto, RecordState.AVAILABLE, 0))
                self.end_offset = upto
            run = self._runs[self._index(offset)]
            upto = min(run.last, last)
            if not self._available(run):
                offset = upto + 1
                continue
            if skip:
                i, _ = self._slice(offset, upto)
                self._runs[i].state = RecordState.ARCHIVED
                archived.append((offset, upto, run.delivery_count))
                offset = upto + 1
                continue
            if self.config.isolate_poison and run.delivery_count >= self.config.delivery_limit - 1 >= 1:
                if taking.count:
                    taking.stop = True  # a record on its last attempt goes alone, in a later fetch
                    return
                upto = offset
                taking.stop = True
            else:
                upto = min(upto, offset + taking.room() - 1)
            i, _ = self._slice(offset, upto)
            self._take(self._runs[i], taking.member, taking.deadline)
            taking.add(offset, upto, self._runs[i].delivery_count)
            offset = upto + 1

    def _take(self, run: _Run, member: str, deadline: int) -> None:
        assert run.state == RecordState.AVAILABLE and run.pending is None
        assert run.delivery_count < self.config.delivery_limit, "delivered at most limit times"
        run.state = RecordState.ACQUIRED
        run.delivery_count += 1
        run.member = member
        run.deadline = deadline

    # acknowledgement --------------------------------------------------------------------------
    def acknowledge(self, member: str, batches: Sequence[AckBatch], *, now: int,
                    renew_allowed: bool = False, lock_ms: int | None = None) -> AckResult:
        """Validate and stage `member`'s acknowledgements for this partition (atomic: the first
        error changes nothing). NONE comes with a pending StateChange (None when nothing
        changes, e.g. every offset below SPSO): complete() it once durable, then answer."""
        problem = validate_ack_batches(batches, renew_allowed=renew_allowed)
        if problem is not None:
            return AckResult(ErrorCode.INVALID_REQUEST, message=problem)
        targets: list[Target] = []
        renewals: list[tuple[int, int]] = []
        dead: list[tuple[int, int, int, DeadLetterReason]] = []
        targets_last = -1  # targets ascend: an offset at or below this one is acknowledged twice
        for batch in batches:
            if batch.last_offset > self.end_offset:
                return AckResult(ErrorCode.INVALID_REQUEST,
                                 message=f"offset {batch.last_offset} past the in-flight window")
            # offsets below SPSO are already terminal and dropped: ignored, as Kafka does
            for first, last, kind in _kinds(batch, max(batch.first_offset, self.start_offset)):
                offset = first
                while offset <= last:
                    run = self._runs[self._index(offset)]
                    upto = min(run.last, last)
                    if (run.state != RecordState.ACQUIRED or run.member != member or run.pending is not None
                            or run.deadline <= now or offset <= targets_last):
                        return AckResult(ErrorCode.INVALID_RECORD_STATE,
                                         message=f"offset {offset} is not acquired by this member")
                    count = run.delivery_count
                    if kind == AckType.RENEW:
                        renewals.append((offset, upto))
                        offset = upto + 1
                        continue
                    if kind == AckType.ACCEPT:
                        state = RecordState.ACKNOWLEDGED
                    elif kind in (AckType.GAP, AckType.REJECT):
                        state = RecordState.ARCHIVED
                        if kind == AckType.REJECT:
                            dead.append((offset, upto, count, REJECTED))
                    elif count >= self.config.delivery_limit:  # RELEASE of a last delivery
                        state = RecordState.ARCHIVED
                        dead.append((offset, upto, count, DELIVERY_LIMIT))
                    else:  # RELEASE
                        state = RecordState.AVAILABLE
                    targets.append((offset, upto, state, count))
                    targets_last = upto
                    offset = upto + 1
        if renewals:
            lock = self.config.lock_duration_ms if lock_ms is None else lock_ms
            for first, last in renewals:
                i, j = self._slice(first, last)
                for run in self._runs[i:j]:
                    run.deadline = now + lock
                heapq.heappush(self._locks, (now + lock, first, last))
            self._merge()
        if not targets:
            self._check()
            return AckResult(ErrorCode.NONE)
        self._seq += 1
        change = StateChange(self._seq, self._start_to_write(self._projected_start(targets)), _state_batches(targets),
                             self._projected_complete_count(targets), _dead_letters(dead),
                             pending=True, targets=tuple(targets))
        for first, last, _state, _count in targets:
            self._mark_pending(first, last, change)
        self._check()
        return AckResult(ErrorCode.NONE, change)

    def _mark_pending(self, first: int, last: int, change: StateChange) -> None:
        i, j = self._slice(first, last)
        for run in self._runs[i:j]:
            run.pending = change

    def complete(self, change: StateChange) -> StateChange | None:
        """`change` is durable in the share coordinator: a pending acknowledgement takes effect.

        Returns a start-only change to persist when SPSO now passes every start a write carried:
        a pending write's start leaves out the other pending acknowledgements (any may fail), so
        when acknowledgements overlap, the last to complete moves SPSO past what any write said,
        and without this write the coordinator's StartOffset (its summary, the group's lag) would
        stay behind until the next acknowledgement (found by the share fault run, issue 31)."""
        if not change.pending:
            return None
        change.pending = False
        for first, last, state, count in change.targets:
            for run in self._pending_runs(first, last, change):
                run.pending = None
                assert run.state == RecordState.ACQUIRED
                assert count == run.delivery_count
                run.member = None
                run.deadline = 0
                run.state = state
        self._advance_start()
        self._merge()
        self._check()
        return self.start_change()

    def start_change(self) -> StateChange | None:
        """A start-only change to persist when SPSO passed every start a write carried (or
        reached one whose write failed), else None: after `complete`, and after `load` (a load
        moves SPSO past the terminal batches above the persisted start)."""
        if self.start_offset < self._written_start or (
                self.start_offset == self._written_start and not self._start_unsure):
            return None
        self._seq += 1
        return StateChange(self._seq, self._start_to_write(self.start_offset), (), self.delivery_complete_count())

    def fail(self, change: StateChange) -> None:
        """`change` could not be made durable: its records stay ACQUIRED by their member under
        their lock, as before the acknowledgement (a background change that failed may be
        passed here too: only its start offset matters then).

        If it carried the highest start offset handed out, that start may not be persisted (or
        may: a timed-out write can still have been applied), so the next write whose start
        reaches it carries it again rather than -1; never a lower one, which could undo a start
        that was applied (and with it the batches below it)."""
        if change.start_offset >= 0 and change.start_offset == self._written_start:
            self._start_unsure = True
        if not change.pending:
            return
        change.pending = False
        for first, last, _state, _count in change.targets:
            for run in self._pending_runs(first, last, change):
                run.pending = None
                # its lock entry may have been passed over by a tick() meanwhile
                heapq.heappush(self._locks, (run.deadline, run.first, run.last))
        self._merge()
        self._check()

    def _pending_runs(self, first: int, last: int, change: StateChange) -> list[_Run]:
        """The runs of `first`..`last` still waiting on `change` (SPSO may have passed some: a
        log start that moved)."""
        first, last = max(first, self.start_offset), min(last, self.end_offset)
        if first > last:
            return []
        i, j = self._slice(first, last)
        return [run for run in self._runs[i:j] if run.pending is change]

    # releases ---------------------------------------------------------------------------------
    def release_member(self, member: str, now: int) -> StateChange | None:
        """Every record `member` holds goes back to AVAILABLE (ARCHIVED at the delivery limit):
        its share session closed or its connection dropped. Records with an acknowledgement being
        written stay with it."""
        return self._return([(r.first, r.last) for r in self._runs
                             if r.state == RecordState.ACQUIRED and r.member == member and r.pending is None])

    def tick(self, now: int) -> StateChange | None:
        """Expire every lock whose deadline is at or before `now`."""
        due = False
        while self._locks and self._locks[0][0] <= now:
            heapq.heappop(self._locks)
            due = True
        if not due:
            return None
        # Every ACQUIRED run's deadline has a heap entry (acquire, renew and fail push one), so
        # the runs whose deadline passed are exactly those the popped entries stand for.
        return self._return([(r.first, r.last) for r in self._runs
                             if r.state == RecordState.ACQUIRED and r.pending is None and r.deadline <= now])

    def _return(self, spans: list[tuple[int, int]]) -> StateChange | None:
        if not spans:
            return None
        dead: list[tuple[int, int, int, DeadLetterReason]] = []
        changed: list[Target] = []
        for first, last in spans:
            i, j = self._slice(first, last)
            for run in self._runs[i:j]:
                assert run.state == RecordState.ACQUIRED
                run.member = None
                run.deadline = 0
                if run.delivery_count >= self.config.delivery_limit:
                    run.state = RecordState.ARCHIVED
                    dead.append((run.first, run.last, run.delivery_count, DELIVERY_LIMIT))
                else:
                    run.state = RecordState.AVAILABLE
                changed.append((run.first, run.last, run.state, run.delivery_count))
        self._advance_start()
        change = self._change(changed, dead=dead)
        self._merge()
        self._check()
        return change

    def advance_log_start(self, log_start_offset: int) -> StateChange | None:
        """The log's start moved (retention, DeleteRecords): SPSO follows; records below it are
        gone (one acquired there may still be acknowledged, and is ignored)."""
        if log_start_offset <= self.start_offset:
            return None
        del self._runs[:self._split(min(log_start_offset, self.end_offset + 1))]
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset - 1)
        self._advance_start()
        self._seq += 1
        change = StateChange(self._seq, self._start_to_write(self.start_offset), (), self.delivery_complete_count())
        self._check()
        return change

    # bookkeeping ------------------------------------------------------------------------------
    def _advance_start(self) -> None:
        runs = self._runs
        done = 0
        while done < len(runs) and runs[done].state in _TERMINAL and runs[done].pending is None:
            done += 1
        if done:
            del runs[:done]
            self.start_offset = runs[0].first if runs else self.end_offset + 1

    def _overlay(self, targets: Sequence[Target], offset: int) -> Iterable[tuple[int, int, RecordState]]:
        """(first, last, state) spans from `offset` to SPEO, in order: the states `targets`
        would give where they lie, the states in effect elsewhere."""
        t, n = 0, len(targets)
        while offset <= self.end_offset:
            while t < n and targets[t][1] < offset:
                t += 1
            if t < n and targets[t][0] <= offset:
                last = targets[t][1]
                yield offset, last, targets[t][2]
            else:
                run = self._runs[self._index(offset)]
                last = run.last if t >= n else min(run.last, targets[t][0] - 1)
                yield offset, last, run.state
            offset = last + 1

    def _projected_start(self, targets: Sequence[Target]) -> int:
        """SPSO once these `targets` take effect. Other pending acknowledgements do not count:
        one of them may still fail, and a start persisted past its records would lose them."""
        for first, _last, state in self._overlay(targets, self.start_offset):
            if state not in _TERMINAL:
                return first
        return self.end_offset + 1

    def _start_to_write(self, projected: int) -> int:
        """A write's StartOffset: `projected` when it passes every start handed out before, else
        -1 (unchanged), so the persisted start never goes back whatever order earlier pending
        writes settle in (their batches say which records are done; the start is a floor)."""
        if projected > self._written_start or (projected == self._written_start and self._start_unsure):
            self._written_start = projected
            self._start_unsure = False
            return projected
        return -1

    def _projected_complete_count(self, targets: Sequence[Target]) -> int:
        return sum(last - first + 1 for first, last, state in self._overlay(targets, self._projected_start(targets))
                   if state in _TERMINAL)

    def _change(self, changed: Sequence[Target], *,
                dead: Sequence[tuple[int, int, int, DeadLetterReason]] = ()) -> StateChange:
        self._seq += 1
        return StateChange(self._seq, self._start_to_write(self._projected_start(())), _state_batches(changed),
                           self.delivery_complete_count(), _dead_letters(dead))

    def _check(self) -> None:
        assert self.end_offset >= self.start_offset - 1
        runs = self._runs
        if not runs:
            assert self.window_size == 0, "every offset of the window is in a run"
            return
        assert runs[0].first == self.start_offset and runs[-1].last == self.end_offset, "runs cover the window"
        first = runs[0]
        assert first.state not in _TERMINAL or first.pending is not None, "SPSO is not terminal"
        for before, after in pairwise(runs):
            assert before.last + 1 == after.first and before.first <= before.last, "runs are contiguous"


@dataclass(slots=True)
class _Taking:
    """What one acquisition has taken so far, and whether it must stop."""

    member: str
    deadline: int
    max_records: int
    mode: AcquireMode
    pieces: list[Piece] = field(default_factory=list)  # AcquiredRecords ranges, merged
    count: int = 0
    stop: bool = False

    def room(self) -> int:
        """How many more records the next run may give (record-limit mode stops at max_records;
        batch-optimized mode finishes the log batch)."""
        return self.max_records - self.count if self.mode == AcquireMode.RECORD_LIMIT else 1 << 62

    def add(self, first: int, last: int, delivery_count: int) -> None:
        pieces = self.pieces
        if pieces and pieces[-1][1] == first - 1 and pieces[-1][2] == delivery_count:
            pieces[-1] = (pieces[-1][0], last, delivery_count)
        else:
            pieces.append((first, last, delivery_count))
        self.count += last - first + 1
        if self.mode == AcquireMode.RECORD_LIMIT and self.count >= self.max_records:
            self.stop = True


def _kinds(batch: AckBatch, first: int) -> Iterable[tuple[int, int, int]]:
    """(first, last, acknowledge type) spans of `batch` from offset `first` on."""
    if first > batch.last_offset:
        return
    if len(batch.types) == 1:
        yield first, batch.last_offset, batch.types[0]
        return
    span_first, kind = first, batch.types[first - batch.first_offset]
    for offset in range(first + 1, batch.last_offset + 1):
        t = batch.types[offset - batch.first_offset]
        if t != kind:
            yield span_first, offset - 1, kind
            span_first, kind = offset, t
    yield span_first, batch.last_offset, kind


def _state_batches(targets: Iterable[Target]) -> tuple[StateBatch, ...]:
    out: list[StateBatch] = []
    for first, last, state, count in sorted(targets):
        assert state != RecordState.ACQUIRED
        prev = out[-1] if out else None
        if (prev is not None and prev.last_offset == first - 1 and prev.delivery_state == state
                and prev.delivery_count == count):
            out[-1] = StateBatch(prev.first_offset, last, int(state), count)
        else:
            out.append(StateBatch(first, last, int(state), count))
    return tuple(out)


def _dead_letters(dead: Iterable[tuple[int, int, int, DeadLetterReason]]) -> tuple[DeadLetter, ...]:
    out: list[DeadLetter] = []
    for first, last, count, reason in sorted(dead):
        prev = out[-1] if out else None
        if prev is not None and prev.last_offset == first - 1 and prev.reason == reason \
                and prev.delivery_count == count:
            out[-1] = DeadLetter(prev.first_offset, last, count, reason)
        else:
            out.append(DeadLetter(first, last, count, reason))
    return tuple(out)


def merge_changes(changes: Sequence[StateChange]) -> StateChange:
    """One write standing for `changes` (in the order they were made): their batches, a later
    one's over an earlier one's where they meet (as the coordinator would merge them written
    one after another), the highest start offset (starts only grow; -1 when none moves it), the
    last one's DeliveryCompleteCount, every dead letter. The changes themselves are untouched:
    each is still complete()d or fail()ed on its own once the merged write settles."""
    assert changes, "at least one change"
    if len(changes) == 1:
        return changes[0]
    pieces: list[StateBatch] = []
    for change in changes:
        for cover in change.batches:
            kept: list[StateBatch] = []
            for piece in pieces:
                if cover.last_offset < piece.first_offset or cover.first_offset > piece.last_offset:
                    kept.append(piece)
                    continue
                if piece.first_offset < cover.first_offset:
                    kept.append(StateBatch(piece.first_offset, cover.first_offset - 1, piece.delivery_state,
                                           piece.delivery_count))
                if piece.last_offset > cover.last_offset:
                    kept.append(StateBatch(cover.last_offset + 1, piece.last_offset, piece.delivery_state,
                                           piece.delivery_count))
            kept.append(cover)
            pieces = kept
    joined: list[StateBatch] = []
    for piece in sorted(pieces, key=lambda b: b.first_offset):
        prev = joined[-1] if joined else None
        if (prev is not None and prev.last_offset == piece.first_offset - 1
                and prev.delivery_state == piece.delivery_state and prev.delivery_count == piece.delivery_count):
            joined[-1] = StateBatch(prev.first_offset, piece.last_offset, prev.delivery_state, prev.delivery_count)
        else:
            joined.append(piece)
    return StateChange(changes[-1].seq, max(change.start_offset for change in changes), tuple(joined),
                       changes[-1].delivery_complete_count,
                       tuple(letter for change in changes for letter in change.dead_letters))
