r"""The format-string language of `roost consume -f` and `roost produce -f`: one string both prints
records and reads them back, so what `consume -f FMT` prints, `produce -f FMT` reads.

    %t  topic              %p  partition           %o  offset
    %k  key                %v  value               %h  headers, as k=v pairs joined by ','
    %T  timestamp, milliseconds since the epoch
    %d  timestamp, ISO-8601 in UTC with milliseconds (2026-11-24T10:00:00.123Z)
    %d{STRFTIME}  timestamp formatted with strftime, in UTC (e.g. %d{%Y-%m-%d %H:%M:%S})
    %k{hex} %k{base64} %v{hex} %v{base64}   the bytes hex- or base64-encoded
    %%  a percent sign     \n \t \r \\  newline, tab, carriage return, backslash

Printing: a key or value that is not UTF-8 is printed with its bad bytes escaped as \xNN (so a
terminal never receives raw binary); use {hex}/{base64} (or `consume --json`) for exact bytes.
A null key or value prints as the null marker (default: nothing).

Reading: each field reads up to the literal text that follows it, so two fields must be separated
by a literal (e.g. '%k %v\n'); a field at the very end reads to the end of the input. The last
record may omit the final delimiter. `produce` reads %o and %t and ignores them (the broker
assigns offsets; records go to the TOPIC given). A key or value equal to the null marker becomes
null (a null value is a tombstone).
Raw %k/%v read bytes exactly as given; the \xNN escapes of printing are not undone.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import BinaryIO

from roost.admin.offset_spec import epoch_ms

FIELDS = frozenset("tkvpohTd")
BYTE_MODIFIERS = ("hex", "base64")
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}
ISO_MS = "%Y-%m-%dT%H:%M:%S.%f"


class FormatError(ValueError):
    """A format string that cannot be compiled, or input that does not match it."""


@dataclass
class Record:
    """One record as the format language sees it; None means absent (or null for key/value)."""

    topic: str = ""
    partition: int | None = None
    offset: int | None = None
    timestamp_ms: int | None = None
    key: bytes | None = None
    value: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass(frozen=True)
class Literal:
    text: str


@dataclass(frozen=True)
class Field:
    name: str  # one of FIELDS
    modifier: str | None = None  # hex/base64 for k and v; the strftime pattern for d


Token = Literal | Field


def _tokenize(fmt: str) -> list[Token]:
    tokens: list[Token] = []
    text: list[str] = []
    i = 0
    while i < len(fmt):
        char = fmt[i]
        if char == "\\":
            if i + 1 >= len(fmt) or fmt[i + 1] not in ESCAPES:
                shown = fmt[i:i + 2]
                raise FormatError(f"unknown escape {shown!r} at position {i} (known: \\n \\t \\r \\\\)")
            text.append(ESCAPES[fmt[i + 1]])
            i += 2
        elif char == "%":
            if i + 1 >= len(fmt):
                raise FormatError("'%' at the end of the format (write %% for a percent sign)")
            name = fmt[i + 1]
            if name == "%":
                text.append("%")
                i += 2
                continue
            if name not in FIELDS:
                raise FormatError(f"unknown field %{name} at position {i} (known: %t %k %v %p %o %h %T %d %%)")
            i += 2
            modifier = None
            if i < len(fmt) and fmt[i] == "{":
                close = fmt.find("}", i)
                if close < 0:
                    raise FormatError(f"unclosed '{{' after %{name} at position {i}")
                modifier = fmt[i + 1:close]
                i = close + 1
                if name in "kv" and modifier not in BYTE_MODIFIERS:
                    raise FormatError(f"unknown modifier %{name}{{{modifier}}} (known: {{hex}}, {{base64}})")
                if name not in "kvd":
                    raise FormatError(f"%{name} takes no {{modifier}}")
                if name == "d" and not modifier:
                    raise FormatError("%d{} needs a strftime pattern, e.g. %d{%Y-%m-%d}")
            if text:
                tokens.append(Literal("".join(text)))
                text = []
            tokens.append(Field(name, modifier))
        else:
            text.append(char)
            i += 1
    if text:
        tokens.append(Literal("".join(text)))
    return tokens


def _iso_ms(timestamp_ms: int) -> str:
    moment = datetime.fromtimestamp(timestamp_ms / 1000, UTC)
    return moment.strftime(ISO_MS)[:-3] + "Z"


def format_timestamp(timestamp_ms: int | None, pattern: str | None = None) -> str:
    """ISO-8601 UTC with milliseconds, or `pattern` (strftime, UTC); '' for an unknown time."""
    if timestamp_ms is None:
        return ""
    if pattern is None:
        return _iso_ms(timestamp_ms)
    return datetime.fromtimestamp(timestamp_ms / 1000, UTC).strftime(pattern)


def parse_timestamp(text: str, pattern: str | None = None) -> int:
    """The inverse of `format_timestamp`: milliseconds since the epoch (naive times are UTC)."""
    try:
        moment = datetime.fromisoformat(text) if pattern is None else datetime.strptime(text, pattern)
    except ValueError as error:
        raise FormatError(f"bad timestamp {text!r}: {error}") from None
    return epoch_ms(moment)


def text_of(data: bytes) -> str:
    """Bytes for a terminal: UTF-8, with any other byte escaped as \\xNN."""
    return data.decode("utf-8", "backslashreplace")


def _encode_bytes(data: bytes, modifier: str | None) -> str:
    if modifier == "hex":
        return data.hex()
    if modifier == "base64":
        return base64.b64encode(data).decode("ascii")
    return text_of(data)


def _decode_bytes(raw: bytes, modifier: str | None) -> bytes:
    try:
        if modifier == "hex":
            return bytes.fromhex(raw.decode("ascii"))
        if modifier == "base64":
            return base64.b64decode(raw, validate=True)
    except (ValueError, binascii.Error) as error:
        raise FormatError(f"bad {modifier} text {raw[:40]!r}: {error}") from None
    return raw


def format_headers(headers: list[tuple[str, bytes | None]]) -> str:
    return ",".join(name if value is None else f"{name}={text_of(value)}" for name, value in headers)


def parse_headers(text: bytes) -> list[tuple[str, bytes | None]]:
    headers: list[tuple[str, bytes | None]] = []
    for pair in text.split(b",") if text else []:
        name, sep, value = pair.partition(b"=")
        headers.append((name.decode("utf-8", "replace"), value if sep else None))
    return headers


class RecordFormat:
    """A compiled format string: `render` prints a record, `read` parses records from bytes."""

    def __init__(self, fmt: str) -> None:
        self.source = fmt
        self.tokens = _tokenize(fmt)
        self.fields = {token.name for token in self.tokens if isinstance(token, Field)}

    def render(self, record: Record, null_marker: str = "") -> str:
        parts: list[str] = []
        for token in self.tokens:
            if isinstance(token, Literal):
                parts.append(token.text)
            elif token.name in "kv":
                data = record.key if token.name == "k" else record.value
                parts.append(null_marker if data is None else _encode_bytes(data, token.modifier))
            elif token.name == "t":
                parts.append(record.topic)
            elif token.name in "po":
                number = record.partition if token.name == "p" else record.offset
                parts.append("" if number is None else str(number))
            elif token.name == "T":
                parts.append("" if record.timestamp_ms is None else str(record.timestamp_ms))
            elif token.name == "d":
                parts.append(format_timestamp(record.timestamp_ms, token.modifier))
            else:
                assert token.name == "h", token
                parts.append(format_headers(record.headers))
        return "".join(parts)

    def check_readable(self) -> None:
        """Refuse a format that cannot be read unambiguously: two fields with nothing between."""
        for before, after in zip(self.tokens, self.tokens[1:], strict=False):
            if isinstance(before, Field) and isinstance(after, Field):
                raise FormatError(f"cannot read %{before.name} followed directly by %{after.name}: "
                                  "put a delimiter between them")
        if not self.tokens:
            raise FormatError("an empty format reads nothing")

    def read(self, stream: BinaryIO, null_marker: bytes | None = None) -> Iterator[Record]:
        """Records parsed from `stream` (read incrementally, so a terminal's lines are sent as
        they are typed). Raises FormatError naming the record number on input that does not fit."""
        self.check_readable()
        source = _Input(stream)
        number = 0
        while not source.at_end():
            number += 1
            try:
                yield self._read_one(source, null_marker)
            except FormatError as error:
                raise FormatError(f"input record {number}: {error}") from None

    def _read_one(self, source: _Input, null_marker: bytes | None) -> Record:
        record = Record()
        tokens = self.tokens
        i = 0
        while i < len(tokens):
            token = tokens[i]
            if isinstance(token, Literal):
                literal = token.text.encode()
                if not source.expect(literal):
                    if i == len(tokens) - 1 and source.at_end():
                        break  # the last record may omit the final delimiter
                    raise FormatError(f"expected {token.text!r}, got {source.peek(len(literal) + 10)!r}")
                i += 1
                continue
            if i + 1 < len(tokens):
                following = tokens[i + 1]
                assert isinstance(following, Literal), "check_readable guarantees a delimiter"
                raw = source.until(following.text.encode())
                if raw is None:
                    if i + 2 != len(tokens):
                        raise FormatError(f"no {following.text!r} after %{token.name}")
                    raw = source.rest()  # the final delimiter may be missing at the end of input
                i += 2
            else:
                raw = source.rest()
                i += 1
            self._assign(record, token, raw, null_marker)
        return record

    @staticmethod
    def _assign(record: Record, token: Field, raw: bytes, null_marker: bytes | None) -> None:
        name = token.name
        if name in "kv":
            data: bytes | None = None if null_marker is not None and raw == null_marker else \
                _decode_bytes(raw, token.modifier)
            if name == "k":
                record.key = data
            else:
                record.value = data
        elif name == "h":
            record.headers.extend(parse_headers(raw))
        else:
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise FormatError(f"%{name}: not UTF-8: {raw[:40]!r}") from None
            if name == "t":
                record.topic = text
            elif name in "poT":
                if not re.fullmatch(r"-?\d+", text):
                    raise FormatError(f"%{name}: expected a whole number, got {text[:40]!r}")
                if name == "p":
                    record.partition = int(text)
                elif name == "o":
                    record.offset = int(text)
                else:
                    record.timestamp_ms = int(text)
            else:
                assert name == "d", token
                record.timestamp_ms = parse_timestamp(text, token.modifier)


class _Input:
    """A byte stream read in chunks as they arrive, with a cursor (no copying per record)."""

    CHUNK = 1 << 16

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._read = getattr(stream, "read1", stream.read)
        self._buffer = bytearray()
        self._pos = 0
        self._eof = False

    def _fill(self) -> bool:
        if self._eof:
            return False
        data = self._read(self.CHUNK)
        if not data:
            self._eof = True
            return False
        if self._pos > len(self._buffer) // 2:  # drop what was consumed, now and then
            del self._buffer[:self._pos]
            self._pos = 0
        self._buffer += data
        return True

    def at_end(self) -> bool:
        while self._pos >= len(self._buffer):
            if not self._fill():
                return True
        return False

    def peek(self, n: int) -> bytes:
        while len(self._buffer) - self._pos < n and self._fill():
            pass
        return bytes(self._buffer[self._pos:self._pos + n])

    def expect(self, literal: bytes) -> bool:
        if self.peek(len(literal)) != literal:
            return False
        self._pos += len(literal)
        return True

    def until(self, literal: bytes) -> bytes | None:
        """The bytes before the next `literal`, consuming both; None (consuming nothing) at the
        end of input without it."""
        searched = self._pos
        while True:
            found = self._buffer.find(literal, searched)
            if found >= 0:
                data = bytes(self._buffer[self._pos:found])
                self._pos = found + len(literal)
                return data
            searched = max(self._pos, len(self._buffer) - len(literal) + 1)
            start = self._pos
            if not self._fill():
                return None
            searched -= start - self._pos  # a fill may have moved the cursor to 0

    def rest(self) -> bytes:
        while self._fill():
            pass
        data = bytes(self._buffer[self._pos:])
        self._pos = len(self._buffer)
        return data
