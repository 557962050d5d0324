"""Log compaction (Kafka's cleanup.policy=compact) for one partition log.

A pass (`clean_log`, called through `PartitionLog.clean`):

1. Decide whether it is worth it: the dirty ratio (bytes of cleanable segments not yet cleaned,
   over all cleanable bytes) must reach `min_cleanable_ratio`, or a kept tombstone must have
   become old enough to go. Cleanable = every segment before the active one (and, with a high
   watermark, wholly below it). The "clean point" (first offset not yet cleaned) and the oldest
   kept tombstone's timestamp live in `cleaner-offset-checkpoint`, so a call that finds nothing
   to do costs no I/O.
2. Build the offset map: key -> offset of its latest record, scanning from the clean point to the
   high watermark (the active segment included: its keys are newer). The map holds at most
   `max_keys` keys; when it is full the pass ends the map at a batch boundary and cleans only the
   prefix of the log it covers (the next pass continues from there).
3. Rewrite the cleanable segments from the start of the log in groups (consecutive segments whose
   sizes add up to at most segment.bytes merge into one), keeping for every key only its latest
   record; keyless records stay; a tombstone stays until its timestamp is more than
   `delete_retention_ms` old. Each group goes to a temp file, is fsynced, then swapped in by
   renames (see `_swap`).

Offsets never change. A batch that loses some records is rewritten as one batch per run of
consecutive surviving offsets (its first batch's base offset = the first surviving offset), so
every batch stays a standard one (lastOffsetDelta + 1 == recordsCount), which every reader of
our own logs and every Kafka client accepts; gaps lie between batches. Kafka itself keeps a
rewritten batch's base and last offsets and leaves the gaps inside it; we cannot, because our
RecordBatch checks (recovery, replication) insist on dense batches.

Rewritten batches keep the original's producer id and epoch, partition leader epoch, timestamp
type, each record's timestamp, headers and codec (they are recompressed with it, as Kafka does);
a run's base sequence is shifted by its distance from the original base offset, so each offset
keeps its sequence number. A rewrite that would not be smaller than the original batch is not
done (the batch is kept whole), so a cleaned segment is never larger than its sources.

Transactions (as Kafka's cleaner): a pass never reaches the first unstable offset (the first
offset of a transaction not yet decided, or decided by a marker the high watermark does not yet
cover), so every transactional batch it sees is decided, and the aborted-transaction index says
which: a batch inside an aborted transaction's range (same producer, first offset .. marker) is
aborted, any other committed. Aborted records never enter the map and are removed; committed
ones are compacted like any record (a rewritten run stays transactional). A control batch (a
COMMIT or ABORT marker) goes once no record of its transaction is left before it and the marker
is older than `delete_retention_ms` (the time a consumer has to read past it); until then it
stays, and its age counts like a kept tombstone's for the next pass's trigger. An ABORT marker
goes one pass after its index entry: a pass that leaves an aborted transaction without records
drops its entry once its swaps are durable, and only a later pass removes the marker. The order
matters to read_committed consumers: given an entry, a consumer counts every later batch of the
producer as aborted until it meets an ABORT marker, so an entry must never outlive its marker
(Kafka's cleaner likewise rebuilds each cleaned segment's index). Offsets never move, so the
other entries stay valid.

Kept as they are, never rewritten: batches that fail their CRC or cannot be decoded (a codec
library missing). The last batch of each idempotent producer keeps its last record, so the
producer's last sequence survives a rebuild of the producer state from the batch headers (Kafka
keeps that batch, emptied, for the same reason); a transaction one of whose records stays keeps
its marker, so such a rebuild never meets a transaction without its end.

Tombstone safety: a tombstone may go only when no older record of its key survives (else that
older value would come back to life). Older values may survive on purpose (kept whole batches,
transactional batches, producer-last records) or because the map of the pass that removes the
tombstone does not reach back to them, so a pass checks it directly: it rewrites from the start
of the log in offset order and remembers a hash of the key of every record it keeps; a tombstone
whose key hash is among them stays (a hash collision only keeps a tombstone longer). Past
`max_keys` remembered keys, or after a batch it cannot read, a pass drops no tombstone at all.

Durability and crashes: before the first swap a pass fsyncs every segment its map read (a
power cut must not keep the removal but lose the newer record that justified it). A swap is
crash-safe at every step (see `_swap`; opening the log deletes temp files, rebuilds missing
indexes and drops segments a merged segment already covers). The clean point is written only
after the whole pass, so a pass cut short is simply redone.

Simplifications against Kafka: tombstones expire by their own record timestamp (Kafka 3 uses a
delete horizon stamped on the batch when it is first cleaned); min.compaction.lag.ms and
max.compaction.lag.ms are not implemented; records below the log start (DeleteRecords inside the
first segment) are left as they are; a pass runs on the caller's thread. Cost: about 50 ms per
MB of log on this machine for the first pass over small records (both phases read every record;
bench/log_bench.py), and a pass rereads the whole cleanable log, as Kafka's cleaner does.
"""

