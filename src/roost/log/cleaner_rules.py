"""The sans-IO core of log compaction (see roost.log.cleaner for the rules and the shell that
reads, writes and swaps segments): summaries of a batch's records, the offset map (key -> offset
of its latest record), which transactional batches are aborted, and the record filter that decides,
batch by batch in offset order from the start of the log, what a pass keeps."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from roost.log.config import NEVER
from roost.log.transactions import AbortedTxn
from roost.wire.kafka.records import (
    COMPRESSION_NONE,
    HEADER_SIZE,
    MAX_SEQUENCE,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    ONE_BYTE_ZIGZAG,
    TIMESTAMP_LOG_APPEND_TIME,
    BatchHeader,
    InvalidRecordBatch,
    Record,
    batch_crc,
    build_batch,
    decode_batch_records,
    read_varint,
)


class RecordSummary(NamedTuple):
    """What a pass decides by: no value bytes, no headers."""

    offset: int
    key: bytes | None
    is_tombstone: bool
    timestamp: int


def summarize_batch(header: BatchHeader, raw: memoryview) -> list[RecordSummary] | None:
    """The records of a dense batch (offsets base..last, no gap or repeat) as summaries, checked
    against the CRC; None when it fails a check. Uncompressed batches are walked without
    building records (the hot path: a pass reads every record twice); others are decoded."""
    if header.compression != COMPRESSION_NONE:
        records = decode_dense_batch(header, raw)
        if records is None:
            return None
        return [RecordSummary(r.offset, r.key, r.value is None, r.timestamp) for r in records]
    if header.size != len(raw) or batch_crc(raw, 0, header.size) != header.crc:
        return None
    if header.records_count != header.last_offset_delta + 1:
        return None
    data = bytes(raw)
    if header.timestamp_type == TIMESTAMP_LOG_APPEND_TIME:
        base_timestamp, timestamp_scale = header.max_timestamp, 0  # every record: the batch's time
    else:
        base_timestamp, timestamp_scale = header.base_timestamp, 1
    base_offset = header.base_offset
    zigzag = ONE_BYTE_ZIGZAG
    make = tuple.__new__  # RecordSummary(...) through its generated __new__ costs twice as much
    summaries: list[RecordSummary] = []
    pos, end = HEADER_SIZE, header.size
    try:
        for delta in range(header.records_count):
            # A call per field is a good part of the cost of a pass, so the fields that are one
            # byte in almost every record (the timestamp delta: records stamped within 63 ms of
            # the batch's first; the key length: keys under 64 bytes) are decoded inline by table.
            # Record lengths and offset deltas are often longer (records over 63 bytes, batches
            # over 64 records), where a failed inline try costs more than it saves.
            length, pos = read_varint(data, pos, end)
            record_end = pos + length
            if length < 1 or record_end > end:
                return None
            pos += 1  # the unused attributes byte
            byte = data[pos] if pos < record_end else 0x80
            if byte < 0x80:
                timestamp_delta, pos = zigzag[byte], pos + 1
            else:
                timestamp_delta, pos = read_varint(data, pos, record_end)
            offset_delta, pos = read_varint(data, pos, record_end)
            byte = data[pos] if pos < record_end else 0x80
            if byte < 0x80:
                key_length, pos = zigzag[byte], pos + 1
            else:
                key_length, pos = read_varint(data, pos, record_end)
            if offset_delta != delta or key_length < -1 or pos + key_length > record_end:
                return None
            if key_length < 0:
                key, value_at = None, pos
            else:
                key, value_at = data[pos : pos + key_length], pos + key_length
            if value_at >= record_end:
                return None
            is_tombstone = data[value_at] == 1  # the zigzag varint -1 (no value) is the byte 0x01
            timestamp = base_timestamp + timestamp_delta * timestamp_scale
            summaries.append(make(RecordSummary, (base_offset + delta, key, is_tombstone, timestamp)))
            pos = record_end
    except InvalidRecordBatch:
        return None  # a varint ran off its record, or is longer than 10 bytes or 64 bits
    return summaries if pos == end else None


def decode_dense_batch(header: BatchHeader, raw: memoryview) -> list[Record] | None:
    """The records of a batch, checked against its CRC and for offsets base..last with no gap
    or repeat (what we can rewrite safely); None when it fails either."""
    try:
        records = decode_batch_records(raw, verify_crc=True)
    except InvalidRecordBatch:
        return None
    if len(records) != header.last_offset_delta + 1:
        return None
    for delta, record in enumerate(records):
        if record.offset != header.base_offset + delta:
            return None
    return records


class AbortedRanges:
    """Which transactional batches are aborted: those inside an aborted transaction's range (its
    producer, first offset .. marker offset) of the aborted-transaction index. Below a pass's
    limit every other transactional batch is committed (the module docstring)."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._firsts: dict[int, list[int]] = {}
        self._lasts: dict[int, list[int]] = {}
        for entry in aborted:  # in increasing marker offset: a producer's ranges never overlap
            self._firsts.setdefault(entry.producer_id, []).append(entry.first_offset)
            self._lasts.setdefault(entry.producer_id, []).append(entry.last_offset)
        self.marker_offsets = frozenset(entry.last_offset for entry in aborted)  # their ABORT markers

    def holds(self, header: BatchHeader) -> bool:
        """Whether the (transactional, non-control) batch lies in an aborted transaction."""
        firsts = self._firsts.get(header.producer_id)
        if not firsts:
            return False
        slot = bisect_right(firsts, header.base_offset) - 1
        return slot >= 0 and header.last_offset < self._lasts[header.producer_id][slot]


