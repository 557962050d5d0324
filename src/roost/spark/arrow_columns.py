"""Decoded record columns (roost.wire.kafka.record_columns) as an Arrow record batch of the source's
schema: a fixed number of pyarrow calls per batch, whatever the number of records.

The column buffers become Arrow buffers without a copy (the arrays and bytearrays export their
memory), so the RecordColumns handed in must not be appended to afterwards: take a new one.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from roost.spark.offsets import TopicPartition
from roost.spark.schema import source_arrow_schema
from roost.wire.kafka.record_columns import RecordColumns
from roost.wire.kafka.records import InvalidRecordBatch


def _validity(valid: bytearray, count: int) -> tuple[pa.Buffer | None, int]:
    """Arrow's validity bitmap for one-byte-per-value flags, and the null count."""
    nulls = count - valid.count(1)
    if nulls == 0:
        return None, 0
    flags = pa.Array.from_buffers(pa.uint8(), count, [None, pa.py_buffer(valid)])
    return pc.not_equal(flags, 0).buffers()[1], nulls


def _binary_like(kind: pa.DataType, count: int, offsets: object, data: bytearray,
                 valid: bytearray | None) -> pa.Array:
    bitmap, nulls = _validity(valid, count) if valid is not None else (None, 0)
    return pa.Array.from_buffers(kind, count, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)],
                                 null_count=nulls)


def _headers(columns: RecordColumns, count: int, list_type: pa.ListType) -> pa.Array:
    entry_type = list_type.value_type
    total = columns.header_offsets[-1]
    keys = _binary_like(pa.string(), total, columns.header_key_offsets, columns.header_key_data, None)
    try:
        keys.validate(full=True)  # header keys must be UTF-8: Arrow checks the whole column at once
    except pa.ArrowInvalid as error:
        raise InvalidRecordBatch(f"record header key is not UTF-8: {error}") from None
    values = _binary_like(pa.binary(), total, columns.header_value_offsets, columns.header_value_data,
                          columns.header_value_valid)
    entries = pa.StructArray.from_arrays([keys, values], fields=list(entry_type))
    offsets = pa.Array.from_buffers(pa.int32(), count + 1, [None, pa.py_buffer(columns.header_offsets)])
    return pa.ListArray.from_arrays(offsets, entries, type=list_type)


def to_record_batch(columns: RecordColumns, tp: TopicPartition) -> pa.RecordBatch:
    """The records of `columns`, all of partition `tp`, as the source's Arrow batch."""
    schema = source_arrow_schema()
    count = len(columns)
    millis = pa.Array.from_buffers(pa.int64(), count, [None, pa.py_buffer(columns.timestamps)])
    try:
        micros = pc.multiply_checked(millis, 1000)
    except pa.ArrowInvalid:
        raise InvalidRecordBatch("a record timestamp is out of range") from None
    return pa.RecordBatch.from_arrays([
        _binary_like(pa.binary(), count, columns.key_offsets, columns.key_data, columns.key_valid),
        _binary_like(pa.binary(), count, columns.value_offsets, columns.value_data, columns.value_valid),
        pa.repeat(pa.scalar(tp.topic, pa.string()), count),
        pa.repeat(pa.scalar(tp.partition, pa.int32()), count),
        pa.Array.from_buffers(pa.int64(), count, [None, pa.py_buffer(columns.offsets)]),
        micros.cast(schema.field("timestamp").type),
        pa.Array.from_buffers(pa.int32(), count, [None, pa.py_buffer(columns.timestamp_types)]),
        _headers(columns, count, schema.field("headers").type),
    ], schema=schema)
