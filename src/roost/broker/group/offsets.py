"""Committed consumer offsets, kept in the internal topic `__consumer_offsets`.

Records have Kafka's shape: key = (version 1, group, topic, partition), value = OffsetCommitValue
version 3 (offset, leader epoch, metadata, commit timestamp), a null value deletes the entry. A
group's records go to partition hash(group) % offsets.topic.num.partitions, so the coordinator of
a group can be the leader of that partition once there are several brokers. On start the broker
reads the whole topic back, the last record per key winning.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from roost.broker.replica.partition import Partition
from roost.wire.kafka.records import build_batch, iter_records

log = logging.getLogger("roost.broker.offsets")

OFFSET_KEY_VERSION = 1
OFFSET_VALUE_VERSION = 3
GROUP_METADATA_KEY_VERSION = 2
MAX_METADATA_BYTES = 4096
READ_CHUNK = 4 * 1024 * 1024

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


def _put_string(out: bytearray, text: str) -> None:
    data = text.encode()
    out += _INT16.pack(len(data))
    out += data


def _get_string(data: bytes, pos: int) -> tuple[str, int]:
    if pos + 2 > len(data):
        raise OffsetRecordError("truncated string length")
    (length,) = _INT16.unpack_from(data, pos)
    pos += 2
    if length < 0 or pos + length > len(data):
        raise OffsetRecordError("bad string length")
    try:
        return data[pos:pos + length].decode(), pos + length
    except UnicodeDecodeError:
        raise OffsetRecordError("string is not UTF-8") from None


def encode_key(key: OffsetKey) -> bytes:
    group, topic, partition = key
    out = bytearray(_INT16.pack(OFFSET_KEY_VERSION))
    _put_string(out, group)
    _put_string(out, topic)
    out += _INT32.pack(partition)
    return bytes(out)


def decode_key(data: bytes) -> OffsetKey | None:
    """The offset key in `data`, or None for the other record kinds (group metadata)."""
    if len(data) < 2:
        raise OffsetRecordError("key too short")
    (version,) = _INT16.unpack_from(data, 0)
    if version == GROUP_METADATA_KEY_VERSION:
        return None
    if version not in (0, 1):
        raise OffsetRecordError(f"unknown key version {version}")
    group, pos = _get_string(data, 2)
    topic, pos = _get_string(data, pos)
    if pos + 4 != len(data):
        raise OffsetRecordError("bad key length")
    (partition,) = _INT32.unpack_from(data, pos)
    return group, topic, partition


def encode_value(value: CommittedOffset) -> bytes:
    out = bytearray(_VALUE_HEAD.pack(OFFSET_VALUE_VERSION, value.offset, value.leader_epoch))
    _put_string(out, value.metadata)
    out += _INT64.pack(value.commit_timestamp_ms)
    return bytes(out)


def decode_value(data: bytes) -> CommittedOffset:
    if len(data) < _VALUE_HEAD.size:
        raise OffsetRecordError("value too short")
    version, offset, leader_epoch = _VALUE_HEAD.unpack_from(data, 0)
    if version != OFFSET_VALUE_VERSION:
        raise OffsetRecordError(f"unknown value version {version}")
    metadata, pos = _get_string(data, _VALUE_HEAD.size)
    if pos + 8 != len(data):
        raise OffsetRecordError("bad value length")
    (timestamp,) = _INT64.unpack_from(data, pos)
    return CommittedOffset(offset, leader_epoch, metadata, timestamp)


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


class OffsetStore:
    """In-memory view of the committed offsets, written through to __consumer_offsets."""

    def __init__(self, partitions: list[Partition],
                 append: Callable[[Partition, bytearray], asyncio.Future[None] | None]) -> None:
        assert partitions, "the offsets topic has at least one partition"
        self._partitions = partitions
        self._append = append
        self._offsets: dict[OffsetKey, CommittedOffset] = {}
        self._by_group: dict[str, set[OffsetKey]] = {}
        for partition in partitions:
            self._load(partition)

    def _load(self, partition: Partition) -> None:
        plog = partition.log
        position = plog.log_start_offset
        loaded = 0
        while position < plog.log_end_offset:
            chunk = plog.read(position, READ_CHUNK)
            if not chunk.buffers:
                break
            for record in iter_records(b"".join(bytes(b) for b in chunk.buffers)):
                if record.key is None:
                    continue
                try:
                    key = decode_key(record.key)
                    if key is None:
                        continue
                    if record.value is None:
                        self._forget(key)
                    else:
                        self._remember(key, decode_value(record.value))
                    loaded += 1
                except OffsetRecordError as error:
                    log.warning("skipping unreadable record at offset %d of %s-%d: %s",
                                record.offset, partition.topic, partition.index, error)
            assert chunk.next_offset > position, "reads make progress"
            position = chunk.next_offset
        if loaded:
            log.info("loaded %d offset records from %s-%d", loaded, partition.topic, partition.index)

    def _remember(self, key: OffsetKey, value: CommittedOffset) -> None:
        self._offsets[key] = value
        self._by_group.setdefault(key[0], set()).add(key)

    def _forget(self, key: OffsetKey) -> None:
        if self._offsets.pop(key, None) is not None:
            keys = self._by_group[key[0]]
            keys.discard(key)
            if not keys:
                del self._by_group[key[0]]

    def partition_for(self, group_id: str) -> Partition:
        return self._partitions[offsets_partition_for(group_id, len(self._partitions))]

    def commit(self, group_id: str, entries: dict[tuple[str, int], CommittedOffset | None],
               now_ms: int) -> asyncio.Future[None] | None:
        """Append the commits (None = delete) as one batch; returns the fsync the commit's
        acknowledgement must wait for, if the offsets topic asks for one."""
        assert entries
        records = [(encode_key((group_id, topic, index)), None if value is None else encode_value(value))
                   for (topic, index), value in entries.items()]
        batch = bytearray(build_batch(records, timestamp_ms=now_ms))
        durable = self._append(self.partition_for(group_id), batch)
        for (topic, index), value in entries.items():
            if value is None:
                self._forget((group_id, topic, index))
            else:
                self._remember((group_id, topic, index), value)
        return durable

    def get(self, group_id: str, topic: str, partition: int) -> CommittedOffset | None:
        return self._offsets.get((group_id, topic, partition))

    def for_group(self, group_id: str) -> dict[tuple[str, int], CommittedOffset]:
        return {(t, p): self._offsets[(g, t, p)] for g, t, p in sorted(self._by_group.get(group_id, ()))}

    def groups(self) -> list[str]:
        return sorted(self._by_group)

    def expired(self, group_id: str, older_than_ms: int) -> list[tuple[str, int]]:
        return [(t, p) for g, t, p in self._by_group.get(group_id, ())
                if self._offsets[(g, t, p)].commit_timestamp_ms < older_than_ms]

    def keys_for_topic(self, topic: str) -> dict[str, list[tuple[str, int]]]:
        found: dict[str, list[tuple[str, int]]] = {}
        for group, t, p in self._offsets:
            if t == topic:
                found.setdefault(group, []).append((t, p))
        return found
