"""RecordBatch v2: header fields, validation errors, offset assignment, build/decode round trips,
and cross-checks against kafka-python's own batch builder and reader (its producer's code)."""

from __future__ import annotations

import struct

import cramjam
import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from roost.wire.kafka import records as rec
from roost.wire.kafka.records import (
    CORRUPT_MESSAGE,
    HEADER_SIZE,
    INVALID_RECORD,
    UNSUPPORTED_COMPRESSION_TYPE,
    InvalidRecordBatch,
    Record,
    assign_offsets,
    build_batch,
    decode_batch_records,
    iter_records,
    parse_header,
    validate_batches,
)

CODECS = [
    rec.COMPRESSION_NONE,
    rec.COMPRESSION_GZIP,
    rec.COMPRESSION_SNAPPY,
    rec.COMPRESSION_LZ4,
    rec.COMPRESSION_ZSTD,
]
SAMPLE = [
    (b"key-1", b"value-1", [("trace", b"abc"), ("empty", None)]),
    (None, b"no key", []),
    (b"no value", None, [("h", b"")]),
    (b"", b"", []),
    (b"k" * 300, bytes(range(256)) * 20, [("\u00fcnicode", b"\x00\xff")]),
]


def _refresh_crc(batch: bytearray) -> None:
    struct.pack_into(">I", batch, 17, crc32c.crc32c(memoryview(batch)[21:]))


def test_header_fields_and_properties() -> None:
    batch = build_batch(
        [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")],
        base_offset=100,
        timestamp_ms=5000,
        producer_id=42,
        producer_epoch=3,
        base_sequence=7,
        is_transactional=True,
        partition_leader_epoch=9,
    )
    header = parse_header(batch)
    assert header.base_offset == 100
    assert header.size == len(batch) == header.batch_length + 12
    assert header.magic == 2
    assert header.partition_leader_epoch == 9
    assert header.records_count == 3 and header.last_offset_delta == 2
    assert header.last_offset == 102 and header.next_offset == 103
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 7)
    assert header.last_sequence == 9
    assert header.is_transactional and not header.is_control
    assert header.compression == 0 and header.timestamp_type == 0
    assert header.crc == crc32c.crc32c(batch[21:])


def test_last_sequence_wraps_like_kafka() -> None:
    batch = build_batch(
        [(None, b"x")] * 3, timestamp_ms=1, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2
    )
    assert parse_header(batch).last_sequence == 0


def test_parse_header_needs_61_bytes() -> None:
    with pytest.raises(InvalidRecordBatch) as raised:
        parse_header(b"\x00" * (HEADER_SIZE - 1))
    assert raised.value.error_code == CORRUPT_MESSAGE


def test_validate_several_batches() -> None:
    first = build_batch([(b"a", b"1")], timestamp_ms=1)
    second = build_batch([(b"b", b"2"), (b"c", b"3")], timestamp_ms=2, compression=rec.COMPRESSION_GZIP)
    found = validate_batches(memoryview(first + second))
    assert [pos for pos, _ in found] == [0, len(first)]
    assert [header.records_count for _, header in found] == [1, 2]


def _expect(data: bytes | bytearray, code: int) -> None:
    with pytest.raises(InvalidRecordBatch) as raised:
        validate_batches(memoryview(data))
    assert raised.value.error_code == code, raised.value


def test_validate_rejects_bad_crc() -> None:
    batch = bytearray(build_batch([(b"k", b"value")], timestamp_ms=1))
    batch[-1] ^= 0x01
    _expect(batch, CORRUPT_MESSAGE)


def test_validate_rejects_truncation_and_trailing_bytes() -> None:
    batch = build_batch([(b"k", b"value")], timestamp_ms=1)
    _expect(batch[:-1], CORRUPT_MESSAGE)
    _expect(batch + b"\x00" * 5, CORRUPT_MESSAGE)
    _expect(batch + batch[: HEADER_SIZE + 2], CORRUPT_MESSAGE)
    _expect(b"", INVALID_RECORD)


