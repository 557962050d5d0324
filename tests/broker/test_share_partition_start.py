"""The share-partition core's persisted start offset (issue 31): when acknowledgements overlap
(the share fault run found it), each pending write's StartOffset leaves out the other pending
acknowledgements, so the last one to complete owes the coordinator a start-only write; and when
the write carrying a start failed (the share simulation found it), the next write reaching that
start carries it again. Otherwise the coordinator's StartOffset (ReadShareGroupStateSummary, the
group's lag) stays behind records long accepted."""

from __future__ import annotations

from roost.broker.share.partition import AckBatch, AckType, LogBatch, SharePartition, StateBatch, StateChange


def persisted_start(writes: list[StateChange | None]) -> int:
    """The StartOffset the coordinator holds after these writes, merged in order (-1: unchanged)."""
    start = -1
    for change in writes:
        if change is not None and change.start_offset >= 0:
            start = change.start_offset
    return start


def test_overlapping_acknowledgements_end_with_the_start_past_them_all() -> None:
    part = SharePartition(0)
    for member, offset in (("a", 0), ("b", 1), ("c", 2)):
        assert part.acquire(member, [LogBatch(offset, offset)], now=0, max_records=10, high_watermark=3).ranges
    # three acknowledgements in flight at once, answered in the order they were asked
    pending = [part.acknowledge(member, [AckBatch(offset, offset, (AckType.ACCEPT,))], now=0).change
               for member, offset in (("a", 0), ("b", 1), ("c", 2))]
    writes: list[StateChange | None] = list(pending)
    for change in pending:
        assert change is not None
        writes.append(part.complete(change))
    assert part.start_offset == 3
    assert persisted_start(writes) == 3, [w.start_offset for w in writes if w is not None]


def test_no_start_only_write_when_the_acknowledgement_carried_the_start() -> None:
    part = SharePartition(0)
    part.acquire("a", [LogBatch(0, 4)], now=0, max_records=10, high_watermark=5)
    change = part.acknowledge("a", [AckBatch(0, 4, (AckType.ACCEPT,))], now=0).change
    assert change is not None and change.start_offset == 5
    assert part.complete(change) is None
    assert part.complete(change) is None  # not pending any more: harmless


def test_a_start_whose_write_failed_is_sent_again_when_reached() -> None:
    """The write carrying the highest start failed (share_sim found the start lagging after one):
    the next write whose start reaches it carries it again, never a lower one."""
    part = SharePartition(0)
    part.acquire("a", [LogBatch(0, 0)], now=0, max_records=10, high_watermark=1)
    first = part.acknowledge("a", [AckBatch(0, 0, (AckType.ACCEPT,))], now=0).change
    assert first is not None and first.start_offset == 1
    part.fail(first)  # not durable: 0 is acquired by "a" again
    again = part.acknowledge("a", [AckBatch(0, 0, (AckType.ACCEPT,))], now=0).change
    assert again is not None and again.start_offset == 1, again
    assert part.complete(again) is None
    # a background write that failed counts too (the leader passes it to fail())
    part.acquire("a", [LogBatch(1, 1)], now=0, max_records=10, high_watermark=2)
    ack = part.acknowledge("a", [AckBatch(1, 1, (AckType.REJECT,))], now=0).change
    assert ack is not None and ack.start_offset == 2
    assert part.complete(ack) is None
    lost = StateChange(99, 2, (), 0)  # as if the write of that start had been a background one
    part.fail(lost)
    part.acquire("b", [LogBatch(2, 2)], now=0, max_records=10, high_watermark=3)
    release = part.release_member("b", now=0)
    assert release is not None and release.start_offset == 2, release


def test_a_load_past_terminal_batches_owes_the_coordinator_its_start() -> None:
    """The persisted start is behind batches already terminal (their start-carrying write was
    lost with the old leader): the new leader's load moves SPSO past them and writes it."""
    part = SharePartition.load(5, [StateBatch(5, 7, 2, 1), StateBatch(8, 8, 0, 1)])
    assert part.start_offset == 8
    change = part.start_change()
    assert change is not None and change.start_offset == 8 and change.batches == ()
    assert part.start_change() is None
    assert SharePartition.load(5, [StateBatch(6, 7, 2, 1)]).start_change() is None  # 5 is not done