def is_aborted(header: BatchHeader, aborted: AbortedRanges) -> bool:
    return header.is_transactional and not header.is_control and aborted.holds(header)


class OffsetMap:
    """Key -> offset of its latest record, built over the log range [start, end)."""

    def __init__(self, start: int, max_keys: int) -> None:
        assert max_keys >= 1
        self.start = start
        self.end = start
        self.max_keys = max_keys
        self.full = False  # the map stopped before the range it was asked to cover
        self.records_seen = 0
        self._latest: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._latest)

    def latest(self, key: bytes) -> int | None:
        return self._latest.get(key)

    def room_for(self, header: BatchHeader) -> bool:
        """Whether a batch surely fits (counting each record as a new key). The first batch is
        always taken, so a pass makes progress whatever max_keys is."""
        return not self._latest or len(self._latest) + header.records_count <= self.max_keys

    def add(self, header: BatchHeader, records: list[RecordSummary] | None) -> None:
        """Account a batch that ends the range covered so far (records None: not mapped, as
        control, aborted and unreadable batches are not)."""
        assert header.last_offset >= self.end, "batches must be added in offset order"
        for record in records or ():
            if record.key is not None and record.offset >= self.start:
                self._latest[record.key] = record.offset
        self.records_seen += header.records_count
        self.end = header.next_offset


@dataclass
class BatchVerdict:
    """What a pass does with one batch: keep it as it is (`keep`), drop it whole (`batches`
    empty), or replace it with `batches` (each a standard RecordBatch)."""

    keep: bool
    batches: list[bytes] = field(default_factory=list)
    removed: int = 0
    tombstones_removed: int = 0


KEEP = BatchVerdict(keep=True)


