"""The records of a RecordBatch decoded straight into column buffers (for columnar readers).

`decode_records_into(columns, header, data, first_offset, end_offset)` walks the decompressed
records of one batch once and appends each record in [first_offset, end_offset) to flat buffers,
one set per column, in Apache Arrow's layout: int64 offsets and timestamps, and for every
variable-length column an int32 offsets array (starting at 0) over one data buffer, plus one
validity byte per value for the nullable ones. A reader then turns thousands of records into
Arrow arrays with a constant number of Python objects, instead of several objects per record.

This pure-Python function is the reference. `roost._speedups.records` holds a compiled twin with
the same results and the same errors on any input (tests/speedups compare them with hypothesis);
`decode_records_into` is the twin when it was built, unless ROOST_PURE_PYTHON is set (see
`roost._speedups`).

The contract, identical in both:
- every record of the batch is checked (also those outside the range), in order; the first
  problem raises InvalidRecordBatch and leaves `columns` as they were;
- varints are zigzag LEB128 of at most 10 bytes whose value fits in 64 bits;
- offset = baseOffset + offsetDelta and timestamp = baseTimestamp + timestampDelta (or the batch's
  maxTimestamp for LogAppendTime) must fit in int64;
- header keys are not checked for UTF-8 here (Arrow's validation does it for the whole column);
- OverflowError when a data buffer could pass 2 GiB (Arrow's int32 offsets): flush before.
"""

from __future__ import annotations

from array import array

from roost._speedups import load
from roost.wire.kafka.records import (
    ATTR_TIMESTAMP_TYPE,
    ONE_BYTE_ZIGZAG,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    BatchHeader,
    InvalidRecordBatch,
    read_varint,
)

MAX_COLUMN_BYTES = 0x7FFFFFFF  # Arrow's int32 offsets
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


class RecordColumns:
    """Column buffers that decoded records are appended to; `len()` is the number of records.

    Variable-length columns are (offsets, data[, valid]): value i is data[offsets[i]:offsets[i+1]],
    null when valid[i] == 0. Headers: record i has headers header_offsets[i]:header_offsets[i+1]
    of the header_key_* / header_value_* columns.
    """

    __slots__ = ("header_key_data", "header_key_offsets", "header_offsets", "header_value_data",
                 "header_value_offsets", "header_value_valid", "key_data", "key_offsets", "key_valid",
                 "offsets", "timestamp_types", "timestamps", "value_data", "value_offsets", "value_valid")

    def __init__(self) -> None:
        self.offsets = array("q")
        self.timestamps = array("q")  # milliseconds, as in the batch
        self.timestamp_types = array("i")  # 0 CreateTime, 1 LogAppendTime
        self.key_offsets = array("i", [0])
        self.key_valid = bytearray()
        self.key_data = bytearray()
        self.value_offsets = array("i", [0])
        self.value_valid = bytearray()
        self.value_data = bytearray()
        self.header_offsets = array("i", [0])
        self.header_key_offsets = array("i", [0])
        self.header_key_data = bytearray()
        self.header_value_offsets = array("i", [0])
        self.header_value_valid = bytearray()
        self.header_value_data = bytearray()

    def __len__(self) -> int:
        return len(self.offsets)

    def data_bytes(self) -> int:
        """Bytes held in the data buffers: what a reader watches to flush in time."""
        return (len(self.key_data) + len(self.value_data) + len(self.header_key_data)
                + len(self.header_value_data))

    def snapshot(self) -> dict[str, bytes]:
        """Every buffer as bytes (for comparing two decoders' output)."""
        return {name: bytes(getattr(self, name)) for name in self.__slots__}

    def _marks(self) -> list[int]:
        return [len(getattr(self, name)) for name in self.__slots__]

    def _truncate(self, marks: list[int]) -> None:
        for name, mark in zip(self.__slots__, marks, strict=True):
            del getattr(self, name)[mark:]


def check_room(columns: RecordColumns, data_size: int) -> None:
    """OverflowError unless `data_size` more bytes fit in every data buffer and header count."""
    largest = max(len(columns.key_data), len(columns.value_data), len(columns.header_key_data),
                  len(columns.header_value_data), columns.header_offsets[-1])
    if largest + data_size > MAX_COLUMN_BYTES:
        raise OverflowError("column buffers would pass 2 GiB: flush them before decoding more")


def _length(data: bytes, pos: int, end: int, what: str) -> tuple[int, int]:
    """A nullable length (-1 = null) that must fit between `pos` and `end`: (length, position)."""
    length, pos = read_varint(data, pos, end)
    if length < -1 or length > end - pos:
        raise InvalidRecordBatch(f"record {what} length {length} does not fit")
    return length, pos


def decode_records_into_py(columns: RecordColumns, header: BatchHeader, data: bytes,
                           first_offset: int, end_offset: int) -> int:
    """Append the records of `data` (a batch's decompressed records) with offsets in
    [first_offset, end_offset) to `columns`; returns how many were appended."""
    data = bytes(data)
    check_room(columns, len(data))
    marks = columns._marks()
    try:
        return _decode(columns, header, data, first_offset, end_offset)
    except BaseException:
        columns._truncate(marks)
        raise


