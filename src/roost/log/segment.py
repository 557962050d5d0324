"""One log segment: a `.log` file of whole batches plus its `.index` and `.timeindex`.

The segment writes with pwrite on raw fds (no Python buffering) so that another thread may fsync
the fd while the event loop keeps appending. It knows nothing of retention or checkpoints; the
partition log decides when to roll, delete or recover segments.
"""

from __future__ import annotations

import mmap
import os
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from roost.log.files import offset_file_name, read_at, write_all
from roost.log.index import OffsetIndex, TimeIndex
from roost.wire.kafka.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    InvalidRecordBatch,
    batch_crc,
    check_header,
    parse_header,
)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
INT32_MAX = (1 << 31) - 1
SCAN_CHUNK_BYTES = 4 << 20
# Reads at least this big are served as views of a read-only memory map of the segment: the bytes
# go from the page cache to the socket without a copy into Python objects (a fresh multi-MiB
# bytes object per fetch cost the broker most of its time when serving caught-up consumers).
# Smaller reads (a consumer tailing the log) are cheaper with one pread than with a new mapping.
MAP_THRESHOLD = 256 * 1024


@dataclass
class ScanStop:
    """Where a scan stopped early and why (None: it reached the end)."""

    position: int
    problem: str | None = None


class BatchScan:
    """Walk the batches of `fd` from `start` to `end` reading big chunks.

    With `verify_crc` every batch is fully checked (header fields and CRC-32C), as recovery
    needs; otherwise only the length chain is followed. Iteration stops at the first batch that
    fails; `stop` then says where and why.
    """

    def __init__(
        self, fd: int, start: int, end: int, *, verify_crc: bool, chunk_bytes: int = SCAN_CHUNK_BYTES
    ) -> None:
        assert 0 <= start <= end
        self.fd = fd
        self.start = start
        self.end = end
        self.verify_crc = verify_crc
        self.chunk_bytes = chunk_bytes
        self.stop = ScanStop(start)

    def __iter__(self) -> Iterator[tuple[int, BatchHeader]]:
        pos = self.start
        buf = b""
        buf_start = pos
        while pos < self.end:
            rel = pos - buf_start
            if len(buf) - rel < HEADER_SIZE:
                buf = read_at(self.fd, min(self.chunk_bytes, self.end - pos), pos)
                buf_start, rel = pos, 0
                if len(buf) < HEADER_SIZE:
                    self.stop = ScanStop(pos, f"{self.end - pos} bytes, too short for a batch header")
                    return
            header = parse_header(buf, rel)
            if header.batch_length < MIN_BATCH_LENGTH:
                self.stop = ScanStop(pos, f"batchLength {header.batch_length} is too small")
                return
            if header.size > self.end - pos:
                self.stop = ScanStop(pos, f"batch of {header.size} bytes cut short at {self.end - pos}")
                return
            if rel + header.size > len(buf) and self.verify_crc:
                buf = read_at(self.fd, max(self.chunk_bytes, header.size), pos)
                buf_start, rel = pos, 0
            if self.verify_crc:
                try:
                    check_header(header, len(buf) - rel)
                except InvalidRecordBatch as error:
                    self.stop = ScanStop(pos, str(error))
                    return
                if batch_crc(buf, rel, header.size) != header.crc:
                    self.stop = ScanStop(pos, "CRC mismatch")
                    return
            yield pos, header
            pos += header.size
            self.stop = ScanStop(pos)


class RecentBatches:
    """Where the last batches appended to a segment lie: reads near the log end (caught-up
    consumers and followers, the common case) find their batches here in O(log n) instead of
    walking batch headers from the sparse index.

    It only ever describes a suffix of the segment: contiguous batches ending at its end. Any
    change other than an append (truncation, recovery) clears it; it fills again as batches come.
    """

    __slots__ = ("bases", "lasts", "limit", "positions")

    def __init__(self, limit: int = 256) -> None:
        # 64-bit arrays: 24 bytes a batch, about 6 KiB per active segment at the limit.
        self.limit = limit
        self.bases = array("q")
        self.lasts = array("q")
        self.positions = array("q")  # of each batch, and one more: the end of the last one

    def add(self, position: int, base_offset: int, last_offset: int, size: int) -> None:
        positions = self.positions
        if positions and positions[-1] != position:
            self.clear()  # not contiguous with what we know: start over from here
        if not positions:
            positions.append(position)
        self.bases.append(base_offset)
        self.lasts.append(last_offset)
        positions.append(position + size)
        if len(self.bases) > self.limit:
            drop = len(self.bases) - self.limit // 2  # drop in halves: amortised O(1)
            del self.bases[:drop], self.lasts[:drop], self.positions[:drop]

    def clear(self) -> None:
        del self.bases[:], self.lasts[:], self.positions[:]


