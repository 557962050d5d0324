"""Kafka RecordBatch v2 (magic 2): header parsing, validation, offset assignment, build and decode.

The broker's hot path only touches batch headers: `validate_batches` checks what a Produce request
carries (header fields and CRC-32C, never individual records) and `assign_offsets` rewrites base
offsets in place. Building and decoding records (`build_batch`, `decode_batch_records`) is for
tests, internal topics and features that need records (ListOffsets by timestamp).

Layout (all big-endian), see the Kafka protocol facts:

    0 baseOffset int64 | 8 batchLength int32 | 12 partitionLeaderEpoch int32 | 16 magic int8
    17 crc uint32 (CRC-32C of bytes 21..end) | 21 attributes int16 | 23 lastOffsetDelta int32
    27 baseTimestamp int64 | 35 maxTimestamp int64 | 43 producerId int64 | 51 producerEpoch int16
    53 baseSequence int32 | 57 recordsCount int32 | 61 records
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple

import crc32c

# Kafka error codes, as plain ints so that this module depends on nothing else of ours.
CORRUPT_MESSAGE = 2
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
UNSUPPORTED_COMPRESSION_TYPE = 76
INVALID_RECORD = 87

MAGIC = 2
HEADER_SIZE = 61
# Bytes of the header that batchLength counts (everything after the batchLength field).
MIN_BATCH_LENGTH = HEADER_SIZE - 12
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part of a batch that batchLength leaves out
CRC_START = 21

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
MAX_SEQUENCE = (1 << 31) - 1

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4
_KNOWN_CODECS = frozenset(range(5))

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1

# Decompressed batches larger than this are refused: a small compressed batch must not be able
# to make the broker allocate gigabytes (a decompression bomb).
DEFAULT_MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024

_HEADER = struct.Struct(">qiibIhiqqqhii")
assert _HEADER.size == HEADER_SIZE
_BASE_OFFSET = struct.Struct(">q")
_ATTRIBUTES = struct.Struct(">h")
_MAX_TIMESTAMP = struct.Struct(">q")
_CRC = struct.Struct(">I")
_INT32_FIELD = struct.Struct(">i")
_LEADER_EPOCH_AT = 12
_ATTRIBUTES_AT = 21
_MAX_TIMESTAMP_AT = 35
_CRC_AT = 17
_MAGIC_AT = 16


class InvalidRecordBatch(ValueError):
    """Bytes that are not a well-formed RecordBatch v2; `error_code` is the Kafka error to answer.
    `log_validation`: Kafka finds this one in its LogValidator, on the partition's log, and so
    answers it with the partition's log start offset (a RecordValidationException); the others it
    finds before reaching a log and answers with -1."""

    def __init__(self, message: str, error_code: int = CORRUPT_MESSAGE, *, log_validation: bool = False) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.log_validation = log_validation


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return TIMESTAMP_LOG_APPEND_TIME if self.attributes & ATTR_TIMESTAMP_TYPE else TIMESTAMP_CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def last_sequence(self) -> int:
        """Sequence of the batch's last record; sequences wrap from 2**31-1 to 0 as in Kafka."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (MAX_SEQUENCE + 1)


_make_header: Final = BatchHeader._make
_unpack_header: Final = _HEADER.unpack_from


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header of the batch at `pos`, without checking its CRC or its length."""
    if pos < 0 or len(buf) - pos < HEADER_SIZE:
        raise InvalidRecordBatch(
            f"record batch header truncated: {max(0, len(buf) - pos)} of {HEADER_SIZE} bytes"
        )
    return _make_header(_unpack_header(buf, pos))


def _wrong_magic(magic: int) -> InvalidRecordBatch:
    """Kafka's answers (Produce v3+, found by the differential against Kafka 3.9): an older message
    format is an INVALID_RECORD (ProduceRequest.validateRecords), a magic Kafka does not know is a
    CORRUPT_MESSAGE (its batch reader refuses it)."""
    code = INVALID_RECORD if magic < MAGIC else CORRUPT_MESSAGE
    return InvalidRecordBatch(f"unsupported record batch magic {magic}: Produce v3+ carries magic {MAGIC} batches",
                              code)


def check_header(header: BatchHeader, available: int) -> None:
    """Every check but the CRC: they need no record bytes. `available` = bytes from the batch
    start to the end of the buffer. Raises InvalidRecordBatch."""
    # Fields by position, not through the properties: this runs once per produced batch.
    _base, batch_length, _epoch, magic, _crc, attributes, last_offset_delta = header[:7]
    records_count = header[12]
    if magic != MAGIC:
        raise _wrong_magic(magic)
    if batch_length < MIN_BATCH_LENGTH:
        raise InvalidRecordBatch(f"batchLength {batch_length} < {MIN_BATCH_LENGTH}")
    if batch_length + LOG_OVERHEAD > available:
        raise InvalidRecordBatch(f"record batch truncated: {available} of {batch_length + LOG_OVERHEAD} bytes")
    if attributes & ATTR_COMPRESSION_MASK not in _KNOWN_CODECS:
        raise InvalidRecordBatch(
            f"unknown compression codec {attributes & ATTR_COMPRESSION_MASK}", UNSUPPORTED_COMPRESSION_TYPE
        )
    if records_count <= 0:
        raise InvalidRecordBatch(f"record batch has {records_count} records", INVALID_RECORD, log_validation=True)
    if last_offset_delta + 1 != records_count:
        raise InvalidRecordBatch(
            f"lastOffsetDelta {last_offset_delta} does not match recordsCount {records_count}",
            INVALID_RECORD, log_validation=True,
        )


def batch_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C of the batch at `pos` (bytes 21..end, as the header's crc field covers)."""
    return crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + size])


