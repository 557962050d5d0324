"""The transaction coordinator's pure core and its `__transaction_state` records: Kafka's state
machine (TransactionCoordinator / TransactionMetadata), epoch bumps and fencing, EndTxn retries,
the timeout abort, and the record layouts (TransactionLogKey/Value v0)."""

from __future__ import annotations

import pytest

from roost.broker.txn.core import EXHAUSTED_EPOCH, Transition, TxnCoordinatorCore, TxnState
from roost.broker.txn.records import (
    TxnLogValue,
    TxnRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    txn_partition_for,
)
from roost.wire.kafka.errors import ErrorCode

T = "app-1"


def written(core: TxnCoordinatorCore, decided: object) -> Transition:
    assert isinstance(decided, Transition), decided
    core.complete(decided)
    return decided


def ready(core: TxnCoordinatorCore, now: int = 0, pid: int = 7) -> tuple[int, int]:
    t = written(core, core.init_producer_id(now, T, 60_000, fresh_producer_id=pid))
    return t.value.producer_id, t.value.producer_epoch


def test_new_id_gets_epoch_zero_and_each_init_bumps_it() -> None:
    core = TxnCoordinatorCore(900_000)
    assert core.needs_producer_id(T)
    assert ready(core) == (7, 0)
    assert not core.needs_producer_id(T)
    t = written(core, core.init_producer_id(1, T, 60_000, fresh_producer_id=None))
    assert (t.value.producer_id, t.value.producer_epoch, t.state) == (7, 1, TxnState.EMPTY)


def test_bad_init_requests() -> None:
    core = TxnCoordinatorCore(10_000)
    assert core.init_producer_id(0, "", 1000, fresh_producer_id=1) == ErrorCode.INVALID_REQUEST
    assert core.init_producer_id(0, T, 10_001, fresh_producer_id=1) == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert core.init_producer_id(0, T, 0, fresh_producer_id=1) == ErrorCode.INVALID_TRANSACTION_TIMEOUT


def test_a_transaction_goes_ongoing_prepare_complete() -> None:
    core = TxnCoordinatorCore(900_000)
    pid, epoch = ready(core)
    added = written(core, core.add_partitions(5, T, pid, epoch, [("a", 0), ("b", 1)]))
    assert added.state == TxnState.ONGOING and added.value.start_ms == 5
    assert core.add_partitions(6, T, pid, epoch, [("a", 0)]) is None  # already in: nothing to write
    more = written(core, core.add_partitions(7, T, pid, epoch, [("c", 0)]))
    assert more.value.partitions == {("a", 0), ("b", 1), ("c", 0)} and more.value.start_ms == 5
    prepared = core.end_txn(8, T, pid, epoch, commit=True)
    assert isinstance(prepared, Transition) and prepared.state == TxnState.PREPARE_COMMIT
    # While the prepare is pending, and after it until the markers are done: come back later.
    assert core.end_txn(8, T, pid, epoch, commit=True) == ErrorCode.CONCURRENT_TRANSACTIONS
    core.complete(prepared)
    assert core.end_txn(9, T, pid, epoch, commit=True) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert core.end_txn(9, T, pid, epoch, commit=False) == ErrorCode.INVALID_TXN_STATE
    assert core.add_partitions(9, T, pid, epoch, [("a", 0)]) == ErrorCode.CONCURRENT_TRANSACTIONS
    done = written(core, core.complete_markers(10, T, prepared))
    assert done.state == TxnState.COMPLETE_COMMIT and not done.value.partitions
    assert core.end_txn(11, T, pid, epoch, commit=True) is None  # a retry: NONE
    assert core.end_txn(11, T, pid, epoch, commit=False) == ErrorCode.INVALID_TXN_STATE
    # The next transaction starts from CompleteCommit with a new start time.
    assert written(core, core.add_partitions(12, T, pid, epoch, [("a", 0)])).value.start_ms == 12


