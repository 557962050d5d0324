"""Idempotent producer state of one partition: epochs and sequence numbers per producer id.

The core (`ProducerStateManager`) is a plain object fed with batch headers; the snapshot helpers
at the bottom read and write its `<offset>.snapshot` files.

Rules (Apache Kafka 3.x `ProducerStateManager` / `ProducerAppendInfo`), checked in this order:

1. Duplicate: a batch with the producer's current epoch and the same first and last sequence as
   one of the producer's last 5 batches is a retry. The broker acknowledges it with the original
   offsets and appends nothing.
2. Epoch: an epoch older than the producer's current one -> INVALID_PRODUCER_EPOCH (47).
3. Sequence: with a newer epoch the batch must start at sequence 0, unless the producer is unknown;
   with the same epoch the first sequence must follow the last one (2**31-1 wraps to 0), else
   OUT_OF_ORDER_SEQUENCE_NUMBER (45).

Unknown producers: Kafka 3 (since KIP-360) accepts any first sequence from a producer id it has no
state for, because that state may have been removed legitimately (retention, DeleteRecords), and
no longer answers UNKNOWN_PRODUCER_ID (59). Roost does the same.

Transactions (Kafka's `ProducerStateManager`): a producer's transaction on this partition is open
from its first transactional batch after its previous marker (`current_txn_first_offset`) until a
control batch (COMMIT or ABORT marker) ends it. The first unstable offset is the smallest first
offset among open transactions and decided ones whose marker the high watermark does not cover
yet (a new leader may lack that marker: until it is replicated the transaction stays unstable, so
the last stable offset never goes back across a leader change). Markers are checked by
`check_marker`: an older producer epoch is INVALID_PRODUCER_EPOCH, an older coordinator epoch
TRANSACTION_COORDINATOR_FENCED.
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import crc32c

from roost.log.files import atomic_write, offset_file_name, parse_offset_file_name
from roost.log.transactions import Marker
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import MAX_SEQUENCE, NO_SEQUENCE, BatchHeader

BATCHES_KEPT = 5  # Kafka keeps the metadata of the last 5 batches: the client's max in-flight

logger = logging.getLogger("roost.log")


@dataclass(frozen=True)
class Duplicate:
    """A retried batch already in the log at `first_offset`..`last_offset`."""

    first_offset: int
    last_offset: int = -1


class Ok:
    """The batch may be appended."""

    _instance: Ok | None = None

    def __new__(cls) -> Ok:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "OK"


OK = Ok()
CheckResult = Duplicate | Ok | ErrorCode


@dataclass(frozen=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))
    last_timestamp: int = -1
    current_txn_first_offset: int = -1  # first offset of its open transaction here, -1 for none
    coordinator_epoch: int = -1  # of the last marker written for it
    last_marker_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        last = self.batches[-1].last_offset if self.batches else -1
        return max(last, self.last_marker_offset, self.current_txn_first_offset)

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


class CompletedTxn(NamedTuple):
    """A transaction a marker ended on this partition."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    aborted: bool


# Decided transactions whose marker is not below the high watermark yet are remembered until it is;
# past this many (a follower never asked for its LSO) the oldest are dropped.
MAX_UNREPLICATED_KEPT = 10_000


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_SEQUENCE)


def _is_idempotent(header: BatchHeader) -> bool:
    return header.producer_id >= 0 and header.base_sequence != NO_SEQUENCE


