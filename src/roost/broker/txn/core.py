"""The transaction coordinator as a state machine (Kafka's TransactionCoordinator and
TransactionMetadata, the classic "TV1" protocol): InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, the markers' completion and the timeout abort.

No I/O and no clock: every call takes `now` (milliseconds). A call that changes a transaction
returns a `Transition`: the record the shell must append to `__transaction_state` before the change
counts. The transaction holds it as its pending transition (any other request meanwhile is
CONCURRENT_TRANSACTIONS); the shell then calls `complete` (the append succeeded) or `fail`.

States and their allowed predecessors (TransactionMetadata.scala):
Empty <- Empty, CompleteCommit, CompleteAbort; Ongoing <- Ongoing, Empty, CompleteCommit,
CompleteAbort; PrepareCommit <- Ongoing; PrepareAbort <- Ongoing, PrepareEpochFence;
CompleteCommit <- PrepareCommit; CompleteAbort <- PrepareAbort; Dead <- Empty, CompleteCommit,
CompleteAbort. PrepareEpochFence is in memory only: the epoch bump that precedes the abort of an
ongoing transaction whose producer is fenced (a new InitProducerId, or the timeout).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import IntEnum

from roost.broker.txn.records import TxnLogValue
from roost.wire.kafka.errors import ErrorCode

log = logging.getLogger("roost.broker.txn")

NO_PRODUCER_ID = -1
NO_EPOCH = -1
# Kafka's TransactionMetadata.isEpochExhausted: the last epoch a producer id may be bumped to
# leaves room for one more bump of the fence (Short.MaxValue - 1).
EXHAUSTED_EPOCH = 32766

TopicPartition = tuple[str, int]


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def label(self) -> str:
        """Kafka's name of the state (DescribeTransactions, ListTransactions)."""
        return "".join(word.capitalize() for word in self.name.split("_"))


