"""The share-partition core (broker/share/partition.py): record states, locks, delivery counts,
the window, read_committed, acknowledgement rules, loading from persisted state."""

from __future__ import annotations

from roost.broker.share.partition import (
    DELIVERY_LIMIT,
    REJECTED,
    AbortedTxn,
    AckBatch,
    AckType,
    AcquiredRange,
    AcquireMode,
    Isolation,
    LogBatch,
    RecordState,
    ShareConfig,
    SharePartition,
    StateBatch,
    StateChange,
    merge_changes,
)
from roost.wire.kafka.errors import ErrorCode

A, ACCEPT, RELEASE, REJECT, GAP, RENEW = "a", AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.GAP, AckType.RENEW


def batches(*bounds: tuple[int, int]) -> list[LogBatch]:
    return [LogBatch(b, e) for b, e in bounds]


def acquire(part: SharePartition, member: str, log: list[LogBatch], now: int = 0, **kw) -> list[AcquiredRange]:
    kw.setdefault("max_records", 500)
    kw.setdefault("high_watermark", max(b.last_offset for b in log) + 1 if log else 0)
    return part.acquire(member, log, now=now, **kw).ranges


def ack(part: SharePartition, member: str, first: int, last: int, kind: int, now: int = 0):
    result = part.acknowledge(member, [AckBatch(first, last, (kind,))], now=now)
    if result.change is not None:
        part.complete(result.change)
    return result


def test_first_delivery_counts_one_and_whole_batches_are_acquired():
    part = SharePartition(0)
    log = batches((0, 4), (5, 9), (10, 14))
    assert acquire(part, A, log, max_records=3) == [AcquiredRange(0, 4, 1)]  # whole first batch
    assert part.end_offset == 4 and part.fetch_offset() == 5
    assert acquire(part, "b", log[1:], max_records=6) == [AcquiredRange(5, 14, 1)]
    assert part.holder(3) == A and part.holder(12) == "b"


def test_an_acquired_record_is_not_acquired_again_until_released():
    part = SharePartition(0)
    log = batches((0, 4))
    assert acquire(part, A, log) == [AcquiredRange(0, 4, 1)]
    assert acquire(part, "b", log) == []
    assert acquire(part, A, log) == []
    part.release_member(A, now=0)
    assert acquire(part, "b", log) == [AcquiredRange(0, 4, 2)]
    assert part.holder(2) == "b"


def test_record_limit_mode_stops_at_max_records():
    part = SharePartition(0)
    assert acquire(part, A, batches((0, 9)), max_records=3, mode=AcquireMode.RECORD_LIMIT) == [AcquiredRange(0, 2, 1)]
    assert part.fetch_offset() == 3
    assert acquire(part, A, batches((0, 9)), max_records=100) == [AcquiredRange(3, 9, 1)]


def test_accept_moves_the_start_offset_and_nothing_comes_back():
    part = SharePartition(0)
    acquire(part, A, batches((0, 9)))
    result = part.acknowledge(A, [AckBatch(0, 9, (ACCEPT,))], now=1)
    assert result.error == ErrorCode.NONE and result.change is not None and result.change.pending
    assert result.change.start_offset == 10  # what the write persists
    assert part.start_offset == 0  # not yet: the write is not durable
    assert part.state_of(3) == RecordState.ACQUIRED
    part.complete(result.change)
    assert part.start_offset == 10 and part.window_size == 0
    assert acquire(part, "b", batches((0, 9), (10, 11))) == [AcquiredRange(10, 11, 1)]


def test_a_pending_ack_is_not_expired_and_a_failed_write_rolls_back():
    part = SharePartition(0, ShareConfig(lock_duration_ms=1000))
    acquire(part, A, batches((0, 4)))
    result = part.acknowledge(A, [AckBatch(0, 4, (ACCEPT,))], now=10)
    assert part.tick(5000) is None  # a pending acknowledgement holds the lock
    part.fail(result.change)
    assert part.state_of(0) == RecordState.ACQUIRED and part.holder(0) == A
    change = part.tick(5000)
    assert change is not None and part.state_of(0) == RecordState.AVAILABLE
    assert change.batches == (StateBatch(0, 4, 0, 1),)


def test_lock_expiry_redelivers_with_count_two_to_anyone():
    part = SharePartition(0, ShareConfig(lock_duration_ms=1000))
    acquire(part, A, batches((0, 4)), now=0)
    assert part.next_deadline() == 1000
    assert part.tick(999) is None
    change = part.tick(1000)
    assert change is not None and change.batches == (StateBatch(0, 4, 0, 1),) and not change.pending
    assert part.fetch_offset() == 0
    assert acquire(part, "b", batches((0, 4)), now=1000) == [AcquiredRange(0, 4, 2)]
    # an ack after the lock expired is a wrong record state, even before tick() ran
    assert ack(part, "b", 0, 4, ACCEPT, now=2000).error == ErrorCode.INVALID_RECORD_STATE


