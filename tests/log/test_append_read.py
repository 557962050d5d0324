"""Appending and reading whole batches across segment rolls, indexes and their file formats."""

from __future__ import annotations

import os
import stat
import struct

import pytest

from roost.log import MessageTooLarge, NonMonotonicAppend, OffsetOutOfRange
from roost.log.partition_state import CLEAN_SHUTDOWN_FILE
from roost.wire.kafka.records import iter_records, parse_header, validate_batches
from tests.log.conftest import FakeClock, LogFactory, batch, read_all


def _fill(log, count: int, per_batch: int = 3, size: int = 40) -> list[bytes]:  # type: ignore[no-untyped-def]
    values = []
    for n in range(count):
        chunk = [b"%06d-" % (n * per_batch + i) + b"x" * size for i in range(per_batch)]
        values += chunk
        log.append(bytearray(batch(chunk, timestamp_ms=1_000 + n)))
    return values


def test_append_assigns_consecutive_offsets(logs: LogFactory) -> None:
    log = logs.open()
    first = log.append(bytearray(batch([b"a", b"b"])))
    second = log.append(bytearray(batch([b"c"]) + batch([b"d", b"e", b"f"])))
    assert (first.first_offset, first.last_offset) == (0, 1)
    assert (second.first_offset, second.last_offset) == (2, 5)
    assert second.log_append_time == -1
    assert second.size_bytes == len(batch([b"c"]) + batch([b"d", b"e", b"f"]))
    assert log.log_end_offset == 6
    assert [(r.offset, r.value) for r in read_all(log)] == list(
        enumerate([b"a", b"b", b"c", b"d", b"e", b"f"])
    )


def test_append_accepts_read_only_bytes(logs: LogFactory) -> None:
    log = logs.open()
    log.append(batch([b"a"]))
    info = log.append(batch([b"b"]))
    assert info.first_offset == 1
    assert [r.value for r in read_all(log)] == [b"a", b"b"]


def test_round_trip_across_many_segments(logs: LogFactory) -> None:
    log = logs.open(segment_bytes=1_000, index_interval_bytes=200)
    values = _fill(log, 60)
    assert log.segment_count > 10
    assert [r.value for r in read_all(log)] == values
    assert [r.offset for r in read_all(log)] == list(range(len(values)))
    names = sorted(os.listdir(log.directory))
    bases = sorted(int(n[:-4]) for n in names if n.endswith(".log"))
    assert all(len(n.split(".")[0]) == 20 for n in names if n[0].isdigit())
    assert bases == [s.base_offset for s in log.segments]
    for segment in log.segments:
        assert segment.size <= 1_000


def test_read_from_every_offset_returns_the_batch_holding_it(logs: LogFactory) -> None:
    log = logs.open(segment_bytes=2_000, index_interval_bytes=150)
    _fill(log, 40)
    for offset in range(log.log_end_offset):
        result = log.read(offset, 1)
        ((header_pos, header),) = validate_batches(result.buffers[0])
        assert header_pos == 0
        assert header.base_offset <= offset <= header.last_offset
        assert result.first_offset == header.base_offset
        assert result.next_offset == header.next_offset


def test_read_respects_max_bytes_and_min_one_batch(logs: LogFactory) -> None:
    log = logs.open(segment_bytes=1_500)
    _fill(log, 30)
    one = parse_header(log.read(0, 1).buffers[0]).size
    result = log.read(0, one * 5 + 10)
    assert result.size == one * 5
    assert result.next_offset == 15
    assert log.read(0, 10, min_one_batch=False) == ([], 0, 0, 0)
    big = log.read(3, 10**9)
    assert big.size == log.size_bytes - one  # from the batch holding offset 3: the second
    assert len(big.buffers) == log.segment_count  # one buffer per segment touched
    assert big.next_offset == log.log_end_offset


def test_read_stops_before_max_offset(logs: LogFactory) -> None:
    log = logs.open(segment_bytes=1_500)
    _fill(log, 10)
    result = log.read(0, 10**6, max_offset=9)
    assert result.next_offset == 9
    assert [r.offset for b in result.buffers for r in iter_records(b)] == list(range(9))
    # A batch that straddles the high watermark is held back.
    assert log.read(0, 10**6, max_offset=10).next_offset == 9
    assert log.read(9, 10**6, max_offset=10).buffers == []


def test_read_outside_the_log_raises(logs: LogFactory) -> None:
    log = logs.open()
    _fill(log, 3)
    assert log.read(9, 100) == ([], 0, 9, 9)
    with pytest.raises(OffsetOutOfRange) as raised:
        log.read(10, 100)
    assert (raised.value.log_start_offset, raised.value.log_end_offset) == (0, 9)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100)