def test_validate_rejects_short_batch_length() -> None:
    batch = bytearray(build_batch([(b"k", b"value")], timestamp_ms=1))
    struct.pack_into(">i", batch, 8, 48)
    _expect(batch, CORRUPT_MESSAGE)


@pytest.mark.parametrize(("magic", "code"), [(0, INVALID_RECORD), (1, INVALID_RECORD), (3, CORRUPT_MESSAGE)])
def test_validate_rejects_other_magic(magic: int, code: int) -> None:
    batch = bytearray(build_batch([(b"k", b"value")], timestamp_ms=1))
    batch[16] = magic
    _expect(batch, code)
    # An old-format message set shorter than a v2 header is still recognised by its magic byte.
    legacy = bytearray(30)
    legacy[16] = 1
    _expect(legacy, INVALID_RECORD)


def test_validate_rejects_count_mismatch_and_empty_batch() -> None:
    batch = bytearray(build_batch([(b"k", b"1"), (b"k", b"2")], timestamp_ms=1))
    struct.pack_into(">i", batch, 23, 5)  # lastOffsetDelta
    _refresh_crc(batch)
    _expect(batch, INVALID_RECORD)
    struct.pack_into(">i", batch, 23, -1)
    struct.pack_into(">i", batch, 57, 0)  # recordsCount
    _refresh_crc(batch)
    _expect(batch, INVALID_RECORD)


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_validate_rejects_unknown_codec(codec: int) -> None:
    batch = bytearray(build_batch([(b"k", b"1")], timestamp_ms=1))
    struct.pack_into(">h", batch, 21, codec)
    _refresh_crc(batch)
    _expect(batch, UNSUPPORTED_COMPRESSION_TYPE)


def test_assign_offsets_rewrites_base_offsets_without_breaking_crc() -> None:
    batches = [build_batch([(b"k", b"v")] * n, timestamp_ms=10) for n in (1, 3, 2)]
    buf = bytearray(b"".join(batches))
    found = validate_batches(buf)
    assert assign_offsets(buf, found, 1000) == 1006
    again = validate_batches(buf)  # CRCs still match
    assert [header.base_offset for _, header in again] == [1000, 1001, 1004]
    assert [r.offset for r in iter_records(buf)] == list(range(1000, 1006))


def test_assign_offsets_with_log_append_time() -> None:
    buf = bytearray(build_batch([(b"k", b"v"), (b"k", b"w")], timestamp_ms=10))
    found = validate_batches(buf)
    assign_offsets(memoryview(buf), found, 5, log_append_time=777_000)
    ((_, header),) = validate_batches(buf)  # the CRC was recomputed
    assert header.timestamp_type == rec.TIMESTAMP_LOG_APPEND_TIME
    assert header.max_timestamp == 777_000
    assert [r.timestamp for r in decode_batch_records(buf)] == [777_000, 777_000]


@pytest.mark.parametrize("codec", CODECS)
def test_build_decode_round_trip(codec: int) -> None:
    batch = build_batch(SAMPLE, base_offset=50, timestamp_ms=1_700_000_000_000, compression=codec)
    ((_, header),) = validate_batches(batch)
    assert header.compression == codec
    decoded = decode_batch_records(batch)
    assert [(r.key, r.value, r.headers) for r in decoded] == [(k, v, list(h)) for k, v, h in SAMPLE]
    assert [r.offset for r in decoded] == list(range(50, 55))
    assert {r.timestamp for r in decoded} == {1_700_000_000_000}


def test_records_keep_their_own_timestamps() -> None:
    records = [Record(b"a", b"1", [], 2000), Record(b"b", b"2", [], 1500), Record(b"c", b"3", [], -1)]
    batch = build_batch(records, timestamp_ms=9000)
    header = parse_header(batch)
    assert header.base_timestamp == 2000 and header.max_timestamp == 9000
    assert [r.timestamp for r in decode_batch_records(batch)] == [2000, 1500, 9000]