def test_lock_duration_per_call():
    part = SharePartition(0, ShareConfig(lock_duration_ms=30_000))
    acquire(part, A, batches((0, 0)), now=0, lock_ms=1000)
    assert part.next_deadline() == 1000
    assert part.tick(1000) is not None


def test_renew_restarts_the_lock_without_a_write():
    part = SharePartition(0, ShareConfig(lock_duration_ms=1000))
    acquire(part, A, batches((0, 2)), now=0)
    result = part.acknowledge(A, [AckBatch(0, 2, (RENEW,))], now=900, renew_allowed=True)
    assert result.error == ErrorCode.NONE and result.change is None
    assert part.tick(1500) is None
    assert part.tick(1900) is not None
    assert part.acknowledge(A, [AckBatch(0, 0, (RENEW,))], now=0).error == ErrorCode.INVALID_REQUEST


def test_release_every_time_archives_at_the_delivery_limit():
    part = SharePartition(0, ShareConfig(delivery_limit=5))
    dead = []
    for delivery in range(1, 6):
        assert acquire(part, A, batches((0, 0), (1, 1)), now=delivery, max_records=1) == [AcquiredRange(0, 0, delivery)]
        result = ack(part, A, 0, 0, RELEASE, now=delivery)
        assert result.error == ErrorCode.NONE
        dead.extend(result.change.dead_letters)
    assert part.state_of(0) == RecordState.ACKNOWLEDGED  # below SPSO: terminal
    assert part.start_offset == 1
    assert [(d.first_offset, d.delivery_count, d.reason) for d in dead] == [(0, 5, DELIVERY_LIMIT)]


def test_expiry_at_the_limit_archives():
    part = SharePartition(0, ShareConfig(delivery_limit=2, lock_duration_ms=10))
    acquire(part, A, batches((0, 0)), now=0)
    part.tick(10)
    acquire(part, A, batches((0, 0)), now=10)
    change = part.tick(20)
    assert change.dead_letters[0].reason == DELIVERY_LIMIT
    assert part.start_offset == 1 and part.fetch_offset() == 1


def test_reject_is_archived_and_dead_lettered():
    part = SharePartition(0)
    acquire(part, A, batches((0, 3)))
    result = part.acknowledge(A, [AckBatch(0, 3, (ACCEPT, REJECT, ACCEPT, GAP))], now=0)
    assert result.change.batches == (StateBatch(0, 0, 2, 1), StateBatch(1, 1, 4, 1), StateBatch(2, 2, 2, 1),
                                     StateBatch(3, 3, 4, 1))
    assert [(d.first_offset, d.reason) for d in result.change.dead_letters] == [(1, REJECTED)]
    part.complete(result.change)
    assert part.start_offset == 4


def test_ack_rules():
    part = SharePartition(0)
    acquire(part, A, batches((0, 9)))
    # another member, not acquired, past the window
    assert ack(part, "b", 0, 0, ACCEPT).error == ErrorCode.INVALID_RECORD_STATE
    assert ack(part, A, 10, 10, ACCEPT).error == ErrorCode.INVALID_REQUEST
    # malformed batches
    bad = [
        [AckBatch(5, 4, (ACCEPT,))],
        [AckBatch(0, 3, ())],
        [AckBatch(0, 3, (ACCEPT, ACCEPT))],
        [AckBatch(0, 3, (7,))],
        [AckBatch(4, 5, (ACCEPT,)), AckBatch(0, 1, (ACCEPT,))],
    ]
    for request in bad:
        assert part.acknowledge(A, request, now=0).error == ErrorCode.INVALID_REQUEST
    # atomic: an error on offset 9 leaves 0..8 acquired
    part.release_member(A, 0)
    acquire(part, A, batches((0, 8)))
    acquire(part, "b", batches((9, 9)))
    assert ack(part, A, 0, 9, ACCEPT).error == ErrorCode.INVALID_RECORD_STATE
    assert part.state_of(0) == RecordState.ACQUIRED
    # a second ack of the same records while the first is being written
    first = part.acknowledge(A, [AckBatch(0, 3, (ACCEPT,))], now=0)
    assert part.acknowledge(A, [AckBatch(0, 3, (REJECT,))], now=0).error == ErrorCode.INVALID_RECORD_STATE
    part.complete(first.change)
    # below SPSO is ignored
    assert ack(part, A, 0, 3, ACCEPT).error == ErrorCode.NONE