from __future__ import annotations

import logging
import os
import re
import time
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol

from roost.log.config import NEVER, LogConfig
from roost.log.files import TEMP_SUFFIX, atomic_write, fsync_directory
from roost.log.producer_state import ProducerStateManager
from roost.log.segment import INT32_MAX, Segment
from roost.log.transactions import AbortedIndex, AbortedTxn
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
    parse_header,
    read_varint,
)


class CleanableLog(Protocol):
    """What a pass needs of a partition log (PartitionLog is one): its segments and bookkeeping,
    and a way to put a cleaned segment in place of the ones it replaces."""

    directory: Path
    config: LogConfig
    segments: list[Segment]
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    producer_state: ProducerStateManager
    aborted_index: AbortedIndex
    cleaner_checkpoint: CleanerCheckpoint

    def replace_segments(self, old: list[Segment], new: Segment | None) -> None: ...

logger = logging.getLogger("roost.log.cleaner")

CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
CLEANED_SUFFIX = ".cleaned" + TEMP_SUFFIX  # opening a log deletes leftovers (they end in .tmp)
DEFAULT_MAX_KEYS = 1_000_000  # a few hundred bytes each with small keys: ~100-200 MB at most
DEFAULT_DELETE_RETENTION_MS = 86_400_000  # Kafka's delete.retention.ms
DEFAULT_MIN_CLEANABLE_RATIO = 0.5  # Kafka's min.cleanable.dirty.ratio
_WRITE_BUFFER_BYTES = 1 << 20


# ---------------------------------------------------------------------------------------------
# results and the checkpoint


@dataclass
class CleanStats:
    """What one `clean` call did. `cleaned` is False when it decided the log was not worth it
    (`reason` says why); the byte and record counts then stay 0."""

    cleaned: bool = False
    reason: str = ""
    dirty_ratio: float = 0.0
    clean_point: int = 0  # first offset not cleaned, after the call
    map_end: int = 0  # the offset map covered [previous clean point, map_end)
    map_full: bool = False  # max_keys stopped the map before the high watermark
    keys: int = 0
    segments_before: int = 0  # cleanable segments rewritten, and what replaced them
    segments_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    bytes_read: int = 0  # every byte read: the map's scan plus the rewritten segments
    records_removed: int = 0
    tombstones_removed: int = 0
    markers_removed: int = 0  # control batches (their records count in records_removed too)
    batches_rewritten: int = 0
    duration_s: float = 0.0


@dataclass(frozen=True)
class CleanerCheckpoint:
    """Where the last complete pass left the log (persisted in CLEANER_CHECKPOINT_FILE)."""

    clean_point: int = 0
    # Timestamp of the oldest tombstone a pass kept only because it was too young (and that a
    # later pass may drop): once it is old enough a pass runs whatever the dirty ratio.
    oldest_tombstone_ms: int = NEVER

    def to_bytes(self) -> bytes:
        return b"%d %d\n" % (self.clean_point, self.oldest_tombstone_ms)

    @classmethod
    def from_bytes(cls, data: bytes) -> CleanerCheckpoint | None:
        """None for anything but two integers and a newline (a torn write never parses)."""
        match = _CHECKPOINT_FORMAT.fullmatch(data)
        if match is None:
            return None
        clean_point, oldest = int(match[1]), int(match[2])
        return cls(clean_point, oldest) if clean_point >= 0 else None


_CHECKPOINT_FORMAT = re.compile(rb"(-?[0-9]+) (-?[0-9]+)\n")


