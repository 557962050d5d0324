"""The scenario every client must pass: all codecs, a group of three, exactly once, resume."""

from __future__ import annotations

from collections.abc import Callable

from tests.support.groups import ClientOps, last_offsets, run_group
from tests.support.workload import check_exactly_once_in_order

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PER_CODEC = 20_000
PARTITIONS = 6

Produce = Callable[[str, int, int], None]  # (codec, count, first message number)
Committed = Callable[[], dict[int, int]]  # partition -> committed offset of the group


def exactly_once_with_resume(produce: Produce, ops: ClientOps, committed: Committed,
                             per_codec: int = PER_CODEC) -> None:
    expected: set[int] = set()
    for index, codec in enumerate(CODECS):
        start = index * per_codec
        produce(codec, per_codec, start)
        expected |= set(range(start, start + per_codec))
    total = len(expected)

    first = run_group(ops, stop_at=total // 2)
    first_count = sum(len(m.received) for m in first)
    assert total // 2 <= first_count < total, first_count

    # The first round committed exactly what it consumed ...
    offsets = committed()
    for partition, offset in last_offsets(first).items():
        assert offsets[partition] == offset + 1, (partition, offsets, offset)

    # ... and the second round, a new set of consumers in the same group, starts right there.
    second = run_group(ops, stop_at=total - first_count)
    check_exactly_once_in_order([m.received for m in first + second], expected)
    firsts: dict[int, int] = {}
    for member in second:
        for record in member.received:
            firsts[record.partition] = min(firsts.get(record.partition, record.offset), record.offset)
    for partition, offset in firsts.items():
        assert offset == offsets.get(partition, 0), (partition, offset, offsets)
    codecs_seen = {dict(r.headers)["tag"].decode() for m in first + second for r in m.received[:50]}
    assert codecs_seen <= set(CODECS)