def test_wrong_producer_or_epoch() -> None:
    core = TxnCoordinatorCore(900_000)
    pid, epoch = ready(core)
    assert core.add_partitions(0, T, pid + 1, epoch, [("a", 0)]) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert core.add_partitions(0, T, pid, epoch + 1, [("a", 0)]) == ErrorCode.PRODUCER_FENCED
    assert core.add_partitions(0, "other", pid, epoch, [("a", 0)]) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert core.end_txn(0, T, pid, epoch, commit=True) == ErrorCode.INVALID_TXN_STATE  # Empty


def test_a_new_instance_fences_the_ongoing_transaction_by_aborting_it_with_a_bumped_epoch() -> None:
    core = TxnCoordinatorCore(900_000)
    pid, epoch = ready(core)
    written(core, core.add_partitions(1, T, pid, epoch, [("a", 0)]))
    fence = core.init_producer_id(2, T, 60_000, fresh_producer_id=None)
    assert isinstance(fence, Transition) and fence.fence
    assert fence.state == TxnState.PREPARE_ABORT and fence.value.producer_epoch == epoch + 1
    assert core.txns[T].shown_state() == TxnState.PREPARE_EPOCH_FENCE
    core.complete(fence)
    # The old instance is fenced at once; the new one waits for the abort to complete.
    assert core.add_partitions(3, T, pid, epoch, [("b", 0)]) == ErrorCode.PRODUCER_FENCED
    assert core.end_txn(3, T, pid, epoch, commit=True) == ErrorCode.PRODUCER_FENCED
    assert core.init_producer_id(3, T, 60_000, fresh_producer_id=None) == ErrorCode.CONCURRENT_TRANSACTIONS
    written(core, core.complete_markers(4, T, fence))
    again = written(core, core.init_producer_id(5, T, 60_000, fresh_producer_id=None))
    assert again.value.producer_epoch == epoch + 2


def test_a_failed_write_changes_nothing() -> None:
    core = TxnCoordinatorCore(900_000)
    pid, epoch = ready(core)
    decided = core.add_partitions(1, T, pid, epoch, [("a", 0)])
    assert isinstance(decided, Transition)
    core.fail(decided)
    assert core.txns[T].state == TxnState.EMPTY and core.txns[T].pending is None


def test_kip_360_bump_with_the_current_epoch_and_fencing_of_an_unknown_one() -> None:
    core = TxnCoordinatorCore(900_000)
    pid, epoch = ready(core)
    bumped = written(core, core.init_producer_id(1, T, 60_000, fresh_producer_id=None, expected_id=pid,
                                                 expected_epoch=epoch))
    assert bumped.value.producer_epoch == epoch + 1
    assert core.init_producer_id(2, T, 60_000, fresh_producer_id=None, expected_id=pid + 5,
                                 expected_epoch=0) == ErrorCode.PRODUCER_FENCED
    assert core.init_producer_id(2, T, 60_000, fresh_producer_id=None, expected_id=pid,
                                 expected_epoch=epoch + 7) == ErrorCode.PRODUCER_FENCED


def test_an_exhausted_epoch_rotates_the_producer_id() -> None:
    core = TxnCoordinatorCore(900_000)
    ready(core)
    core.txns[T].producer_epoch = EXHAUSTED_EPOCH
    assert core.needs_producer_id(T)
    rotated = written(core, core.init_producer_id(1, T, 60_000, fresh_producer_id=99))
    assert (rotated.value.producer_id, rotated.value.producer_epoch) == (99, 0)
    assert core.txns[T].previous_producer_id == 7


def test_timed_out_transactions_are_fenced_and_aborted() -> None:
    core = TxnCoordinatorCore(900_000)
    pid, epoch = ready(core)
    written(core, core.add_partitions(1000, T, pid, epoch, [("a", 0)]))
    assert core.timed_out(1000 + 60_000) == []
    assert core.timed_out(1001 + 60_000) == [T]
    abort = core.abort_timed_out(1001 + 60_000, T)
    assert abort is not None and abort.state == TxnState.PREPARE_ABORT and abort.value.producer_epoch == epoch + 1
    assert core.timed_out(10**9) == []  # pending: not twice


