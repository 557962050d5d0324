# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Compiled twin of `roost.wire.kafka.record_columns.decode_records_into_py`.

Same results and the same errors on any input (see that module for the contract). The batch is
walked twice: the first pass checks every record and counts what will be appended (so an error
leaves the columns untouched, and every buffer grows once), the second copies.
"""

from cpython cimport array
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.string cimport memcpy

import array as _array_module  # noqa: F401  (cpython.array needs the module imported)

from roost.wire.kafka.records import InvalidRecordBatch

INTERFACE = 1

cdef int64_t MAX_COLUMN_BYTES = 0x7FFFFFFF
cdef int64_t INT64_MAX = 0x7FFFFFFFFFFFFFFF
cdef int64_t INT64_MIN = -INT64_MAX - 1
cdef int ATTR_TIMESTAMP_TYPE = 0x08


cdef struct Totals:
    Py_ssize_t records
    Py_ssize_t key_bytes
    Py_ssize_t value_bytes
    Py_ssize_t headers
    Py_ssize_t header_key_bytes
    Py_ssize_t header_value_bytes


cdef struct Out:
    # Where the second pass writes: the first slot past the old contents of every buffer.
    int64_t* offsets
    int64_t* timestamps
    int32_t* timestamp_types
    int32_t* key_offsets
    char* key_valid
    char* key_data
    int32_t* value_offsets
    char* value_valid
    char* value_data
    int32_t* header_offsets
    int32_t* header_key_offsets
    char* header_key_data
    int32_t* header_value_offsets
    char* header_value_valid
    char* header_value_data
    # Running ends (the values the offsets arrays receive).
    int32_t key_end
    int32_t value_end
    int32_t header_total
    int32_t header_key_end
    int32_t header_value_end


cdef inline int read_varint(const unsigned char* data, Py_ssize_t* pos, Py_ssize_t end,
                            int64_t* out) except -1:
    cdef Py_ssize_t p = pos[0]
    cdef uint64_t result = 0
    cdef unsigned int shift = 0
    cdef unsigned char byte
    while True:
        if p >= end:
            raise InvalidRecordBatch("record truncated inside a varint")
        byte = data[p]
        p += 1
        if shift == 63 and byte > 1:
            if byte & 0x80:
                raise InvalidRecordBatch("varint longer than 10 bytes")
            raise InvalidRecordBatch("varint does not fit in 64 bits")
        result |= (<uint64_t>(byte & 0x7F)) << shift
        if not (byte & 0x80):
            break
        shift += 7
    pos[0] = p
    out[0] = <int64_t>((result >> 1) ^ (<uint64_t>0 - (result & 1)))
    return 0


cdef inline int read_length(const unsigned char* data, Py_ssize_t* pos, Py_ssize_t end,
                            str what, int64_t* out) except -1:
    read_varint(data, pos, end, out)
    if out[0] < -1 or out[0] > end - pos[0]:
        raise InvalidRecordBatch(f"record {what} length {out[0]} does not fit")
    return 0


cdef int walk(const unsigned char* data, Py_ssize_t end, int64_t count, int64_t base_offset,
              int64_t base_timestamp, bint log_append, int64_t max_timestamp, int32_t timestamp_type,
              int64_t first_offset, int64_t end_offset, Totals* totals, Out* out) except -1:
    """One pass over the records: checks and counts (out is NULL), or copies (out is set)."""
    cdef Py_ssize_t pos = 0, record_end, key_at, value_at, name_at
    cdef int64_t i, h, length, timestamp_delta, offset_delta, offset, timestamp
    cdef int64_t key_length, value_length, header_count, name_length, header_value_length
    cdef bint wanted
    for i in range(count):
        read_varint(data, &pos, end, &length)
        if length < 1 or length > end - pos:
            raise InvalidRecordBatch(f"record length {length} does not fit the batch")
        record_end = pos + length
        pos += 1  # record attributes: unused
        read_varint(data, &pos, record_end, &timestamp_delta)
        read_varint(data, &pos, record_end, &offset_delta)
        if ((offset_delta > 0 and base_offset > INT64_MAX - offset_delta)
                or (offset_delta < 0 and base_offset < INT64_MIN - offset_delta)):
            raise InvalidRecordBatch(f"record offset delta {offset_delta} does not fit after base "
                                     f"offset {base_offset}")
        offset = base_offset + offset_delta
        if log_append:
            timestamp = max_timestamp
        else:
            if ((timestamp_delta > 0 and base_timestamp > INT64_MAX - timestamp_delta)
                    or (timestamp_delta < 0 and base_timestamp < INT64_MIN - timestamp_delta)):
                raise InvalidRecordBatch(f"record timestamp delta {timestamp_delta} does not fit "
                                         f"after base timestamp {base_timestamp}")
            timestamp = base_timestamp + timestamp_delta
        wanted = first_offset <= offset < end_offset
        read_length(data, &pos, record_end, "key", &key_length)
        key_at = pos
        if key_length > 0:
            pos += key_length
        read_length(data, &pos, record_end, "value", &value_length)
        value_at = pos
        if value_length > 0:
            pos += value_length
        read_varint(data, &pos, record_end, &header_count)
        if header_count < 0 or header_count > record_end - pos:
            raise InvalidRecordBatch(f"record header count {header_count} is invalid")
        for h in range(header_count):
            read_length(data, &pos, record_end, "header key", &name_length)
            if name_length == -1:
                raise InvalidRecordBatch("record header key is null")
            name_at = pos
            pos += name_length
            read_length(data, &pos, record_end, "header value", &header_value_length)
            if wanted:
                if out is NULL:
                    totals.headers += 1
                    totals.header_key_bytes += name_length
                    if header_value_length > 0:
                        totals.header_value_bytes += header_value_length
                else:
                    memcpy(out.header_key_data, data + name_at, name_length)
                    out.header_key_data += name_length
                    out.header_key_end += <int32_t>name_length
                    out.header_key_offsets[0] = out.header_key_end
                    out.header_key_offsets += 1
                    if header_value_length >= 0:
                        memcpy(out.header_value_data, data + pos, header_value_length)
                        out.header_value_data += header_value_length
                        out.header_value_end += <int32_t>header_value_length
                        out.header_value_valid[0] = 1
                    else:
                        out.header_value_valid[0] = 0
                    out.header_value_valid += 1
                    out.header_value_offsets[0] = out.header_value_end
                    out.header_value_offsets += 1
            if header_value_length > 0:
                pos += header_value_length
        if pos != record_end:
            raise InvalidRecordBatch(f"record has {record_end - pos} unexpected trailing bytes")
        if not wanted:
            continue
        if out is NULL:
            totals.records += 1
            if key_length > 0:
                totals.key_bytes += key_length
            if value_length > 0:
                totals.value_bytes += value_length
            continue
        out.offsets[0] = offset
        out.offsets += 1
        out.timestamps[0] = timestamp
        out.timestamps += 1
        out.timestamp_types[0] = timestamp_type
        out.timestamp_types += 1
        if key_length >= 0:
            memcpy(out.key_data, data + key_at, key_length)
            out.key_data += key_length
            out.key_end += <int32_t>key_length
            out.key_valid[0] = 1
        else:
            out.key_valid[0] = 0
        out.key_valid += 1
        out.key_offsets[0] = out.key_end
        out.key_offsets += 1
        if value_length >= 0:
            memcpy(out.value_data, data + value_at, value_length)
            out.value_data += value_length
            out.value_end += <int32_t>value_length
            out.value_valid[0] = 1
        else:
            out.value_valid[0] = 0
        out.value_valid += 1
        out.value_offsets[0] = out.value_end
        out.value_offsets += 1
        out.header_total += <int32_t>header_count
        out.header_offsets[0] = out.header_total
        out.header_offsets += 1
    if pos != end:
        raise InvalidRecordBatch(f"{end - pos} bytes after the batch's last record")
    return 0


cdef Py_ssize_t grow_array(array.array column, Py_ssize_t more) except -1:
    """Lengthen `column` by `more` items; the old length."""
    cdef Py_ssize_t old = len(column)
    if more:
        array.resize_smart(column, old + more)
    return old


cdef char* grow_bytes(bytearray column, Py_ssize_t more) except NULL:
    """Lengthen `column` by `more` bytes; where the new bytes start."""
    cdef Py_ssize_t old = PyByteArray_GET_SIZE(column)
    if more:
        PyByteArray_Resize(column, old + more)
    return PyByteArray_AS_STRING(column) + old


def decode_records_into(columns, header, data, int64_t first_offset, int64_t end_offset):
    """See `roost.wire.kafka.record_columns.decode_records_into_py`."""
    cdef const unsigned char[::1] view = data
    cdef Py_ssize_t size = view.shape[0]
    cdef const unsigned char* raw = &view[0] if size else <const unsigned char*>b""
    cdef array.array offsets = columns.offsets, timestamps = columns.timestamps
    cdef array.array timestamp_types = columns.timestamp_types
    cdef array.array key_offsets = columns.key_offsets, value_offsets = columns.value_offsets
    cdef array.array header_offsets = columns.header_offsets
    cdef array.array header_key_offsets = columns.header_key_offsets
    cdef array.array header_value_offsets = columns.header_value_offsets
    cdef bytearray key_valid = columns.key_valid, key_data = columns.key_data
    cdef bytearray value_valid = columns.value_valid, value_data = columns.value_data
    cdef bytearray header_key_data = columns.header_key_data
    cdef bytearray header_value_valid = columns.header_value_valid
    cdef bytearray header_value_data = columns.header_value_data
    cdef int64_t count = header.records_count
    cdef int64_t base_offset = header.base_offset, base_timestamp = header.base_timestamp
    cdef int64_t max_timestamp = header.max_timestamp
    cdef bint log_append = (header.attributes & ATTR_TIMESTAMP_TYPE) != 0
    cdef int32_t timestamp_type = 1 if log_append else 0
    cdef Totals totals
    cdef Out out
    cdef Py_ssize_t at

    largest = max(len(key_data), len(value_data), len(header_key_data), len(header_value_data),
                  header_offsets[len(header_offsets) - 1])
    if largest + size > MAX_COLUMN_BYTES:
        raise OverflowError("column buffers would pass 2 GiB: flush them before decoding more")

    totals.records = totals.key_bytes = totals.value_bytes = 0
    totals.headers = totals.header_key_bytes = totals.header_value_bytes = 0
    walk(raw, size, count, base_offset, base_timestamp, log_append, max_timestamp, timestamp_type,
         first_offset, end_offset, &totals, NULL)

    out.key_end = <int32_t>len(key_data)
    out.value_end = <int32_t>len(value_data)
    out.header_total = header_offsets.data.as_ints[len(header_offsets) - 1]
    out.header_key_end = <int32_t>len(header_key_data)
    out.header_value_end = <int32_t>len(header_value_data)

    at = grow_array(offsets, totals.records)
    out.offsets = <int64_t*>offsets.data.as_longlongs + at
    at = grow_array(timestamps, totals.records)
    out.timestamps = <int64_t*>timestamps.data.as_longlongs + at
    at = grow_array(timestamp_types, totals.records)
    out.timestamp_types = <int32_t*>timestamp_types.data.as_ints + at
    at = grow_array(key_offsets, totals.records)
    out.key_offsets = <int32_t*>key_offsets.data.as_ints + at
    at = grow_array(value_offsets, totals.records)
    out.value_offsets = <int32_t*>value_offsets.data.as_ints + at
    at = grow_array(header_offsets, totals.records)
    out.header_offsets = <int32_t*>header_offsets.data.as_ints + at
    at = grow_array(header_key_offsets, totals.headers)
    out.header_key_offsets = <int32_t*>header_key_offsets.data.as_ints + at
    at = grow_array(header_value_offsets, totals.headers)
    out.header_value_offsets = <int32_t*>header_value_offsets.data.as_ints + at
    out.key_valid = grow_bytes(key_valid, totals.records)
    out.key_data = grow_bytes(key_data, totals.key_bytes)
    out.value_valid = grow_bytes(value_valid, totals.records)
    out.value_data = grow_bytes(value_data, totals.value_bytes)
    out.header_key_data = grow_bytes(header_key_data, totals.header_key_bytes)
    out.header_value_valid = grow_bytes(header_value_valid, totals.headers)
    out.header_value_data = grow_bytes(header_value_data, totals.header_value_bytes)

    walk(raw, size, count, base_offset, base_timestamp, log_append, max_timestamp, timestamp_type,
         first_offset, end_offset, &totals, &out)
    return totals.records
