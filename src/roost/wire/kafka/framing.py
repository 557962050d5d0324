"""Whole frames: cutting a byte stream into frames, and request and response headers around
compiled message bodies. The one framing module of both sides: the broker's connections, the
broker's own clients (replication, the controller) and the test and benchmark clients use it.

`FrameSplitter` cuts a byte stream into frames (h11 style: feed bytes, get whole frames; the size
is checked before anything is buffered, and a bad size raises FrameSizeError).

A request frame is `size int32 | header | body`; this module's decoders take the frame *after* the
size prefix (the transport has already cut it), and its encoders return the complete frame with
the prefix as a list of buffers to write in order.

Header versions follow the body's flexibility: request header v1 (api_key, api_version,
correlation_id, client_id as a classic nullable string) or v2 (v1 plus a tagged-field section);
response header v0 (correlation_id) or v1 (plus tagged fields). Two exceptions, as in Kafka's
ApiMessageType: ApiVersions' response header is always v0, so that a client that does not yet know
the broker's versions can read it (KIP-511); and ControlledShutdown v0 requests use request header
v0 (api_key, api_version, correlation_id: no client_id), a relic of the 0.8 protocol.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from roost.wire.kafka.apis import DEFAULT_CODECS, ApiKey, CodecTable, lookup_api
from roost.wire.kafka.exceptions import KafkaCodecError
from roost.wire.kafka.primitives import HEADER_FIXED, INT16, INT32, Buffer, Out, as_view
from roost.wire.kafka.schemas import EMBEDDED_STRUCTS

# What malformed bytes can make the readers raise; the entry points turn these into KafkaCodecError.
_DECODE_FAILURES: Final = (struct.error, IndexError, ValueError, OverflowError)
# What an unencodable body (a wrong type, an out-of-range integer) makes the writers raise.
_ENCODE_FAILURES: Final = (struct.error, TypeError, AttributeError, ValueError, OverflowError)

FRAME_SIZE: Final = struct.Struct(">i")  # every frame's length, in front of it
SIZE_PREFIX: Final = FRAME_SIZE


class FrameSizeError(KafkaCodecError):
    """A frame's size prefix lies outside the limits: the peer is broken or hostile."""


class FrameSplitter:
    """Cuts a stream of `size int32 | frame` into frames (without their size prefix).

    Frames come out as writable copies (a broker rewrites base offsets inside produced records).
    A size below `min_frame_bytes` or above `max_frame_bytes` raises FrameSizeError before the
    frame's bytes are buffered, so a peer cannot make us hold more than one frame's limit.
    """

    __slots__ = ("_buffer", "max_frame_bytes", "min_frame_bytes")

    def __init__(self, max_frame_bytes: int, min_frame_bytes: int = 0) -> None:
        assert 0 <= min_frame_bytes <= max_frame_bytes
        self.max_frame_bytes = max_frame_bytes
        self.min_frame_bytes = min_frame_bytes
        self._buffer = bytearray()

    @property
    def buffered(self) -> int:
        """Bytes received that do not yet make a whole frame."""
        return len(self._buffer)

    @property
    def pending_size(self) -> int:
        """The declared size of the frame being received (-1: its length prefix is not whole)."""
        buffer = self._buffer
        return FRAME_SIZE.unpack_from(buffer, 0)[0] if len(buffer) >= 4 else -1

    def split(self, data: Buffer) -> list[bytearray]:
        """Take `data` from the stream; return the frames it completes, in order."""
        buffer = self._buffer
        buffer += data
        frames: list[bytearray] = []
        position = 0
        available = len(buffer)
        while available - position >= 4:
            (size,) = FRAME_SIZE.unpack_from(buffer, position)
            if size < self.min_frame_bytes or size > self.max_frame_bytes:
                buffer.clear()
                raise FrameSizeError(f"frame size {size} outside [{self.min_frame_bytes}, {self.max_frame_bytes}]")
            end = position + 4 + size
            if end > available:
                break
            frames.append(buffer[position + 4:end])
            position = end
        if position:
            del buffer[:position]
        return frames

    def clear(self) -> None:
        self._buffer.clear()


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


# A frozen dataclass's __init__ sets each field through object.__setattr__; the decoder, which makes
# one header per request, fills the slots directly (the same object, about half the time).
_new_object: Final = object.__new__
# (The slots' member descriptors, taken from the class's __dict__: the checker knows them as Any.)
_set_api_key: Final = RequestHeader.__dict__["api_key"].__set__
_set_api_version: Final = RequestHeader.__dict__["api_version"].__set__
_set_correlation_id: Final = RequestHeader.__dict__["correlation_id"].__set__
_set_client_id: Final = RequestHeader.__dict__["client_id"].__set__