def test_decode_checks_crc_unless_told_not_to() -> None:
    batch = bytearray(build_batch([(b"k", b"v")], timestamp_ms=1))
    batch[-2] ^= 0xFF  # the value's byte: still a well-formed record
    with pytest.raises(InvalidRecordBatch):
        decode_batch_records(batch)
    assert decode_batch_records(batch, verify_crc=False)[0].value == bytes([ord("v") ^ 0xFF])


def test_decompression_bomb_is_refused() -> None:
    batch = build_batch([(None, b"\x00" * 1_000_000)], timestamp_ms=1, compression=rec.COMPRESSION_ZSTD)
    assert len(batch) < 1000
    with pytest.raises(InvalidRecordBatch):
        decode_batch_records(batch, max_decompressed_bytes=100_000)


def test_raw_snappy_without_xerial_framing_decodes() -> None:
    plain = build_batch(SAMPLE, timestamp_ms=1)
    raw_snappy = bytes(cramjam.snappy.compress_raw(plain[HEADER_SIZE:]))
    batch = bytearray(plain[:HEADER_SIZE] + raw_snappy)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, 21, rec.COMPRESSION_SNAPPY)
    _refresh_crc(batch)
    assert [r.value for r in decode_batch_records(batch)] == [v for _, v, _ in SAMPLE]


def test_iter_records_spans_batches_and_skips_control_on_request() -> None:
    data = build_batch([(b"a", b"1")], timestamp_ms=1) + build_batch(
        [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")], base_offset=1, timestamp_ms=1, is_control=True
    )
    assert [r.value for r in iter_records(data)] == [b"1", b"\x00" * 6]
    assert [r.value for r in iter_records(data, include_control=False)] == [b"1"]


# ---- kafka-python's producer encoding as the reference ----------------------------------------


def _kafka_python_batch(codec: int, base_sequence: int = -1) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=5 if base_sequence >= 0 else -1,
        producer_epoch=1 if base_sequence >= 0 else -1,
        base_sequence=base_sequence,
        batch_size=1 << 20,
    )
    for offset, (key, value, headers) in enumerate(SAMPLE):
        builder.append(offset, timestamp=1_000 + offset, key=key, value=value, headers=headers)
    return bytes(builder.build())


@pytest.mark.parametrize("codec", CODECS)
def test_decode_batches_built_by_kafka_python(codec: int) -> None:
    batch = _kafka_python_batch(codec, base_sequence=11)
    ((_, header),) = validate_batches(batch)
    assert header.compression == codec
    assert (header.producer_id, header.base_sequence, header.last_sequence) == (5, 11, 15)
    decoded = decode_batch_records(batch)
    assert [(r.key, r.value, r.headers, r.timestamp) for r in decoded] == [
        (k, v, list(h), 1_000 + i) for i, (k, v, h) in enumerate(SAMPLE)
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_our_batches(codec: int) -> None:
    ours = build_batch(SAMPLE, base_offset=7, timestamp_ms=4242, compression=codec)
    theirs = DefaultRecordBatch(ours)
    assert theirs.validate_crc()
    assert [(m.offset, m.key, m.value, list(m.headers), m.timestamp) for m in theirs] == [
        (7 + i, k, v, list(h), 4242) for i, (k, v, h) in enumerate(SAMPLE)
    ]


def test_uncompressed_bytes_identical_to_kafka_python() -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for offset, (key, value, headers) in enumerate(SAMPLE):
        builder.append(offset, timestamp=99, key=key, value=value, headers=headers)
    theirs = bytearray(builder.build())
    ours = build_batch(SAMPLE, timestamp_ms=99, partition_leader_epoch=0)  # its default
    assert ours == bytes(theirs)


# ---- fuzzing: any bytes raise only InvalidRecordBatch ----------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_arbitrary_bytes_raise_only_invalid_record_batch(data: bytes) -> None:
    for parse in (parse_header, validate_batches, decode_batch_records):
        try:
            parse(data)
        except InvalidRecordBatch:
            pass


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(CODECS),
    st.integers(min_value=0, max_value=200),
    st.binary(min_size=1, max_size=8),
    st.integers(min_value=0, max_value=2),
)
def test_mutated_records_with_valid_crc_raise_only_invalid_record_batch(
    codec: int, position: int, patch: bytes, mode: int
) -> None:
    """Garbage *behind* a correct CRC reaches the record parser and the decompressors."""
    batch = bytearray(build_batch(SAMPLE[:3], timestamp_ms=1, compression=codec))
    body_at = HEADER_SIZE + position % max(1, len(batch) - HEADER_SIZE)
    if mode == 0:
        batch[body_at : body_at + len(patch)] = patch  # overwrite
    elif mode == 1:
        del batch[body_at:]  # cut short
        batch += patch
    else:
        batch[body_at:body_at] = patch  # insert
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    _refresh_crc(batch)
    try:
        decode_batch_records(batch)
    except InvalidRecordBatch:
        pass


