"""Crash recovery: torn tails are cut (and logged), never served; indexes are rebuilt."""

from __future__ import annotations

import logging
import os
import struct

import pytest

from roost.log.partition_state import RECOVERY_POINT_FILE
from roost.wire.kafka.records import HEADER_SIZE
from tests.log.conftest import LogFactory, abandon, batch, read_all

CONFIG = {"segment_bytes": 1_500, "index_interval_bytes": 200, "recovery_checkpoint_interval_ms": 0}


def _fill(log, batches: int) -> list[bytes]:  # type: ignore[no-untyped-def]
    values = []
    for n in range(batches):
        chunk = [b"%05d" % (n * 2 + i) + b"." * 60 for i in range(2)]
        log.append(bytearray(batch(chunk)))
        values += chunk
    return values


def _crash_with_tail(logs: LogFactory, damage) -> tuple[list[bytes], int, int]:  # type: ignore[no-untyped-def]
    """Fill a log, flush it, append one more batch, damage the active segment file, crash."""
    log = logs.open(**CONFIG)
    values = _fill(log, 30)
    log.flush()
    last = log.append(bytearray(batch([b"last-1", b"last-2"])))
    active = log.active.log_path
    size_before = active.stat().st_size
    abandon(log)
    damage(active)
    return values, last.first_offset, size_before


def test_garbage_tail_is_cut(logs: LogFactory, caplog: pytest.LogCaptureFixture) -> None:
    def add_garbage(path):  # type: ignore[no-untyped-def]
        with open(path, "ab") as handle:
            handle.write(os.urandom(100))

    values, last_offset, size_before = _crash_with_tail(logs, add_garbage)
    with caplog.at_level(logging.WARNING, logger="roost.log"):
        log = logs.open(**CONFIG)
    assert "cut 100 bytes" in caplog.text and f"at position {size_before}" in caplog.text
    assert log.log_end_offset == last_offset + 2  # the complete last batch survives
    assert [r.value for r in read_all(log)] == [*values, b"last-1", b"last-2"]
    assert log.active.log_path.stat().st_size == size_before


def test_half_a_batch_is_cut(logs: LogFactory, caplog: pytest.LogCaptureFixture) -> None:
    def tear(path):  # type: ignore[no-untyped-def]
        size = path.stat().st_size
        os.truncate(path, size - 20)

    values, last_offset, _ = _crash_with_tail(logs, tear)
    with caplog.at_level(logging.WARNING, logger="roost.log"):
        log = logs.open(**CONFIG)
    assert log.log_end_offset == last_offset
    assert [r.value for r in read_all(log)] == values
    assert str(log.active.log_path) in caplog.text
    assert "cut" in caplog.text
    assert log.append(bytearray(batch([b"again"]))).first_offset == last_offset


def test_flipped_byte_in_the_last_batch_is_caught_by_crc(
    logs: LogFactory, caplog: pytest.LogCaptureFixture
) -> None:
    def flip(path):  # type: ignore[no-untyped-def]
        with open(path, "r+b") as handle:
            handle.seek(-3, os.SEEK_END)
            byte = handle.read(1)
            handle.seek(-3, os.SEEK_END)
            handle.write(bytes([byte[0] ^ 0x40]))

    values, last_offset, size_before = _crash_with_tail(logs, flip)
    with caplog.at_level(logging.WARNING, logger="roost.log"):
        log = logs.open(**CONFIG)
    assert "CRC mismatch" in caplog.text
    assert log.log_end_offset == last_offset
    assert [r.value for r in read_all(log)] == values
    cut = size_before - log.active.size
    assert f"cut {cut} bytes" in caplog.text


def test_recovery_scans_from_the_recovery_point_only(logs: LogFactory) -> None:
    log = logs.open(**CONFIG)
    _fill(log, 30)
    log.flush()
    assert (log.directory / RECOVERY_POINT_FILE).read_text() == f"{log.log_end_offset}\n"
    first = log.segments[0].log_path
    abandon(log)
    # Damage below the recovery point is not looked for (that data was fsynced and is trusted):
    # flipping a record byte there goes unnoticed, while the segment structure stays intact.
    data = bytearray(first.read_bytes())
    data[HEADER_SIZE + 5] ^= 0x01
    first.write_bytes(bytes(data))
    again = logs.open(**CONFIG)
    assert again.log_end_offset == 60