class Segment:
    """Batches with offsets from `base_offset` on, in one file."""

    def __init__(
        self, directory: Path, base_offset: int, log_fd: int, created_ms: int, name_suffix: str = ""
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        # Appended to every file name of a segment still being written elsewhere (the cleaner's
        # output); `promote` renames the files to their real names.
        self.name_suffix = name_suffix
        self.log_fd = log_fd
        # Index files that were not there when the segment was opened (a swap interrupted by a
        # crash removes them on purpose): such a segment is never trusted, its indexes are rebuilt.
        self.indexes_were_missing = False
        # The segment owns `log_fd` from here on: when an index cannot open (out of descriptors,
        # say), what did open is closed again, so a failed open leaks nothing.
        try:
            self.offset_index = OffsetIndex.open(self.index_path, base_offset, load=True)
            try:
                self.time_index = TimeIndex.open(self.time_index_path, base_offset, load=True)
            except BaseException:
                self.offset_index.close()
                raise
        except BaseException:
            os.close(log_fd)
            raise
        self.size = 0
        self.next_offset = base_offset  # one past the last offset held; base_offset when empty
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1  # last offset of the (first) batch with max_timestamp
        self.first_batch_timestamp = -1  # the clock for time-based rolls, as Kafka's
        self.created_ms = created_ms
        self.roll_jitter_ms = -1  # drawn by the log when first needed (segment.jitter.ms)
        self.bytes_since_index_entry = 0
        self.recent = RecentBatches()  # the last batches appended (see RecentBatches)
        # Maps the file as it was when mapped; remapped when a read reaches past it. A map that
        # fetch responses still hold views of stays alive (and valid) until they are sent.
        self._map: mmap.mmap | None = None

    # ---- files

    @property
    def log_path(self) -> Path:
        return self.directory / (offset_file_name(self.base_offset, LOG_SUFFIX) + self.name_suffix)

    @property
    def index_path(self) -> Path:
        return self.directory / (offset_file_name(self.base_offset, INDEX_SUFFIX) + self.name_suffix)

    @property
    def time_index_path(self) -> Path:
        return self.directory / (offset_file_name(self.base_offset, TIME_INDEX_SUFFIX) + self.name_suffix)

    @property
    def paths(self) -> list[Path]:
        return [self.log_path, self.index_path, self.time_index_path]

    @property
    def fds(self) -> list[int]:
        return [self.log_fd, self.offset_index.fd, self.time_index.fd]

    @classmethod
    def create(cls, directory: Path, base_offset: int, now_ms: int) -> Segment:
        """A new empty segment (any stale files of that name are emptied)."""
        path = directory / offset_file_name(base_offset, LOG_SUFFIX)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        segment = cls(directory, base_offset, fd, now_ms)
        segment.reset_indexes()
        return segment

    @classmethod
    def create_temp(cls, directory: Path, base_offset: int, now_ms: int, name_suffix: str) -> Segment:
        """A new empty segment whose files carry `name_suffix` until `promote` (the suffix should
        end in files.TEMP_SUFFIX so that opening the log deletes leftovers of a crash)."""
        assert name_suffix, "a temporary segment needs a name suffix"
        path = directory / (offset_file_name(base_offset, LOG_SUFFIX) + name_suffix)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        segment = cls(directory, base_offset, fd, now_ms, name_suffix)
        segment.reset_indexes()
        return segment

    def reset_indexes(self) -> None:
        """Empty both indexes of a new segment; on failure the segment's files are closed."""
        try:
            self.offset_index.reset()
            self.time_index.reset()
        except BaseException:
            self.close()
            raise

    def promote(self) -> None:
        """Give a temporary segment its real file names, replacing any files of that name: the
        log first, then the indexes. A crash in between leaves the new log next to whatever index
        files had the real names, so the caller removes those first (a segment whose index files
        are missing is rebuilt on open). Open fds stay valid across renames."""
        assert self.name_suffix, "only a temporary segment is promoted"
        temp_log = self.log_path
        suffix, self.name_suffix = self.name_suffix, ""
        os.replace(temp_log, self.log_path)
        for index in (self.offset_index, self.time_index):
            final = index.path.with_name(index.path.name.removesuffix(suffix))
            os.replace(index.path, final)
            index.path = final

    @classmethod
    def open_existing(cls, directory: Path, base_offset: int, now_ms: int) -> Segment:
        """Open files as found; the caller then calls `load_trusted` or `recover`."""
        fd = os.open(directory / offset_file_name(base_offset, LOG_SUFFIX), os.O_RDWR)
        indexes_present = all(
            (directory / offset_file_name(base_offset, suffix)).exists()
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)
        )
        segment = cls(directory, base_offset, fd, now_ms)
        segment.indexes_were_missing = not indexes_present
        segment.size = os.fstat(fd).st_size
        return segment

    def fsync(self) -> None:
        for fd in self.fds:
            os.fsync(fd)

    def index_full(self, max_index_bytes: int) -> bool:
        """Whether one more entry would take the offset index (8 bytes an entry) or the time index
        (12) past `max_index_bytes`: Kafka's segment.index.bytes, which rolls the segment then."""
        return (len(self.offset_index) + 1) * 8 > max_index_bytes or (len(self.time_index) + 1) * 12 > max_index_bytes

    def largest_timestamp(self) -> int:
        """The newest record timestamp in this segment, for time retention; for batches without
        timestamps, the file's modification time, as Kafka does."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.fstat(self.log_fd).st_mtime * 1000)

    def close(self) -> None:
        self._release_map()
        for fd in self.fds:
            os.close(fd)

    def _release_map(self) -> bool:
        """Drop the memory map; False when views of it are still in use (it then lives on until
        they are gone, and the caller must not shrink the file under them)."""
        if self._map is None:
            return True
        current, self._map = self._map, None
        try:
            current.close()
        except BufferError:
            return False
        return True

    def _shrink_file(self, size: int) -> None:
        """Cut the file to `size` bytes without pulling pages from under live views: reading a
        mapped page past the end of its file is a SIGBUS. With views alive, the kept prefix is
        copied to a new file that replaces this one; the old inode lives on for the views."""
        if self._release_map():
            os.ftruncate(self.log_fd, size)
            return
        temp = self.log_path.with_name(self.log_path.name + ".cut")
        fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        position = 0
        while position < size:
            chunk = read_at(self.log_fd, min(SCAN_CHUNK_BYTES, size - position), position)
            write_all(fd, chunk, position)
            position += len(chunk)
        os.fsync(fd)
        os.replace(temp, self.log_path)
        os.dup2(fd, self.log_fd)  # keep the fd number that flush handles may hold
        os.close(fd)

    def delete_files(self) -> None:
        for path in self.paths:
            path.unlink(missing_ok=True)

    # ---- opening

    def load_trusted(self) -> bool:
        """Take the indexes as they are (a clean shutdown, or data below the recovery point) after
        cheap checks, and find the end offset by walking from the last index entry. False when
        anything does not add up; the caller then recovers the segment."""
        if self.indexes_were_missing and self.size:
            return False
        if not self.offset_index.is_sane(self.size):
            return False
        start = self.offset_index.last_position
        expected_last = (
            self.base_offset + self.offset_index.relative_offsets[-1] if len(self.offset_index) else None
        )
        next_offset = self.base_offset
        scan = BatchScan(self.log_fd, start, self.size, verify_crc=False)
        for pos, header in scan:
            if pos == start and expected_last is not None and header.last_offset != expected_last:
                return False
            if header.base_offset < max(next_offset, self.base_offset):
                return False
            next_offset = header.next_offset
        if scan.stop.problem is not None:
            return False
        self.next_offset = next_offset
        if not self.time_index.is_sane(self.next_offset):
            return False
        last_time = self.time_index.last_entry
        if last_time is not None:
            # The last entry is written when the segment is rolled or closed: the segment's maximum.
            self.max_timestamp, self.offset_of_max_timestamp = last_time
        if self.size:
            self.first_batch_timestamp = self.header_at(0).max_timestamp
        # Appends after a reopen index at the next interval boundary, as after a rebuild.
        self.bytes_since_index_entry = self.size - self.offset_index.last_position
        return True

    def recover(self, index_interval_bytes: int) -> tuple[int, str | None]:
        """Rebuild the indexes by walking every batch with full checks (CRC-32C), and cut the
        file at the first batch that fails. Returns (bytes cut, why)."""
        self.offset_index.reset()
        self.time_index.reset()
        self._reset_stats()
        scan = BatchScan(self.log_fd, 0, self.size, verify_crc=True)
        problem: str | None = None
        batches = iter(scan)
        for pos, header in batches:
            if header.base_offset < self.next_offset or header.last_offset - self.base_offset > INT32_MAX:
                problem = f"offsets {header.base_offset}..{header.last_offset} out of order"
                scan.stop = ScanStop(pos, problem)
                break
            self._account(pos, header, index_interval_bytes)
        valid_end = scan.stop.position
        problem = problem or scan.stop.problem
        cut = self.size - valid_end
        if cut:
            self._shrink_file(valid_end)
            self.size = valid_end
        self.on_roll()
        return cut, problem

    def _reset_stats(self) -> None:
        self.recent.clear()  # recovery and truncation recompute the stats: the tail index goes too
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp = -1
        self.bytes_since_index_entry = 0

    # ---- appending

    def _account(self, position: int, header: BatchHeader, index_interval_bytes: int) -> None:
        """Update indexes and statistics for a batch now in the file at `position` (Kafka's
        LogSegment.append: the batch counts toward the maximum before the index entry)."""
        # Header fields by name, computed once: this runs for every appended batch.
        base_offset, max_timestamp = header.base_offset, header.max_timestamp
        last_offset = base_offset + header.last_offset_delta
        assert base_offset >= self.next_offset
        if position == 0:
            self.first_batch_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_index_entry > index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_index_entry = 0
        self.bytes_since_index_entry += header.batch_length + LOG_OVERHEAD
        self.next_offset = last_offset + 1

    def append(
        self, data: memoryview, batches: Sequence[tuple[int, BatchHeader]], index_interval_bytes: int
    ) -> None:
        """Write `data` (whole batches; `batches` = their positions within `data` and headers with
        their final offsets) at the end of the file, then index them."""
        assert batches and batches[0][0] == 0
        assert batches[0][1].base_offset >= self.next_offset
        assert batches[-1][1].last_offset - self.base_offset <= INT32_MAX
        position = self.size
        write_all(self.log_fd, data, position)
        self.size += len(data)
        recent_add = self.recent.add
        account = self._account
        for pos, header in batches:
            account(position + pos, header, index_interval_bytes)
            base_offset = header.base_offset
            recent_add(position + pos, base_offset, base_offset + header.last_offset_delta,
                       header.batch_length + LOG_OVERHEAD)

    def on_roll(self) -> None:
        """The segment becomes read-only: record its final maximum so a reopen finds it, and
        forget its tail index (reads of closed segments go by the sparse index)."""
        self.recent.clear()
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    # ---- reading

    def header_at(self, position: int) -> BatchHeader:
        return parse_header(read_at(self.log_fd, HEADER_SIZE, position))

    def read(self, position: int, size: int) -> bytes | memoryview:
        """Up to `size` bytes at `position`, never past the segment's end."""
        end = min(position + size, self.size)
        if end - position < MAP_THRESHOLD:
            return read_at(self.log_fd, end - position, position)
        if self._map is None or len(self._map) < end:
            self._map = mmap.mmap(self.log_fd, self.size, prot=mmap.PROT_READ)
        return memoryview(self._map)[position:end]

    def scan(
        self, start: int = 0, *, chunk_bytes: int = SCAN_CHUNK_BYTES
    ) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of every batch from position `start` (trusted data: no CRC)."""
        return iter(BatchScan(self.log_fd, start, self.size, verify_crc=False, chunk_bytes=chunk_bytes))

    def iter_batches(
        self, start: int = 0, *, chunk_bytes: int = SCAN_CHUNK_BYTES
    ) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        """(position, header, bytes) of every batch from position `start`, read in big chunks
        (trusted data: no CRC check here). The bytes are a view of a private copy."""
        position = start
        while position < self.size:
            chunk = read_at(self.log_fd, min(max(chunk_bytes, HEADER_SIZE), self.size - position), position)
            view = memoryview(chunk)
            rel = 0
            while len(view) - rel >= HEADER_SIZE:
                header = parse_header(view, rel)
                assert header.batch_length >= MIN_BATCH_LENGTH, (
                    f"bad batch at {position + rel} in {self.log_path}"
                )
                if rel + header.size > len(view):
                    break
                yield position + rel, header, view[rel : rel + header.size]
                rel += header.size
            if rel == 0:
                # One batch larger than the chunk: read exactly it.
                header = parse_header(view, 0)
                whole = memoryview(read_at(self.log_fd, header.size, position))
                assert len(whole) == header.size, f"batch at {position} cut short in {self.log_path}"
                yield position, header, whole
                rel = header.size
            position += rel

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= `offset`, or None."""
        for pos, header in self.scan(self.offset_index.lookup(offset), chunk_bytes=64 * 1024):
            if header.last_offset >= offset:
                return pos, header
        return None

    # ---- truncation

    def truncate_to_offset(self, offset: int) -> int:
        """Remove every batch whose last offset is >= `offset`; returns the new log end offset:
        the base offset of the first removed batch when `offset` falls inside it, else `offset`."""
        found = self.find_batch(offset)
        if found is None:
            return offset
        position, header = found
        new_end = min(offset, header.base_offset)
        self.recent.clear()
        self._shrink_file(position)
        self.size = position
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to_offset(new_end)
        self._recompute_after_cut()
        return new_end

    def _recompute_after_cut(self) -> None:
        """Statistics for the batches left: start from the last time-index entry (a maximum
        over a prefix), then walk the batches after it."""
        last_time = self.time_index.last_entry
        self._reset_stats()
        start = 0
        if last_time is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last_time
            start = self.offset_index.lookup(self.offset_of_max_timestamp)
        if self.size:
            self.first_batch_timestamp = self.header_at(0).max_timestamp
        for _pos, header in self.scan(start):
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
            self.next_offset = header.next_offset
        self.bytes_since_index_entry = self.size - self.offset_index.last_position
