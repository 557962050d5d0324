"""The scenario every client must pass: all codecs, a group of three, exactly once, resume."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.support.groups import ClientOps, last_offsets, run_group
from tests.support.workload import check_exactly_once_in_order

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PER_CODEC = 20_000
PARTITIONS = 6

Produce = Callable[[str, int, int], None]  # (codec, count, first message number)
Committed = Callable[[], dict[int, int]]  # partition -> committed offset of the group
StoredCodecs = Callable[[], set[str]]  # the codecs of the batches the broker holds for the topic


def exactly_once_with_resume(produce: Produce, ops: ClientOps, committed: Committed, stored_codecs: StoredCodecs,
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
    # Every record carries the codec it was produced with: message n came from the producer of
    # CODECS[n // per_codec], and every codec's messages arrived (the set check above is exact too).
    tags: dict[str, int] = {}
    for member in first + second:
        for record in member.received:
            tag = dict(record.headers)["tag"].decode()
            n = json.loads(record.value)["n"]
            assert tag == CODECS[n // per_codec], (n, tag)
            tags[tag] = tags.get(tag, 0) + 1
    assert tags == dict.fromkeys(CODECS, per_codec), tags
    # ... and the producer really compressed with each: the broker stores batches as they came.
    assert stored_codecs() == set(CODECS)