def test_corruption_in_an_earlier_segment_drops_later_ones(
    logs: LogFactory, caplog: pytest.LogCaptureFixture
) -> None:
    log = logs.open(**CONFIG)
    values = _fill(log, 30)
    bases = [s.base_offset for s in log.segments]
    second = log.segments[1]
    position_of_third_batch = sum(h.size for _, h in list(second.scan())[:2])
    path = second.log_path
    abandon(log)
    # Each roll made the segment before it durable and moved the recovery point; without the
    # checkpoint (lost, or unreadable) recovery scans every segment.
    (log.directory / RECOVERY_POINT_FILE).unlink()
    data = bytearray(path.read_bytes())
    data[position_of_third_batch + HEADER_SIZE + 3] ^= 0xFF
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="roost.log"):
        again = logs.open(**CONFIG)
    assert [s.base_offset for s in again.segments] == bases[:2]
    expected_end = bases[1] + 4  # two whole batches of two records survive in the second segment
    assert again.log_end_offset == expected_end
    assert [r.value for r in read_all(again)] == values[:expected_end]
    assert "deleting" in caplog.text
    assert sorted(n for n in os.listdir(again.directory) if n.endswith(".log")) == [
        f"{b:020d}.log" for b in bases[:2]
    ]


def test_damaged_index_is_rebuilt(logs: LogFactory, caplog: pytest.LogCaptureFixture) -> None:
    log = logs.open(**CONFIG)
    values = _fill(log, 30)
    log.close()
    index = log.segments[0].index_path
    index.write_bytes(index.read_bytes()[:-8] + struct.pack(">ii", 0, 0) + b"\x01\x02")
    with caplog.at_level(logging.WARNING, logger="roost.log"):
        again = logs.open(**CONFIG)
    assert "rebuilding" in caplog.text
    assert [r.value for r in read_all(again)] == values
    for offset in range(0, again.log_end_offset, 3):
        assert again.read(offset, 1).first_offset <= offset < again.read(offset, 1).next_offset


def test_unclean_reopen_after_a_clean_one_is_still_checked(logs: LogFactory) -> None:
    log = logs.open(**CONFIG)
    values = _fill(log, 5)
    log.close()
    again = logs.open(**CONFIG)  # removes the clean-shutdown marker
    again.append(bytearray(batch([b"unflushed"])))
    path = again.active.log_path
    abandon(again)
    with open(path, "ab") as handle:
        handle.write(b"\x00" * 30)
    third = logs.open(**CONFIG)
    assert [r.value for r in read_all(third)] == [*values, b"unflushed"]


@pytest.mark.parametrize("kept_batches", [0, 1, 2])
def test_a_power_cut_after_rolls_leaves_no_hole_below_the_log_end(logs: LogFactory, kept_batches: int) -> None:
    # A power cut keeps what was fsynced and, of each file, any prefix of the rest (cut here at a
    # batch boundary, so no CRC fails and recovery has nothing to see). If an earlier segment
    # could lose its tail while a later one kept its records, the log would have a hole below
    # its end, which a follower reports as held (found by tests/sim/replication). So each roll
    # makes the segment before it durable: only the active segment holds unsynced bytes.
    log = logs.open(segment_bytes=300)
    values = [b"v%03d" % n + b"x" * 40 for n in range(8)]
    for value in values:
        log.append(bytearray(batch([value])), leader_epoch=0)
    assert len(log.segments) > 2
    durable = log.recovery_point
    assert durable == log.active.base_offset, "a roll left a segment before the active one unsynced"
    active = log.active
    boundaries = [position for position, _ in active.scan(0)]
    abandon(log)
    # The worst the disk may do: every file cut at a batch boundary at or after its durable part.
    for segment_path in sorted(active.log_path.parent.glob("*.log")):
        if int(segment_path.stem) >= durable:
            os.truncate(segment_path, boundaries[kept_batches] if kept_batches < len(boundaries) else
                        segment_path.stat().st_size)
    reopened = logs.open(segment_bytes=300)
    offsets = [r.offset for r in read_all(reopened)]
    assert offsets == list(range(len(offsets))), f"offsets {offsets} below the log end {reopened.log_end_offset}"
    assert reopened.log_end_offset == len(offsets) >= durable
