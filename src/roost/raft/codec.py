"""Wire encoding of raft peer messages.

A frame is `length:u32 | version:u8 | crc32c(body):u32 | body`, where `length` counts everything
after itself. The body is the message header, then its entries, request ids, optional snapshot and
application payload, each count or length checked against the bytes that remain. Any malformed
input raises `CodecError` and nothing else, so the transport can drop the connection and move on.

A peer connection opens with a hello (`MAGIC | version:u8 | node id:u32`) so that the listener
knows which member is talking.
"""

from __future__ import annotations

import struct

import crc32c

from roost.raft.messages import Entry, EntryKind, Membership, Message, MessageType, Snapshot

VERSION = 1
MAGIC = b"RRFT"
DEFAULT_MAX_FRAME = 256 << 20  # a snapshot travels in one frame; the keeper's data tree must fit

_FRAME_HEAD = struct.Struct(">IBI")  # length, version, crc
_HEADER = struct.Struct(">BIIQQQQBQQQ")
_ENTRY_HEAD = struct.Struct(">BQQI")
_COUNT = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_SNAP_HEAD = struct.Struct(">QQI")
_HELLO = struct.Struct(">4sBI")
HELLO_SIZE = _HELLO.size

_TYPES = {t.value: t for t in MessageType}
_KINDS = {k.value: k for k in EntryKind}


class CodecError(ValueError):
    """Bytes that are not a valid raft frame (corrupt, truncated, oversized, unknown version)."""


_FLAG_REJECT = 0x01
_FLAG_QUIET = 0x02


def encode_hello(node_id: int) -> bytes:
    return _HELLO.pack(MAGIC, VERSION, node_id)


def decode_hello(data: bytes) -> int:
    if len(data) != HELLO_SIZE:
        raise CodecError("hello has the wrong size")
    magic, version, node_id = _HELLO.unpack(data)
    if magic != MAGIC or version != VERSION:
        raise CodecError(f"not a raft peer hello: {data!r}")
    return int(node_id)


def encode_message(m: Message) -> bytes:
    parts: list[bytes] = [_HEADER.pack(
        m.type.value, m.src, m.dst, m.term, m.log_term, m.index, m.commit,
        (_FLAG_REJECT if m.reject else 0) | (_FLAG_QUIET if m.quiet else 0),
        m.hint_index, m.hint_term, m.context,
    ), _COUNT.pack(len(m.entries))]
    for e in m.entries:
        parts.append(_ENTRY_HEAD.pack(e.kind.value, e.term, e.index, len(e.data)))
        parts.append(e.data)
    parts.append(_COUNT.pack(len(m.request_ids)))
    parts.extend(_U64.pack(r) for r in m.request_ids)
    if m.snapshot is None:
        parts.append(b"\x00")
    else:
        s = m.snapshot
        # Flag 1: a snapshot of the initial configuration; 2: one that carries its configuration.
        parts.append(b"\x01" if s.membership is None else b"\x02")
        parts.append(_SNAP_HEAD.pack(s.index, s.term, len(s.data)))
        parts.append(s.data)
        if s.membership is not None:
            membership = s.membership.encode()
            parts.append(_COUNT.pack(len(membership)))
            parts.append(membership)
    parts.append(_COUNT.pack(len(m.data)))
    parts.append(m.data)
    body = b"".join(parts)
    return _FRAME_HEAD.pack(len(body) + 5, VERSION, crc32c.crc32c(body)) + body


