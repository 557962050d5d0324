"""The compiled record decoder (roost._speedups.records) against its pure-Python reference
(roost.wire.kafka.record_columns): identical columns on any input, and on malformed input the
same error with the same message, leaving the columns as they were. Also: the reference agrees
with the record decoder of roost.wire.kafka.records on real batches."""

from __future__ import annotations

import importlib
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from roost.wire.kafka.record_columns import RecordColumns, decode_records_into_py
from roost.wire.kafka.records import (
    ATTR_TIMESTAMP_TYPE,
    HEADER_SIZE,
    BatchHeader,
    InvalidRecordBatch,
    Record,
    build_batch,
    decode_batch_records,
    parse_header,
)

try:
    twin = importlib.import_module("roost._speedups.records")
except ImportError:  # the install could not compile it; the pure path is tested elsewhere
    twin = None

needs_twin = pytest.mark.skipif(twin is None, reason="roost._speedups.records is not built")
PROPERTY = settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)


def _zigzag_varint(value: int) -> bytes:
    encoded = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while encoded >= 0x80:
        out.append((encoded & 0x7F) | 0x80)
        encoded >>= 7
    out.append(encoded)
    return bytes(out)


@st.composite
def record_bytes(draw: Any) -> bytes:
    """One record, well formed or nearly: fields drawn so that both common and edge values occur."""
    small = st.integers(-3, 300)
    edge = st.sampled_from([b"\xff" * 10, b"\xff" * 9 + b"\x01", b"\xff" * 9 + b"\x02", b"\x80"])
    key = draw(st.none() | st.binary(max_size=20))
    value = draw(st.none() | st.binary(max_size=40))
    headers = draw(st.lists(st.tuples(st.binary(max_size=6), st.none() | st.binary(max_size=6)), max_size=3))
    body = bytearray(b"\x00")
    body += _zigzag_varint(draw(small | INT64))  # timestamp delta
    body += _zigzag_varint(draw(st.integers(0, 8) | small | INT64))  # offset delta
    for item in (key, value):
        body += _zigzag_varint(-1 if item is None else len(item)) + (item or b"")
    body += _zigzag_varint(len(headers))
    for name, header_value in headers:
        null_name = draw(st.integers(0, 15)) == 0
        body += _zigzag_varint(-1) if null_name else _zigzag_varint(len(name)) + name
        body += _zigzag_varint(-1 if header_value is None else len(header_value)) + (header_value or b"")
    if draw(st.integers(0, 15)) == 0:  # a varint at the limits of 64 bits somewhere
        at = draw(st.integers(1, len(body)))
        body[at:at] = draw(edge)
    length = len(body)
    if draw(st.integers(0, 9)) == 0:
        length = draw(st.sampled_from([len(body) - 1, len(body) + 1, 0, -1]))
    return _zigzag_varint(length) + bytes(body)


