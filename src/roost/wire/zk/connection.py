"""Sans-IO ZooKeeper connections (h11 style): feed bytes in, get events out; ask for bytes to send.

`ServerConnection` is the server's side of one client connection. Its first frame is the
ConnectRequest (or, on a fresh connection, a four-letter word such as `ruok` sent raw); every later
frame is a request header and body. Frames longer than `max_frame` (jute.maxbuffer) are refused
before their body is buffered, so memory per connection stays bounded. Any malformed input raises
`ZkCodecError`, after which the connection is unusable.

`ClientConnection` is the client's side (roost.zkclient, tests, fuzzing, tools): it decodes replies
by remembering which opcode each xid was sent with. Replies come in request order except ping and
auth replies, which servers may answer out of turn (the keeper answers a ping at once, ahead of
writes still in flight; ZooKeeper answers auth outside its pipeline), so those two are matched by
their special xid and never queued.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from roost.wire.zk.constants import (
    AUTH_XID,
    DEFAULT_MAX_BUFFER,
    FOUR_LETTER_WORDS,
    PING_XID,
    SET_WATCHES_XID,
    WATCH_XID,
    WRITE_OPS,
    OpCode,
)
from roost.wire.zk.errors import ZkCodecError
from roost.wire.zk.jute import INT, INT_INT, INT_LONG_INT, JuteReader, JuteWriter
from roost.wire.zk.records import (
    REQUEST_READERS,
    ConnectRequest,
    ConnectResponse,
    Request,
    Stat,
    WatcherEvent,
    read_acl_list,
    read_multi_response,
)

# Room for the reply header around a maximal record when a client sizes its own frames.
FRAME_OVERHEAD = 64


# --------------------------------------------------------------------------------------- events


@dataclass(slots=True)
class FourLetterWord:
    """A raw four-letter admin command (ruok, srvr, stat, mntr, envi, ...) on a fresh connection."""

    command: str


@dataclass(slots=True)
class ConnectReceived:
    request: ConnectRequest


@dataclass(slots=True)
class RequestReceived:
    """A decoded request. For state-changing ops (`WRITE_OPS`), `body` holds the request's raw
    bytes (after the header) so a server can replicate them verbatim without encoding the record
    again; for reads it is empty."""

    xid: int
    opcode: int
    request: Request
    body: bytes


@dataclass(slots=True)
class UnknownRequest:
    """A well-framed request whose opcode this codec does not know (ZooKeeper: Unimplemented)."""

    xid: int
    opcode: int


ServerEvent = FourLetterWord | ConnectReceived | RequestReceived | UnknownRequest


class _FrameBuffer:
    """Accumulates bytes and cuts length-prefixed frames, refusing lengths above `max_frame`."""

    __slots__ = ("buf", "max_frame", "pos")

    def __init__(self, max_frame: int) -> None:
        assert max_frame > 0
        self.buf = bytearray()
        self.pos = 0
        self.max_frame = max_frame

    def feed(self, data: bytes) -> None:
        if self.pos and self.pos == len(self.buf):
            # Everything consumed: start over instead of growing (keeps the buffer bounded).
            self.buf.clear()
            self.pos = 0
        elif self.pos > 65536:
            del self.buf[: self.pos]
            self.pos = 0
        self.buf += data

    def peek_length(self) -> int | None:
        if len(self.buf) - self.pos < 4:
            return None
        length: int = INT.unpack_from(self.buf, self.pos)[0]
        return length

    def next_frame(self) -> tuple[int, int] | None:
        """(start, end) offsets of the next complete frame body in `buf`, or None if incomplete."""
        available = len(self.buf) - self.pos
        if available < 4:
            return None
        (length,) = INT.unpack_from(self.buf, self.pos)
        if length < 0 or length > self.max_frame:
            raise ZkCodecError(f"frame length {length} outside [0, {self.max_frame}] (jute.maxbuffer)")
        if available - 4 < length:
            return None
        start = self.pos + 4
        self.pos = start + length
        return start, self.pos

    @property
    def buffered(self) -> int:
        return len(self.buf) - self.pos


class ServerConnection:
    """The server side of one client connection's byte stream."""

    __slots__ = ("_frames", "allow_four_letter_words", "closed", "connected")

    def __init__(self, max_frame: int = DEFAULT_MAX_BUFFER, allow_four_letter_words: bool = True) -> None:
        self._frames = _FrameBuffer(max_frame)
        self.allow_four_letter_words = allow_four_letter_words
        self.connected = False  # the ConnectRequest has been received
        self.closed = False

    def receive_data(self, data: bytes) -> list[ServerEvent]:
        """Consume `data`; return the complete events it finished. Raises ZkCodecError."""
        if self.closed:
            raise ZkCodecError("data after the connection was closed")
        frames = self._frames
        frames.feed(data)
        events: list[ServerEvent] = []
        if not self.connected:
            if self.allow_four_letter_words and frames.buffered >= 4:
                word = bytes(frames.buf[frames.pos : frames.pos + 4])
                if word in FOUR_LETTER_WORDS:
                    # A four-letter word ends the conversation: the server answers and closes.
                    self.closed = True
                    return [FourLetterWord(word.decode("ascii"))]
            span = frames.next_frame()
            if span is None:
                return events
            start, end = span
            events.append(ConnectReceived(ConnectRequest.read(JuteReader(frames.buf, start, end))))
            self.connected = True
        buf = frames.buf
        while True:
            span = frames.next_frame()
            if span is None:
                return events
            start, end = span
            if end - start < 8:
                raise ZkCodecError(f"request frame of {end - start} bytes is shorter than its header")
            xid, opcode = INT_INT.unpack_from(buf, start)
            reader_fn = REQUEST_READERS.get(opcode)
            if reader_fn is None:
                events.append(UnknownRequest(xid, opcode))
                continue
            body_start = start + 8
            request = reader_fn(JuteReader(buf, body_start, end))
            body = bytes(buf[body_start:end]) if opcode in WRITE_OPS else b""
            events.append(RequestReceived(xid, opcode, request, body))