def read_cleaner_checkpoint(directory: Path) -> CleanerCheckpoint:
    """The checkpoint in `directory`; the start (nothing cleaned) when missing or unreadable."""
    try:
        data = (directory / CLEANER_CHECKPOINT_FILE).read_bytes()
    except FileNotFoundError:
        return CleanerCheckpoint()
    checkpoint = CleanerCheckpoint.from_bytes(data)
    if checkpoint is None:
        logger.warning("ignoring unreadable %s in %s", CLEANER_CHECKPOINT_FILE, directory)
        return CleanerCheckpoint()
    return checkpoint


def write_cleaner_checkpoint(directory: Path, checkpoint: CleanerCheckpoint) -> None:
    # Durable: a pass may drop a tombstone below the clean point only because an earlier,
    # complete pass removed the older records of its key. A lost checkpoint is harmless (the
    # next pass recleans more); a too high one is impossible, it is written after the pass.
    atomic_write(directory / CLEANER_CHECKPOINT_FILE, checkpoint.to_bytes())


# ---------------------------------------------------------------------------------------------
# the sans-IO core: the offset map and the record filter


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
        indexed_aborts: frozenset[int] = frozenset(),
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
        # ABORT markers with an entry in the aborted-transaction index, and those of them whose
        # transaction this pass leaves without a record (their entries go after the swaps).
        self.indexed_aborts = indexed_aborts
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
        if header.base_offset in self.indexed_aborts:
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


# ---------------------------------------------------------------------------------------------
# the shell: deciding, scanning, writing and swapping segments


@dataclass
class _Plan:
    limit: int  # offsets at or above are neither mapped nor cleaned (high watermark, first unstable)
    cleanable: list[Segment]
    clean_point: int
    dirty_ratio: float
    reason: str  # why a pass runs, or why not


def _plan(
    log: CleanableLog, now_ms: int, delete_retention_ms: int, min_ratio: float, hw: int | None
) -> _Plan:
    checkpoint = log.cleaner_checkpoint
    limit = log.log_end_offset if hw is None else min(hw, log.log_end_offset)
    # Never past an undecided transaction: whether its records stay is not known yet.
    unstable = log.producer_state.first_unstable_offset(limit)
    if unstable is not None:
        limit = min(limit, unstable)
    cleanable = [
        s for s, after in zip(log.segments, log.segments[1:], strict=False) if after.base_offset <= limit
    ]
    clean_point = min(max(checkpoint.clean_point, log.log_start_offset), log.log_end_offset)
    total = sum(segment.size for segment in cleanable)
    dirty = sum(
        segment.size
        for segment, after in zip(cleanable, log.segments[1:], strict=False)
        if after.base_offset > clean_point
    )
    ratio = dirty / total if total else 0.0
    plan = _Plan(limit, cleanable, clean_point, ratio, "")
    if not total:
        plan.reason = (
            "nothing cleanable (no data below the active segment, the high watermark and the first "
            "unstable offset)"
        )
    elif dirty and ratio >= min_ratio:
        plan.reason = f"dirty ratio {ratio:.2f} >= {min_ratio}"
    elif (
        checkpoint.oldest_tombstone_ms != NEVER
        and now_ms - checkpoint.oldest_tombstone_ms > delete_retention_ms
    ):
        plan.reason = "tombstones past delete.retention.ms"
    else:
        plan.cleanable = []
        plan.reason = f"dirty ratio {ratio:.2f} below {min_ratio}"
    if not total:
        plan.cleanable = []
    return plan


