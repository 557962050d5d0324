"""Retention by time and size, DeleteRecords, and their persistence across reopen."""

from __future__ import annotations

import logging

import pytest

from roost.log import OffsetOutOfRange
from tests.log.conftest import FakeClock, LogFactory, batch, read_all

SEGMENT = 1_000


def _fill(log, clock: FakeClock, batches: int) -> None:  # type: ignore[no-untyped-def]
    for _ in range(batches):
        log.append(bytearray(batch([b"v" * 50] * 3, timestamp_ms=clock.now_ms)))
        clock.advance(1_000)


def test_time_retention_deletes_old_segments_but_never_the_active_one(
    logs: LogFactory, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    log = logs.open(segment_bytes=SEGMENT, retention_ms=10_000)
    _fill(log, clock, 40)
    segments_before = log.segment_count
    expired = 0
    for segment in log.segments[:-1]:
        if clock.now_ms - segment.max_timestamp <= 10_000:
            break
        expired += 1
    assert 0 < expired < segments_before - 1
    assert log.apply_retention() == expired
    segments_before -= expired
    with caplog.at_level(logging.INFO, logger="roost.log"):
        clock.advance(10**6)
        deleted = log.apply_retention()
    assert deleted == segments_before - 1
    assert log.segment_count == 1
    assert log.log_start_offset == log.segments[0].base_offset
    assert "retention deleted" in caplog.text
    assert read_all(log)[0].offset == log.log_start_offset


def test_time_retention_keeps_young_segments(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(segment_bytes=SEGMENT, retention_ms=15_000)
    _fill(log, clock, 40)  # one batch per simulated second
    log.apply_retention()
    cutoff = clock.now_ms - 15_000
    assert log.segments[0].max_timestamp > cutoff  # what is left is young enough ...
    kept = read_all(log)
    assert kept[0].offset == log.log_start_offset
    assert min(r.timestamp for r in kept) <= cutoff or log.segment_count == 1  # ... whole segments only


def test_size_retention(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(segment_bytes=SEGMENT, retention_bytes=3 * SEGMENT, retention_ms=-1)
    _fill(log, clock, 60)
    log.apply_retention()
    # Kafka's rule: delete the oldest segment while the log stays >= retention.bytes without it.
    assert log.size_bytes >= 3 * SEGMENT
    assert log.size_bytes - log.segments[0].size < 3 * SEGMENT
    assert read_all(log)[-1].offset == log.log_end_offset - 1


def test_retention_respects_the_high_watermark(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(segment_bytes=SEGMENT, retention_ms=0)
    _fill(log, clock, 40)
    clock.advance(10**6)
    second_base = log.segments[1].base_offset
    log.apply_retention(high_watermark=second_base)
    assert log.log_start_offset == second_base  # only the segment wholly below the HW went


def test_log_start_survives_reopen(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(segment_bytes=SEGMENT, retention_ms=5_000)
    _fill(log, clock, 40)
    clock.advance(10**6)
    log.apply_retention()
    start = log.log_start_offset
    log.close()
    again = logs.open(segment_bytes=SEGMENT, retention_ms=5_000)
    assert again.log_start_offset == start
    with pytest.raises(OffsetOutOfRange):
        again.read(start - 1, 100)


def test_delete_records(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(segment_bytes=SEGMENT)
    _fill(log, clock, 40)
    end = log.log_end_offset
    segments = log.segment_count
    assert log.delete_records_before(5) == 5  # inside the batch 3..5
    assert log.segment_count == segments
    result = log.read(5, 1)
    assert result.first_offset == 3  # the batch holding the log start is still served whole
    with pytest.raises(OffsetOutOfRange):
        log.read(4, 100)
    middle = log.segments[3].base_offset + 1
    log.delete_records_before(middle)
    assert log.segments[0].base_offset == log.segments[0].base_offset <= middle
    assert log.segment_count == segments - 3
    assert log.delete_records_before(2) == middle  # never moves back
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(end + 1)
    # Persisted even without a clean shutdown.
    log._release_fds()
    again = logs.open(segment_bytes=SEGMENT)
    assert again.log_start_offset == middle
    assert again.log_end_offset == end
    assert again.delete_records_before(end) == end
    assert again.read(end, 100).size == 0
