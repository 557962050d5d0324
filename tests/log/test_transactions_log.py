"""The log side of transactions: open transactions per producer, the last stable offset, the
aborted-transaction index, and how they survive a clean restart, a crash and a truncation."""

from __future__ import annotations

from roost.log.producer_state import ProducerStateManager
from roost.log.transactions import INDEX_FILE, AbortedTxn, build_marker
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import build_batch
from tests.log.conftest import LogFactory, abandon


def _txn(pid: int, seq: int, count: int = 2, epoch: int = 0) -> bytes:
    return build_batch([(b"k", b"v%d" % i) for i in range(count)], timestamp_ms=1, producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, is_transactional=True)


def _plain(count: int = 1) -> bytes:
    return build_batch([(b"k", b"p")] * count, timestamp_ms=1)


def _marker(pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> bytes:
    return build_marker(pid, epoch, commit=commit, coordinator_epoch=coordinator_epoch, timestamp_ms=1)


def test_lso_follows_open_transactions_and_markers(logs: LogFactory) -> None:
    log = logs.open()
    log.append(_plain())  # 0
    assert log.last_stable_offset(1) == 1  # no transaction: the high watermark
    log.append(_txn(7, 0))  # 1-2, producer 7 opens
    log.append(_plain())  # 3
    log.append(_txn(8, 0))  # 4-5, producer 8 opens
    assert log.last_stable_offset(6) == 1
    log.append(_txn(7, 2))  # 6-7, same transaction
    log.append(_marker(7, commit=True))  # 8
    # Decided, but the marker is not below the high watermark yet: still unstable.
    assert log.last_stable_offset(8) == 1
    assert log.last_stable_offset(9) == 4  # producer 8's transaction is still open
    log.append(_marker(8, commit=False))  # 9
    assert log.last_stable_offset(10) == 10
    assert log.aborted_transactions(0, 10) == [AbortedTxn(8, 4, 9, 10)]
    assert log.aborted_transactions(10, 11) == []  # marker below the fetch offset
    assert log.aborted_transactions(0, 4) == []  # read ends before the transaction's first offset


def test_marker_without_data_ends_nothing(logs: LogFactory) -> None:
    log = logs.open()
    log.append(_marker(3, commit=False))
    log.append(_plain())
    assert log.last_stable_offset(2) == 2
    assert log.aborted_transactions(0, 2) == []


def test_marker_checks() -> None:
    state = ProducerStateManager()
    from roost.wire.kafka.records import parse_header
    state.update(parse_header(_txn(5, 0, epoch=3)), 0)
    assert state.check_marker(5, 2, 0) is ErrorCode.INVALID_PRODUCER_EPOCH
    assert state.check_marker(5, 3, 0) is ErrorCode.NONE
    assert state.check_marker(99, 0, 0) is ErrorCode.NONE


def test_open_transactions_and_index_survive_clean_restart_and_crash(logs: LogFactory) -> None:
    log = logs.open(segment_bytes=400)
    log.append(_txn(1, 0))  # 0-1
    log.append(_marker(1, commit=False))  # 2
    log.append(_txn(2, 0))  # 3-4, open
    for _ in range(5):
        log.append(_plain(3))  # rolls: snapshots carry producer 2's open transaction
    end = log.log_end_offset
    log.close()
    log = logs.open(segment_bytes=400)
    assert log.last_stable_offset(end) == 3
    assert log.aborted_transactions(0, end) == [AbortedTxn(1, 0, 2, 3)]
    log.append(_marker(2, commit=False))
    log.append(_txn(3, 0))  # open after the last snapshot: only the replay finds it
    end = log.log_end_offset
    abandon(log)
    log = logs.open(segment_bytes=400)
    assert log.last_stable_offset(end) == end - 2
    assert [t.producer_id for t in log.aborted_transactions(0, end)] == [1, 2]


def test_crash_losing_index_entries_rebuilds_them_from_the_log(logs: LogFactory) -> None:
    log = logs.open()
    log.append(_txn(1, 0))
    log.append(_marker(1, commit=False))
    abandon(log)
    assert (log.directory / INDEX_FILE).stat().st_size == 34  # one entry, Kafka's layout
    (log.directory / INDEX_FILE).unlink()  # the unsynced entry never reached the disk
    log = logs.open()
    assert log.aborted_transactions(0, 3) == [AbortedTxn(1, 0, 2, 3)]


def test_truncation_reopens_transactions_and_cuts_the_index(logs: LogFactory) -> None:
    log = logs.open()
    log.append(_txn(1, 0))  # 0-1
    log.append(_marker(1, commit=False))  # 2
    log.append(_txn(2, 0))  # 3-4
    log.append(_marker(2, commit=True))  # 5
    assert log.last_stable_offset(6) == 6
    log.truncate_to(5)  # a follower loses the commit marker: the transaction is open again
    assert log.last_stable_offset(5) == 3
    log.truncate_to(2)  # and the abort marker
    assert log.aborted_transactions(0, 2) == []
    assert log.last_stable_offset(2) == 0
    assert not (log.directory / INDEX_FILE).exists()


def test_delete_records_keeps_open_transactions_and_the_lso_stays_in_the_log(logs: LogFactory) -> None:
    log = logs.open()
    log.append(_txn(1, 0))  # 0-1, stays open
    log.append(_plain(3))  # 2-4
    log.delete_records_before(3)
    assert 1 in log.producer_state.ongoing
    assert log.last_stable_offset(5) == 3  # Kafka: the first unstable offset is cut to the log start
