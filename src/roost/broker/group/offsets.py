"""Committed consumer offsets, kept in the internal topic `__consumer_offsets`.

Records have Kafka's shape: key = (version 1, group, topic, partition), value = OffsetCommitValue
version 3 (offset, leader epoch, metadata, commit timestamp), a null value deletes the entry.
Roost keeps no group metadata records (key version 2, the group), but a deleted group gets that
key's tombstone as in Kafka, and loading skips such records. A
group's records go to partition abs(Java hashCode(group)) % offsets.topic.num.partitions, and the
group's coordinator is the leader of that partition: when a broker becomes leader it reads the
partition back (the last record per key winning) into an `OffsetStore` of its own.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from roost.log.transactions import read_marker
from roost.wire.kafka.records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    build_batch,
    decode_batch_records,
    iter_batch_headers,
)

log = logging.getLogger("roost.broker.offsets")

OFFSET_KEY_VERSION = 1
OFFSET_VALUE_VERSION = 3
GROUP_METADATA_KEY_VERSION = 2
MAX_METADATA_BYTES = 4096

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_VALUE_HEAD = struct.Struct(">hqi")

OffsetKey = tuple[str, str, int]  # (group, topic, partition)


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


class OffsetRecordError(ValueError):
    """A record in __consumer_offsets that this broker cannot read."""


def put_string(out: bytearray, text: str) -> None:
    """A STRING of Kafka's internal-topic records (int16 length, UTF-8): __consumer_offsets'
    and __transaction_state's keys and values."""
    data = text.encode()
    out += _INT16.pack(len(data))
    out += data


def get_string(data: bytes, pos: int, error: type[ValueError] = OffsetRecordError) -> tuple[str, int]:
    """The STRING at `pos` and the position after it; `error` (the caller's record error) if the
    bytes cannot hold one."""
    if pos + 2 > len(data):
        raise error("truncated string length")
    (length,) = _INT16.unpack_from(data, pos)
    pos += 2
    if length < 0 or pos + length > len(data):
        raise error("bad string length")
    try:
        return data[pos:pos + length].decode(), pos + length
    except UnicodeDecodeError:
        raise error("string is not UTF-8") from None


def encode_key(key: OffsetKey) -> bytes:
    group, topic, partition = key
    out = bytearray(_INT16.pack(OFFSET_KEY_VERSION))
    put_string(out, group)
    put_string(out, topic)
    out += _INT32.pack(partition)
    return bytes(out)


def encode_group_metadata_key(group: str) -> bytes:
    """Kafka's GroupMetadataKey (version 2): the key of a group's metadata record."""
    out = bytearray(_INT16.pack(GROUP_METADATA_KEY_VERSION))
    put_string(out, group)
    return bytes(out)


# Record types 3-8: KIP-848 consumer groups (group/consumer_protocol_records.py reads them);
# 10-15: KIP-932 share groups (group/share_records.py). Both are the group service's.
CONSUMER_GROUP_RECORD_TYPES = range(3, 16)


def decode_key(data: bytes) -> OffsetKey | None:
    """The offset key in `data`, or None for the other record kinds (group metadata, consumer
    group records)."""
    if len(data) < 2:
        raise OffsetRecordError("key too short")
    (version,) = _INT16.unpack_from(data, 0)
    if version == GROUP_METADATA_KEY_VERSION or version in CONSUMER_GROUP_RECORD_TYPES:
        return None
    if version not in (0, 1):
        raise OffsetRecordError(f"unknown key version {version}")
    group, pos = get_string(data, 2)
    topic, pos = get_string(data, pos)
    if pos + 4 != len(data):
        raise OffsetRecordError("bad key length")
    (partition,) = _INT32.unpack_from(data, pos)
    return group, topic, partition


def encode_value(value: CommittedOffset) -> bytes:
    out = bytearray(_VALUE_HEAD.pack(OFFSET_VALUE_VERSION, value.offset, value.leader_epoch))
    put_string(out, value.metadata)
    out += _INT64.pack(value.commit_timestamp_ms)
    return bytes(out)


def decode_value(data: bytes) -> CommittedOffset:
    if len(data) < _VALUE_HEAD.size:
        raise OffsetRecordError("value too short")
    version, offset, leader_epoch = _VALUE_HEAD.unpack_from(data, 0)
    if version != OFFSET_VALUE_VERSION:
        raise OffsetRecordError(f"unknown value version {version}")
    metadata, pos = get_string(data, _VALUE_HEAD.size)
    if pos + 8 != len(data):
        raise OffsetRecordError("bad value length")
    (timestamp,) = _INT64.unpack_from(data, pos)
    return CommittedOffset(offset, leader_epoch, metadata, timestamp)