class RecordFilter:
    """Decides, batch by batch and in offset order from the start of the log, which records a
    pass keeps (see the module docstring for the rules)."""

    def __init__(
        self,
        offset_map: OffsetMap,
        *,
        tombstone_horizon_ms: int,
        producer_last_offsets: dict[int, int],
        max_kept_keys: int,
        aborted: AbortedRanges | None = None,
    ) -> None:
        self.offset_map = offset_map
        self.tombstone_horizon_ms = tombstone_horizon_ms  # tombstones (and markers) older may go
        self.producer_last_offsets = producer_last_offsets
        self.max_kept_keys = max_kept_keys
        self.aborted = aborted if aborted is not None else AbortedRanges([])
        # hash(key) of every keyed record kept so far in this pass, from the start of the log.
        self.kept_key_hashes: set[int] = set()
        self.tombstone_drops_allowed = True
        self.oldest_kept_tombstone_ms = NEVER
        self.unreadable_batches = 0
        self.markers_removed = 0
        self.last_offset = -1
        # Producers with a record of their current transaction kept since their last marker.
        self._txn_kept: set[int] = set()
        # ABORT markers with an index entry (in `aborted`) whose transaction this pass leaves
        # without a record: their entries go after the swaps.
        self.emptied_aborts: list[int] = []

    def _remember_kept(self, records: Iterable[RecordSummary]) -> None:
        if not self.tombstone_drops_allowed:
            return
        for record in records:
            if record.key is not None:
                self.kept_key_hashes.add(hash(record.key))
        self._check_kept_bound()

    def _check_kept_bound(self) -> None:
        if len(self.kept_key_hashes) > self.max_kept_keys:
            # Without the whole set a tombstone could go while an older value of its key stays.
            self.tombstone_drops_allowed = False
            self.kept_key_hashes.clear()

    def filter(self, header: BatchHeader, raw: memoryview, fallback_timestamp_ms: int) -> BatchVerdict:
        """The verdict for the batch `raw` (whose header is `header`). Records without a
        timestamp count as `fallback_timestamp_ms` old (their segment's age)."""
        assert header.base_offset > self.last_offset, "batches must come in offset order"
        self.last_offset = header.last_offset
        if header.is_control:
            return self._marker_verdict(header, fallback_timestamp_ms)
        verdict = self._data_verdict(header, raw, fallback_timestamp_ms)
        if header.is_transactional and (verdict.keep or verdict.batches):
            self._txn_kept.add(header.producer_id)
        return verdict

    def _marker_verdict(self, header: BatchHeader, fallback_timestamp_ms: int) -> BatchVerdict:
        """A control batch ends its producer's transaction: it goes once none of that
        transaction's records is left and it is older than the horizon."""
        if header.producer_id in self._txn_kept:
            self._txn_kept.discard(header.producer_id)
            return KEEP
        timestamp = header.max_timestamp if header.max_timestamp != NO_TIMESTAMP else fallback_timestamp_ms
        if header.base_offset in self.aborted.marker_offsets:
            # Its index entry goes first (after this pass's swaps), the marker in a later pass: a
            # read_committed consumer given an entry without its marker takes every later batch
            # of the producer for aborted (it waits for an ABORT marker), while a marker without
            # its entry, or an entry whose records are gone but marker stays, misleads nobody.
            self.emptied_aborts.append(header.base_offset)
            self.oldest_kept_tombstone_ms = min(self.oldest_kept_tombstone_ms, timestamp)
            return KEEP
        if timestamp < self.tombstone_horizon_ms:
            self.markers_removed += 1
            return BatchVerdict(keep=False, removed=header.records_count)
        self.oldest_kept_tombstone_ms = min(self.oldest_kept_tombstone_ms, timestamp)
        return KEEP

    def _data_verdict(self, header: BatchHeader, raw: memoryview, fallback_timestamp_ms: int) -> BatchVerdict:
        records = summarize_batch(header, raw)
        if records is None:
            self.unreadable_batches += 1
            self.tombstone_drops_allowed = False  # its keys are unknown: it may hold older values
            return KEEP
        aborted = is_aborted(header, self.aborted)

        keep = [not aborted] * len(records)
        expired = [False] * len(records)  # the records that go as expired tombstones
        candidate_oldest = NEVER
        kept_hashes = self.kept_key_hashes
        for slot, record in enumerate(records):
            if aborted or record.key is None:
                continue
            key_hash = hash(record.key)
            latest = self.offset_map.latest(record.key)
            if latest is not None and latest > record.offset:
                keep[slot] = False  # superseded by a newer record of its key
                continue
            if record.is_tombstone and self.tombstone_drops_allowed and key_hash not in kept_hashes:
                timestamp = record.timestamp if record.timestamp != NO_TIMESTAMP else fallback_timestamp_ms
                if timestamp < self.tombstone_horizon_ms:
                    keep[slot] = False
                    expired[slot] = True
                    continue
                candidate_oldest = min(candidate_oldest, timestamp)
            # Kept: from here on (later in this batch too) a tombstone of this key must stay.
            kept_hashes.add(key_hash)

        if not keep[-1] and self._is_producer_last_batch(header):
            keep[-1] = True
            expired[-1] = False
            self._remember_kept(records[-1:])
        tombstones_dropped = expired.count(True)
        if all(keep):
            self._check_kept_bound()
            self.oldest_kept_tombstone_ms = min(self.oldest_kept_tombstone_ms, candidate_oldest)
            return KEEP
        if not any(keep):
            self._check_kept_bound()
            return BatchVerdict(keep=False, removed=len(keep), tombstones_removed=tombstones_dropped)
        full_records = decode_dense_batch(header, raw)
        if full_records is None:  # record bodies only the full decoder rejects (clients can send any)
            self.unreadable_batches += 1
            self.tombstone_drops_allowed = False
            return KEEP
        batches = [_encode_run(header, run) for run in _runs(full_records, keep)]
        if sum(len(batch) for batch in batches) >= header.size:
            self._remember_kept(records)  # not worth a rewrite: the batch stays whole
            return KEEP
        self._check_kept_bound()
        self.oldest_kept_tombstone_ms = min(self.oldest_kept_tombstone_ms, candidate_oldest)
        return BatchVerdict(
            keep=False,
            batches=batches,
            removed=keep.count(False),
            tombstones_removed=tombstones_dropped,
        )

    def _is_producer_last_batch(self, header: BatchHeader) -> bool:
        if header.producer_id < 0 or header.base_sequence == NO_SEQUENCE:
            return False
        return self.producer_last_offsets.get(header.producer_id) == header.last_offset


def _runs(records: list[Record], keep: list[bool]) -> Iterator[list[Record]]:
    """Runs of kept records (consecutive offsets: the records of a dense batch are)."""
    run: list[Record] = []
    for record, kept in zip(records, keep, strict=True):
        if kept:
            run.append(record)
        elif run:
            yield run
            run = []
    if run:
        yield run


def _encode_run(original: BatchHeader, run: list[Record]) -> bytes:
    """One batch holding `run` (records with consecutive offsets) with the original's fields."""
    shift = run[0].offset - original.base_offset
    base_sequence = original.base_sequence
    if base_sequence != NO_SEQUENCE:
        base_sequence = (base_sequence + shift) % (MAX_SEQUENCE + 1)
    return build_batch(
        run,
        base_offset=run[0].offset,
        timestamp_ms=NO_TIMESTAMP,  # every record keeps its own timestamp (none stays none)
        producer_id=original.producer_id,
        producer_epoch=original.producer_epoch,
        base_sequence=base_sequence,
        compression=original.compression,
        partition_leader_epoch=original.partition_leader_epoch,
        timestamp_type=original.timestamp_type,
        is_transactional=original.is_transactional,
    )