_CONTROLLED_SHUTDOWN: Final = int(ApiKey.CONTROLLED_SHUTDOWN)  # a plain int compares faster
_API_VERSIONS: Final = int(ApiKey.API_VERSIONS)
# Request header v1/v2 up to the client_id's characters: api_key, api_version, correlation_id and
# the client_id's int16 length, unpacked at once.
_HEADER_V1: Final = struct.Struct(">hhih")


def request_has_client_id(api_key: int, api_version: int) -> bool:
    """Whether the request header carries a client_id: all but ControlledShutdown v0 (header v0)."""
    return not (api_key == _CONTROLLED_SHUTDOWN and api_version == 0)


def read_request_header(frame: Buffer) -> tuple[RequestHeader, int]:
    """The request header and where it ends (before the flexible header's tagged fields).

    Does not need the API version to be supported. A server that looked at the header first (to
    answer an unknown API or an unsupported version with the right correlation id) passes both
    to `decode_request_body`, so the header is parsed once.
    """
    return _read_request_header(as_view(frame))


def _read_request_header(buf: memoryview) -> tuple[RequestHeader, int]:
    size = len(buf)
    if size >= _HEADER_V1.size:
        api_key, api_version, correlation_id, length = _HEADER_V1.unpack_from(buf, 0)
        pos = _HEADER_V1.size
    elif size >= HEADER_FIXED.size:  # only a v0 header fits
        api_key, api_version, correlation_id = HEADER_FIXED.unpack_from(buf, 0)
        length = pos = 0
    else:
        raise KafkaCodecError(f"request frame of {size} bytes is shorter than a request header")
    client_id: str | None = None
    if api_key == _CONTROLLED_SHUTDOWN and api_version == 0:  # header v0: no client_id
        pos = HEADER_FIXED.size
    elif pos == 0:
        raise KafkaCodecError(f"request frame of {size} bytes is shorter than a request header")
    elif length >= 0:
        end = pos + length
        if end > size:
            raise KafkaCodecError("request header client_id runs past the end of the frame")
        try:
            client_id = buf[pos:end].tobytes().decode()  # str(view, "utf-8"), faster
        except UnicodeDecodeError as exc:
            raise KafkaCodecError(f"request header client_id is not UTF-8: {exc}") from exc
        pos = end
    header = _new_object(RequestHeader)
    _set_api_key(header, api_key)
    _set_api_version(header, api_version)
    _set_correlation_id(header, correlation_id)
    _set_client_id(header, client_id)
    return header, pos


def peek_request_header(frame: Buffer) -> RequestHeader:
    """The request header, without decoding the body or knowing whether the API version is supported.

    Lets a server answer an unknown API or an unsupported version with the right correlation id.
    """
    return read_request_header(frame)[0]


def frame_size(prefix: Buffer, max_frame_bytes: int) -> int:
    """The length of the frame behind a 4-byte size prefix, as a client reads a response.

    KafkaCodecError when the length is negative or over `max_frame_bytes`, so that a reader never
    allocates for a length its peer cannot back (principle 4).
    """
    size: int = SIZE_PREFIX.unpack_from(prefix, 0)[0]
    if size < 0 or size > max_frame_bytes:
        raise KafkaCodecError(f"frame size {size} outside [0, {max_frame_bytes}]")
    return size


def _response_header_flexible(api_key: int, flexible: bool) -> bool:
    return flexible and api_key != _API_VERSIONS


# The size prefix (filled in last) and a response header: v0 is the correlation id; v1 adds the tag
# count of its (always empty) tagged fields, the "x" pad byte.
_RESPONSE_HEADER_V0: Final = struct.Struct(">ii")
_RESPONSE_HEADER_V1: Final = struct.Struct(">iix")
BodyReader = Callable[[memoryview, int], tuple[dict[str, Any], int]]
BodyWriter = Callable[[dict[str, Any], Out], None]


