"""Corruption at rest in a partition's segment, found at start-up or at read time: every file kind
Roost reads the log through, damaged three ways (a flipped bit, a zeroed range, a cut), after a
clean shutdown (nothing re-checked at start-up) and after a crash (recovery re-checks from the
recovery point).

The promise checked: a read never returns a byte that is not what was written. It returns the
original batches (the same bytes, the same offsets), or raises CorruptLog naming the segment file
and position (the broker then takes the directory offline: tests/broker/test_corrupt_segment.py);
a crash recovery may cut a damaged tail (those records were never flushed, so never promised),
never a batch below it. `roost check-logs` finds the same damage offline (tests/cli/test_check_logs.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from roost.log import PartitionLog
from roost.log.errors import CorruptLog
from roost.wire.kafka.records import parse_header, validate_batches
from tests.log.conftest import LogFactory, abandon, batch

BATCHES = 40
DAMAGES = ("flip", "zero", "truncate")


def damage(path: Path, how: str, at: int, length: int = 64) -> None:
    data = bytearray(path.read_bytes())
    if how == "flip":
        data[at] ^= 0x10
    elif how == "zero":
        data[at:at + length] = bytes(min(length, len(data) - at))
    else:
        del data[at:]
    path.write_bytes(bytes(data))


def written(log: PartitionLog) -> dict[int, bytes]:
    """{base offset: batch bytes} of every batch in the log, read with its CRC checked."""
    out: dict[int, bytes] = {}
    result = log.read(0, 1 << 30)
    for buffer in result.buffers:
        view = memoryview(buffer)
        for position, header in validate_batches(view):
            out[header.base_offset] = bytes(view[position:position + header.size])
    return out


def read_everything(log: PartitionLog) -> tuple[dict[int, bytes], CorruptLog | None]:
    """Read from offset 0 in small steps (so reads start from the index as consumers' do)."""
    got: dict[int, bytes] = {}
    offset = log.log_start_offset
    for _ in range(4 * BATCHES):  # bounded
        if offset >= log.log_end_offset:
            return got, None
        try:
            result = log.read(offset, 300)
        except CorruptLog as error:
            return got, error
        for buffer in result.buffers:
            view = memoryview(buffer)
            position = 0
            while position < len(view):
                header = parse_header(view, position)
                got[header.base_offset] = bytes(view[position:position + header.size])
                position += header.size
        if result.next_offset <= offset:
            return got, None
        offset = result.next_offset
    raise AssertionError("reading never reached the log end")


@pytest.mark.parametrize("crash", [False, True], ids=["after-clean-shutdown", "after-crash"])
@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("where", ["first-batch", "middle-batch", "last-batch"])
def test_a_damaged_segment_never_serves_a_changed_byte(logs: LogFactory, tmp_path: Path, how: str, where: str,
                                                      crash: bool) -> None:
    log = logs.open(index_interval_bytes=256)
    for n in range(BATCHES):
        log.append(bytearray(batch([b"%04d-" % n + b"v" * 60], timestamp_ms=1_000 + n)))
    log.flush()
    original = written(log)
    segment = log.segments[0].log_path
    positions = [0]
    for data in original.values():
        positions.append(positions[-1] + len(data))
    pick = {"first-batch": 0, "middle-batch": BATCHES // 2, "last-batch": BATCHES - 1}[where]
    at = positions[pick] + 30  # inside the batch: past the CRC, in the attributes and records
    if crash:
        abandon(log)
    else:
        log.close()
    damage(segment, how, at)
    reopened = PartitionLog.open(log.directory, log.config, logs.clock)
    logs.opened.append(reopened)
    got, error = read_everything(reopened)
    changed = {offset for offset, data in got.items() if original.get(offset) != data}
    assert not changed, f"served batches that differ from what was written: {sorted(changed)}"
    if error is not None:
        assert str(segment) in str(error) and "position" in str(error)
    if how == "truncate":
        # A cut loses the tail: what is left is served, the rest is gone from the log's end.
        assert set(got) == {o for o in original if o < reopened.log_end_offset}
    elif crash and error is None:
        # Recovery re-checked the damaged batch and cut the log there (unflushed by its rules).
        assert reopened.log_end_offset <= min(o for o in original if o >= pick)
        assert set(got) == {o for o in original if o < reopened.log_end_offset}
    else:
        # Nothing re-checked it at start-up: the read must refuse it, never skip it.
        assert error is not None, f"a {how} in the {where} was served or skipped without an error"
        assert set(got) == {o for o in original if o < pick}


# The files a log derives from its segments: damaged, they are rebuilt (or ignored) at start-up,
# and the log serves every batch as written.
DERIVED = {
    "offset-index": ".index",
    "time-index": ".timeindex",
    "producer-snapshot": ".snapshot",
    "leader-epochs": "leader-epoch-checkpoint",
    "recovery-point": "recovery-point-offset-checkpoint",
}


@pytest.mark.parametrize("crash", [False, True], ids=["after-clean-shutdown", "after-crash"])
@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("kind", DERIVED)
def test_a_damaged_derived_file_is_rebuilt_and_every_batch_is_served(logs: LogFactory, kind: str, how: str,
                                                                    crash: bool) -> None:
    log = logs.open(segment_bytes=3000, index_interval_bytes=100)
    log.leader_epochs.assign(0, 0)
    for n in range(BATCHES):
        if n == BATCHES // 2:
            log.leader_epochs.assign(2, log.log_end_offset)
        log.append(bytearray(batch([b"%04d-" % n + b"v" * 60], timestamp_ms=1_000 + n, producer_id=9,
                                   producer_epoch=0, base_sequence=n,
                                   partition_leader_epoch=0 if n < BATCHES // 2 else 2)))
    log.flush()
    original = written(log)
    epochs_before = list(log.leader_epochs.entries)
    suffix = DERIVED[kind]
    victims = sorted(p for p in log.directory.iterdir() if p.name.endswith(suffix) and p.stat().st_size > 0)
    assert victims, f"no {kind} file to damage"
    if crash:
        abandon(log)
    else:
        log.close()
    path = victims[0]
    size = path.stat().st_size
    damage(path, how, size // 2, length=16)
    reopened = PartitionLog.open(log.directory, log.config, logs.clock)
    logs.opened.append(reopened)
    got, error = read_everything(reopened)
    assert error is None, f"a damaged {kind} made the log refuse a read: {error}"
    assert got == original, f"after a damaged {kind}: {len(got)} of {len(original)} batches served as written"
    assert list(reopened.leader_epochs.entries) == epochs_before
    # Reads from every offset (so through every index entry) return the batch that holds it.
    for offset in range(0, BATCHES, 7):
        result = reopened.read(offset, 1)
        first = parse_header(memoryview(result.buffers[0]), 0)
        assert first.base_offset <= offset <= first.last_offset