# ------------------------------------------------------------------------------------ encoding


def frame(body: bytes | bytearray) -> bytes:
    return INT.pack(len(body)) + body


def encode_connect_response(response: ConnectResponse) -> bytes:
    w = JuteWriter()
    response.write(w)
    return frame(w.out)


def encode_reply(xid: int, zxid: int, err: int, body: bytes = b"") -> bytes:
    """A reply frame: ReplyHeader(xid, zxid, err) followed by the response record (if any)."""
    return INT.pack(16 + len(body)) + INT_LONG_INT.pack(xid, zxid, err) + body


def encode_watch_event(event_type: int, state: int, path: str) -> bytes:
    w = JuteWriter()
    w.raw(INT_LONG_INT.pack(WATCH_XID, -1, 0))
    WatcherEvent(event_type, state, path).write(w)
    return frame(w.out)


def encode_request(xid: int, request: Request) -> bytes:
    w = JuteWriter()
    w.raw(INT_INT.pack(xid, request.opcode))
    request.write(w)
    return frame(w.out)


def encode_connect_request(request: ConnectRequest) -> bytes:
    w = JuteWriter()
    request.write(w)
    return frame(w.out)


# ------------------------------------------------------------------------------------- client


@dataclass(slots=True)
class ConnectedEvent:
    response: ConnectResponse


@dataclass(slots=True)
class ReplyEvent:
    """A reply matched to its request; `result` is the decoded response (None on error/empty)."""

    xid: int
    zxid: int
    err: int
    opcode: int
    result: object


@dataclass(slots=True)
class WatchEvent:
    event: WatcherEvent
    zxid: int


ClientEvent = ConnectedEvent | ReplyEvent | WatchEvent