def test_loading_takes_the_last_record_and_unloading_forgets() -> None:
    core = TxnCoordinatorCore(900_000)
    core.load(T, TxnLogValue(3, 4, 1000, int(TxnState.ONGOING), frozenset({("a", 1)}), 5, 4))
    assert core.txns[T].state == TxnState.ONGOING and core.txns[T].partitions == {("a", 1)}
    core.load(T, None)
    assert T not in core.txns
    core.load(T, TxnLogValue(3, 4, 1000, int(TxnState.EMPTY), frozenset(), 5, -1))
    core.unload([T])
    assert T not in core.txns


def test_state_labels_are_kafkas() -> None:
    assert [s.label for s in TxnState] == ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                                           "CompleteAbort", "Dead", "PrepareEpochFence"]


def test_records_have_kafkas_layout() -> None:
    assert encode_key("ab") == b"\x00\x00\x00\x02ab"
    assert decode_key(encode_key("txn-é")) == "txn-é"
    empty = TxnLogValue(5, 1, 60000, 0, frozenset(), 1234, -1)
    data = encode_value(empty)
    # version 0, pid, epoch, timeout, state, null partitions, last update, start
    assert data == (b"\x00\x00" + (5).to_bytes(8, "big") + b"\x00\x01" + (60000).to_bytes(4, "big") + b"\x00"
                    + b"\xff\xff\xff\xff" + (1234).to_bytes(8, "big") + (-1).to_bytes(8, "big", signed=True))
    assert decode_value(data) == empty
    ongoing = TxnLogValue(5, 1, 60000, 1, frozenset({("t", 0), ("t", 2), ("u", 1)}), 10, 9)
    assert decode_value(encode_value(ongoing)) == ongoing
    with pytest.raises(TxnRecordError):
        decode_value(data[:-1])
    with pytest.raises(TxnRecordError):
        decode_key(b"\x00\x01\x00\x00")


def test_partition_is_kafkas_hash() -> None:
    # Java: "my-txn".hashCode() == -1061187895
    assert txn_partition_for("my-txn", 50) == 1061187895 % 50


def test_transactional_offsets_are_held_until_the_marker() -> None:
    from roost.broker.group.offsets import CommittedOffset, OffsetStore, offset_batch
    from roost.log.transactions import build_marker

    store = OffsetStore()
    key = ("g", "t", 0)
    store.hold_txn(5, {key: CommittedOffset(10, -1, "", 1)}, log_offset=3)
    assert store.get("g", "t", 0) is None and store.has_unstable("g", "t", 0)
    store.end_txn(5, commit=True)
    assert store.get("g", "t", 0) == CommittedOffset(10, -1, "", 1) and not store.has_unstable("g", "t", 0)
    store.hold_txn(6, {key: CommittedOffset(20, -1, "", 2)}, log_offset=4)
    store.end_txn(6, commit=False)
    assert store.get("g", "t", 0).offset == 10 and not store.has_unstable("g", "t", 0)
    # Loading: the log's transactional batches wait for their markers too.
    log = b"".join(bytes(b) for b in (
        offset_batch({key: CommittedOffset(30, -1, "", 3)}, 3, producer_id=7, producer_epoch=0),
        offset_batch({("g", "t", 1): CommittedOffset(40, -1, "", 3)}, 3, producer_id=8, producer_epoch=0),
        build_marker(7, 0, commit=True, coordinator_epoch=0, timestamp_ms=4),
    ))
    loaded = OffsetStore()
    loaded.replay(log, "test")
    assert loaded.get("g", "t", 0).offset == 30
    assert loaded.get("g", "t", 1) is None and loaded.has_unstable("g", "t", 1)


def test_idle_ids_expire_to_dead_and_are_forgotten() -> None:
    core = TxnCoordinatorCore(900_000)
    pid, epoch = ready(core, now=1000)
    assert core.expired(1000 + 5000, 5000) == []
    assert core.expired(1001 + 5000, 5000) == [T]
    written(core, core.add_partitions(7000, T, pid, epoch, [("a", 0)]))
    assert core.expired(10**9, 5000) == []  # an ongoing transaction never expires
    core.txns[T].state = TxnState.COMPLETE_ABORT
    dead = core.expire(10**9, T)
    assert dead is not None and dead.state == TxnState.DEAD
    core.complete(dead)
    assert T not in core.txns and core.needs_producer_id(T)
