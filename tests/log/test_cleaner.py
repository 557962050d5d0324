"""Log compaction: the latest record per key survives, tombstones age out, offsets never change,
reads, indexes and producer state keep working across the gaps, and passes are cheap to repeat."""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roost.log import PartitionLog
from roost.log.cleaner import (
    CLEANED_SUFFIX,
    CLEANER_CHECKPOINT_FILE,
    CleanerCheckpoint,
    CompactionLags,
    read_cleaner_checkpoint,
)
from roost.log.cleaner_rules import OffsetMap, RecordFilter, decode_dense_batch, summarize_batch
from roost.log.config import NEVER
from roost.log.producer_state import OK
from roost.log.segment import MAP_THRESHOLD
from roost.wire.kafka.records import (
    COMPRESSION_GZIP,
    HEADER_SIZE,
    Record,
    batch_crc,
    build_batch,
    iter_records,
    parse_header,
)
from tests.log.compaction_checks import (
    Appended,
    append_records,
    check_compacted_view,
    check_fully_compacted,
    log_batches,
    log_records,
)
from tests.log.conftest import FakeClock, LogFactory, abandon, read_all

CONFIG = {"segment_bytes": 1_200, "index_interval_bytes": 150}
DAY = 86_400_000


def _value(n: int) -> bytes:
    return b"value-%04d-" % n + b"x" * 40


def _fill(log: PartitionLog, clock: FakeClock, count: int, keys: int, *, start: int = 0) -> list[Appended]:
    """`count` single-record batches cycling over `keys` keys, one simulated second apart."""
    appended = []
    for n in range(start, start + count):
        appended += append_records(log, [(b"key-%d" % (n % keys), _value(n), clock.now_ms)])
        clock.advance(1_000)
    return appended


def test_latest_value_per_key_survives_with_offsets_and_keyless_records(
    logs: LogFactory, clock: FakeClock
) -> None:
    log = logs.open(**CONFIG)
    appended: list[Appended] = []
    for n in range(120):
        records = [(b"key-%d" % (n % 5), _value(n), clock.now_ms), (None, b"keyless-%d" % n, clock.now_ms)]
        appended += append_records(log, records)
        clock.advance(1_000)
    size_before, segments_before = log.size_bytes, log.segment_count

    stats = log.clean(clock.now_ms)
    assert stats.cleaned and stats.dirty_ratio == 1.0
    assert stats.records_removed > 0 and stats.tombstones_removed == 0
    assert log.size_bytes < size_before and log.segment_count <= segments_before
    check_compacted_view(log, appended, tombstone_horizon_ms=None)
    check_fully_compacted(log, appended, tombstone_horizon_ms=clock.now_ms - DAY)
    # Outside the active segment each key appears once; all 120 keyless records are there.
    cleaned = [r for base, rs in log_batches(log) if base != log.active.base_offset for r in rs]
    keyed = [r.key for r in cleaned if r.key is not None]
    assert len(keyed) == len(set(keyed))
    assert sum(1 for r in log_records(log) if r.key is None) == 120
    assert stats.clean_point == log.active.base_offset