def clean_log(
    log: CleanableLog,
    now_ms: int,
    *,
    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS,
    min_cleanable_ratio: float = DEFAULT_MIN_CLEANABLE_RATIO,
    high_watermark: int | None = None,
    max_keys: int = DEFAULT_MAX_KEYS,
) -> CleanStats:
    """One compaction pass over `log` if it is worth it; see the module docstring."""
    assert delete_retention_ms >= 0 and 0.0 <= min_cleanable_ratio <= 1.0 and max_keys >= 1
    started = time.monotonic()
    plan = _plan(log, now_ms, delete_retention_ms, min_cleanable_ratio, high_watermark)
    stats = CleanStats(reason=plan.reason, dirty_ratio=plan.dirty_ratio, clean_point=plan.clean_point)
    if not plan.cleanable:
        return stats

    aborted = AbortedRanges(log.aborted_index.collect(log.log_start_offset, plan.limit))
    offset_map = _build_offset_map(log, plan, max_keys, aborted, stats)
    stats.map_end, stats.map_full, stats.keys = offset_map.end, offset_map.full, len(offset_map)
    # Rewrite every cleanable segment the map reaches; records past the map's end are kept.
    targets = [s for s in plan.cleanable if s.base_offset < offset_map.end]
    assert targets, "the map covers at least one batch past the clean point"
    boundary = log.segments[log.segments.index(targets[-1]) + 1].base_offset
    new_clean_point = min(offset_map.end, boundary)

    # A record may go only once the records that replace it are durable (a power cut must not
    # lose the newer value after the older one was removed): fsync what the map read.
    for segment in log.segments:
        if segment.size and segment.next_offset > log.recovery_point and segment.base_offset < offset_map.end:
            os.fsync(segment.log_fd)
    # Likewise the index entries that make records aborted (recovery would put them back from
    # the markers, but only while the records before a marker are still there).
    log.aborted_index.sync()

    record_filter = RecordFilter(
        offset_map,
        tombstone_horizon_ms=now_ms - delete_retention_ms,
        # The last data batch (markers carry no sequence): what a rebuild takes the sequence from.
        producer_last_offsets={
            pid: entry.batches[-1].last_offset for pid, entry in log.producer_state.producers.items() if entry.batches
        },
        max_kept_keys=max_keys,
        aborted=aborted,
        indexed_aborts=frozenset(entry.last_offset for entry in log.aborted_index.entries),
    )
    stats.segments_before = len(targets)
    stats.bytes_before = sum(s.size for s in targets)
    for group in _groups(targets, log.config.segment_bytes):
        after = _clean_group(log, group, record_filter, now_ms, stats)
        stats.segments_after += len(after)
        stats.bytes_after += sum(s.size for s in after)

    # The emptied aborted transactions' entries go only now that their records are durably gone
    # (a crash before this leaves entries whose records are gone: harmless, the next pass drops them).
    log.aborted_index.drop(record_filter.emptied_aborts)

    oldest = record_filter.oldest_kept_tombstone_ms if record_filter.tombstone_drops_allowed else NEVER
    checkpoint = CleanerCheckpoint(new_clean_point, oldest)
    write_cleaner_checkpoint(log.directory, checkpoint)
    log.cleaner_checkpoint = checkpoint
    stats.cleaned = True
    stats.markers_removed = record_filter.markers_removed
    stats.clean_point = new_clean_point
    stats.duration_s = time.monotonic() - started
    if record_filter.unreadable_batches:
        logger.warning(
            "cleaner kept %d unreadable batches of %s as they are (and no tombstone went)",
            record_filter.unreadable_batches,
            log.directory,
        )
    logger.info(
        "cleaned %s (%s): %d segments of %d bytes -> %d of %d; %d records and %d tombstones removed; "
        "%d keys mapped up to offset %d%s; clean point %d; %.3fs",
        log.directory,
        plan.reason,
        stats.segments_before,
        stats.bytes_before,
        stats.segments_after,
        stats.bytes_after,
        stats.records_removed,
        stats.tombstones_removed,
        stats.keys,
        stats.map_end,
        " (map full)" if stats.map_full else "",
        new_clean_point,
        stats.duration_s,
    )
    return stats


def _build_offset_map(
    log: CleanableLog, plan: _Plan, max_keys: int, aborted: AbortedRanges, stats: CleanStats
) -> OffsetMap:
    """Scan from the clean point up to the limit (the active segment too), key by key."""
    offset_map = OffsetMap(plan.clean_point, max_keys)
    for segment in log.segments:
        if segment.next_offset <= plan.clean_point or not segment.size:
            continue
        start = segment.offset_index.lookup(plan.clean_point) if plan.clean_point > segment.base_offset else 0
        for _position, header, raw in segment.iter_batches(start):
            if header.last_offset < plan.clean_point:
                continue
            if header.last_offset >= plan.limit:
                return offset_map
            if not offset_map.room_for(header):
                offset_map.full = True
                return offset_map
            stats.bytes_read += header.size
            mapped = not header.is_control and not is_aborted(header, aborted)
            offset_map.add(header, summarize_batch(header, raw) if mapped else None)
    return offset_map