@st.composite
def mutated(draw: Any, data: bytes) -> bytes:
    """`data` with a few bytes flipped, cut, or inserted (or untouched)."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "none"]))
        at = draw(st.integers(0, max(0, len(buf))))
        if kind == "flip" and at < len(buf):
            buf[at] = draw(st.integers(0, 255))
        elif kind == "cut":
            del buf[at:]
        elif kind == "insert":
            buf[at:at] = draw(st.binary(min_size=1, max_size=11))
    return bytes(buf)


@st.composite
def batch_input(draw: Any) -> tuple[BatchHeader, bytes, int, int]:
    records = draw(st.lists(record_bytes(), max_size=6))
    data = b"".join(records)
    if draw(st.integers(0, 2)) == 0:
        data = draw(mutated(data))
    if draw(st.integers(0, 9)) == 0:
        data = draw(st.binary(max_size=64))  # plain noise, including huge varints
    count = len(records)
    if draw(st.integers(0, 7)) == 0:
        count = draw(st.sampled_from([len(records) + 1, max(0, len(records) - 1), 0, -1]))
    base_offset = draw(st.integers(0, 1000) | INT64)
    attributes = draw(st.sampled_from([0, ATTR_TIMESTAMP_TYPE, 0x10, 0x20 | ATTR_TIMESTAMP_TYPE]))
    header = BatchHeader(base_offset, 0, -1, 2, 0, attributes, max(0, count - 1),
                         draw(st.integers(-1, 2_000_000_000_000) | INT64), draw(INT64), -1, -1, -1, count)
    first = draw(st.integers(-2, 3).map(lambda delta: max(-(1 << 63), min(base_offset + delta, (1 << 63) - 1)))
                 | INT64)
    end = draw(st.sampled_from([(1 << 63) - 1]) | st.integers(first, min(first + 8, (1 << 63) - 1)) | INT64)
    return header, data, first, end


def _prefilled() -> RecordColumns:
    """Columns that already hold two records, so appends start from non-zero offsets."""
    columns = RecordColumns()
    batch = build_batch([(b"k", b"v", [("a", b"1")]), (None, None)], base_offset=5, timestamp_ms=9)
    decode_records_into_py(columns, parse_header(batch), batch[HEADER_SIZE:], 0, 100)
    return columns


def _outcome(decode: Any, header: BatchHeader, data: bytes, first: int, end: int) -> tuple[Any, ...]:
    columns = _prefilled()
    before = columns.snapshot()
    try:
        appended = decode(columns, header, data, first, end)
    except (InvalidRecordBatch, OverflowError) as error:
        assert columns.snapshot() == before, "a failed decode must leave the columns as they were"
        return ("error", type(error), str(error), getattr(error, "error_code", None))
    assert len(columns) == len(before["offsets"]) // 8 + appended
    return ("ok", appended, columns.snapshot())


@needs_twin
@PROPERTY
@given(batch_input())
def test_twin_matches_the_reference_on_arbitrary_input(case: tuple[BatchHeader, bytes, int, int]) -> None:
    header, data, first, end = case
    assert _outcome(twin.decode_records_into, header, data, first, end) == \
        _outcome(decode_records_into_py, header, data, first, end)


@needs_twin
@PROPERTY
@given(st.binary(max_size=200), st.integers(-2, 40), INT64, INT64, INT64, st.integers(0, 0x3F))
def test_twin_matches_the_reference_on_noise(data: bytes, count: int, base: int, stamp: int, first: int,
                                             attributes: int) -> None:
    header = BatchHeader(base, 0, -1, 2, 0, attributes, count - 1, stamp, stamp, -1, -1, -1, count)
    end = min(first + 100, (1 << 63) - 1)  # offsets are int64: the contract's range
    assert _outcome(twin.decode_records_into, header, data, first, end) == \
        _outcome(decode_records_into_py, header, data, first, end)


@needs_twin
def test_twin_accepts_every_buffer_type_the_reader_passes() -> None:
    batch = build_batch([(b"k", b"v")] * 3, base_offset=0, timestamp_ms=1)
    header = parse_header(batch)
    for data in (batch[HEADER_SIZE:], bytearray(batch[HEADER_SIZE:]), memoryview(batch)[HEADER_SIZE:]):
        assert _outcome(twin.decode_records_into, header, data, 0, 3) == \
            _outcome(decode_records_into_py, header, bytes(data), 0, 3)


@needs_twin
def test_varint_limits_are_the_same() -> None:
    """Ten-byte varints at the edge of 64 bits: accepted, too long, and overflowing."""
    for tail in (b"\x01", b"\x02", b"\x81\x00", b"\x7f"):
        stamp = b"\xff" * 9 + tail
        body = b"\x00" + stamp + b"\x00" + b"\x01" + b"\x01" + b"\x00"
        data = _zigzag_varint(len(body)) + body
        header = BatchHeader(0, 0, -1, 2, 0, 0, 0, 0, 0, -1, -1, -1, 1)
        expected = _outcome(decode_records_into_py, header, data, 0, 10)
        assert _outcome(twin.decode_records_into, header, data, 0, 10) == expected
    assert expected[0] == "error"


@PROPERTY
@given(st.lists(st.tuples(st.none() | st.binary(max_size=30), st.none() | st.binary(max_size=30),
                          st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2)),
                min_size=1, max_size=20),
       st.integers(0, 10**12), st.integers(0, 2 * 10**12), st.booleans(), st.integers(0, 25), st.integers(0, 25))
def test_reference_agrees_with_the_record_decoder(items: list[Any], base_offset: int, stamp: int, log_append: bool,
                                                  skip_front: int, keep: int) -> None:
    records = [Record(key, value, headers, stamp + index * 7) for index, (key, value, headers) in enumerate(items)]
    batch = build_batch(records, base_offset=base_offset, timestamp_ms=stamp,
                        timestamp_type=1 if log_append else 0)
    header = parse_header(batch)
    first, end = base_offset + skip_front, base_offset + skip_front + keep
    columns = RecordColumns()
    appended = decode_records_into_py(columns, header, batch[HEADER_SIZE:], first, end)
    expected = [r for r in decode_batch_records(batch) if first <= r.offset < end]
    assume(expected or appended == 0)
    assert appended == len(expected) == len(columns)
    for row, record in enumerate(expected):
        assert columns.offsets[row] == record.offset
        assert columns.timestamps[row] == record.timestamp
        assert columns.timestamp_types[row] == (1 if log_append else 0)
        for name, want in (("key", record.key), ("value", record.value)):
            valid = getattr(columns, f"{name}_valid")[row]
            start, stop = getattr(columns, f"{name}_offsets")[row:row + 2]
            got = bytes(getattr(columns, f"{name}_data")[start:stop]) if valid else None
            assert got == want
        first_header, last_header = columns.header_offsets[row:row + 2]
        headers = []
        for index in range(first_header, last_header):
            key_start, key_stop = columns.header_key_offsets[index:index + 2]
            value_start, value_stop = columns.header_value_offsets[index:index + 2]
            value = bytes(columns.header_value_data[value_start:value_stop]) \
                if columns.header_value_valid[index] else None
            headers.append((columns.header_key_data[key_start:key_stop].decode(), value))
        assert headers == record.headers


def test_a_truncated_record_is_refused_by_the_reference() -> None:
    batch = build_batch([(b"key", b"value")], base_offset=0, timestamp_ms=1)
    with pytest.raises(InvalidRecordBatch, match="does not fit"):
        decode_records_into_py(RecordColumns(), parse_header(batch), batch[HEADER_SIZE:-1], 0, 1)
    assert struct.calcsize("q") == 8