def validate_batches(buf: bytes | bytearray | memoryview) -> list[tuple[int, BatchHeader]]:
    """Check a Produce request's records: whole v2 batches back to back, each with a good CRC.

    Returns [(position, header)] for every batch. Raises InvalidRecordBatch (with the Kafka error
    code to answer) on the first problem. Individual records are never parsed.
    """
    view = memoryview(buf)
    end = len(view)
    if end == 0:
        raise InvalidRecordBatch("no record batches", INVALID_RECORD)
    batches: list[tuple[int, BatchHeader]] = []
    pos = 0
    while pos < end:
        available = end - pos
        # The magic byte sits at offset 16 in every message format, so an old-format message set
        # is recognised as such (and answered with 43) even when it is shorter than our header.
        if available > _MAGIC_AT and view[pos + _MAGIC_AT] != MAGIC:
            raise _wrong_magic(view[pos + _MAGIC_AT])
        header = parse_header(view, pos)
        check_header(header, available)
        size = header[1] + LOG_OVERHEAD  # batch_length
        actual = crc32c.crc32c(view[pos + CRC_START : pos + size])
        if actual != header[4]:  # crc
            raise InvalidRecordBatch(
                f"record batch at position {pos}: CRC {actual:#010x} does not match {header.crc:#010x}"
            )
        batches.append((pos, header))
        pos += size
    assert pos == end
    return batches


def assign_offsets(
    buf: bytearray | memoryview,
    batches: Sequence[tuple[int, BatchHeader]],
    base_offset: int,
    log_append_time: int | None = None,
    *,
    partition_leader_epoch: int | None = None,
) -> int:
    """Rewrite each batch's baseOffset in place with consecutive offsets; return the next offset.

    baseOffset is outside the CRC, so the CRC stays valid; so is partitionLeaderEpoch, which
    the leader stamps when `partition_leader_epoch` is given. With `log_append_time` (Kafka's
    message.timestamp.type=LogAppendTime) the timestamp-type bit and maxTimestamp are set too,
    and since both are inside the CRC, the CRC is recomputed.
    """
    view = memoryview(buf)
    assert not view.readonly, "assign_offsets needs a writable buffer"
    assert base_offset >= 0
    next_offset = base_offset
    for pos, header in batches:
        _BASE_OFFSET.pack_into(view, pos, next_offset)
        if partition_leader_epoch is not None:
            _INT32_FIELD.pack_into(view, pos + _LEADER_EPOCH_AT, partition_leader_epoch)
        if log_append_time is not None:
            _ATTRIBUTES.pack_into(view, pos + _ATTRIBUTES_AT, header.attributes | ATTR_TIMESTAMP_TYPE)
            _MAX_TIMESTAMP.pack_into(view, pos + _MAX_TIMESTAMP_AT, log_append_time)
            _CRC.pack_into(view, pos + _CRC_AT, batch_crc(view, pos, header.size))
        next_offset += header.last_offset_delta + 1
    return next_offset


def iter_batch_headers(
    buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None
) -> Iterator[tuple[int, BatchHeader]]:
    """Walk whole batches by their lengths (no CRC check); stops before a partial batch.

    For bytes already trusted (read back from our own log). Yields (position, header).
    """
    if end is None:
        end = len(buf)
    while end - pos >= HEADER_SIZE:
        header = parse_header(buf, pos)
        if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > end:
            return
        yield pos, header
        pos += header.size


# ---------------------------------------------------------------------------------------------
# Records: build and decode