def _decode(columns: RecordColumns, header: BatchHeader, data: bytes, first_offset: int,
            end_offset: int) -> int:
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    log_append = bool(header.attributes & ATTR_TIMESTAMP_TYPE)
    timestamp_type = TIMESTAMP_LOG_APPEND_TIME if log_append else TIMESTAMP_CREATE_TIME
    offsets, timestamps, timestamp_types = columns.offsets, columns.timestamps, columns.timestamp_types
    key_offsets, key_valid, key_data = columns.key_offsets, columns.key_valid, columns.key_data
    value_offsets, value_valid, value_data = columns.value_offsets, columns.value_valid, columns.value_data
    header_offsets = columns.header_offsets
    header_key_offsets, header_key_data = columns.header_key_offsets, columns.header_key_data
    header_value_offsets = columns.header_value_offsets
    header_value_valid, header_value_data = columns.header_value_valid, columns.header_value_data
    header_total = header_offsets[-1]
    appended = 0
    pos = 0
    end = len(data)
    for _ in range(header.records_count):
        # The single-byte varints (almost every field of a small record) are decoded inline: a
        # function call per field is most of the pure-Python cost.
        byte = data[pos] if pos < end else 0x80
        if byte < 0x80:
            length = ONE_BYTE_ZIGZAG[byte]
            pos += 1
        else:
            length, pos = read_varint(data, pos, end)
        if length < 1 or length > end - pos:
            raise InvalidRecordBatch(f"record length {length} does not fit the batch")
        record_end = pos + length
        pos += 1  # record attributes: unused by every Kafka version so far
        byte = data[pos] if pos < record_end else 0x80
        if byte < 0x80:
            timestamp_delta = ONE_BYTE_ZIGZAG[byte]
            pos += 1
        else:
            timestamp_delta, pos = read_varint(data, pos, record_end)
        byte = data[pos] if pos < record_end else 0x80
        if byte < 0x80:
            offset_delta = ONE_BYTE_ZIGZAG[byte]
            pos += 1
        else:
            offset_delta, pos = read_varint(data, pos, record_end)
        offset = base_offset + offset_delta
        if not _INT64_MIN <= offset <= _INT64_MAX:
            raise InvalidRecordBatch(f"record offset delta {offset_delta} does not fit after base "
                                     f"offset {base_offset}")
        if log_append:
            timestamp = header.max_timestamp
        else:
            timestamp = base_timestamp + timestamp_delta
            if not _INT64_MIN <= timestamp <= _INT64_MAX:
                raise InvalidRecordBatch(f"record timestamp delta {timestamp_delta} does not fit "
                                         f"after base timestamp {base_timestamp}")
        wanted = first_offset <= offset < end_offset
        byte = data[pos] if pos < record_end else 0x80
        if byte < 0x80 and -1 <= ONE_BYTE_ZIGZAG[byte] <= record_end - pos - 1:
            key_length = ONE_BYTE_ZIGZAG[byte]
            pos += 1
        else:
            key_length, pos = _length(data, pos, record_end, "key")
        key_at = pos
        if key_length > 0:
            pos += key_length
        byte = data[pos] if pos < record_end else 0x80
        if byte < 0x80 and -1 <= ONE_BYTE_ZIGZAG[byte] <= record_end - pos - 1:
            value_length = ONE_BYTE_ZIGZAG[byte]
            pos += 1
        else:
            value_length, pos = _length(data, pos, record_end, "value")
        value_at = pos
        if value_length > 0:
            pos += value_length
        byte = data[pos] if pos < record_end else 0x80
        if byte < 0x80:
            count = ONE_BYTE_ZIGZAG[byte]
            pos += 1
        else:
            count, pos = read_varint(data, pos, record_end)
        if count < 0 or count > record_end - pos:
            raise InvalidRecordBatch(f"record header count {count} is invalid")
        for _ in range(count):
            name_length, pos = _length(data, pos, record_end, "header key")
            if name_length == -1:
                raise InvalidRecordBatch("record header key is null")
            name_at = pos
            pos += name_length
            header_value_length, pos = _length(data, pos, record_end, "header value")
            if wanted:
                header_key_data += data[name_at:name_at + name_length]
                header_key_offsets.append(len(header_key_data))
                if header_value_length >= 0:
                    header_value_data += data[pos:pos + header_value_length]
                    header_value_valid.append(1)
                else:
                    header_value_valid.append(0)
                header_value_offsets.append(len(header_value_data))
            if header_value_length > 0:
                pos += header_value_length
        if pos != record_end:
            raise InvalidRecordBatch(f"record has {record_end - pos} unexpected trailing bytes")
        if not wanted:
            continue
        offsets.append(offset)
        timestamps.append(timestamp)
        timestamp_types.append(timestamp_type)
        if key_length >= 0:
            key_data += data[key_at:key_at + key_length]
            key_valid.append(1)
        else:
            key_valid.append(0)
        key_offsets.append(len(key_data))
        if value_length >= 0:
            value_data += data[value_at:value_at + value_length]
            value_valid.append(1)
        else:
            value_valid.append(0)
        value_offsets.append(len(value_data))
        header_total += count
        header_offsets.append(header_total)
        appended += 1
    if pos != end:
        raise InvalidRecordBatch(f"{end - pos} bytes after the batch's last record")
    return appended


# Chosen last: the compiled twin imports this package's records module, never this one.
_twin = load("records")
ACCELERATED = _twin is not None
decode_records_into = _twin.decode_records_into if _twin is not None else decode_records_into_py
