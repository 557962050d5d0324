"""What a compacted log must satisfy, checked against every record the test appended."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from roost.log import PartitionLog
from roost.wire.kafka.records import BatchHeader, Record, build_batch, decode_batch_records


@dataclass(frozen=True)
class Appended:
    """A record as the test appended it, with the offset the log gave it."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


def append_records(
    log: PartitionLog, records: Iterable[tuple[bytes | None, bytes | None, int]], **batch_fields: int
) -> list[Appended]:
    """Append (key, value, timestamp) records as one batch; returns them with their offsets."""
    items = list(records)
    data = build_batch([Record(k, v, [], t) for k, v, t in items], timestamp_ms=0, **batch_fields)  # type: ignore[arg-type]
    info = log.append(bytearray(data))
    return [Appended(info.first_offset + n, k, v, t) for n, (k, v, t) in enumerate(items)]


def log_batches(log: PartitionLog) -> list[tuple[int, list[Record]]]:
    """(segment base offset, records) of every batch in the log, in order."""
    return [(base, records) for base, _header, records in log_batches_with_headers(log)]


def log_batches_with_headers(log: PartitionLog) -> list[tuple[int, BatchHeader, list[Record]]]:
    found = []
    for segment in log.segments:
        for _pos, header, raw in segment.iter_batches():
            found.append((segment.base_offset, header, decode_batch_records(raw)))
    return found


def log_records(log: PartitionLog) -> list[Record]:
    return [record for _base, records in log_batches(log) for record in records]


def check_compacted_view(
    log: PartitionLog, appended: list[Appended], *, tombstone_horizon_ms: int | None
) -> None:
    """What every compacted log (cleaned or not, or half cleaned by a crash) must satisfy:

    - every record in the log is one that was appended, at the same offset, unchanged;
    - offsets strictly increase; the log end is unchanged;
    - every keyless record is still there;
    - for every key, the last record in the log is the last one appended; only a tombstone
      older than `tombstone_horizon_ms` (None: no tombstone may have gone) may be gone, and then
      every record of its key is gone with it.
    """
    # Below the log start (DeleteRecords) records are invisible: the first segment may still
    # hold some, and keys whose last record went that way may be gone.
    appended = [a for a in appended if a.offset >= log.log_start_offset]
    by_offset = {a.offset: a for a in appended}
    records = [r for r in log_records(log) if r.offset >= log.log_start_offset]
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets)), "offsets must strictly increase"
    if appended:
        assert log.log_end_offset == appended[-1].offset + 1
    for record in records:
        original = by_offset.get(record.offset)
        assert original is not None, f"offset {record.offset} was never appended"
        assert (record.key, record.value, record.timestamp) == (
            original.key,
            original.value,
            original.timestamp,
        )
    present = set(offsets)
    for a in appended:
        if a.key is None:
            assert a.offset in present, f"keyless record at {a.offset} is gone"
    last_appended: dict[bytes, Appended] = {}
    for a in appended:
        if a.key is not None:
            last_appended[a.key] = a
    last_in_log: dict[bytes, int] = {}
    for record in records:
        if record.key is not None:
            last_in_log[record.key] = record.offset
    for key, last in last_appended.items():
        if key in last_in_log:
            assert last_in_log[key] == last.offset, (
                f"key {key!r}: latest {last.offset}, log ends at {last_in_log[key]}"
            )
        else:
            assert last.value is None, f"key {key!r} lost its latest value at {last.offset}"
            assert tombstone_horizon_ms is not None and last.timestamp < tombstone_horizon_ms, (
                f"tombstone of {key!r} at {last.offset} went before it was old enough"
            )


def check_fully_compacted(log: PartitionLog, appended: list[Appended], *, tombstone_horizon_ms: int) -> None:
    """After a complete pass with no high watermark and an unbounded map: outside the active
    segment no record is superseded, except in a batch kept whole because splitting it around
    its gaps would not have made it smaller (its survivors are not consecutive), and the last
    record of an idempotent producer's last batch; and no tombstone is older than the horizon
    unless an older record of its key survives. Batches reaching below the log start (invisible
    there, and not cleaned there: the map starts at the log start) are not checked."""
    producer_last_offsets = {entry.last_offset for entry in log.producer_state.producers.values()}
    latest: dict[bytes, int] = {}
    for a in appended:
        if a.key is not None:
            latest[a.key] = a.offset
    seen_keys: set[bytes] = set()
    for base, header, records in log_batches_with_headers(log):
        doomed = []
        for record in records:
            if record.key is None or record.offset < log.log_start_offset:
                doomed.append(False)  # below the log start records are invisible: left alone
            elif latest[record.key] > record.offset:
                doomed.append(True)
            else:
                expired = record.value is None and record.timestamp < tombstone_horizon_ms
                doomed.append(expired and record.key not in seen_keys)
        if (
            header.producer_id >= 0
            and header.base_sequence >= 0
            and header.last_offset in producer_last_offsets
        ):
            doomed[-1] = False
        seen_keys.update(record.key for record in records if record.key is not None)
        if base == log.active.base_offset or not any(doomed) or records[0].offset < log.log_start_offset:
            continue
        assert not all(doomed), f"a batch with nothing to keep survived at {records[0].offset}"
        kept_runs = sum(1 for n, d in enumerate(doomed) if not d and (n == 0 or doomed[n - 1]))
        assert kept_runs >= 2, f"batch at {records[0].offset} keeps superseded records it could shed"
