"""Wire primitives shared by the codec generator and the framing: fixed-width formats, unsigned varints,
buffer views, and `Out`, the encoder's output that never copies a caller's large buffers."""

from __future__ import annotations

import struct
from typing import Final

from roost.wire.kafka.exceptions import KafkaCodecError

Buffer = bytes | bytearray | memoryview

# struct format characters of Kafka's fixed-width types (all big-endian on the wire).
FIXED_FORMAT: Final = {
    "bool": "?", "int8": "b", "int16": "h", "int32": "i", "int64": "q",
    "uint16": "H", "uint32": "I", "float64": "d",
}

INT16: Final = struct.Struct(">h")
INT32: Final = struct.Struct(">i")
HEADER_FIXED: Final = struct.Struct(">hhi")  # api_key, api_version, correlation_id

# Attaching a caller's buffer costs a list slot; copying a small one into the framing is cheaper.
ATTACH_THRESHOLD: Final = 512
_MAX_VARINT_SHIFT: Final = 28  # five bytes carry Kafka's 32-bit unsigned varints


def as_view(data: Buffer) -> memoryview:
    """A flat byte view of `data`, so lengths are byte counts and slices are zero-copy."""
    kind = type(data)
    if kind is bytearray or kind is bytes:  # the usual frames: already flat bytes
        return memoryview(data)
    view = data if isinstance(data, memoryview) else memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def nbytes(buffer: Buffer) -> int:
    return buffer.nbytes if isinstance(buffer, memoryview) else len(buffer)


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """An unsigned varint at `pos`: (value, position after it). IndexError past the end."""
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    value = byte & 0x7F
    shift = 7
    while True:
        pos += 1
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos + 1
        shift += 7
        if shift > _MAX_VARINT_SHIFT:
            raise KafkaCodecError("unsigned varint longer than five bytes")


def _encode_uvarint(value: int) -> bytes:
    if value < 0:
        raise KafkaCodecError(f"negative value {value} for an unsigned varint")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# Lengths below this are precomputed: most compact lengths, counts and tags are small.
SMALL_UVARINTS: Final = tuple(_encode_uvarint(n) for n in range(1024))


def uvarint(value: int) -> bytes:
    """The unsigned varint encoding of `value`."""
    if 0 <= value < 1024:
        return SMALL_UVARINTS[value]
    return _encode_uvarint(value)


class Out:
    """Where writers put their bytes: framing accumulates in `cur`; large buffers are attached.

    `parts` holds finished pieces in order. `attach` closes the current bytearray and appends the
    caller's buffer as is, which is how a Fetch response carries segment slices without a copy.
    """

    __slots__ = ("cur", "parts")

    def __init__(self, reserve: int = 0) -> None:
        self.cur = bytearray(reserve)
        self.parts: list[Buffer] = []

    def attach(self, buffer: Buffer) -> None:
        if self.cur:
            self.parts.append(self.cur)
            self.cur = bytearray()
        # Our own pieces are the only bytearrays in `parts`; a caller's is viewed, never copied.
        self.parts.append(memoryview(buffer) if isinstance(buffer, bytearray) else buffer)

    def getvalue(self) -> bytes:
        """Everything written, joined (for small outputs such as tagged fields and structs)."""
        if not self.parts:
            return bytes(self.cur)
        return b"".join([*self.parts, self.cur])

    def frame(self) -> list[bytes | memoryview]:
        """The parts as a size-prefixed frame; `Out(reserve=4)` must have started it.

        The frame is the Out's last use: nothing may be written to it afterwards.
        """
        if not self.parts:  # nothing attached: the whole frame is in `cur` (small messages)
            first = self.cur
            assert len(first) >= 4, "frame needs Out(reserve=4)"
            size = len(first) - 4
            if size > 0x7FFFFFFF:
                raise KafkaCodecError(f"frame of {size} bytes exceeds the int32 size prefix")
            INT32.pack_into(first, 0, size)
            return [bytes(first)]
        if self.cur:
            self.parts.append(self.cur)
            self.cur = bytearray()
        parts = self.parts
        head = parts[0]
        assert isinstance(head, bytearray) and len(head) >= 4, "frame needs Out(reserve=4)"
        first = head
        size = -4
        for part in parts:
            size += part.nbytes if type(part) is memoryview else len(part)
        if size > 0x7FFFFFFF:
            raise KafkaCodecError(f"frame of {size} bytes exceeds the int32 size prefix")
        INT32.pack_into(first, 0, size)
        return [bytes(part) if isinstance(part, bytearray) else part for part in parts]
