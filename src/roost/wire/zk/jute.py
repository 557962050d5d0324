"""Jute, ZooKeeper's binary record encoding: big-endian ints and longs, length-prefixed buffers.

`JuteReader` decodes with strict bounds: every length is checked against the bytes that remain
before anything is sliced or allocated, so a hostile length can cost no memory, and every failure
is a `ZkCodecError`. `JuteWriter` builds records into one bytearray.
"""

from __future__ import annotations

import builtins  # the readers' and writers' own `int` and `bool` methods shadow the types
import struct

from roost.wire.zk.errors import ZkCodecError

INT = struct.Struct("!i")
LONG = struct.Struct("!q")
INT_INT = struct.Struct("!ii")
INT_LONG_INT = struct.Struct("!iqi")
MULTI_HEADER = struct.Struct("!i?i")
# Stat: czxid mzxid ctime mtime version cversion aversion ephemeralOwner dataLength numChildren pzxid
STAT = struct.Struct("!qqqqiiiqiiq")

INT_MIN = -(2**31)
INT_MAX = 2**31 - 1
LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1


class JuteReader:
    """Reads jute fields from `data[offset:end]`; raises ZkCodecError on any malformed field."""

    __slots__ = ("data", "end", "pos")

    def __init__(self, data: bytes | bytearray | memoryview, offset: int = 0, end: int | None = None):
        self.data = data
        self.pos = offset
        self.end = len(data) if end is None else end
        assert 0 <= self.pos <= self.end <= len(data)

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def _need(self, count: int) -> None:
        if count > self.end - self.pos:
            raise ZkCodecError(f"record truncated: need {count} bytes, {self.end - self.pos} left")

    def int(self) -> int:
        self._need(4)
        value: int = INT.unpack_from(self.data, self.pos)[0]
        self.pos += 4
        return value

    def long(self) -> builtins.int:
        self._need(8)
        value: int = LONG.unpack_from(self.data, self.pos)[0]
        self.pos += 8
        return value

    def bool(self) -> bool:
        self._need(1)
        value = self.data[self.pos]
        self.pos += 1
        # Java's readBool accepts any non-zero byte as true; so do we.
        return value != 0

    def _length(self, what: str) -> builtins.int:
        length = self.int()
        if length < -1:
            raise ZkCodecError(f"negative {what} length {length}")
        if length > self.end - self.pos:
            raise ZkCodecError(f"{what} length {length} exceeds the {self.end - self.pos} bytes left")
        return length

    def buffer(self) -> bytes | None:
        length = self._length("buffer")
        if length == -1:
            return None
        start = self.pos
        self.pos += length
        return bytes(self.data[start : self.pos])

    def ustring(self) -> str | None:
        length = self._length("string")
        if length == -1:
            return None
        start = self.pos
        self.pos += length
        try:
            return bytes(self.data[start : self.pos]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ZkCodecError(f"string is not UTF-8: {exc}") from None

    def path(self) -> str:
        """A ustring that must be present (null paths are refused as malformed)."""
        value = self.ustring()
        if value is None:
            raise ZkCodecError("null path")
        return value

    def vector_length(self, min_item_size: builtins.int, *, null_allowed: builtins.bool = True) -> builtins.int:
        """The element count of a vector; -1 (null) reads as 0 where ZooKeeper's own messages
        may carry it, and is refused where the writer never sends it (so a decoded message
        re-encodes to the same bytes). Bounded by the bytes left."""
        count = self.int()
        if count < -1 or (count == -1 and not null_allowed):
            raise ZkCodecError(f"negative vector length {count}")
        if count == -1:
            return 0
        if count * min_item_size > self.end - self.pos:
            raise ZkCodecError(f"vector of {count} items cannot fit in {self.end - self.pos} bytes")
        return count

    def ustring_vector(self) -> list[str]:
        return [self.path() for _ in range(self.vector_length(4))]

    def stat(self) -> tuple[builtins.int, ...]:
        self._need(STAT.size)
        value = STAT.unpack_from(self.data, self.pos)
        self.pos += STAT.size
        return value

    def expect_end(self, what: str) -> None:
        """Refuse trailing bytes after a record (a sign of a confused or hostile peer)."""
        if self.pos != self.end:
            raise ZkCodecError(f"{self.end - self.pos} unexpected bytes after {what}")


class JuteWriter:
    """Appends jute fields to a bytearray."""

    __slots__ = ("out",)

    def __init__(self) -> None:
        self.out = bytearray()

    def int(self, value: int) -> JuteWriter:
        self.out += INT.pack(value)
        return self

    def long(self, value: builtins.int) -> JuteWriter:
        self.out += LONG.pack(value)
        return self

    def bool(self, value: bool) -> JuteWriter:
        self.out.append(1 if value else 0)
        return self

    def buffer(self, value: bytes | None) -> JuteWriter:
        if value is None:
            self.out += INT.pack(-1)
        else:
            self.out += INT.pack(len(value))
            self.out += value
        return self

    def ustring(self, value: str | None) -> JuteWriter:
        return self.buffer(None if value is None else value.encode("utf-8"))

    def ustring_vector(self, values: list[str] | tuple[str, ...]) -> JuteWriter:
        self.out += INT.pack(len(values))
        for value in values:
            self.ustring(value)
        return self

    def stat(self, stat: tuple[builtins.int, ...]) -> JuteWriter:
        self.out += STAT.pack(*stat)
        return self

    def raw(self, data: bytes) -> JuteWriter:
        self.out += data
        return self

    def getvalue(self) -> bytes:
        return bytes(self.out)