def offset_batch(entries: dict[OffsetKey, CommittedOffset | None], now_ms: int,
                 deleted_groups: Iterable[str] = (), producer_id: int = NO_PRODUCER_ID,
                 producer_epoch: int = NO_PRODUCER_EPOCH) -> bytearray:
    """One record batch with a record per entry (None: a tombstone, the entry is deleted), then
    a group metadata tombstone per deleted group. With a producer id: a transactional batch
    (TxnOffsetCommit), pending until its transaction's marker."""
    records: list[tuple[bytes, bytes | None]] = [
        (encode_key(key), None if value is None else encode_value(value)) for key, value in entries.items()]
    records += [(encode_group_metadata_key(group), None) for group in deleted_groups]
    assert records
    if producer_id == NO_PRODUCER_ID:
        return bytearray(build_batch(records, timestamp_ms=now_ms))
    return bytearray(build_batch(records, timestamp_ms=now_ms, producer_id=producer_id,
                                 producer_epoch=producer_epoch, is_transactional=True))


def offsets_partition_for(group_id: str, partitions: int) -> int:
    """Kafka's placement: abs(Java String.hashCode(group)) % partitions."""
    h = 0
    for unit in _utf16_units(group_id):
        h = (31 * h + unit) & 0xFFFFFFFF
    if h >= 2**31:
        h -= 2**32
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0.
    return (0 if h == -(2**31) else abs(h)) % partitions


def _utf16_units(text: str) -> Iterator[int]:
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        yield (data[i] << 8) | data[i + 1]


@dataclass(frozen=True, slots=True)
class StoredOffset:
    value: CommittedOffset
    log_offset: int  # where its record is in __consumer_offsets: a later record wins