def test_active_segment_is_never_rewritten_but_its_keys_are_newer(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(segment_bytes=100_000)
    appended = _fill(log, clock, 10, 2)
    log.roll_if_due()  # nothing: the segment is young
    log._roll(log.log_end_offset, clock.now_ms)  # everything so far is now cleanable
    appended += append_records(log, [(b"key-0", b"newest", clock.now_ms)])
    active_before = log.active.log_path.read_bytes()

    log.clean(clock.now_ms)
    assert log.active.log_path.read_bytes() == active_before
    survivors = [r for r in log_records(log) if r.key == b"key-0"]
    assert [r.value for r in survivors] == [b"newest"]  # the older ones went: the active one is newer
    assert [r.value for r in log_records(log) if r.key == b"key-1"] == [_value(9)]
    check_compacted_view(log, appended, tombstone_horizon_ms=None)


def test_tombstones_stay_until_delete_retention_then_go(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(**CONFIG)
    appended = _fill(log, clock, 30, 3)
    appended += append_records(log, [(b"key-1", None, clock.now_ms)])  # delete key-1
    tombstone_time = clock.now_ms
    # key-0 only from here: the tombstone leaves the active segment
    appended += _fill(log, clock, 30, 1, start=100)

    stats = log.clean(clock.now_ms, delete_retention_ms=DAY)
    assert stats.cleaned and stats.tombstones_removed == 0
    key1 = [r for r in log_records(log) if r.key == b"key-1"]
    assert [r.value for r in key1] == [None]  # older values gone at once, the tombstone stays
    assert read_cleaner_checkpoint(log.directory).oldest_tombstone_ms == tombstone_time

    # Nothing new is dirty, so nothing happens until the tombstone is old enough.
    clock.advance(DAY // 2)
    assert not log.clean(clock.now_ms, delete_retention_ms=DAY).cleaned
    clock.advance(DAY)
    stats = log.clean(clock.now_ms, delete_retention_ms=DAY)
    assert stats.cleaned and stats.reason == "tombstones past delete.retention.ms"
    assert stats.tombstones_removed == 1
    assert not [r for r in log_records(log) if r.key == b"key-1"]
    assert read_cleaner_checkpoint(log.directory).oldest_tombstone_ms == NEVER
    check_compacted_view(log, appended, tombstone_horizon_ms=clock.now_ms - DAY)
    assert not log.clean(clock.now_ms, delete_retention_ms=DAY).cleaned


def test_second_call_is_a_cheap_no_op_until_enough_is_dirty(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(**CONFIG)
    _fill(log, clock, 100, 30)
    assert log.clean(clock.now_ms).cleaned
    files = {p.name: p.stat().st_mtime_ns for p in log.directory.iterdir()}
    again = log.clean(clock.now_ms)
    assert not again.cleaned and again.dirty_ratio == 0.0 and "below" in again.reason
    assert {p.name: p.stat().st_mtime_ns for p in log.directory.iterdir()} == files

    # New data becomes dirty once its segment rolls; below the ratio nothing happens.
    for n in range(200):
        _fill(log, clock, 1, 30, start=1000 + n)
        probe = log.clean(clock.now_ms, min_cleanable_ratio=1.0)
        if probe.dirty_ratio > 0:
            break
    assert not probe.cleaned and 0 < probe.dirty_ratio < 1.0
    assert log.clean(clock.now_ms, min_cleanable_ratio=probe.dirty_ratio).cleaned


def test_reads_across_gaps(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(**CONFIG)
    appended = _fill(log, clock, 60, 3)
    log.clean(clock.now_ms)
    present = [r.offset for r in log_records(log)]
    gaps = sorted(set(range(log.log_end_offset)) - set(present))
    assert gaps
    for offset in gaps:
        result = log.read(offset, 1)  # at least one batch: the next one after the gap
        first = next(iter_records(result.buffers[0]))
        assert first.offset == min(o for o in present if o > offset)
        assert result.first_offset == first.offset
    # Reading everything from the start walks every gap and segment boundary.
    assert [r.offset for r in read_all(log, 0)] == present
    # Small budgets step through batch by batch.
    offset, seen = 0, []
    for _ in range(len(present) + 1):
        if offset >= log.log_end_offset:
            break
        result = log.read(offset, 1)
        seen += [r.offset for b in result.buffers for r in iter_records(b)]
        offset = result.next_offset
    assert seen == present
    # Timestamps: the record at or after a time, also when that time's record went.
    by_offset = {a.offset: a for a in appended}
    for a in appended[::7]:
        found = log.offset_for_timestamp(a.timestamp)
        assert found is not None
        expected = min(o for o in present if by_offset[o].timestamp >= a.timestamp)
        assert found == (expected, by_offset[expected].timestamp)
    newest = max(present)
    assert log.max_timestamp_offset() == (by_offset[newest].timestamp, newest)


def test_reopen_after_clean_shutdown_and_after_a_crash(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(**CONFIG)
    appended = _fill(log, clock, 60, 4)
    log.clean(clock.now_ms)
    expected = [(r.offset, r.key, r.value) for r in log_records(log)]
    log.close()
    log = logs.open(**CONFIG)
    assert [(r.offset, r.key, r.value) for r in log_records(log)] == expected
    assert log.cleaner_checkpoint.clean_point == log.active.base_offset
    appended += _fill(log, clock, 10, 4, start=500)
    abandon(log)
    log = logs.open(**CONFIG)
    check_compacted_view(log, appended, tombstone_horizon_ms=None)
    assert log.clean(clock.now_ms, min_cleanable_ratio=0.0).cleaned
    check_fully_compacted(log, appended, tombstone_horizon_ms=0)


def test_high_watermark_bounds_what_counts_as_newer(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(segment_bytes=100_000)
    appended = _fill(log, clock, 6, 1)
    log._roll(log.log_end_offset, clock.now_ms)
    high_watermark = log.log_end_offset
    appended += append_records(log, [(b"key-0", b"not yet committed", clock.now_ms)])

    log.clean(clock.now_ms, high_watermark=high_watermark)
    assert [r.value for r in log_records(log) if r.key == b"key-0"] == [_value(5), b"not yet committed"]
    # A follower truncates the uncommitted record: the committed value is still there.
    log.truncate_to(high_watermark)
    assert [r.value for r in log_records(log)] == [_value(5)]
    check_compacted_view(log, appended[:-1], tombstone_horizon_ms=None)
    # Without the high watermark nothing counts as cleanable above it either.
    assert not log.clean(clock.now_ms, high_watermark=0).cleaned


def test_truncation_below_the_clean_point_lowers_it(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(**CONFIG)
    _fill(log, clock, 60, 3)
    log.clean(clock.now_ms)
    assert log.cleaner_checkpoint.clean_point > 10
    log.truncate_to(10)
    assert read_cleaner_checkpoint(log.directory).clean_point <= 10
    assert log.cleaner_checkpoint.clean_point <= 10


def test_bounded_map_cleans_a_prefix_and_later_passes_finish(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(**CONFIG)
    appended: list[Appended] = []
    for n in range(150):  # a new key per record, then each key again: only the second ones stay
        appended += append_records(log, [(b"k%03d" % (n % 75), _value(n), clock.now_ms)])
    stats = log.clean(clock.now_ms, max_keys=20)
    assert stats.cleaned and stats.map_full and stats.keys <= 20
    assert stats.clean_point == stats.map_end < log.active.base_offset
    check_compacted_view(log, appended, tombstone_horizon_ms=None)
    for _ in range(20):
        stats = log.clean(clock.now_ms, max_keys=20, min_cleanable_ratio=0.0)
        if not stats.cleaned:
            break
        check_compacted_view(log, appended, tombstone_horizon_ms=None)
    assert log.cleaner_checkpoint.clean_point == log.active.base_offset
    # With the map bounded, a key is only dropped when its newer record was mapped in the same
    # pass; one full pass removes everything left.
    log.cleaner_checkpoint = CleanerCheckpoint()
    assert log.clean(clock.now_ms, min_cleanable_ratio=0.0).cleaned
    check_fully_compacted(log, appended, tombstone_horizon_ms=0)


def test_compressed_batches_are_recompressed_with_their_codec(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(**CONFIG)
    appended: list[Appended] = []
    for n in range(20):
        records = [(b"key-%d" % k, _value(n * 10 + k), clock.now_ms + k) for k in range(6)]
        appended += append_records(log, records, compression=COMPRESSION_GZIP)
        clock.advance(1_000)
    log.clean(clock.now_ms)
    check_compacted_view(log, appended, tombstone_horizon_ms=None)
    check_fully_compacted(log, appended, tombstone_horizon_ms=0)
    for segment in log.segments:
        for _pos, header, _raw in segment.iter_batches():
            assert header.compression == COMPRESSION_GZIP


def test_rewritten_batches_keep_their_header_fields(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(segment_bytes=100_000)
    data = build_batch(
        [Record(b"a", b"1" * 50, [("h", b"x")], 5_000), Record(b"b", b"2" * 50, [], 5_001),
         Record(b"c", b"3" * 50, [], 5_002), Record(b"d", b"4" * 50, [], 5_003)],
        timestamp_ms=0, producer_id=42, producer_epoch=3, base_sequence=10, partition_leader_epoch=7,
    )  # fmt: skip
    log.append(bytearray(data))
    append_records(log, [(b"b", b"newer", 6_000)], producer_id=42, producer_epoch=3, base_sequence=14)
    log._roll(log.log_end_offset, clock.now_ms)
    append_records(log, [(b"d", b"newest", 7_000)])
    log.clean(clock.now_ms)

    batches = [(h, raw) for s in log.segments[:-1] for _p, h, raw in s.iter_batches()]
    # Offsets 0 (a), 2 (c) and 4 (b, newer) stay: three runs of one record each.
    assert [h.base_offset for h, _raw in batches] == [0, 2, 4]
    first, second, _third = (h for h, _raw in batches)
    assert (first.producer_id, first.producer_epoch, first.partition_leader_epoch) == (42, 3, 7)
    assert (first.base_sequence, second.base_sequence) == (10, 12)  # each offset keeps its sequence
    assert (first.base_timestamp, second.base_timestamp) == (5_000, 5_002)
    records = list(iter_records(b"".join(bytes(raw) for _h, raw in batches)))
    assert records[0].headers == [("h", b"x")] and records[0].timestamp == 5_000


def test_a_producers_last_transactional_batch_and_its_marker_stay_and_pin_their_keys(
    logs: LogFactory, clock: FakeClock
) -> None:
    # (The rest of the transactional rules: tests/log/test_cleaner_transactions.py.)
    log = logs.open(segment_bytes=100_000)
    old = clock.now_ms
    appended = append_records(log, [(b"t", b"in a transaction", old)], producer_id=9, producer_epoch=0,
                              base_sequence=0, is_transactional=True)  # fmt: skip
    control = build_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")], timestamp_ms=old,
                          producer_id=9, producer_epoch=0, is_transactional=True, is_control=True)  # fmt: skip
    log.append(bytearray(control))
    appended += append_records(log, [(b"t", None, old)])  # a tombstone for the same key
    appended += append_records(log, [(b"u", b"plain", old), (b"u", b"plain again", old)])
    log._roll(log.log_end_offset, clock.now_ms)
    clock.advance(10 * DAY)

    log.clean(clock.now_ms)
    headers = [h for _p, h, _raw in log.segments[0].iter_batches()]
    assert [(h.is_transactional, h.is_control) for h in headers[:2]] == [(True, False), (True, True)]
    # The tombstone is old, but an older value of its key stays in the transactional batch.
    assert [r.value for r in log_records(log) if r.key == b"t"] == [b"in a transaction", None]
    assert [r.value for r in log_records(log) if r.key == b"u"] == [b"plain again"]


def test_idempotent_producer_state_survives_a_rebuild_from_cleaned_segments(
    logs: LogFactory, clock: FakeClock
) -> None:
    log = logs.open(segment_bytes=100_000)
    append_records(log, [(b"a", b"1" * 40, 1), (b"b", b"2" * 40, 1)], producer_id=5, producer_epoch=0,
                   base_sequence=0)  # fmt: skip
    append_records(log, [(b"a", b"newer", 2)])  # another producer supersedes pid 5's first record
    append_records(log, [(b"b", b"newer", 2)])  # ... and its last one
    log._roll(log.log_end_offset, clock.now_ms)
    log.clean(clock.now_ms)
    # Kafka keeps the producer's last batch; we keep its last record so its sequence survives.
    assert [(r.offset, r.key, r.value) for r in log_records(log)][:2] == [
        (1, b"b", b"2" * 40),
        (2, b"a", b"newer"),
    ]

    # Rebuild the producer state from the headers alone (no snapshot), as after a lost snapshot.
    log.close()
    for snapshot in log.directory.glob("*.snapshot"):
        snapshot.unlink()
    log = logs.open(segment_bytes=100_000)
    entry = log.producer_state.entry(5)
    assert entry is not None and entry.last_seq == 1
    next_batch = build_batch([(b"c", b"3")], timestamp_ms=3, producer_id=5, producer_epoch=0, base_sequence=2)
    assert log.producer_state.check(parse_header(next_batch)) is OK


def test_retention_and_delete_records_on_cleaned_segments(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(**CONFIG, retention_ms=20_000)
    appended: list[Appended] = []
    for n in range(60):  # every third key unique (it stays), the others overwritten (they go)
        key = b"unique-%d" % n if n % 3 == 0 else b"shared-%d" % (n % 2)
        appended += append_records(log, [(key, _value(n), clock.now_ms)])
        clock.advance(1_000)
    log.clean(clock.now_ms)
    present = [r.offset for r in log_records(log)]
    gap = next(o for o in range(present[-1]) if o not in present and o > present[2])
    assert log.delete_records_before(gap) == gap
    assert read_all(log)[0].offset == min(o for o in present if o >= gap)
    clock.advance(40_000)
    deleted = log.apply_retention()
    assert deleted >= 1 and log.segment_count == 1
    assert read_all(log)[0].offset >= log.log_start_offset
    check_compacted_view(log, [a for a in appended if a.offset >= log.log_start_offset] or appended[-1:],
                         tombstone_horizon_ms=None)  # fmt: skip


def test_live_views_survive_a_swap(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(segment_bytes=10 * MAP_THRESHOLD)
    big = b"y" * 50_000
    for n in range(20):
        append_records(log, [(b"key-%d" % (n % 2), big + b"%d" % n, n)])
    log._roll(log.log_end_offset, clock.now_ms)
    view = log.read(0, 4 * MAP_THRESHOLD)
    assert any(isinstance(b, memoryview) for b in view.buffers)
    before = b"".join(bytes(b) for b in view.buffers)
    log.clean(clock.now_ms)
    assert b"".join(bytes(b) for b in view.buffers) == before  # the old inode lives on
    assert [r.offset for r in log_records(log)] == [18, 19]


def test_leftover_temp_files_are_deleted_on_open(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(**CONFIG)
    _fill(log, clock, 20, 2)
    log.close()
    leftovers = [log.directory / ("00000000000000000000" + suffix + CLEANED_SUFFIX)
                 for suffix in (".log", ".index", ".timeindex")]  # fmt: skip
    for path in leftovers:
        path.write_bytes(os.urandom(100))
    (log.directory / CLEANER_CHECKPOINT_FILE).write_bytes(b"garbage")
    log = logs.open(**CONFIG)
    assert not any(path.exists() for path in leftovers)
    assert log.cleaner_checkpoint == CleanerCheckpoint()


def test_record_filter_core() -> None:
    """The sans-IO decision alone: superseded, keyless, young and old tombstones, and a batch
    kept whole when splitting it around its gaps would not make it smaller."""
    for filler, splits in ((b"", False), (b"z" * 100, True)):
        batch = build_batch([(b"a", b"1" + filler), (None, b"keyless" + filler), (b"b", None), (b"c", None),
                             (b"a", b"2" + filler)], timestamp_ms=1_000)  # fmt: skip
        header = parse_header(batch)
        offset_map = OffsetMap(start=0, max_keys=10)
        offset_map.add(header, summarize_batch(header, memoryview(batch)))
        young = RecordFilter(offset_map, tombstone_horizon_ms=500, producer_last_offsets={}, max_kept_keys=10)
        verdict = young.filter(header, memoryview(batch), 0)
        kept = [r.offset for b in verdict.batches for r in iter_records(b)]
        assert kept == [1, 2, 3, 4] and verdict.removed == 1 and young.oldest_kept_tombstone_ms == 1_000
        old = RecordFilter(offset_map, tombstone_horizon_ms=2_000, producer_last_offsets={}, max_kept_keys=10)
        verdict = old.filter(header, memoryview(batch), 0)
        if splits:
            assert [r.offset for b in verdict.batches for r in iter_records(b)] == [1, 4]
            assert verdict.tombstones_removed == 2 and len(verdict.batches) == 2
        else:  # two 61-byte headers for two tiny records: not smaller, the batch stays whole
            assert verdict.keep
        # Every key kept is remembered: a later tombstone of "a" must stay while "a"@0 survives.
        assert old.kept_key_hashes == ({hash(b"a"), hash(b"b"), hash(b"c")} if not splits else {hash(b"a")})


def test_checkpoint_format(tmp_path: Path) -> None:
    checkpoint = CleanerCheckpoint(123, 456)
    assert CleanerCheckpoint.from_bytes(checkpoint.to_bytes()) == checkpoint
    assert CleanerCheckpoint.from_bytes(b"123 456") is None  # torn: no newline
    assert CleanerCheckpoint.from_bytes(b"-1 0\n") is None
    assert read_cleaner_checkpoint(tmp_path) == CleanerCheckpoint()


@pytest.mark.parametrize("keys", [1, 7])
def test_many_passes_with_interleaved_writes(logs: LogFactory, clock: FakeClock, keys: int) -> None:
    log = logs.open(**CONFIG)
    appended: list[Appended] = []
    for round_ in range(6):
        appended += _fill(log, clock, 25, keys, start=round_ * 100)
        if round_ % 2:
            appended += append_records(log, [(b"key-0", None, clock.now_ms)])
        log.clean(clock.now_ms, delete_retention_ms=3_000, min_cleanable_ratio=0.0)
        check_compacted_view(log, appended, tombstone_horizon_ms=clock.now_ms - 3_000)
    check_fully_compacted(log, appended, tombstone_horizon_ms=clock.now_ms - 3_000 - 25_000)


def test_a_tombstone_stays_while_an_older_value_of_its_key_survives(
    logs: LogFactory, clock: FakeClock
) -> None:
    """Found by the model test: a batch kept whole (splitting it would not make it smaller)
    keeps an old value; a later pass whose map does not reach back to it must still not drop
    the key's tombstone, or the old value would come back to life."""
    log = logs.open(segment_bytes=100_000)
    appended = append_records(
        log, [(None, b"0", clock.now_ms), (b"a", b"old", clock.now_ms), (None, b"2", clock.now_ms)]
    )
    appended += append_records(log, [(b"a", None, clock.now_ms)])
    log._roll(log.log_end_offset, clock.now_ms)
    log.clean(clock.now_ms, delete_retention_ms=3_000)  # the tombstone is young: it stays
    assert [r.value for r in log_records(log) if r.key == b"a"] == [b"old", None]  # kept whole
    clock.advance(10_000)
    appended += append_records(log, [(None, b"more", clock.now_ms)])
    log._roll(log.log_end_offset, clock.now_ms)
    log.clean(clock.now_ms, delete_retention_ms=3_000, min_cleanable_ratio=0.0)
    check_compacted_view(log, appended, tombstone_horizon_ms=clock.now_ms - 3_000)
    assert [r.value for r in log_records(log) if r.key == b"a"] == [b"old", None]


def test_truncating_back_into_a_compacted_segment_keeps_the_log_end(
    logs: LogFactory, clock: FakeClock
) -> None:
    """Found by the model test: a truncation that makes a compacted segment (whose last records
    went) the active one must not let a reopen move the log end back."""
    log = logs.open(segment_bytes=100_000)
    append_records(log, [(None, b"0" * 30, 1), (b"a", b"1" * 30, 1), (b"a", b"2" * 30, 1), (b"a", None, 1)])
    log._roll(log.log_end_offset, clock.now_ms)
    append_records(log, [(b"b", b"uncommitted", 2)])
    log.clean(clock.now_ms, high_watermark=4)
    assert [r.offset for r in log_records(log)] == [0, 4]  # 1..3 went: the first segment ends at 1
    log.truncate_to(4)
    assert log.log_end_offset == 4
    log.flush()
    abandon(log)
    log = logs.open(segment_bytes=100_000)
    assert log.log_end_offset == 4
    assert log.append(bytearray(build_batch([(b"c", b"next")], timestamp_ms=3))).first_offset == 4


def test_a_value_the_bounded_map_misses_keeps_its_tombstone_in_the_same_batch(
    logs: LogFactory, clock: FakeClock
) -> None:
    """Found by the model test: with the map full before a batch [e=value, e=tombstone], the
    value is kept (the map does not know it is superseded), so the tombstone must stay too."""
    log = logs.open(segment_bytes=100_000)
    appended = append_records(log, [(b"a", b"1", 1)])
    appended += append_records(log, [(b"e", b"old", 1), (b"e", None, 1)])
    log._roll(log.log_end_offset, clock.now_ms)
    stats = log.clean(clock.now_ms, delete_retention_ms=0, max_keys=2)
    assert stats.map_full and stats.map_end == 1
    check_compacted_view(log, appended, tombstone_horizon_ms=clock.now_ms)
    assert [r.value for r in log_records(log) if r.key == b"e"] == [b"old", None]


def test_truncating_back_into_an_emptied_first_segment_keeps_the_log_end(
    logs: LogFactory, clock: FakeClock
) -> None:
    log = logs.open(segment_bytes=100_000)
    append_records(log, [(b"a", None, 1)])
    log._roll(log.log_end_offset, clock.now_ms)
    log.clean(clock.now_ms, delete_retention_ms=0)
    assert log.segments[0].size == 0  # the first segment stays, empty
    append_records(log, [(None, b"uncommitted", 2)])
    log.truncate_to(1)
    log.close()
    log = logs.open(segment_bytes=100_000)
    assert log.log_end_offset == 1


@given(
    records=st.lists(
        st.tuples(
            st.none() | st.binary(max_size=300), st.none() | st.binary(max_size=300), st.integers(-1, 10**13)
        ),
        min_size=1,
        max_size=20,
    ),
    compression=st.sampled_from([0, COMPRESSION_GZIP]),
    log_append_time=st.booleans(),
    flips=st.lists(st.integers(0, 10**6), max_size=3),
)
@settings(max_examples=150, deadline=None)
def test_summaries_agree_with_the_full_decoder(
    records: list[tuple[bytes | None, bytes | None, int]],
    compression: int,
    log_append_time: bool,
    flips: list[int],
) -> None:
    data = bytearray(
        build_batch(
            [Record(k, v, [("h", b"x")], t) for k, v, t in records],
            base_offset=1_000,
            timestamp_ms=5,
            compression=compression,
            timestamp_type=int(log_append_time),
        )
    )
    for flip in flips:  # damage: the CRC check (or, past it, the decoder) must refuse it
        data[61 + flip % (len(data) - 61)] ^= 0x5A
    header = parse_header(data)
    summaries = summarize_batch(header, memoryview(data))
    decoded = decode_dense_batch(header, memoryview(data))
    if decoded is None:
        assert summaries is None or flips  # (damage may also hit where only the decoder looks)
        return
    assert summaries == [(r.offset, r.key, r.value is None, r.timestamp) for r in decoded]


def _one_record_batch(record: bytes) -> bytearray:
    """A batch of one record whose bytes are `record` (anything), with a correct length and CRC."""
    batch = bytearray(build_batch([(b"k", b"v")], base_offset=7, timestamp_ms=1_000))
    batch[HEADER_SIZE:] = record
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, batch_crc(batch, 0, len(batch)))
    return batch


_GOOD_RECORD = b"\x00\x04\x00\x02k\x02v\x00"  # attributes, timestamp delta 2, offset delta 0, key, value, no headers


@pytest.mark.parametrize(
    ("record", "readable"),
    [
        (b"\x10" + _GOOD_RECORD, True),
        (b"\x80", False),  # the batch ends inside the record length
        (b"\x04\x00\x80" + _GOOD_RECORD[2:], False),  # the timestamp delta runs past its record
        (b"\x22\x00" + b"\xff" * 9 + b"\x01" + _GOOD_RECORD[2:], True),  # -2**63: still 64 bits
        (b"\x22\x00" + b"\xff" * 9 + b"\x02" + _GOOD_RECORD[2:], False),  # needs 65 bits
        (b"\x24\x00" + b"\xff" * 9 + b"\x80\x00" + _GOOD_RECORD[2:], False),  # eleven bytes
    ],
)
def test_summaries_refuse_a_varint_that_is_not_one(record: bytes, readable: bool) -> None:
    batch = _one_record_batch(record)
    header = parse_header(batch)
    summaries = summarize_batch(header, memoryview(batch))
    if not readable:
        assert summaries is None
        return
    decoded = decode_dense_batch(header, memoryview(batch))
    assert decoded is not None
    assert summaries == [(r.offset, r.key, r.value is None, r.timestamp) for r in decoded]
    assert summaries[0].offset == 7 and summaries[0].key == b"k"


def test_an_unreadable_batch_is_kept_and_no_tombstone_goes(
    logs: LogFactory, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    log = logs.open(segment_bytes=100_000)
    append_records(log, [(b"a", b"old" * 20, 1)])
    damaged = log.active.size
    append_records(log, [(b"x", b"damaged later" * 5, 1)])
    append_records(log, [(b"a", b"new" * 20, 1), (b"b", None, 1)])
    log._roll(log.log_end_offset, clock.now_ms)
    with open(log.segments[0].log_path, "r+b") as handle:  # rot inside the record bytes
        handle.seek(damaged + 70)
        handle.write(b"\xff")
    caplog.set_level(logging.WARNING, logger="roost.log.cleaner")
    stats = log.clean(clock.now_ms, delete_retention_ms=0)
    assert "kept 1 unreadable batches" in caplog.text
    assert stats.records_removed == 1 and stats.tombstones_removed == 0  # the old "a" only
    survivors = [(h.base_offset, h.records_count) for _p, h, _raw in log.segments[0].iter_batches()]
    assert survivors == [(1, 1), (2, 2)]


def test_past_max_keys_remembered_no_tombstone_goes() -> None:
    values = build_batch([(b"k%d" % n, b"v") for n in range(5)], timestamp_ms=1)
    tombstone = build_batch([(b"gone", None)], base_offset=5, timestamp_ms=1)
    for max_kept, dropped in ((10, 1), (3, 0)):
        offset_map = OffsetMap(start=0, max_keys=100)
        record_filter = RecordFilter(
            offset_map, tombstone_horizon_ms=1_000, producer_last_offsets={}, max_kept_keys=max_kept
        )
        for batch in (values, tombstone):
            offset_map.add(parse_header(batch), summarize_batch(parse_header(batch), memoryview(batch)))
        assert record_filter.filter(parse_header(values), memoryview(values), 0).keep  # remembers 5 keys
        assert record_filter.tombstone_drops_allowed == (max_kept == 10)
        verdict = record_filter.filter(parse_header(tombstone), memoryview(tombstone), 0)
        assert verdict.tombstones_removed == dropped


def test_a_kafka_client_decoder_reads_cleaned_segments(logs: LogFactory, clock: FakeClock) -> None:
    """kafka-python's own RecordBatch reader, as a consumer would see a fetch of cleaned data."""
    from kafka.record.memory_records import MemoryRecords

    log = logs.open(**CONFIG)
    _fill(log, clock, 60, 7)
    log.clean(clock.now_ms)
    expected = [(r.offset, r.key, r.value) for r in log_records(log)]
    data = b"".join(bytes(b) for b in log.read(0, 1 << 30).buffers)
    seen = []
    records = MemoryRecords(data)
    for _ in range(len(expected) + 1):
        batch = records.next_batch()
        if batch is None:
            break
        assert batch.validate_crc()
        seen += [(r.offset, r.key, r.value) for r in batch]
    assert seen == expected and len(set(range(log.log_end_offset)) - {o for o, _k, _v in seen}) > 0


def test_min_compaction_lag_keeps_young_segments_uncleaned(logs: LogFactory, clock: FakeClock) -> None:
    """A segment holding a record younger than min.compaction.lag.ms is not cleaned, nor any
    after it; once the lag has passed, it is."""
    log = logs.open(**CONFIG)
    appended = _fill(log, clock, 100, 5)  # 100 s of records, one a second
    lags = CompactionLags(min_ms=60_000)  # the last minute's records stay as written
    stats = log.clean(clock.now_ms, lags=lags)
    assert stats.cleaned
    young = clock.now_ms - 60_000
    kept = [r for r in log_records(log) if r.timestamp > young]
    assert [r.value for r in kept] == [_value(n) for n in range(100) if appended[n].timestamp > young], \
        "a record within the lag was compacted away"
    assert stats.records_removed > 0  # the older segments were compacted
    clock.advance(120_000)
    assert log.clean(clock.now_ms, lags=lags).cleaned
    check_compacted_view(log, appended, tombstone_horizon_ms=None)


def test_max_compaction_lag_cleans_below_the_dirty_ratio(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(**CONFIG)
    _fill(log, clock, 100, 30)
    assert log.clean(clock.now_ms).cleaned
    _fill(log, clock, 30, 30, start=1000)  # a little more dirt, far below a ratio of 1.0
    probe = log.clean(clock.now_ms, min_cleanable_ratio=1.0)
    assert not probe.cleaned and 0 < probe.dirty_ratio < 1.0
    clock.advance(10 * 60_000)
    stats = log.clean(clock.now_ms, min_cleanable_ratio=1.0, lags=CompactionLags(max_ms=5 * 60_000))
    assert stats.cleaned and "max.compaction.lag.ms" in stats.reason


def test_segment_jitter_rolls_each_segment_a_little_earlier(logs: LogFactory, clock: FakeClock) -> None:
    """segment.jitter.ms takes a random amount below it off each segment's segment.ms: with a
    jitter as long as segment.ms, segments roll at different ages, each before segment.ms."""
    ages = []
    for n in range(8):
        log = logs.open(f"jitter-{n}", segment_ms=100_000, segment_jitter_ms=100_000)
        created = clock.now_ms
        append_records(log, [(b"k", b"v", clock.now_ms)])
        for _step in range(200):  # bounded: 200 s of one-second steps
            clock.advance(1_000)
            log.roll_if_due()
            if log.segment_count > 1:
                break
        ages.append(clock.now_ms - created)
    assert all(age <= 100_000 for age in ages), ages
    assert len(set(ages)) > 1, f"every segment rolled at the same age: {ages}"