def decode_body(body: bytes | memoryview) -> Message:
    """Decode one frame body (already length-delimited and CRC-checked)."""
    view = memoryview(body)
    end = len(view)
    if end < _HEADER.size + _COUNT.size:
        raise CodecError("message header truncated")
    (type_value, src, dst, term, log_term, index, commit, flags, hint_index, hint_term,
     context) = _HEADER.unpack_from(view, 0)
    mtype = _TYPES.get(type_value)
    if mtype is None:
        raise CodecError(f"unknown message type {type_value}")
    if flags & ~(_FLAG_REJECT | _FLAG_QUIET):
        raise CodecError(f"unknown message flags 0x{flags:x}")
    pos = _HEADER.size
    (count,) = _COUNT.unpack_from(view, pos)
    pos += _COUNT.size
    if count * _ENTRY_HEAD.size > end - pos:
        raise CodecError("entry count exceeds the frame")
    entries: list[Entry] = []
    for _ in range(count):
        if pos + _ENTRY_HEAD.size > end:
            raise CodecError("entry header truncated")
        kind_value, e_term, e_index, size = _ENTRY_HEAD.unpack_from(view, pos)
        pos += _ENTRY_HEAD.size
        kind = _KINDS.get(kind_value)
        if kind is None:
            raise CodecError(f"unknown entry kind {kind_value}")
        if size > end - pos:
            raise CodecError("entry data exceeds the frame")
        entries.append(Entry(e_term, e_index, bytes(view[pos:pos + size]), kind))
        pos += size
    if pos + _COUNT.size > end:
        raise CodecError("request id count truncated")
    (count,) = _COUNT.unpack_from(view, pos)
    pos += _COUNT.size
    if count * _U64.size > end - pos:
        raise CodecError("request id count exceeds the frame")
    request_ids = tuple(_U64.unpack_from(view, pos + 8 * k)[0] for k in range(count))
    pos += 8 * count
    if pos + 1 > end:
        raise CodecError("snapshot flag truncated")
    flag = view[pos]
    pos += 1
    snapshot = None
    if flag in (1, 2):
        if pos + _SNAP_HEAD.size > end:
            raise CodecError("snapshot header truncated")
        s_index, s_term, size = _SNAP_HEAD.unpack_from(view, pos)
        pos += _SNAP_HEAD.size
        if size > end - pos:
            raise CodecError("snapshot data exceeds the frame")
        data = bytes(view[pos:pos + size])
        pos += size
        membership = None
        if flag == 2:
            if pos + _COUNT.size > end:
                raise CodecError("snapshot membership length truncated")
            (size,) = _COUNT.unpack_from(view, pos)
            pos += _COUNT.size
            if size > end - pos:
                raise CodecError("snapshot membership exceeds the frame")
            try:
                membership = Membership.decode(bytes(view[pos:pos + size]))
            except (ValueError, AssertionError) as exc:
                raise CodecError(f"snapshot membership is invalid: {exc}") from None
            pos += size
        snapshot = Snapshot(s_index, s_term, data, membership)
    elif flag != 0:
        raise CodecError("snapshot flag is not 0, 1 or 2")
    if pos + _COUNT.size > end:
        raise CodecError("payload length truncated")
    (size,) = _COUNT.unpack_from(view, pos)
    pos += _COUNT.size
    if size != end - pos:
        raise CodecError("payload length does not match the frame")
    data = bytes(view[pos:end])
    return Message(mtype, src, dst, term=term, log_term=log_term, index=index, commit=commit,
                   entries=tuple(entries), reject=bool(flags & _FLAG_REJECT), quiet=bool(flags & _FLAG_QUIET),
                   hint_index=hint_index, hint_term=hint_term,
                   context=context, request_ids=request_ids, snapshot=snapshot, data=data)


def decode_message(frame: bytes) -> Message:
    """Decode exactly one whole frame."""
    decoder = FrameDecoder()
    messages = decoder.feed(frame)
    if len(messages) != 1 or decoder.buffered:
        raise CodecError("not exactly one frame")
    return messages[0]


class FrameDecoder:
    """Incremental decoder for a byte stream of frames (bounded buffer, linear time)."""

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buffer = bytearray()
        self._start = 0

    @property
    def buffered(self) -> int:
        return len(self._buffer) - self._start

    def feed(self, data: bytes) -> list[Message]:
        self._buffer += data
        out: list[Message] = []
        buf = self._buffer
        while len(buf) - self._start >= 4:
            (length,) = _COUNT.unpack_from(buf, self._start)
            if length < 5 or length > self.max_frame:
                raise CodecError(f"frame length {length} out of bounds")
            # Check the version as soon as it is here, not after the whole (claimed) body: a
            # stream that resumes mid-frame is refused at once instead of waiting for up to
            # max_frame bytes that will never make sense.
            if len(buf) - self._start >= 5 and buf[self._start + 4] != VERSION:
                raise CodecError(f"unsupported frame version {buf[self._start + 4]}")
            if len(buf) - self._start < 4 + length:
                break
            _, version, crc = _FRAME_HEAD.unpack_from(buf, self._start)
            assert version == VERSION
            body = bytes(buf[self._start + 9:self._start + 4 + length])
            if crc32c.crc32c(body) != crc:
                raise CodecError("frame CRC mismatch")
            out.append(decode_body(body))
            self._start += 4 + length
        if self._start:
            del buf[:self._start]
            self._start = 0
        return out