def test_release_member_returns_only_its_records():
    part = SharePartition(0)
    acquire(part, A, batches((0, 4)))
    acquire(part, "b", batches((5, 9)))
    change = part.release_member(A, now=0)
    assert change.batches == (StateBatch(0, 4, 0, 1),)
    assert part.holder(7) == "b" and part.fetch_offset() == 0
    assert part.release_member(A, now=0) is None


def test_the_window_cap_limits_new_records_but_not_redeliveries():
    part = SharePartition(0, ShareConfig(max_record_locks=10))
    log = batches((0, 5), (6, 11), (12, 13))
    assert acquire(part, A, log) == [AcquiredRange(0, 11, 1)]  # the batch that crosses the cap is whole
    assert part.fetch_offset() is None
    assert acquire(part, "b", log[2:]) == []
    part.release_member(A, now=0)
    assert acquire(part, "b", log, max_records=1) == [AcquiredRange(0, 5, 2)]


def test_read_committed_stops_at_the_lso_and_archives_aborted_records():
    part = SharePartition(0)
    log = [
        LogBatch(0, 1),  # plain
        LogBatch(2, 3, producer_id=7, is_transactional=True),  # aborted
        LogBatch(4, 4, is_control=True, producer_id=7, is_transactional=True),  # abort marker
        LogBatch(5, 6, producer_id=8, is_transactional=True),  # committed
        LogBatch(7, 7, is_control=True, producer_id=8, is_transactional=True),  # commit marker
        LogBatch(8, 9, producer_id=9, is_transactional=True),  # open: past the LSO
    ]
    result = part.acquire(A, log, now=0, max_records=100, high_watermark=10, last_stable_offset=8,
                          isolation=Isolation.READ_COMMITTED, aborted=[AbortedTxn(7, 2)])
    assert result.ranges == [AcquiredRange(0, 1, 1), AcquiredRange(5, 7, 1)]
    assert result.change is not None and result.change.batches == (StateBatch(2, 4, 4, 0),)
    assert part.end_offset == 7 and part.fetch_offset() == 8
    # read_uncommitted delivers everything up to the high watermark
    other = SharePartition(0)
    assert acquire(other, A, log, high_watermark=10) == [AcquiredRange(0, 9, 1)]


def test_the_last_attempt_is_delivered_alone():
    part = SharePartition(0, ShareConfig(delivery_limit=3, lock_duration_ms=10))
    for now in (0, 10):
        acquire(part, A, batches((0, 4)), now=now)
        part.tick(now + 10)
    assert acquire(part, A, batches((0, 4)), now=20) == [AcquiredRange(0, 0, 3)]
    assert acquire(part, A, batches((0, 4)), now=20) == [AcquiredRange(1, 1, 3)]


def test_load_makes_unpersisted_in_flight_records_acquirable_with_their_counts():
    part = SharePartition.load(10, [StateBatch(10, 11, 2, 1), StateBatch(13, 13, 0, 3), StateBatch(15, 15, 4, 2),
                                    StateBatch(5, 8, 2, 1)])
    assert part.start_offset == 12 and part.end_offset == 15
    assert acquire(part, A, batches((10, 19))) == [AcquiredRange(12, 12, 1), AcquiredRange(13, 13, 4),
                                                  AcquiredRange(14, 14, 1), AcquiredRange(16, 19, 1)]
    assert part.state_of(15) == RecordState.ARCHIVED


def test_a_compacted_hole_is_archived_without_delivery():
    part = SharePartition(0)
    result = part.acquire(A, batches((0, 1), (5, 6)), now=0, max_records=100, high_watermark=7)
    assert result.ranges == [AcquiredRange(0, 1, 1), AcquiredRange(5, 6, 1)]
    assert result.change.batches == (StateBatch(2, 4, 4, 0),)


def test_log_start_movement():
    part = SharePartition(0)
    acquire(part, A, batches((0, 9)))
    change = part.advance_log_start(5)
    assert change.start_offset == 5 and part.start_offset == 5
    assert ack(part, A, 0, 9, ACCEPT).error == ErrorCode.NONE
    assert part.start_offset == 10