def _read_response(opcode: int, r: JuteReader) -> object:
    """Decode the response record for `opcode` (an empty body reads as None)."""
    if opcode in (OpCode.CREATE,):
        return r.path()
    if opcode in (OpCode.CREATE2, OpCode.CREATE_TTL, OpCode.CREATE_CONTAINER):
        return r.path(), Stat(*r.stat())
    if opcode in (OpCode.EXISTS, OpCode.SET_DATA, OpCode.SET_ACL):
        return Stat(*r.stat())
    if opcode == OpCode.GET_DATA:
        data = r.buffer()
        return (b"" if data is None else data), Stat(*r.stat())
    if opcode == OpCode.GET_CHILDREN:
        return r.ustring_vector()
    if opcode == OpCode.GET_CHILDREN2:
        return r.ustring_vector(), Stat(*r.stat())
    if opcode == OpCode.GET_ACL:
        return read_acl_list(r), Stat(*r.stat())
    if opcode == OpCode.SYNC:
        return r.path()
    if opcode in (OpCode.MULTI, OpCode.MULTI_READ):
        return read_multi_response(r)
    if opcode == OpCode.GET_ALL_CHILDREN_NUMBER:
        return r.int()
    if opcode == OpCode.GET_EPHEMERALS:
        return r.ustring_vector()
    if opcode == OpCode.SASL:
        return r.buffer() or b""  # SetSASLResponse's token
    return None


# Replies a server may send out of request order, by xid, with the opcode they answer.
_OUT_OF_TURN_XIDS = {PING_XID: OpCode.PING, AUTH_XID: OpCode.AUTH}


class ClientConnection:
    """The client side of a connection: encodes requests, decodes replies and watch events."""

    def __init__(self, max_frame: int = DEFAULT_MAX_BUFFER * 16, max_request: int | None = None) -> None:
        self._frames = _FrameBuffer(max_frame)
        # Requests whose body exceeds this (the server's jute.maxbuffer) are refused unsent.
        self.max_request = max_request
        self._pending: deque[tuple[int, int]] = deque()
        self._next_xid = 0
        self.connected = False

    def connect(self, request: ConnectRequest) -> bytes:
        return encode_connect_request(request)

    def send(self, request: Request, xid: int | None = None) -> tuple[int, bytes]:
        """Encode `request`; returns (xid, bytes). Special ops get ZooKeeper's special xids."""
        if xid is None:
            if request.opcode == OpCode.PING:
                xid = PING_XID
            elif request.opcode == OpCode.AUTH:
                xid = AUTH_XID
            elif request.opcode in (OpCode.SET_WATCHES, OpCode.SET_WATCHES2):
                xid = SET_WATCHES_XID
            else:
                self._next_xid += 1
                xid = self._next_xid
        data = encode_request(xid, request)
        if self.max_request is not None and len(data) - 4 > self.max_request:
            raise ZkCodecError(f"request of {len(data) - 4} bytes exceeds the {self.max_request}-byte limit")
        if xid not in _OUT_OF_TURN_XIDS:
            self._pending.append((xid, request.opcode))
        return xid, data

    @property
    def pending(self) -> int:
        """How many sent requests (pings and auth aside) still wait for their reply."""
        return len(self._pending)

    def receive_data(self, data: bytes) -> list[ClientEvent]:
        frames = self._frames
        frames.feed(data)
        events: list[ClientEvent] = []
        while True:
            span = frames.next_frame()
            if span is None:
                return events
            start, end = span
            reader = JuteReader(frames.buf, start, end)
            if not self.connected:
                events.append(ConnectedEvent(ConnectResponse.read(reader)))
                self.connected = True
                continue
            xid, zxid, err = reader.int(), reader.long(), reader.int()
            if xid == WATCH_XID:
                events.append(WatchEvent(WatcherEvent.read(reader), zxid))
                continue
            if xid in _OUT_OF_TURN_XIDS:
                events.append(ReplyEvent(xid, zxid, err, _OUT_OF_TURN_XIDS[xid], None))
                continue
            if not self._pending:
                raise ZkCodecError(f"reply with xid {xid} but nothing is pending")
            expected_xid, opcode = self._pending.popleft()
            if xid != expected_xid:
                raise ZkCodecError(f"xids do not match: expected {expected_xid}, received {xid}")
            result = None
            if err == 0 and reader.remaining:
                result = _read_response(opcode, reader)
            events.append(ReplyEvent(xid, zxid, err, opcode, result))