@dataclass
class Record:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp: int = NO_TIMESTAMP
    offset: int = -1


RecordInput = (
    tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]
)


def _zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def _put_varint(out: bytearray, value: int) -> None:
    """Append a zigzag varint (records use signed varints throughout)."""
    assert -(1 << 63) <= value < (1 << 63)
    encoded = _zigzag(value) & 0xFFFFFFFFFFFFFFFF
    while encoded >= 0x80:
        out.append((encoded & 0x7F) | 0x80)
        encoded >>= 7
    out.append(encoded)


def _put_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        _put_varint(out, -1)
    else:
        _put_varint(out, len(data))
        out += data


def _encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]],
) -> None:
    body = bytearray()
    body.append(0)  # record attributes: unused by every Kafka version so far
    _put_varint(body, timestamp_delta)
    _put_varint(body, offset_delta)
    _put_bytes(body, key)
    _put_bytes(body, value)
    _put_varint(body, len(headers))
    for header_key, header_value in headers:
        _put_bytes(body, header_key.encode("utf-8"))
        _put_bytes(body, header_value)
    _put_varint(out, len(body))
    out += body


def build_batch(
    records: Iterable[RecordInput | Record],
    *,
    base_offset: int = 0,
    timestamp_ms: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    compression: int = COMPRESSION_NONE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
    timestamp_type: int = TIMESTAMP_CREATE_TIME,
) -> bytes:
    """Encode one RecordBatch v2.

    `records` are (key, value) or (key, value, headers) tuples stamped with `timestamp_ms`, or
    `Record`s, which keep their own timestamp when it is set (>= 0). Offsets are consecutive from
    `base_offset` (a Record's `offset` is ignored): that is what a producer sends.
    """
    entries: list[tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]], int]] = []
    for item in records:
        if isinstance(item, Record):
            stamp = item.timestamp if item.timestamp >= 0 else timestamp_ms
            entries.append((item.key, item.value, item.headers, stamp))
        elif len(item) == 2:
            entries.append((item[0], item[1], (), timestamp_ms))
        else:
            entries.append((item[0], item[1], item[2], timestamp_ms))
    if not entries:
        raise ValueError("a record batch needs at least one record")
    if compression not in _KNOWN_CODECS:
        raise ValueError(f"unknown compression codec {compression}")

    base_timestamp = entries[0][3]
    max_timestamp = max(entry[3] for entry in entries)
    body = bytearray()
    for offset_delta, (key, value, headers, stamp) in enumerate(entries):
        _encode_record(body, offset_delta, stamp - base_timestamp, key, value, headers)
    payload = _compress(compression, bytes(body))

    attributes = compression
    if timestamp_type == TIMESTAMP_LOG_APPEND_TIME:
        attributes |= ATTR_TIMESTAMP_TYPE
    if is_transactional:
        attributes |= ATTR_TRANSACTIONAL
    if is_control:
        attributes |= ATTR_CONTROL
    batch = bytearray(HEADER_SIZE)
    batch += payload
    _HEADER.pack_into(
        batch,
        0,
        base_offset,
        len(batch) - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        len(entries) - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(entries),
    )
    _CRC.pack_into(batch, _CRC_AT, batch_crc(batch, 0, len(batch)))
    return bytes(batch)


def recompress_batch(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader, codec: int,
                     level: int | None = None) -> bytes:
    """The batch at `pos` with its records block in `codec` instead of its own (Kafka's broker-side
    recompression for a topic's compression.type): the records themselves are the same bytes in
    every codec, so only the block, batchLength, the codec bits of the attributes and the CRC
    change; offsets, timestamps, producer fields and flags are kept. InvalidRecordBatch when the
    block does not decompress."""
    assert codec in _KNOWN_CODECS, codec
    assert not header.attributes & ATTR_CONTROL, "control batches are never recompressed"
    view = memoryview(buf)
    block = bytes(view[pos + HEADER_SIZE : pos + header.size])
    payload = _compress(codec, _decompress(header.compression, block, DEFAULT_MAX_DECOMPRESSED_BYTES), level)
    batch = bytearray(view[pos : pos + HEADER_SIZE])
    batch += payload
    _INT32_FIELD.pack_into(batch, 8, len(batch) - LOG_OVERHEAD)  # batchLength
    _ATTRIBUTES.pack_into(batch, _ATTRIBUTES_AT, (header.attributes & ~ATTR_COMPRESSION_MASK) | codec)
    _CRC.pack_into(batch, _CRC_AT, batch_crc(batch, 0, len(batch)))
    return bytes(batch)