def _groups(segments: list[Segment], segment_bytes: int) -> Iterator[list[Segment]]:
    """Consecutive segments that fit one segment together (in bytes and in int32 offsets)."""
    max_bytes = min(segment_bytes, INT32_MAX)
    group: list[Segment] = []
    size = 0
    for segment in segments:
        fits = (
            size + segment.size <= max_bytes
            and segment.next_offset - 1 - (group[0].base_offset if group else segment.base_offset)
            <= INT32_MAX
        )
        if group and not fits:
            yield group
            group, size = [], 0
        group.append(segment)
        size += segment.size
    if group:
        yield group


class _SegmentWriter:
    """Appends batches to a new segment through a buffer (one pwrite per megabyte or so)."""

    def __init__(self, segment: Segment, index_interval_bytes: int) -> None:
        self.segment = segment
        self.index_interval_bytes = index_interval_bytes
        self.buffer = bytearray()
        self.batches: list[tuple[int, BatchHeader]] = []

    def add(self, data: bytes | memoryview, header: BatchHeader) -> None:
        self.batches.append((len(self.buffer), header))
        self.buffer += data
        if len(self.buffer) >= _WRITE_BUFFER_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.batches:
            self.segment.append(memoryview(self.buffer), self.batches, self.index_interval_bytes)
        self.buffer = bytearray()
        self.batches = []


def _clean_group(
    log: CleanableLog, group: list[Segment], record_filter: RecordFilter, now_ms: int, stats: CleanStats
) -> list[Segment]:
    """Write the cleaned form of `group` and swap it in; returns the segments now in its place
    (the group itself when nothing changed, none when nothing was left)."""
    base = group[0].base_offset
    new = Segment.create_temp(log.directory, base, now_ms, CLEANED_SUFFIX)
    temp_paths = new.paths  # only these names are ever removed here, whatever fails
    swapped = False
    try:
        writer = _SegmentWriter(new, log.config.index_interval_bytes)
        changed = len(group) > 1
        for segment in group:
            fallback_timestamp = segment.largest_timestamp()
            for _position, header, raw in segment.iter_batches():
                stats.bytes_read += header.size
                verdict = record_filter.filter(header, raw, fallback_timestamp)
                if verdict.keep:
                    writer.add(raw, header)
                    continue
                changed = True
                stats.records_removed += verdict.removed
                stats.tombstones_removed += verdict.tombstones_removed
                stats.batches_rewritten += 1
                for batch in verdict.batches:
                    writer.add(batch, parse_header(batch))
        writer.flush()
        if not changed:
            return group
        assert new.size <= sum(s.size for s in group), "a cleaned segment never grows"
        if new.size == 0 and group[0] is not log.segments[0]:
            # Nothing left: the segments just go (the first segment of the log stays, even
            # empty, since it holds the log start). A crash midway leaves some old segments,
            # which is harmless: they hold only what this pass would have removed.
            for segment in group:
                segment.delete_files()
            fsync_directory(log.directory)
            log.replace_segments(group, None)
            return []
        new.on_roll()  # the final time-index entry, as for any segment that is not active
        new.fsync()
        _swap(log, group, new)
        swapped = True
        return [new]
    finally:
        if not swapped:
            new.close()
            for path in temp_paths:
                path.unlink(missing_ok=True)


def _swap(log: CleanableLog, group: list[Segment], new: Segment) -> None:
    """Replace the files of `group` with the fsynced temp segment `new`, crash-safely:

    1. delete the first segment's index files (durably): from here until step 2 ends, a crash
       leaves a log file (old or new, each whole) without indexes, which opening rebuilds;
    2. rename the new log, then its indexes, over the first segment's names;
    3. delete the group's other segments. A crash before that leaves them next to the new
       segment; opening the log deletes every segment that starts below the end of the one
       before it (the new one holds all they had left to keep).

    The old files' inodes live on for any read views of them until those are gone."""
    for path in (group[0].index_path, group[0].time_index_path):
        path.unlink(missing_ok=True)
    fsync_directory(log.directory)
    new.promote()
    fsync_directory(log.directory)
    for segment in group[1:]:
        segment.delete_files()
    fsync_directory(log.directory)
    log.replace_segments(group, new)
