"""Large reads are views of a memory map; truncation never pulls pages from under a live view."""

from __future__ import annotations

import mmap
from pathlib import Path

from roost.log import LogConfig, PartitionLog
from roost.log.segment import MAP_THRESHOLD
from roost.wire.kafka.records import build_batch, iter_records


def batch(value: bytes, count: int = 1) -> bytearray:
    return bytearray(build_batch([(None, value)] * count, timestamp_ms=1_700_000_000_000))


def test_large_reads_are_views_and_survive_truncation(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "p-0", LogConfig(), lambda: 1_700_000_000_000)
    for n in range(40):
        log.append(batch(bytes([65 + n % 26]) * 20_000))
    result = log.read(0, 4 * MAP_THRESHOLD)
    assert any(isinstance(b, memoryview) and isinstance(b.obj, mmap.mmap) for b in result.buffers)
    before = b"".join(bytes(b) for b in result.buffers)

    # A follower-style truncation while the views are still held (as a fetch being sent would).
    log.truncate_to(5)
    assert log.log_end_offset == 5
    after = b"".join(bytes(b) for b in result.buffers)  # would be a SIGBUS with an in-place cut
    assert after == before
    values = [r.value for r in iter_records(after)]
    assert values[:5] == [bytes([65 + n]) * 20_000 for n in range(5)]

    # The log itself now holds exactly the kept prefix, and appends continue after it.
    kept = b"".join(bytes(b) for b in log.read(0, 1 << 30).buffers)
    assert [r.offset for r in iter_records(kept)] == [0, 1, 2, 3, 4]
    log.append(batch(b"next"))
    assert log.log_end_offset == 6
    log.close()
    reopened = PartitionLog.open(tmp_path / "p-0", LogConfig(), lambda: 1_700_000_000_000)
    assert reopened.log_end_offset == 6
    reopened.close()


def test_small_reads_are_plain_bytes(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "p-0", LogConfig(), lambda: 1_700_000_000_000)
    log.append(batch(b"small"))
    result = log.read(0, 1 << 20)
    # One pread's copy (possibly seen through a memoryview that trims it to whole batches), never a
    # view of a memory map: the test above shows large reads are maps, this one that small are not.
    owners = [b.obj if isinstance(b, memoryview) else b for b in result.buffers]
    assert owners and all(type(owner) is bytes for owner in owners), [type(owner) for owner in owners]
    assert [r.value for r in iter_records(b"".join(bytes(b) for b in result.buffers))] == [b"small"]
    log.close()
