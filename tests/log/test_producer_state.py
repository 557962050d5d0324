"""Idempotent producer state: Kafka 3's duplicate, epoch and sequence rules, and its survival
across restarts (snapshots plus a replay of batch headers)."""

from __future__ import annotations

from roost.log.producer_state import OK, Duplicate, ProducerStateManager
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import BatchHeader, build_batch, parse_header
from tests.log.conftest import LogFactory, abandon


def _idempotent(pid: int, epoch: int, seq: int, count: int = 2) -> bytearray:
    return bytearray(
        build_batch(
            [(b"k", b"v%d" % i) for i in range(count)],
            timestamp_ms=1,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
        )
    )


def _header(pid: int, epoch: int, seq: int, count: int = 2) -> BatchHeader:
    return parse_header(_idempotent(pid, epoch, seq, count))


def test_sequence_rules() -> None:
    state = ProducerStateManager()
    assert state.check(_header(7, 0, 0)) is OK
    state.update(_header(7, 0, 0), 0)  # seqs 0..1 at offsets 0..1
    assert state.check(_header(7, 0, 2)) is OK
    assert state.check(_header(7, 0, 3)) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # a gap
    assert state.check(_header(7, 0, 1)) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # overlaps, not identical
    assert state.check(_header(7, 0, 0)) == Duplicate(0, 1)
    state.update(_header(7, 0, 2), 2)
    assert state.check(_header(7, 0, 0)) == Duplicate(0, 1)
    assert state.check(_header(7, 0, 2)) == Duplicate(2, 3)


def test_only_the_last_five_batches_are_duplicates() -> None:
    state = ProducerStateManager()
    for n in range(7):
        state.update(_header(1, 0, n * 2), n * 2)
    assert state.check(_header(1, 0, 0)) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # forgotten
    assert state.check(_header(1, 0, 4)) == Duplicate(4, 5)


def test_epoch_rules() -> None:
    state = ProducerStateManager()
    state.update(_header(3, 5, 0), 0)
    assert state.check(_header(3, 4, 2)) is ErrorCode.INVALID_PRODUCER_EPOCH
    assert state.check(_header(3, 6, 5)) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # a new epoch starts at 0
    assert state.check(_header(3, 6, 0)) is OK
    state.update(_header(3, 6, 0), 2)
    assert state.check(_header(3, 5, 0)) is ErrorCode.INVALID_PRODUCER_EPOCH  # not a duplicate any more


def test_unknown_producer_is_accepted_at_any_sequence_like_kafka_3() -> None:
    state = ProducerStateManager()
    assert state.check(_header(99, 0, 42)) is OK


def test_sequence_wraps_at_int32_max() -> None:
    state = ProducerStateManager()
    state.update(_header(1, 0, 2**31 - 2, count=1), 0)
    assert state.check(_header(1, 0, 2**31 - 1, count=1)) is OK
    state.update(_header(1, 0, 2**31 - 1, count=1), 1)
    assert state.check(_header(1, 0, 0, count=1)) is OK


def test_snapshot_round_trip() -> None:
    state = ProducerStateManager()
    for pid in range(3):
        for n in range(3):
            state.update(_header(pid, pid, n * 2), state.map_end_offset)
    again = ProducerStateManager.from_bytes(state.to_bytes())
    assert again.map_end_offset == state.map_end_offset
    assert again.producers == state.producers


def test_log_updates_producer_state_and_it_survives_a_clean_restart(logs: LogFactory) -> None:
    log = logs.open(segment_bytes=300)
    for n in range(10):
        log.append(_idempotent(11, 2, n * 2))
    assert log.segment_count > 2
    assert log.producer_state.check(_header(11, 2, 18)) == Duplicate(18, 19)
    log.close()
    assert list(log.directory.glob("*.snapshot"))
    again = logs.open(segment_bytes=300)
    assert again.producer_state.check(_header(11, 2, 18)) == Duplicate(18, 19)
    assert again.producer_state.check(_header(11, 2, 20)) is OK
    assert again.producer_state.check(_header(11, 1, 20)) is ErrorCode.INVALID_PRODUCER_EPOCH


def test_producer_state_after_a_crash_is_rebuilt_from_snapshot_and_headers(logs: LogFactory) -> None:
    log = logs.open(segment_bytes=300)
    for n in range(12):
        log.append(_idempotent(5, 0, n * 2))  # rolls write snapshots
    log.append(_idempotent(6, 3, 0))  # after the last snapshot: only in the log
    log.flush()
    abandon(log)
    again = logs.open(segment_bytes=300)
    assert again.producer_state.check(_header(5, 0, 22)) == Duplicate(22, 23)
    assert again.producer_state.check(_header(5, 0, 24)) is OK
    assert again.producer_state.check(_header(6, 3, 0)) == Duplicate(24, 25)
    assert again.producer_state.check(_header(6, 2, 2)) is ErrorCode.INVALID_PRODUCER_EPOCH


def test_truncation_rewinds_producer_state(logs: LogFactory) -> None:
    log = logs.open(segment_bytes=300)
    for n in range(12):
        log.append(_idempotent(5, 0, n * 2))
    log.truncate_to(10)  # keeps sequences 0..9
    assert log.producer_state.check(_header(5, 0, 10)) is OK
    assert log.producer_state.check(_header(5, 0, 8)) == Duplicate(8, 9)
    assert all(int(p.stem) <= 10 for p in log.directory.glob("*.snapshot"))


def test_delete_records_forgets_producers_wholly_below_the_log_start(logs: LogFactory) -> None:
    log = logs.open()
    log.append(_idempotent(1, 0, 0))
    log.append(_idempotent(2, 0, 0))
    log.delete_records_before(2)
    assert log.producer_state.entry(1) is None
    assert log.producer_state.entry(2) is not None