# The value of every one-byte zigzag varint, for walks that decode those inline (most lengths
# and deltas of small records) and call read_varint for the others.
ONE_BYTE_ZIGZAG: Final = tuple((byte >> 1) ^ -(byte & 1) for byte in range(0x80))


def read_varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """The zigzag varint at `pos`, read no further than `end`: (value, position after it).

    Every pure-Python reader of records uses this one (the decoder here, record_columns, the
    log cleaner). InvalidRecordBatch when the varint runs past `end`, is longer than 10 bytes
    or does not fit in 64 bits; the compiled twin in roost._speedups.records raises the same
    messages, which tests/speedups compare.
    """
    if pos >= end:
        raise InvalidRecordBatch("record truncated inside a varint")
    byte = data[pos]
    pos += 1
    if byte < 0x80:  # one byte: most lengths and deltas of small records
        return (byte >> 1) ^ -(byte & 1), pos
    result = byte & 0x7F
    shift = 7
    while True:
        if pos >= end:
            raise InvalidRecordBatch("record truncated inside a varint")
        byte = data[pos]
        pos += 1
        if byte < 0x80:
            if shift == 63 and byte > 1:  # the tenth byte may carry only the 64th bit
                raise InvalidRecordBatch("varint does not fit in 64 bits")
            result |= byte << shift
            return (result >> 1) ^ -(result & 1), pos
        result |= (byte & 0x7F) << shift
        shift += 7
        if shift > 63:
            raise InvalidRecordBatch("varint longer than 10 bytes")