def test_index_files_use_kafka_formats(logs: LogFactory) -> None:
    log = logs.open(segment_bytes=100_000, index_interval_bytes=300)
    _fill(log, 50)
    log.close()
    segment_base = 0
    index = (log.directory / f"{segment_base:020d}.index").read_bytes()
    time_index = (log.directory / f"{segment_base:020d}.timeindex").read_bytes()
    data = (log.directory / f"{segment_base:020d}.log").read_bytes()
    assert index and len(index) % 8 == 0 and len(time_index) % 12 == 0
    for relative, position in struct.iter_unpack(">ii", index):
        header = parse_header(data, position)  # every entry points at a batch start ...
        assert header.last_offset == segment_base + relative  # ... recording its last offset
    times = list(struct.iter_unpack(">qi", time_index))
    assert [t for t, _ in times] == sorted({t for t, _ in times})  # strictly increasing
    assert times[-1][0] == 1_049  # the final entry holds the segment's max timestamp


def test_reopen_after_clean_close_keeps_everything(logs: LogFactory) -> None:
    log = logs.open(segment_bytes=1_000, index_interval_bytes=100)
    values = _fill(log, 30)
    log.close()
    assert (log.directory / CLEAN_SHUTDOWN_FILE).exists()
    again = logs.open(segment_bytes=1_000, index_interval_bytes=100)
    assert not (again.directory / CLEAN_SHUTDOWN_FILE).exists()  # a crash now must look unclean
    assert again.log_end_offset == len(values)
    assert [r.value for r in read_all(again)] == values
    info = again.append(bytearray(batch([b"after"])))
    assert info.first_offset == len(values)
    assert again.read(len(values), 100).size > 0