def test_a_failed_acknowledgement_is_not_passed_by_a_later_write_s_start_offset():
    """Two acknowledgements being written at once, of 0-4 and 5-9: the second's write must not
    carry a start offset past 0-4, since the first may still fail (it does here); else a new
    leader loading that start would skip 0-4, which nobody acknowledged."""
    part = SharePartition(0)
    acquire(part, A, batches((0, 4)))
    acquire(part, "b", batches((5, 9)))
    first = part.acknowledge(A, [AckBatch(0, 4, (ACCEPT,))], now=0).change
    second = part.acknowledge("b", [AckBatch(5, 9, (ACCEPT,))], now=0).change
    assert first.start_offset == 5
    assert second.start_offset == -1  # unchanged: 0-4 may not become durable
    part.fail(first)
    part.complete(second)
    assert part.start_offset == 0 and part.state_of(7) == RecordState.ACKNOWLEDGED
    # a new leader from what was written (only the second): 0-4 come back, 5-9 stay done
    loaded = SharePartition.load(0, second.batches)
    assert acquire(loaded, "c", batches((0, 4), (5, 9), (10, 10))) == [AcquiredRange(0, 4, 1), AcquiredRange(10, 10, 1)]


def test_delivery_counts_are_the_unfinished_records_by_times_delivered():
    """What the console's delivery-count distribution shows (roost_share_partition_records_by_delivery_count)."""
    part = SharePartition(0)
    log = batches((0, 4), (5, 9))
    assert part.delivery_counts() == {}
    acquire(part, A, log)  # 0-9 delivered once, held by A
    assert part.delivery_counts() == {1: 10}
    ack(part, A, 0, 2, ACCEPT)  # done: no longer counted
    ack(part, A, 3, 4, RELEASE)  # available again, delivered once
    assert part.delivery_counts() == {1: 7}
    acquire(part, "b", log)  # 3-4 delivered a second time
    assert part.delivery_counts() == {1: 5, 2: 2}
    ack(part, "b", 3, 4, REJECT)
    assert part.delivery_counts() == {1: 5}


def test_the_window_is_held_as_runs_split_only_where_a_change_covers_part_of_one():
    """A fetched log batch is one run whatever its size, an acknowledgement of part of it splits
    it, and settled neighbours in one state join again (the cost of a fetch and its
    acknowledgement follows the batches, not the records)."""
    part = SharePartition(0)
    assert acquire(part, A, batches((0, 499), (500, 999)), max_records=1000) == [AcquiredRange(0, 999, 1)]
    assert part.run_count() == 1
    result = part.acknowledge(A, [AckBatch(100, 199, (ACCEPT,)), AckBatch(200, 299, (RELEASE,))], now=0)
    assert result.error == ErrorCode.NONE and result.change is not None
    assert part.run_count() == 4  # 0-99 held, 100-199 and 200-299 pending, 300-999 held
    part.complete(result.change)
    assert [part.state_of(o) for o in (99, 100, 199, 200, 299, 300)] == [
        RecordState.ACQUIRED, RecordState.ACKNOWLEDGED, RecordState.ACKNOWLEDGED,
        RecordState.AVAILABLE, RecordState.AVAILABLE, RecordState.ACQUIRED]
    assert part.fetch_offset() == 200
    ack(part, A, 0, 99, ACCEPT)
    assert part.start_offset == 200 and part.run_count() == 2  # 200-299 available, 300-999 held
    assert acquire(part, "b", batches((200, 299))) == [AcquiredRange(200, 299, 2)]
    ack(part, "b", 200, 299, ACCEPT)
    ack(part, A, 300, 999, ACCEPT)
    assert part.start_offset == 1000 and part.run_count() == 0 and part.window_size == 0


def test_changes_written_together_merge_as_written_one_after_another():
    """The leader sends the state changes queued behind a write in flight as one write."""
    part = SharePartition(0)
    acquire(part, A, batches((0, 9)))
    first = part.acknowledge(A, [AckBatch(0, 4, (ACCEPT,))], now=0).change
    second = part.acknowledge(A, [AckBatch(5, 9, (REJECT,))], now=0).change
    assert first is not None and second is not None
    merged = merge_changes([first, second])
    assert merged.batches == (StateBatch(0, 4, 2, 1), StateBatch(5, 9, 4, 1))
    assert merged.start_offset == 5  # the first's; the second's leaves the first (pending) out: -1
    assert merged.dead_letters == second.dead_letters and merged.delivery_complete_count == second.delivery_complete_count
    part.complete(first)
    part.complete(second)
    assert part.start_offset == 10
    # where they meet, the later batch wins
    later = StateChange(9, -1, (StateBatch(3, 6, 0, 2),), 0)
    assert merge_changes([first, later]).batches == (StateBatch(0, 2, 2, 1), StateBatch(3, 6, 0, 2))
    assert merge_changes([first]) is first