class KafkaFraming:
    """Requests, responses and embedded structs around the body codecs of one `CodecTable`.

    The module's functions (`decode_request`, `encode_response`, ...) are the methods of the
    instance over the default table; tests and benchmarks make one per table to compare them.
    """

    def __init__(self, codecs: CodecTable) -> None:
        self.codecs = codecs
        self._message_codec = codecs.message_codec
        self._struct_codec = codecs.struct_codec
        # A struct with no fields, flexible: exactly a tagged-field section (header tags are all unknown).
        self._header_tags = codecs.compile_struct("Header", (), 0, True).read
        # What the per-request paths need, by (api_key, api_version), looked up without a call.
        self._request_readers: dict[tuple[int, int], tuple[BodyReader, bool]] = {}
        self._response_writers: dict[tuple[int, int], tuple[BodyWriter, struct.Struct]] = {}

    def __repr__(self) -> str:
        return f"KafkaFraming({self.codecs!r})"

    def _request_reader(self, api_key: int, api_version: int) -> tuple[BodyReader, bool]:
        codec, flexible = self._message_codec(api_key, api_version, True)
        found = self._request_readers[(api_key, api_version)] = (codec.read, flexible)
        return found

    def _response_writer(self, api_key: int, api_version: int) -> tuple[BodyWriter, struct.Struct]:
        codec, flexible = self._message_codec(api_key, api_version, False)
        header = _RESPONSE_HEADER_V1 if _response_header_flexible(api_key, flexible) else _RESPONSE_HEADER_V0
        found = self._response_writers[(api_key, api_version)] = (codec.write, header)
        return found

    def decode_request(self, frame: Buffer, *, strict: bool = False) -> tuple[RequestHeader, dict[str, Any]]:
        """Header and body of a request frame (without its size prefix).

        Raises UnknownApiError, UnsupportedVersionError, or KafkaCodecError for malformed bytes.
        Bytes left over after the body are ignored unless `strict`, because that is what Apache
        Kafka does and real clients rely on it: librdkafka 2.16 sends three stray bytes after the
        body of an all-topics Metadata v12 request (AdminClient.list_topics), which a strict
        broker would refuse.
        """
        buf = as_view(frame)
        header, pos = _read_request_header(buf)
        return header, self._decode_request_body(header, buf, pos, strict)

    def decode_request_body(self, header: RequestHeader, frame: Buffer, header_end: int, *,
                            strict: bool = False) -> dict[str, Any]:
        """The body of a request frame whose header `read_request_header` gave (with `header_end`).

        The same checks and errors as `decode_request`, without parsing the header again.
        """
        return self._decode_request_body(header, as_view(frame), header_end, strict)

    def _decode_request_body(self, header: RequestHeader, buf: memoryview, pos: int,
                             strict: bool) -> dict[str, Any]:
        api_key, api_version = header.api_key, header.api_version
        found = self._request_readers.get((api_key, api_version))
        if found is None:
            found = self._request_reader(api_key, api_version)
        read, flexible = found
        try:
            if flexible:
                if buf[pos] == 0:  # no header tagged fields, the usual case
                    pos += 1
                else:
                    _, pos = self._header_tags(buf, pos)
            body, pos = read(buf, pos)
        except _DECODE_FAILURES as exc:
            raise _malformed("request", api_key, api_version, exc) from exc
        if strict and pos != len(buf):
            raise KafkaCodecError(f"{len(buf) - pos} bytes left after the body of "
                                  f"{_describe(api_key, api_version)} request")
        return body

    def encode_request(self, header: RequestHeader, body: dict[str, Any]) -> list[bytes | memoryview]:
        """The complete request frame, size prefix included, as buffers to write in order."""
        codec, flexible = self._message_codec(header.api_key, header.api_version, True)
        out = Out(reserve=4)
        try:
            out.cur += HEADER_FIXED.pack(header.api_key, header.api_version, header.correlation_id)
            if not request_has_client_id(header.api_key, header.api_version):
                if header.client_id is not None:
                    raise KafkaCodecError(f"{_describe(header.api_key, header.api_version)} requests "
                                          "have no client_id in their header; pass None")
            elif header.client_id is None:
                out.cur += INT16.pack(-1)
            else:
                client_id = header.client_id.encode("utf-8")
                out.cur += INT16.pack(len(client_id))
                out.cur += client_id
            if flexible:
                out.cur += b"\x00"  # no header tagged fields
            codec.write(body, out)
        except _ENCODE_FAILURES as exc:
            raise _unencodable("request", header.api_key, header.api_version, exc) from exc
        return out.frame()

    def encode_response(self, header: RequestHeader, body: dict[str, Any]) -> list[bytes | memoryview]:
        """The complete response frame for the request `header`, size prefix included."""
        api_key, api_version = header.api_key, header.api_version
        found = self._response_writers.get((api_key, api_version))
        if found is None:
            found = self._response_writer(api_key, api_version)
        write, response_header = found
        out = _new_object(Out)  # Out(reserve=4) without the call: its size prefix comes with the header
        out.parts = []
        try:
            out.cur = bytearray(response_header.pack(0, header.correlation_id))
            write(body, out)
        except _ENCODE_FAILURES as exc:
            raise _unencodable("response", api_key, api_version, exc) from exc
        return out.frame()

    def decode_response(self, api_key: int, api_version: int, frame: Buffer) -> tuple[int, dict[str, Any]]:
        """(correlation_id, body) of a response frame (without its size prefix)."""
        buf = as_view(frame)
        codec, flexible = self._message_codec(api_key, api_version, False)
        try:
            (correlation_id,) = INT32.unpack_from(buf, 0)
            pos = 4
            if _response_header_flexible(api_key, flexible):
                if buf[pos] == 0:  # no header tagged fields, the usual case
                    pos += 1
                else:
                    _, pos = self._header_tags(buf, pos)
            body, pos = codec.read(buf, pos)
        except _DECODE_FAILURES as exc:
            raise _malformed("response", api_key, api_version, exc) from exc
        if pos != len(buf):
            raise KafkaCodecError(f"{len(buf) - pos} bytes left after the body of "
                                  f"{_describe(api_key, api_version)} response")
        return correlation_id, body

    # ------------------------------------------------------------ embedded structs

    def encode_struct(self, name: str, version: int, body: dict[str, Any]) -> bytes:
        """An embedded struct (e.g. "ConsumerProtocolAssignment") without a version prefix."""
        out = Out()
        try:
            self._struct_codec(name, version).write(body, out)
        except _ENCODE_FAILURES as exc:
            raise KafkaCodecError(f"cannot encode {name} v{version}: {exc}") from exc
        return out.getvalue()

    def decode_struct(self, name: str, version: int, data: Buffer) -> dict[str, Any]:
        """An embedded struct without a version prefix; every byte must belong to it."""
        buf = as_view(data)
        body, pos = self._read_struct(name, version, buf, 0)
        if pos != len(buf):
            raise KafkaCodecError(f"{len(buf) - pos} bytes left after {name} v{version}")
        return body

    def _read_struct(self, name: str, version: int, buf: memoryview, pos: int) -> tuple[dict[str, Any], int]:
        codec = self._struct_codec(name, version)
        try:
            return codec.read(buf, pos)
        except _DECODE_FAILURES as exc:
            raise KafkaCodecError(f"malformed {name} v{version}: {exc}") from exc

    def decode_versioned_struct(self, name: str, data: Buffer) -> tuple[int, dict[str, Any]]:
        """(version, body) of an int16-version-prefixed embedded struct, read the way Kafka does.

        A version newer than ours is read as our newest (newer versions only append fields), and
        bytes after the struct are ignored, so newer clients' subscriptions and assignments still parse.
        """
        buf = as_view(data)
        if len(buf) < 2:
            raise KafkaCodecError(f"{name}: {len(buf)} bytes cannot hold a version")
        (version,) = INT16.unpack_from(buf, 0)
        if version < 0:
            raise KafkaCodecError(f"{name}: negative version {version}")
        newest = _newest_struct_version(name)
        body, _ = self._read_struct(name, min(version, newest), buf, 2)
        return version, body

    def encode_versioned_struct(self, name: str, version: int, body: dict[str, Any]) -> bytes:
        """An embedded struct behind its int16 version prefix."""
        return INT16.pack(version) + self.encode_struct(name, version, body)