def test_log_append_time_stamps_batches(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(message_timestamp_type="LogAppendTime")
    info = log.append(bytearray(batch([b"a", b"b"], timestamp_ms=5)))
    assert info.log_append_time == clock.now_ms
    assert info.max_timestamp == clock.now_ms
    stored = log.read(0, 1000).buffers[0]
    validate_batches(stored)  # CRC recomputed
    assert [r.timestamp for r in iter_records(stored)] == [clock.now_ms] * 2


def test_oversized_batch_is_refused(logs: LogFactory) -> None:
    log = logs.open(max_message_bytes=200)
    with pytest.raises(MessageTooLarge) as raised:
        log.append(bytearray(batch([b"x" * 500])))
    assert raised.value.error_code == 10
    assert log.log_end_offset == 0


def test_follower_append_keeps_offsets_and_checks_order(logs: LogFactory) -> None:
    log = logs.open()
    log.append(batch([b"a", b"b"], base_offset=0), assign_offsets=False)
    log.append(batch([b"c"], base_offset=5), assign_offsets=False)  # a gap is allowed
    assert log.log_end_offset == 6
    assert [r.offset for r in read_all(log)] == [0, 1, 5]
    assert [r.offset for r in read_all(log, offset=3)] == [5]
    with pytest.raises(NonMonotonicAppend):
        log.append(batch([b"d"], base_offset=4), assign_offsets=False)


def test_time_based_roll(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(segment_ms=1_000)
    log.append(bytearray(batch([b"a"], timestamp_ms=10_000)))
    log.append(bytearray(batch([b"b"], timestamp_ms=10_500)))
    assert log.segment_count == 1
    log.append(bytearray(batch([b"c"], timestamp_ms=11_000)))  # record time says the segment is old
    assert log.segment_count == 2
    clock.advance(999)
    log.roll_if_due()
    assert log.segment_count == 2
    clock.advance(10**9)
    log.roll_if_due()
    assert log.segment_count == 3
    assert [r.value for r in read_all(log)] == [b"a", b"b", b"c"]


def test_truncate_to(logs: LogFactory) -> None:
    log = logs.open(segment_bytes=800, index_interval_bytes=100)
    values = _fill(log, 30)  # 3 records per batch
    log.truncate_to(40)  # inside the batch 39..41: the whole batch goes
    assert log.log_end_offset == 39
    assert [r.value for r in read_all(log)] == values[:39]
    assert all(s.base_offset < 39 for s in log.segments)
    info = log.append(bytearray(batch([b"new"])))
    assert info.first_offset == 39
    log.truncate_to(21)  # a batch boundary
    assert log.log_end_offset == 21
    log.close()
    again = logs.open(segment_bytes=800, index_interval_bytes=100)
    assert [r.value for r in read_all(again)] == values[:21]
    again.truncate_to(0)
    assert again.log_end_offset == 0 and again.size_bytes == 0
    assert again.append(bytearray(batch([b"z"]))).first_offset == 0


def test_flush_handle_and_mark_flushed(logs: LogFactory) -> None:
    log = logs.open(segment_bytes=600, recovery_checkpoint_interval_ms=0)
    _fill(log, 10)
    fds, end = log.flush_handle()
    assert end == log.log_end_offset and fds
    segment_fds = {s.log_fd for s in log.segments}
    # A new log's first flush also syncs its directory and the directory above it (their
    # entries name its files), directories first.
    directories = [fd for fd in fds if fd not in segment_fds]
    assert len(directories) == 2 and fds[:2] == directories
    assert all(stat.S_ISDIR(os.fstat(fd).st_mode) for fd in directories)
    for fd in fds:
        os.fsync(fd)
    log.mark_flushed(end)
    assert log.recovery_point == end
    assert (log.directory / "recovery-point-offset-checkpoint").read_text() == f"{end}\n"
    assert log.flush_handle()[0] == []  # nothing new to flush, and the directories only once
    log.mark_flushed(end)


def test_fds_of_deleted_segments_stay_open_until_the_flush_is_marked(logs: LogFactory) -> None:
    log = logs.open(segment_bytes=600)
    _fill(log, 10)
    fds, end = log.flush_handle()
    log.delete_records_before(log.log_end_offset)  # deletes every segment but the active one
    for fd in fds:
        os.fsync(fd)  # a flusher thread would do this now: the fds must still be open
    log.mark_flushed(end)
    for fd in fds[:-1]:
        with pytest.raises(OSError):
            os.fstat(fd)


def test_flush_due(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(flush_interval_messages=4, flush_interval_ms=1_000)
    assert not log.flush_due()
    log.append(bytearray(batch([b"a", b"b"])))
    assert not log.flush_due()
    clock.advance(1_000)
    assert log.flush_due()
    log.flush()
    assert not log.flush_due()
    log.append(bytearray(batch([b"a", b"b", b"c", b"d"])))
    assert log.flush_due()


def test_retire_lets_go_of_the_files_and_renames_the_directory_for_removal(logs: LogFactory) -> None:
    log = logs.open()
    _fill(log, 3)
    files = sorted(entry.name for entry in log.directory.iterdir())
    retired = log.retire("gone-0.deleted")
    assert not log.directory.exists()
    assert retired == log.directory.with_name("gone-0.deleted")
    assert sorted(entry.name for entry in retired.iterdir()) == files
    assert not [path for path in _open_paths() if path.startswith(str(retired))]  # no fd left open


def _open_paths() -> list[str]:
    """What this process's file descriptors point at (Linux)."""
    paths = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            paths.append(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:  # the listing's own descriptor, closed by now
            pass
    return paths


def test_leader_stamps_its_epoch_without_breaking_the_crc(logs: LogFactory) -> None:
    log = logs.open()
    log.append(bytearray(batch([b"a"]) + batch([b"b"])), leader_epoch=7)
    stored = log.read(0, 10_000).buffers[0]
    assert [header.partition_leader_epoch for _, header in validate_batches(stored)] == [7, 7]


def test_close_while_a_flush_runs_keeps_its_fds_open_until_marked(logs: LogFactory) -> None:
    log = logs.open()
    _fill(log, 3)
    fds, end = log.flush_handle()
    log.close()
    for fd in fds:
        os.fsync(fd)  # the flusher thread's fsync still has a valid fd
    log.mark_flushed(end)
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)
    assert log.flush_handle() == ([], end)  # a flush queued for a closed log is a no-op
    log.mark_flushed(end)


@pytest.mark.parametrize("index_interval", [0, 300, 5_000])
def test_reads_cut_exactly_like_a_linear_scan(logs: LogFactory, index_interval: int) -> None:
    log = logs.open(segment_bytes=8_000, index_interval_bytes=index_interval)
    spans = []  # (base offset, last offset, size) of every batch, in order
    for n in range(150):
        data = batch([b"x" * ((n * 37) % 150)] * (1 + n % 4))
        info = log.append(bytearray(data))
        spans.append((info.first_offset, info.last_offset, len(data)))
    end = log.log_end_offset
    for offset in range(0, end, 7):
        for max_bytes in (1, 500, 2_000, 9_000):
            for limit in (end, offset + 3, (offset + end) // 2):
                expected, total = [], 0
                for base, last, size in spans:
                    if last < offset:
                        continue
                    if last >= limit or (total + size > max_bytes and expected):
                        break
                    expected.append((base, last))
                    total += size
                result = log.read(offset, max_bytes, max_offset=limit)
                got = [(h.base_offset, h.last_offset) for b in result.buffers for _, h in validate_batches(b)]
                assert got == expected, (offset, max_bytes, limit)
                assert result.size == total


def test_a_segment_rolls_before_its_index_passes_segment_index_bytes(logs: LogFactory, clock: FakeClock) -> None:
    """segment.index.bytes of 36: at most 4 offset entries (8 bytes) and 3 time entries (12) a
    segment; with an index entry for every batch, segments roll by their index, not their size."""
    log = logs.open(segment_bytes=1 << 20, index_interval_bytes=0, segment_index_bytes=36)
    values = []
    for n in range(40):
        values.append(b"v%d" % n)
        log.append(batch([values[-1]], timestamp_ms=clock.now_ms))
        clock.advance(10)  # a growing timestamp: each batch may add a time-index entry
    assert log.segment_count >= 10
    for segment in log.segments:
        assert len(segment.offset_index) * 8 <= 36 and len(segment.time_index) * 12 <= 36
    assert [r.value for r in read_all(log)] == values
