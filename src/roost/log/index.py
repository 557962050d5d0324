"""Sparse segment indexes in Kafka's file formats.

`.index`: entries of (offset - segment base offset) int32, file position int32; the offset is the
*last* offset of the batch that starts at that position (as Kafka writes it). `.timeindex`:
entries of max timestamp so far int64, (offset - base) int32 of the batch holding that maximum.
Both are kept in memory as arrays (4-8 bytes per entry) and appended to their file with pwrite.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_right
from pathlib import Path
from typing import Self

from roost.log.files import write_all

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_INT32_MAX = (1 << 31) - 1


def _column(data: bytes, typecode: str) -> array[int]:
    values = array(typecode)
    values.frombytes(data)
    if sys.byteorder == "little":
        values.byteswap()
    return values


class _IndexFile:
    """What both indexes share: the file, its fd, and opening it loaded or emptied."""

    def __init__(self, path: Path, base_offset: int, fd: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.fd = fd

    @classmethod
    def open(cls, path: Path, base_offset: int, *, load: bool) -> Self:
        index = cls(path, base_offset, os.open(path, os.O_RDWR | os.O_CREAT, 0o644))
        try:
            if load:
                index._load()
            else:
                os.ftruncate(index.fd, 0)
        except BaseException:
            index.close()
            raise
        return index

    def _load(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        os.close(self.fd)


class OffsetIndex(_IndexFile):
    """Offset -> file position of a batch at or before it."""

    def __init__(self, path: Path, base_offset: int, fd: int) -> None:
        super().__init__(path, base_offset, fd)
        self.relative_offsets = array("i")
        self.positions = array("i")

    def _load(self) -> None:
        size = os.fstat(self.fd).st_size
        usable = size - size % _OFFSET_ENTRY.size
        data = os.pread(self.fd, usable, 0) if usable else b""
        pairs = _column(data, "i")
        self.relative_offsets = pairs[0::2]
        self.positions = pairs[1::2]

    def __len__(self) -> int:
        return len(self.positions)

    def is_sane(self, log_size: int) -> bool:
        """Entries strictly increasing and inside the log; a crash can leave a torn or zeroed tail."""
        if os.fstat(self.fd).st_size != len(self) * _OFFSET_ENTRY.size:
            return False
        previous_offset = -1
        previous_position = -1
        for relative, position in zip(self.relative_offsets, self.positions, strict=True):
            if relative <= previous_offset or position <= previous_position or position >= log_size:
                return False
            previous_offset, previous_position = relative, position
        return True

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        assert 0 <= relative <= _INT32_MAX and 0 <= position <= _INT32_MAX
        if self.positions:
            assert relative > self.relative_offsets[-1] and position > self.positions[-1], "index must grow"
        write_all(self.fd, _OFFSET_ENTRY.pack(relative, position), len(self) * _OFFSET_ENTRY.size)
        self.relative_offsets.append(relative)
        self.positions.append(position)

    def lookup(self, offset: int) -> int:
        """Position of the last indexed batch whose last offset is <= `offset` (0 if none):
        the batch holding `offset` starts there or later."""
        slot = bisect_right(self.relative_offsets, offset - self.base_offset) - 1
        return self.positions[slot] if slot >= 0 else 0

    def floor_position(self, position: int) -> int:
        """The largest indexed batch position <= `position` (0 if none): a batch boundary."""
        slot = bisect_right(self.positions, position) - 1
        return self.positions[slot] if slot >= 0 else 0

    @property
    def last_position(self) -> int:
        return self.positions[-1] if self.positions else 0

    def truncate_to_position(self, position: int) -> None:
        """Drop entries for batches at or after `position` (the log was cut there)."""
        keep = bisect_right(self.positions, position - 1)
        del self.relative_offsets[keep:]
        del self.positions[keep:]
        os.ftruncate(self.fd, keep * _OFFSET_ENTRY.size)

    def reset(self) -> None:
        self.truncate_to_position(0)


class TimeIndex(_IndexFile):
    """Timestamp -> an offset whose batches before it all have smaller timestamps."""

    def __init__(self, path: Path, base_offset: int, fd: int) -> None:
        super().__init__(path, base_offset, fd)
        self.timestamps = array("q")
        self.relative_offsets = array("i")

    def _load(self) -> None:
        size = os.fstat(self.fd).st_size
        count = size // _TIME_ENTRY.size
        data = os.pread(self.fd, count * _TIME_ENTRY.size, 0) if count else b""
        for timestamp, relative in _TIME_ENTRY.iter_unpack(data):
            self.timestamps.append(timestamp)
            self.relative_offsets.append(relative)

    def __len__(self) -> int:
        return len(self.timestamps)

    def is_sane(self, next_offset: int) -> bool:
        if os.fstat(self.fd).st_size != len(self) * _TIME_ENTRY.size:
            return False
        previous_time = -(1 << 63)
        previous_offset = -1
        for timestamp, relative in zip(self.timestamps, self.relative_offsets, strict=True):
            if timestamp <= previous_time or relative < previous_offset:
                return False
            if relative < 0 or self.base_offset + relative >= next_offset:
                return False
            previous_time, previous_offset = timestamp, relative
        return True

    @property
    def last_entry(self) -> tuple[int, int] | None:
        """(max timestamp, absolute offset) of the last entry."""
        if not self.timestamps:
            return None
        return self.timestamps[-1], self.base_offset + self.relative_offsets[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Append unless the timestamp does not grow (Kafka's rule: entries strictly increase)."""
        if self.timestamps and timestamp <= self.timestamps[-1]:
            return
        relative = offset - self.base_offset
        assert 0 <= relative <= _INT32_MAX
        if self.relative_offsets:
            assert relative >= self.relative_offsets[-1]
        write_all(self.fd, _TIME_ENTRY.pack(timestamp, relative), len(self) * _TIME_ENTRY.size)
        self.timestamps.append(timestamp)
        self.relative_offsets.append(relative)

    def lookup_before(self, timestamp: int) -> int | None:
        """Offset of the last entry whose timestamp is < `timestamp`: every batch before the one
        holding that offset has only smaller timestamps. None when no entry qualifies."""
        slot = bisect_right(self.timestamps, timestamp - 1) - 1
        return self.base_offset + self.relative_offsets[slot] if slot >= 0 else None

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries pointing at `offset` or later."""
        keep = bisect_right(self.relative_offsets, offset - self.base_offset - 1)
        del self.timestamps[keep:]
        del self.relative_offsets[keep:]
        os.ftruncate(self.fd, keep * _TIME_ENTRY.size)

    def reset(self) -> None:
        del self.timestamps[:]
        del self.relative_offsets[:]
        os.ftruncate(self.fd, 0)