DEFAULT_FRAMING: Final = KafkaFraming(DEFAULT_CODECS)

# The module's functions: the default framing's methods.
decode_request: Final = DEFAULT_FRAMING.decode_request
decode_request_body: Final = DEFAULT_FRAMING.decode_request_body
encode_request: Final = DEFAULT_FRAMING.encode_request
encode_response: Final = DEFAULT_FRAMING.encode_response
decode_response: Final = DEFAULT_FRAMING.decode_response
encode_struct: Final = DEFAULT_FRAMING.encode_struct
decode_struct: Final = DEFAULT_FRAMING.decode_struct
decode_versioned_struct: Final = DEFAULT_FRAMING.decode_versioned_struct
encode_versioned_struct: Final = DEFAULT_FRAMING.encode_versioned_struct


def encode_api_versions_fallback(correlation_id: int, error_code: int,
                                 api_keys: list[tuple[int, int, int]]) -> bytes:
    """KIP-511: the answer to an ApiVersions request at a version we do not implement.

    A v0-shaped body (error_code, [(api_key, min_version, max_version)]) behind a v0 response
    header, which every client version can read; it then retries at a version we listed.
    """
    header = RequestHeader(ApiKey.API_VERSIONS, 0, correlation_id, None)
    body = {
        "error_code": error_code,
        "api_keys": [{"api_key": key, "min_version": low, "max_version": high}
                     for key, low, high in api_keys],
    }
    return b"".join(encode_response(header, body))


def _newest_struct_version(name: str) -> int:
    message = EMBEDDED_STRUCTS.get(name)
    if message is None:
        raise KafkaCodecError(f"unknown struct {name!r}")
    return message.versions.high


# ---------------------------------------------------------------- error messages

def _describe(api_key: int, api_version: int) -> str:
    return f"{lookup_api(api_key, api_version).name} v{api_version}"


def _malformed(kind: str, api_key: int, api_version: int, exc: Exception) -> KafkaCodecError:
    return KafkaCodecError(f"malformed {_describe(api_key, api_version)} {kind}: {exc!r}")


def _unencodable(kind: str, api_key: int, api_version: int, exc: Exception) -> KafkaCodecError:
    return KafkaCodecError(f"cannot encode {_describe(api_key, api_version)} {kind}: {exc!r}")