class ProducerStateManager:
    """Per-producer epoch and last batches, rebuilt from batch headers alone."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        # Every batch below this offset has been applied: where a snapshot of this state stands.
        self.map_end_offset = 0
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        # (first offset, marker offset) of decided transactions, in marker order, until the high
        # watermark passes their marker.
        self.unreplicated: deque[tuple[int, int]] = deque(maxlen=MAX_UNREPLICATED_KEPT)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self.producers.get(producer_id)

    def check(self, header: BatchHeader) -> CheckResult:
        """Whether an incoming (client) batch may be appended; see the module docstring."""
        if not _is_idempotent(header) or header.is_control:
            return OK
        entry = self.producers.get(header.producer_id)
        if entry is None:
            return OK
        duplicate = entry.find_duplicate(header.producer_epoch, header.base_sequence, header.last_sequence)
        if duplicate is not None:
            return Duplicate(duplicate.first_offset, duplicate.last_offset)
        if header.producer_epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if header.producer_epoch > entry.epoch:
            if header.base_sequence != 0:
                return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            return OK
        if not _in_sequence(entry.last_seq, header.base_sequence):
            return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        return OK

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> ErrorCode:
        """Whether a transaction marker from the coordinator may be appended."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return ErrorCode.NONE
        if producer_epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if coordinator_epoch < entry.coordinator_epoch:
            return ErrorCode.TRANSACTION_COORDINATOR_FENCED
        return ErrorCode.NONE

    def update(self, header: BatchHeader, first_offset: int, marker: Marker | None = None) -> CompletedTxn | None:
        """Record a batch appended at `first_offset` (its header's own base offset may be stale);
        `marker` is what a control batch says. Returns the transaction a marker ended, if any."""
        assert first_offset >= self.map_end_offset, "producer state fed an offset it already has"
        last_offset = first_offset + header.last_offset_delta
        self.map_end_offset = last_offset + 1
        if header.producer_id < 0:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = ProducerEntry(header.producer_id, header.producer_epoch)
            self.producers[header.producer_id] = entry
        elif header.producer_epoch > entry.epoch:
            # A new epoch starts a fresh sequence: older batches can no longer be duplicates.
            entry.epoch = header.producer_epoch
            entry.batches.clear()
        entry.last_timestamp = max(entry.last_timestamp, header.max_timestamp)
        if header.is_control:
            return self._end_transaction(entry, marker, first_offset) if marker is not None else None
        if header.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self.ongoing[entry.producer_id] = first_offset
        if header.base_sequence == NO_SEQUENCE:
            return None
        entry.batches.append(
            BatchMetadata(
                header.base_sequence, header.last_sequence, first_offset, last_offset, header.max_timestamp
            )
        )
        return None

    def _end_transaction(self, entry: ProducerEntry, marker: Marker, offset: int) -> CompletedTxn | None:
        entry.coordinator_epoch = max(entry.coordinator_epoch, marker.coordinator_epoch)
        entry.last_marker_offset = offset
        first = entry.current_txn_first_offset
        if first < 0:
            return None  # no data of its transaction here: only the producer's state moves
        entry.current_txn_first_offset = -1
        del self.ongoing[entry.producer_id]
        self.unreplicated.append((first, offset))
        return CompletedTxn(entry.producer_id, first, offset, not marker.commit)

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The smallest offset a read_committed consumer may not read past (module docstring)."""
        unreplicated = self.unreplicated
        while unreplicated and unreplicated[0][1] < high_watermark:
            unreplicated.popleft()
        candidates = [first for first, _marker in unreplicated]
        if self.ongoing:
            candidates.append(min(self.ongoing.values()))
        return min(candidates) if candidates else None

    def last_stable_offset(self, high_watermark: int) -> int:
        unstable = self.first_unstable_offset(high_watermark)
        return high_watermark if unstable is None else min(unstable, high_watermark)

    def stable_offset_after_marker(self, marker_offset: int) -> int:
        """What Kafka's index entry records: the first offset of the next open transaction, else
        the offset after the marker."""
        return min(self.ongoing.values()) if self.ongoing else marker_offset + 1

    def remove_before(self, log_start_offset: int) -> int:
        """Forget producers whose every batch lies below the log start; returns how many."""
        gone = [pid for pid, entry in self.producers.items()
                if entry.last_offset < log_start_offset and entry.current_txn_first_offset < 0]
        for pid in gone:
            del self.producers[pid]
        return len(gone)

    # ---- snapshot encoding: version int16, crc32c uint32 of the rest, map_end_offset int64,
    # ---- count int32, then per producer: pid int64, epoch int16, last_timestamp int64,
    # ---- batch count int8, (version 2:) current txn first offset int64, coordinator epoch int32,
    # ---- last marker offset int64, then batches (first_seq int32, last_seq int32, first/last
    # ---- offset int64, timestamp int64). Version 1 (no transactions) is still read.

    def to_bytes(self) -> bytes:
        body = bytearray(_BODY_HEAD.pack(self.map_end_offset, len(self.producers)))
        for entry in self.producers.values():
            body += _ENTRY.pack(entry.producer_id, entry.epoch, entry.last_timestamp, len(entry.batches))
            body += _TXN.pack(entry.current_txn_first_offset, entry.coordinator_epoch, entry.last_marker_offset)
            for batch in entry.batches:
                body += _BATCH.pack(
                    batch.first_seq, batch.last_seq, batch.first_offset, batch.last_offset, batch.timestamp
                )
        return _FILE_HEAD.pack(_VERSION, crc32c.crc32c(body)) + bytes(body)

    @classmethod
    def from_bytes(cls, data: bytes) -> ProducerStateManager:
        """Decode a snapshot; raises ValueError when it is damaged."""
        if len(data) < _FILE_HEAD.size + _BODY_HEAD.size:
            raise ValueError("producer snapshot truncated")
        version, crc = _FILE_HEAD.unpack_from(data, 0)
        body = memoryview(data)[_FILE_HEAD.size :]
        if version not in (_VERSION_1, _VERSION) or crc32c.crc32c(body) != crc:
            raise ValueError("producer snapshot version or CRC does not match")
        manager = cls()
        manager.map_end_offset, count = _BODY_HEAD.unpack_from(body, 0)
        if count < 0:
            raise ValueError(f"producer snapshot has a negative producer count {count}")
        pos = _BODY_HEAD.size
        try:
            for _ in range(count):
                pid, epoch, last_timestamp, batch_count = _ENTRY.unpack_from(body, pos)
                pos += _ENTRY.size
                # What to_bytes never writes is damage, not something to merge or cut silently.
                if not 0 <= batch_count <= BATCHES_KEPT or pid in manager.producers:
                    raise ValueError(f"producer snapshot has producer {pid} twice or with {batch_count} batches")
                entry = ProducerEntry(pid, epoch, last_timestamp=last_timestamp)
                if version >= _VERSION:
                    (entry.current_txn_first_offset, entry.coordinator_epoch,
                     entry.last_marker_offset) = _TXN.unpack_from(body, pos)
                    pos += _TXN.size
                    if entry.current_txn_first_offset >= 0:
                        manager.ongoing[pid] = entry.current_txn_first_offset
                for _ in range(batch_count):
                    entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                    pos += _BATCH.size
                manager.producers[pid] = entry
        except struct.error as error:
            raise ValueError(f"producer snapshot truncated: {error}") from None
        if pos != len(body):
            raise ValueError("producer snapshot has trailing bytes")
        return manager


_VERSION_1 = 1
_VERSION = 2
_FILE_HEAD = struct.Struct(">hI")
_BODY_HEAD = struct.Struct(">qi")
_ENTRY = struct.Struct(">qhqb")
_BATCH = struct.Struct(">iiqqq")
_TXN = struct.Struct(">qiq")
SNAPSHOT_SUFFIX = ".snapshot"


# ---- snapshot files -------------------------------------------------------------------------


def snapshot_offsets(directory: Path) -> list[int]:
    """Offsets of the snapshot files in `directory`, ascending."""
    offsets = []
    for name in os.listdir(directory):
        offset = parse_offset_file_name(name, SNAPSHOT_SUFFIX)
        if offset is not None:
            offsets.append(offset)
    return sorted(offsets)


def write_snapshot(directory: Path, state: ProducerStateManager) -> Path:
    """Write `state` as `<map_end_offset>.snapshot`, crash-safely."""
    path = directory / offset_file_name(state.map_end_offset, SNAPSHOT_SUFFIX)
    atomic_write(path, state.to_bytes())
    return path


def load_latest_snapshot(directory: Path, max_offset: int) -> ProducerStateManager | None:
    """The newest readable snapshot at or below `max_offset`; snapshots above it (a log tail
    that recovery cut, or a truncation) and damaged ones are deleted."""
    for offset in reversed(snapshot_offsets(directory)):
        path = directory / offset_file_name(offset, SNAPSHOT_SUFFIX)
        if offset > max_offset:
            path.unlink(missing_ok=True)
            continue
        try:
            state = ProducerStateManager.from_bytes(path.read_bytes())
        except (OSError, ValueError) as error:
            logger.warning("ignoring damaged producer snapshot %s: %s", path, error)
            path.unlink(missing_ok=True)
            continue
        if state.map_end_offset != offset:
            logger.warning("ignoring producer snapshot %s: it covers offset %d", path, state.map_end_offset)
            path.unlink(missing_ok=True)
            continue
        return state
    return None


def delete_snapshots(directory: Path, *, below: int | None = None, above: int | None = None) -> None:
    """Delete snapshot files with an offset < `below` or > `above`."""
    for offset in snapshot_offsets(directory):
        if (below is not None and offset < below) or (above is not None and offset > above):
            (directory / offset_file_name(offset, SNAPSHOT_SUFFIX)).unlink(missing_ok=True)
