"""Transactions on the log side: control (marker) batches and the aborted-transaction index.

A transaction's end is written into each of its partitions as a control batch (Kafka's
`EndTransactionMarker`): transactional and control attributes, the transaction's producer id and
epoch, base sequence -1, one record whose key is (int16 version 0, int16 type: 0 ABORT, 1 COMMIT)
and whose value is (int16 version 0, int32 coordinator epoch). It occupies an offset; consumers
never deliver it.

The aborted-transaction index lists every aborted transaction of the partition that had data, in
increasing marker offset, as Kafka's `.txnindex` entries (34 bytes: int16 version 0, int64
producer id, int64 first offset, int64 last offset = the marker's, int64 last stable offset right
after the marker). Kafka keeps one such file per segment; Roost keeps one per partition,
`aborted-transactions.txnindex`, with the same entry layout, because offsets never change in a
log (compaction removes records but moves none), so one file cut at the log end on
truncation and trimmed below the log start serves every segment. Durability: the file is appended
without an fsync and fsynced before each producer-state snapshot is written; recovery replays the
batches after the snapshot, and the markers it meets put back any entry a crash lost; entries at
or past the recovered log end are dropped on open.
"""

from __future__ import annotations

import logging
import os
import struct
from bisect import bisect_left
from pathlib import Path
from typing import NamedTuple

from roost.log.files import atomic_write
from roost.wire.kafka.records import (
    NO_SEQUENCE,
    BatchHeader,
    InvalidRecordBatch,
    build_batch,
    decode_batch_records,
)

logger = logging.getLogger("roost.log")

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
_MARKER_KEY = struct.Struct(">hh")  # version, type
_MARKER_VALUE = struct.Struct(">hi")  # version, coordinator epoch

INDEX_FILE = "aborted-transactions.txnindex"
_ENTRY = struct.Struct(">hqqqq")
assert _ENTRY.size == 34


class Marker(NamedTuple):
    """What a control batch says: the transaction committed or aborted, and by which coordinator."""

    commit: bool
    coordinator_epoch: int


def build_marker(producer_id: int, producer_epoch: int, *, commit: bool, coordinator_epoch: int,
                 timestamp_ms: int) -> bytes:
    """One control batch ending `producer_id`'s transaction (what WriteTxnMarkers appends)."""
    key = _MARKER_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = _MARKER_VALUE.pack(0, coordinator_epoch)
    return build_batch([(key, value)], timestamp_ms=timestamp_ms, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE, is_transactional=True,
                       is_control=True)


def read_marker(header: BatchHeader, batch: bytes | memoryview) -> Marker | None:
    """The marker a control batch holds; None for a control record of another kind (KRaft's
    types 2-6) or one that cannot be read (it then ends nothing, as Kafka ignores unknown types)."""
    if not header.is_control:
        return None
    try:
        records = decode_batch_records(batch, verify_crc=False)
    except InvalidRecordBatch as error:
        logger.warning("unreadable control batch at offset %d: %s", header.base_offset, error)
        return None
    if len(records) != 1 or records[0].key is None or len(records[0].key) < _MARKER_KEY.size:
        return None
    _version, kind = _MARKER_KEY.unpack_from(records[0].key)
    if kind not in (CONTROL_ABORT, CONTROL_COMMIT):
        return None
    value = records[0].value or b""
    coordinator_epoch = _MARKER_VALUE.unpack_from(value)[1] if len(value) >= _MARKER_VALUE.size else -1
    return Marker(kind == CONTROL_COMMIT, coordinator_epoch)


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int  # the partition's LSO right after the marker


class AbortedIndex:
    """The aborted transactions of one partition, in memory and in `INDEX_FILE` (module docstring)."""

    def __init__(self, directory: Path, entries: list[AbortedTxn] | None = None) -> None:
        self.path = directory / INDEX_FILE
        self.entries: list[AbortedTxn] = entries or []
        self._lasts = [entry.last_offset for entry in self.entries]
        self._fd: int | None = None
        self._dirty = False

    @classmethod
    def load(cls, directory: Path, log_start_offset: int, log_end_offset: int) -> AbortedIndex:
        """The index file, cut to the log's range (a torn last entry is dropped)."""
        entries: list[AbortedTxn] = []
        path = directory / INDEX_FILE
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = b""
        whole = len(data) - len(data) % _ENTRY.size
        for pos in range(0, whole, _ENTRY.size):
            version, *fields = _ENTRY.unpack_from(data, pos)
            entry = AbortedTxn(*fields)
            if version != 0 or (entries and entry.last_offset <= entries[-1].last_offset):
                logger.warning("aborted-transaction index %s is damaged at byte %d: cut there", path, pos)
                break
            entries.append(entry)
        kept = [e for e in entries if log_start_offset <= e.last_offset < log_end_offset]
        index = cls(directory, kept)
        if len(kept) != len(entries) or whole != len(data) or len(kept) * _ENTRY.size != len(data):
            index._rewrite()
        return index

    def append(self, entry: AbortedTxn) -> None:
        """An ABORT marker was appended; entries come in increasing marker offset, and a marker
        met again (recovery replaying what the file already holds) is not added twice."""
        if self._lasts and entry.last_offset <= self._lasts[-1]:
            return
        self.entries.append(entry)
        self._lasts.append(entry.last_offset)
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self._fd, _ENTRY.pack(0, *entry))
        self._dirty = True

    def sync(self) -> None:
        """Make every entry durable (before a producer snapshot says their markers are applied)."""
        if self._fd is not None and self._dirty:
            os.fsync(self._fd)
            self._dirty = False

    def truncate(self, end_offset: int) -> None:
        """Drop the entries whose marker is at or past `end_offset` (the log was cut there)."""
        cut = bisect_left(self._lasts, end_offset)
        if cut < len(self.entries):
            del self.entries[cut:], self._lasts[cut:]
            self._rewrite()

    def trim_below(self, log_start_offset: int) -> None:
        """Forget the transactions whose marker lies below the log start."""
        cut = bisect_left(self._lasts, log_start_offset)
        if cut:
            del self.entries[:cut], self._lasts[:cut]
            self._rewrite()

    def drop(self, marker_offsets: list[int]) -> None:
        """Forget the aborted transactions whose markers are at `marker_offsets` (the cleaner left
        them without records); the file is rewritten durably."""
        doomed = set(marker_offsets)
        kept = [entry for entry in self.entries if entry.last_offset not in doomed]
        if len(kept) != len(self.entries):
            self.entries = kept
            self._lasts = [entry.last_offset for entry in kept]
            self._rewrite()

    def collect(self, fetch_offset: int, upper: int) -> list[AbortedTxn]:
        """The aborted transactions a read of [fetch_offset, upper) may hold data of: marker at or
        past `fetch_offset`, first offset below `upper`."""
        start = bisect_left(self._lasts, fetch_offset)
        return [entry for entry in self.entries[start:] if entry.first_offset < upper]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _rewrite(self) -> None:
        self.close()
        if not self.entries:
            self.path.unlink(missing_ok=True)
        else:
            atomic_write(self.path, b"".join(_ENTRY.pack(0, *entry) for entry in self.entries))
        self._dirty = False