S = TxnState
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
COMPLETE = frozenset({S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
PREPARE = frozenset({S.PREPARE_COMMIT, S.PREPARE_ABORT})


@dataclass(frozen=True)
class Transition:
    """A change to append as `value` under `transactional_id`, then apply."""

    transactional_id: str
    value: TxnLogValue
    fence: bool = False  # the abort that follows an epoch fence: the answer is CONCURRENT_TRANSACTIONS

    @property
    def state(self) -> TxnState:
        return TxnState(self.value.state)


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    last_producer_epoch: int = NO_EPOCH
    previous_producer_id: int = NO_PRODUCER_ID  # the id before an exhausted epoch rotated it
    pending: Transition | None = None

    def value(self) -> TxnLogValue:
        return TxnLogValue(self.producer_id, self.producer_epoch, self.timeout_ms, int(self.state),
                           frozenset(self.partitions), self.last_update_ms, self.start_ms)

    def shown_state(self) -> TxnState:
        """The state as DescribeTransactions shows it: a pending fence shows PrepareEpochFence."""
        if self.pending is not None and self.pending.fence:
            return S.PREPARE_EPOCH_FENCE
        return self.state


class TxnCoordinatorCore:
    def __init__(self, max_timeout_ms: int) -> None:
        self.max_timeout_ms = max_timeout_ms
        self.txns: dict[str, TxnMetadata] = {}

    # transitions ------------------------------------------------------------------------------
    def _prepare(self, md: TxnMetadata, value: TxnLogValue, *, fence: bool = False) -> Transition:
        assert md.pending is None, f"{md.transactional_id}: a second pending transition"
        target = TxnState(value.state)
        previous = S.PREPARE_EPOCH_FENCE if fence else md.state
        assert previous in VALID_PREVIOUS[target], f"{md.transactional_id}: {previous.label} -> {target.label}"
        transition = Transition(md.transactional_id, value, fence)
        md.pending = transition
        return transition

    def complete(self, transition: Transition) -> None:
        """The transition's record is in the log (replicated): it takes effect."""
        md = self.txns.get(transition.transactional_id)
        if md is None or md.pending is not transition:
            return  # unloaded meanwhile (resignation): the next coordinator reads it from the log
        value = transition.value
        if value.producer_id != md.producer_id:
            md.previous_producer_id = md.producer_id
            md.last_producer_epoch = NO_EPOCH
        elif value.producer_epoch != md.producer_epoch:
            md.last_producer_epoch = md.producer_epoch
        if transition.state == S.DEAD:
            del self.txns[transition.transactional_id]  # its tombstone is in the log
            return
        md.producer_id, md.producer_epoch = value.producer_id, value.producer_epoch
        md.timeout_ms, md.state = value.timeout_ms, TxnState(value.state)
        md.partitions = set(value.partitions)
        md.start_ms, md.last_update_ms = value.start_ms, value.last_update_ms
        md.pending = None

    def fail(self, transition: Transition) -> None:
        """The append failed: nothing changes (the client retries)."""
        md = self.txns.get(transition.transactional_id)
        if md is not None and md.pending is transition:
            md.pending = None

    # InitProducerId ---------------------------------------------------------------------------
    def needs_producer_id(self, transactional_id: str) -> bool:
        """Whether InitProducerId must come with a fresh producer id: a new transactional id,
        or one whose epoch is exhausted."""
        md = self.txns.get(transactional_id)
        return md is None or md.producer_epoch >= EXHAUSTED_EPOCH

    def init_producer_id(self, now: int, transactional_id: str, timeout_ms: int, *, fresh_producer_id: int | None,
                         expected_id: int = NO_PRODUCER_ID, expected_epoch: int = NO_EPOCH
                         ) -> ErrorCode | Transition:
        """A bumped epoch (Empty, written), or, for an ongoing transaction, the abort that fences
        its producer (its transition has `fence`: the client hears CONCURRENT_TRANSACTIONS and
        retries), or an error."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT
        md = self.txns.get(transactional_id)
        if md is None:
            assert fresh_producer_id is not None
            md = TxnMetadata(transactional_id, fresh_producer_id, NO_EPOCH, timeout_ms, S.EMPTY, last_update_ms=now)
            self.txns[transactional_id] = md
        if md.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if expected_id != NO_PRODUCER_ID and not (
                md.producer_epoch == NO_EPOCH or expected_id == md.producer_id
                or (expected_id == md.previous_producer_id and expected_epoch >= EXHAUSTED_EPOCH)):
            return ErrorCode.PRODUCER_FENCED
        if md.state in PREPARE:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if md.state == S.ONGOING:
            return self._fence_and_abort(now, md)
        if md.state not in (S.EMPTY, *COMPLETE):
            return ErrorCode.INVALID_TXN_STATE
        if expected_id != NO_PRODUCER_ID and expected_id == md.producer_id:
            # KIP-360: the producer names its current epoch; a retry whose answer was lost names
            # the one before the bump and gets the same answer again.
            if expected_epoch == md.last_producer_epoch and md.producer_epoch != NO_EPOCH \
                    and expected_epoch != md.producer_epoch:
                return self._prepare(md, replace(md.value(), state=int(S.EMPTY), partitions=frozenset(),
                                                 timeout_ms=timeout_ms, last_update_ms=now, start_ms=-1))
            if expected_epoch != md.producer_epoch:
                return ErrorCode.PRODUCER_FENCED
        if md.producer_epoch >= EXHAUSTED_EPOCH:
            assert fresh_producer_id is not None
            pid, epoch = fresh_producer_id, 0
        else:
            pid, epoch = md.producer_id, md.producer_epoch + 1
        return self._prepare(md, TxnLogValue(pid, epoch, timeout_ms, int(S.EMPTY), frozenset(), now, -1))

    def _fence_and_abort(self, now: int, md: TxnMetadata) -> Transition:
        """Bump the epoch of an ongoing transaction (PrepareEpochFence) and abort it with the new
        epoch: its markers carry that epoch, so the old producer's writes are refused on every
        partition of the transaction, and its coordinator requests are PRODUCER_FENCED."""
        assert md.state == S.ONGOING and md.producer_epoch < EXHAUSTED_EPOCH + 1
        value = replace(md.value(), producer_epoch=md.producer_epoch + 1, state=int(S.PREPARE_ABORT),
                        last_update_ms=now)
        return self._prepare(md, value, fence=True)

    # AddPartitionsToTxn / AddOffsetsToTxn -----------------------------------------------------
    def _check_producer(self, md: TxnMetadata | None, producer_id: int, producer_epoch: int) -> ErrorCode:
        if md is None or md.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if md.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if md.pending is not None or md.state in PREPARE:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.NONE

    def add_partitions(self, now: int, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition]) -> ErrorCode | Transition | None:
        """None: every partition is in the ongoing transaction already (nothing to write)."""
        md = self.txns.get(transactional_id)
        code = self._check_producer(md, producer_id, producer_epoch)
        if code != ErrorCode.NONE:
            return code
        assert md is not None
        wanted = set(partitions)
        if md.state == S.ONGOING and wanted <= md.partitions:
            return None
        if md.state not in VALID_PREVIOUS[S.ONGOING]:
            return ErrorCode.INVALID_TXN_STATE
        start = md.start_ms if md.state == S.ONGOING else now
        return self._prepare(md, replace(md.value(), state=int(S.ONGOING), partitions=frozenset(md.partitions | wanted),
                                         start_ms=start, last_update_ms=now))

    # EndTxn ----------------------------------------------------------------------------------
    def end_txn(self, now: int, transactional_id: str, producer_id: int, producer_epoch: int,
                commit: bool) -> ErrorCode | Transition | None:
        """PrepareCommit / PrepareAbort to write (then the markers), None for a retry of a
        transaction already completed that way, or an error."""
        md = self.txns.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if md.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if md.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if md.state == S.ONGOING:
            target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            return self._prepare(md, replace(md.value(), state=int(target), last_update_ms=now))
        if md.state == (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT):
            return None
        if md.state == (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.INVALID_TXN_STATE

    def complete_markers(self, now: int, transactional_id: str, prepared: Transition) -> Transition | None:
        """Every partition has its marker: CompleteCommit / CompleteAbort to write. None when the
        transaction moved on meanwhile (unloaded, or another coordinator epoch took it)."""
        md = self.txns.get(transactional_id)
        if md is None or md.pending is not None or md.state not in PREPARE \
                or (md.producer_id, md.producer_epoch) != (prepared.value.producer_id, prepared.value.producer_epoch):
            return None
        target = S.COMPLETE_COMMIT if md.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        return self._prepare(md, replace(md.value(), state=int(target), partitions=frozenset(), last_update_ms=now))

    # timeouts --------------------------------------------------------------------------------
    def timed_out(self, now: int) -> list[str]:
        """Ongoing transactions past their timeout with nothing pending (Kafka's
        abortTimedOutTransactions)."""
        return sorted(t for t, md in self.txns.items()
                      if md.state == S.ONGOING and md.pending is None and md.start_ms + md.timeout_ms < now)

    def abort_timed_out(self, now: int, transactional_id: str) -> Transition | None:
        md = self.txns.get(transactional_id)
        if md is None or md.state != S.ONGOING or md.pending is not None:
            return None
        log.info("transaction %s (producer %d epoch %d) timed out after %d ms: aborting it", transactional_id,
                 md.producer_id, md.producer_epoch, md.timeout_ms)
        return self._fence_and_abort(now, md)

    # expiry ----------------------------------------------------------------------------------
    def expired(self, now: int, expiration_ms: int) -> list[str]:
        """Ids idle (Empty, CompleteCommit, CompleteAbort, nothing pending) for longer than
        `expiration_ms` (Kafka's transactional.id.expiration.ms)."""
        return sorted(t for t, md in self.txns.items()
                      if md.state in (S.EMPTY, *COMPLETE) and md.pending is None
                      and md.last_update_ms + expiration_ms < now)

    def expire(self, now: int, transactional_id: str) -> Transition | None:
        """Dead: the shell appends the id's tombstone, then the id is forgotten (a later
        InitProducerId starts it afresh with a new producer id)."""
        md = self.txns.get(transactional_id)
        if md is None or md.pending is not None or md.state not in VALID_PREVIOUS[S.DEAD]:
            return None
        return self._prepare(md, replace(md.value(), state=int(S.DEAD), partitions=frozenset(), last_update_ms=now))

    # loading ---------------------------------------------------------------------------------
    def load(self, transactional_id: str, value: TxnLogValue | None) -> None:
        """A record read back from `__transaction_state` (the last one per id wins)."""
        if value is None:
            self.txns.pop(transactional_id, None)
            return
        self.txns[transactional_id] = TxnMetadata(
            transactional_id, value.producer_id, value.producer_epoch, value.timeout_ms, TxnState(value.state),
            set(value.partitions), value.start_ms, value.last_update_ms)

    def unload(self, transactional_ids: Iterable[str]) -> None:
        for transactional_id in transactional_ids:
            self.txns.pop(transactional_id, None)