def _read_bytes(buf: bytes, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    length, pos = read_varint(buf, pos, end)
    if length == -1:
        return None, pos
    if length < -1 or pos + length > end:
        raise InvalidRecordBatch(f"record {what} length {length} does not fit")
    return buf[pos : pos + length], pos + length


def _decode_records(data: bytes, header: BatchHeader) -> list[Record]:
    records: list[Record] = []
    pos = 0
    end = len(data)
    log_append = header.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
    for _ in range(header.records_count):
        length, pos = read_varint(data, pos, end)
        record_end = pos + length
        if length < 1 or record_end > end:
            raise InvalidRecordBatch(f"record length {length} does not fit the batch")
        pos += 1  # record attributes, unused
        timestamp_delta, pos = read_varint(data, pos, record_end)
        offset_delta, pos = read_varint(data, pos, record_end)
        key, pos = _read_bytes(data, pos, record_end, "key")
        value, pos = _read_bytes(data, pos, record_end, "value")
        header_count, pos = read_varint(data, pos, record_end)
        if header_count < 0 or header_count > record_end - pos:
            raise InvalidRecordBatch(f"record header count {header_count} is invalid")
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(header_count):
            raw_key, pos = _read_bytes(data, pos, record_end, "header key")
            if raw_key is None:
                raise InvalidRecordBatch("record header key is null")
            try:
                header_key = raw_key.decode("utf-8")
            except UnicodeDecodeError as error:
                raise InvalidRecordBatch(f"record header key is not UTF-8: {error}") from None
            header_value, pos = _read_bytes(data, pos, record_end, "header value")
            headers.append((header_key, header_value))
        if pos != record_end:
            raise InvalidRecordBatch(f"record has {record_end - pos} unexpected trailing bytes")
        timestamp = header.max_timestamp if log_append else header.base_timestamp + timestamp_delta
        records.append(Record(key, value, headers, timestamp, header.base_offset + offset_delta))
    if pos != end:
        raise InvalidRecordBatch(f"{end - pos} bytes after the batch's last record")
    return records


def decode_batch_records(
    batch: bytes | bytearray | memoryview,
    *,
    verify_crc: bool = True,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> list[Record]:
    """The records of the one batch at the start of `batch` (decompressed when needed)."""
    view = memoryview(batch)
    header = parse_header(view)
    check_header(header, len(view))
    if verify_crc and batch_crc(view, 0, header.size) != header.crc:
        raise InvalidRecordBatch("record batch CRC does not match")
    payload = bytes(view[HEADER_SIZE : header.size])
    data = _decompress(header.compression, payload, max_decompressed_bytes)
    return _decode_records(data, header)


def iter_records(buf: bytes | bytearray | memoryview, *, include_control: bool = True) -> Iterator[Record]:
    """Records of every whole batch in `buf`, in order (a trailing partial batch is ignored,
    as a fetch response may end with one)."""
    view = memoryview(buf)
    for pos, header in iter_batch_headers(view):
        if header.is_control and not include_control:
            continue
        yield from decode_batch_records(view[pos : pos + header.size])


# ---------------------------------------------------------------------------------------------
# Compression codecs. The libraries are imported on first use so the broker runs without them.

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")


def _compress(codec: int, data: bytes, level: int | None = None) -> bytes:
    """`data` compressed with `codec` at `level` (None: the codec library's default)."""
    if codec == COMPRESSION_NONE:
        return data
    if codec == COMPRESSION_GZIP:
        # wbits 16 + 15: gzip framing, as Kafka uses; zlib's -1 is its default level (6).
        compressor = zlib.compressobj(-1 if level is None else level, wbits=31)
        return compressor.compress(data) + compressor.flush()
    if codec == COMPRESSION_SNAPPY:
        import cramjam

        # Xerial framing, as the Java client writes it; every client reads it.
        out = bytearray(_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1))
        for start in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
            out += _INT32.pack(len(block))
            out += block
        return bytes(out)
    if codec == COMPRESSION_LZ4:
        import lz4.frame

        compressed: bytes = lz4.frame.compress(data) if level is None else \
            lz4.frame.compress(data, compression_level=level)
        return compressed
    if codec == COMPRESSION_ZSTD:
        import zstandard

        return (zstandard.ZstdCompressor() if level is None else zstandard.ZstdCompressor(level=level)).compress(data)
    raise ValueError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes, limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> bytes:
    """A batch's records block decompressed with `codec` (returned as is for none), at most
    `limit` bytes; InvalidRecordBatch when it cannot be (UNSUPPORTED_COMPRESSION_TYPE when the
    codec's library is missing)."""
    return _decompress(codec, data, limit)


def _decompress(codec: int, data: bytes, limit: int) -> bytes:
    if codec == COMPRESSION_NONE:
        return data
    try:
        out = _DECOMPRESSORS[codec](data, limit)
    except InvalidRecordBatch:
        raise
    except ImportError as error:
        raise InvalidRecordBatch(
            f"compression codec {codec} is not available here: {error}", UNSUPPORTED_COMPRESSION_TYPE
        ) from None
    except Exception as error:  # every codec library has its own exception types
        raise InvalidRecordBatch(f"cannot decompress codec {codec}: {error}") from None
    if len(out) > limit:
        raise InvalidRecordBatch(f"batch decompresses to more than {limit} bytes")
    return out


def _gunzip(data: bytes, limit: int) -> bytes:
    out = bytearray()
    while data:
        decompressor = zlib.decompressobj(wbits=47)  # 32 + 15: gzip or zlib header, detected
        out += decompressor.decompress(data, limit + 1 - len(out))
        if len(out) > limit:
            break
        if not decompressor.eof:
            raise InvalidRecordBatch("gzip data truncated")
        data = decompressor.unused_data  # concatenated gzip members
    return bytes(out)


def _snappy_raw(block: bytes, limit: int) -> bytes:
    import cramjam

    if cramjam.snappy.decompress_raw_len(block) > limit:
        raise InvalidRecordBatch(f"batch decompresses to more than {limit} bytes")
    return bytes(cramjam.snappy.decompress_raw(block))


def _unsnappy(data: bytes, limit: int) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return _snappy_raw(data, limit)
    if len(data) < _XERIAL_HEADER.size:
        raise InvalidRecordBatch("snappy xerial header truncated")
    out = bytearray()
    pos = _XERIAL_HEADER.size
    while pos < len(data):
        if pos + 4 > len(data):
            raise InvalidRecordBatch("snappy xerial block length truncated")
        (length,) = _INT32.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise InvalidRecordBatch("snappy xerial block truncated")
        out += _snappy_raw(data[pos : pos + length], limit - len(out))
        pos += length
    return bytes(out)


def _unlz4(data: bytes, limit: int) -> bytes:
    import lz4.frame

    decompressor = lz4.frame.LZ4FrameDecompressor()
    out: bytes = decompressor.decompress(data, max_length=limit + 1)
    if len(out) <= limit and not decompressor.eof:
        raise InvalidRecordBatch("lz4 frame truncated")
    return out


def _unzstd(data: bytes, limit: int) -> bytes:
    import zstandard

    with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as reader:
        out = bytearray()
        while len(out) <= limit:
            chunk = reader.read(limit + 1 - len(out))
            if not chunk:
                break
            out += chunk
    return bytes(out)


_DECOMPRESSORS: dict[int, Callable[[bytes, int], bytes]] = {
    COMPRESSION_GZIP: _gunzip,
    COMPRESSION_SNAPPY: _unsnappy,
    COMPRESSION_LZ4: _unlz4,
    COMPRESSION_ZSTD: _unzstd,
}