class OffsetStore:
    """The committed offsets of the groups of one `__consumer_offsets` partition, in memory.

    No I/O: the service appends the records and tells the store what became of them. A commit
    is *pending* from its append until its acknowledgement; only a commit that succeeded becomes
    visible, and only if no later record for the same key is already applied (commits of one key
    may finish out of order). Keys with a pending commit do not expire (Kafka's rule), and a
    pending commit to a deleted topic is dropped when it finishes.

    Transactional commits (TxnOffsetCommit) are held per producer id apart from the visible ones
    until the transaction's marker reaches this partition: COMMIT makes them visible (unless a
    later record of the key is), ABORT drops them. While a key has one held, OffsetFetch with
    `require_stable` answers UNSTABLE_OFFSET_COMMIT for it.
    """

    def __init__(self) -> None:
        self._offsets: dict[OffsetKey, StoredOffset] = {}
        self._by_group: dict[str, set[OffsetKey]] = {}
        self._pending: dict[OffsetKey, int] = {}  # key -> commits appended, not yet finished
        self._txn_pending: dict[int, dict[OffsetKey, StoredOffset]] = {}  # producer id -> held commits

    def __len__(self) -> int:
        return len(self._offsets)

    # loading ----------------------------------------------------------------------------------
    def replay(self, data: bytes, where: str,
               consumer_groups: Callable[[bytes, bytes | None], None] | None = None) -> int:
        """Apply the records of the whole batches in `data`, read in log order; returns how
        many offset records there were (other record kinds are skipped; KIP-848 consumer group
        records go to `consumer_groups`). Transactional batches are held until their marker,
        which is a control batch of the same producer."""
        applied = 0
        view = memoryview(data)
        for pos, header in iter_batch_headers(view):
            batch = view[pos:pos + header.size]
            if header.is_control:
                marker = read_marker(header, batch)
                if marker is not None:
                    self.end_txn(header.producer_id, marker.commit)
                continue
            held = self._txn_pending.setdefault(header.producer_id, {}) if header.is_transactional else None
            for record in decode_batch_records(batch):
                if record.key is None:
                    continue
                if consumer_groups is not None and held is None and len(record.key) >= 2 \
                        and _INT16.unpack_from(record.key, 0)[0] in CONSUMER_GROUP_RECORD_TYPES:
                    consumer_groups(bytes(record.key), None if record.value is None else bytes(record.value))
                    continue
                try:
                    key = decode_key(record.key)
                    if key is None:
                        continue
                    if held is not None:
                        if record.value is not None:
                            held[key] = StoredOffset(decode_value(record.value), record.offset)
                    elif record.value is None:
                        self._forget(key)
                    else:
                        self._apply(key, StoredOffset(decode_value(record.value), record.offset))
                    applied += 1
                except OffsetRecordError as error:
                    log.warning("skipping unreadable record at offset %d of %s: %s", record.offset, where, error)
            if held is not None and not held:
                del self._txn_pending[header.producer_id]
        return applied

    # transactional commits --------------------------------------------------------------------
    def hold_txn(self, producer_id: int, entries: dict[OffsetKey, CommittedOffset], log_offset: int) -> None:
        """A TxnOffsetCommit's batch was appended (and replicated) at `log_offset`."""
        held = self._txn_pending.setdefault(producer_id, {})
        for key, value in entries.items():
            held[key] = StoredOffset(value, log_offset)

    def end_txn(self, producer_id: int, commit: bool) -> int:
        """The producer's transaction ended on this partition; returns how many offsets it made
        visible."""
        held = self._txn_pending.pop(producer_id, None)
        if not held or not commit:
            return 0
        shown = 0
        for key, stored in held.items():
            known = self._offsets.get(key)
            if known is None or known.log_offset < stored.log_offset:
                self._apply(key, stored)
                shown += 1
        return shown

    def has_unstable(self, group_id: str, topic: str, partition: int) -> bool:
        key = (group_id, topic, partition)
        return any(key in held for held in self._txn_pending.values())

    # committing -------------------------------------------------------------------------------
    def begin_commit(self, keys: Iterable[OffsetKey]) -> None:
        """The commit's record for each key was appended at some log offset; not visible yet."""
        for key in keys:
            self._pending[key] = self._pending.get(key, 0) + 1

    def finish_commit(self, entries: dict[OffsetKey, CommittedOffset], log_offset: int, succeeded: bool) -> None:
        """The commit appended at `log_offset` is acknowledged (or failed: then nothing shows)."""
        for key, value in entries.items():
            count = self._pending.get(key)
            if count is None:
                continue  # its topic was deleted meanwhile
            if count == 1:
                del self._pending[key]
            else:
                self._pending[key] = count - 1
            if succeeded:
                known = self._offsets.get(key)
                if known is None or known.log_offset < log_offset:
                    self._apply(key, StoredOffset(value, log_offset))

    def delete(self, keys: Iterable[OffsetKey], *, drop_pending: bool = False) -> None:
        """Forget entries (their tombstones are appended by the caller); with `drop_pending`
        (a deleted topic), commits still in flight for them will not show either."""
        for key in keys:
            self._forget(key)
            if drop_pending:
                self._pending.pop(key, None)

    def _apply(self, key: OffsetKey, stored: StoredOffset) -> None:
        self._offsets[key] = stored
        self._by_group.setdefault(key[0], set()).add(key)

    def _forget(self, key: OffsetKey) -> None:
        if self._offsets.pop(key, None) is not None:
            keys = self._by_group[key[0]]
            keys.discard(key)
            if not keys:
                del self._by_group[key[0]]

    # questions --------------------------------------------------------------------------------
    def get(self, group_id: str, topic: str, partition: int) -> CommittedOffset | None:
        stored = self._offsets.get((group_id, topic, partition))
        return None if stored is None else stored.value

    def for_group(self, group_id: str) -> dict[tuple[str, int], CommittedOffset]:
        return {(t, p): self._offsets[(g, t, p)].value for g, t, p in sorted(self._by_group.get(group_id, ()))}

    def groups(self) -> list[str]:
        return sorted(self._by_group)

    def has_group(self, group_id: str) -> bool:
        return group_id in self._by_group

    def expired(self, group_id: str, older_than_ms: int) -> list[OffsetKey]:
        """The group's entries committed before `older_than_ms`, none with a commit in flight."""
        return sorted(key for key in self._by_group.get(group_id, ())
                      if self._offsets[key].value.commit_timestamp_ms < older_than_ms
                      and key not in self._pending)

    def keys_for_group(self, group_id: str) -> list[OffsetKey]:
        """Every key of the group, applied or in flight."""
        return sorted(self._by_group.get(group_id, set()) | {k for k in self._pending if k[0] == group_id})

    def keys_for_topic(self, topic: str) -> list[OffsetKey]:
        """Every key of `topic`, applied or in flight."""
        return sorted({k for k in self._offsets if k[1] == topic} | {k for k in self._pending if k[1] == topic})
