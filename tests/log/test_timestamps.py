"""ListOffsets support: offset_for_timestamp (Kafka semantics) and max_timestamp_offset."""

from __future__ import annotations

from roost.wire.kafka.records import COMPRESSION_LZ4, Record, build_batch
from tests.log.conftest import LogFactory


def _stamped(timestamps: list[int], **kwargs: int) -> bytearray:
    records = [Record(b"k", b"t=%d" % t, [], t) for t in timestamps]
    return bytearray(build_batch(records, timestamp_ms=0, **kwargs))


def _brute_force(
    all_records: list[tuple[int, int]], target: int, log_start: int = 0
) -> tuple[int, int] | None:
    for offset, timestamp in all_records:
        if offset >= log_start and timestamp >= target:
            return offset, timestamp
    return None


def test_offset_for_timestamp_matches_a_brute_force_scan(logs: LogFactory) -> None:
    log = logs.open(segment_bytes=700, index_interval_bytes=120)
    # Timestamps mostly grow but jump around inside and across batches, as real producers' do.
    pattern = [[100, 90, 130], [120, 125], [200], [150, 210, 205], [300, 310], [305], [400, 390]]
    all_records: list[tuple[int, int]] = []
    for round_ in range(6):
        for stamps in pattern:
            shifted = [t + 1_000 * round_ for t in stamps]
            info = log.append(_stamped(shifted, compression=COMPRESSION_LZ4 if round_ % 2 else 0))
            all_records += list(zip(range(info.first_offset, info.last_offset + 1), shifted, strict=True))
    assert log.segment_count > 3
    for target in range(0, 6_500, 7):
        assert log.offset_for_timestamp(target) == _brute_force(all_records, target), target
    assert log.offset_for_timestamp(10**12) is None
    offset, timestamp = max(all_records, key=lambda r: (r[1], -r[0]))
    assert log.max_timestamp_offset() == (timestamp, offset)


def test_offset_for_timestamp_after_reopen_and_delete_records(logs: LogFactory) -> None:
    log = logs.open(segment_bytes=500, index_interval_bytes=50)
    all_records = []
    for n in range(30):
        stamps = [n * 10, n * 10 + 5]
        info = log.append(_stamped(stamps))
        all_records += list(zip(range(info.first_offset, info.last_offset + 1), stamps, strict=True))
    log.close()
    again = logs.open(segment_bytes=500, index_interval_bytes=50)
    for target in range(0, 320, 3):
        assert again.offset_for_timestamp(target) == _brute_force(all_records, target)
    again.delete_records_before(21)  # inside the batch 20..21
    assert again.offset_for_timestamp(0) == (21, 105)
    assert again.max_timestamp_offset() == (295, 59)


def test_empty_log_has_no_timestamps(logs: LogFactory) -> None:
    log = logs.open()
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp_offset() is None