# ---- the zigzag varint reader every pure-Python record walk shares ---------------------------


@pytest.mark.parametrize(
    ("encoded", "value"),
    [
        (b"\x00", 0),
        (b"\x01", -1),
        (b"\x02", 1),
        (b"\x7f", -64),
        (b"\x80\x01", 64),
        (b"\xac\x02", 150),
        (b"\xfe" + b"\xff" * 8 + b"\x01", (1 << 63) - 1),
        (b"\xff" * 9 + b"\x01", -(1 << 63)),
    ],
)
def test_read_varint_values(encoded: bytes, value: int) -> None:
    data = b"\x99" + encoded + b"\x99"  # read from inside a buffer, not only at its edges
    assert rec.read_varint(data, 1, len(data)) == (value, 1 + len(encoded))


@pytest.mark.parametrize(
    ("encoded", "message"),
    [
        (b"", "record truncated inside a varint"),
        (b"\x80", "record truncated inside a varint"),
        (b"\xff" * 9, "record truncated inside a varint"),
        (b"\xff" * 9 + b"\x02", "varint does not fit in 64 bits"),
        (b"\xff" * 9 + b"\x7f", "varint does not fit in 64 bits"),
        (b"\xff" * 9 + b"\x81\x00", "varint longer than 10 bytes"),
        (b"\xff" * 9 + b"\x80\x00", "varint longer than 10 bytes"),
    ],
)
def test_read_varint_refuses(encoded: bytes, message: str) -> None:
    data = encoded + b"\x00\x00"  # the bound, not the buffer, ends the varint
    with pytest.raises(InvalidRecordBatch) as raised:
        rec.read_varint(data, 0, len(encoded))
    assert str(raised.value) == message
    assert raised.value.error_code == CORRUPT_MESSAGE


def test_decoder_refuses_a_timestamp_delta_past_64_bits() -> None:
    """A ten-byte varint whose value needs 65 bits: refused (as the compiled twin does), where the
    decoder once gave a timestamp no int64 holds."""
    batch = bytearray(build_batch([(b"k", b"v")], timestamp_ms=1))
    record = bytearray(batch[HEADER_SIZE:])
    assert record[2] == 0  # length, attributes, then the timestamp delta 0
    record[2:3] = b"\xff" * 9 + b"\x02"
    record[0] += 18  # the record grows by nine bytes: zigzag adds 18
    batch[HEADER_SIZE:] = record
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    _refresh_crc(batch)
    with pytest.raises(InvalidRecordBatch, match="varint does not fit in 64 bits"):
        decode_batch_records(batch)
