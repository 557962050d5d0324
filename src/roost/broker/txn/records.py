"""Transaction metadata records, kept in the internal topic `__transaction_state`.

Kafka's layouts (`TransactionLogKey.json`, `TransactionLogValue.json` version 0, the one a
ZooKeeper-mode broker writes): key = int16 version 0 + string transactional id; value = int16
version 0, int64 producer id, int16 producer epoch, int32 transaction timeout, int8 state, a
nullable array of {string topic, int32 array of partitions} (null when the state is Empty),
int64 last update timestamp, int64 transaction start timestamp. A null value (tombstone) removes
an expired transactional id. A transactional id's records go to partition
abs(Java hashCode(id)) % transaction.state.log.num.partitions, whose leader is its coordinator.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from roost.broker.group.offsets import get_string, offsets_partition_for, put_string
from roost.wire.kafka.records import build_batch

TXN_KEY_VERSION = 0
TXN_VALUE_VERSION = 0

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, state
_TIMES = struct.Struct(">qq")


class TxnRecordError(ValueError):
    """A record in __transaction_state that this broker cannot read."""


@dataclass(frozen=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int
    partitions: frozenset[tuple[str, int]]
    last_update_ms: int
    start_ms: int


def txn_partition_for(transactional_id: str, partitions: int) -> int:
    """Kafka's TransactionStateManager.partitionFor: the same hash as a group's."""
    return offsets_partition_for(transactional_id, partitions)


def encode_key(transactional_id: str) -> bytes:
    out = bytearray(_INT16.pack(TXN_KEY_VERSION))
    put_string(out, transactional_id)
    return bytes(out)


def decode_key(data: bytes) -> str:
    if len(data) < 2:
        raise TxnRecordError("key too short")
    (version,) = _INT16.unpack_from(data, 0)
    if version != TXN_KEY_VERSION:
        raise TxnRecordError(f"unknown key version {version}")
    transactional_id, pos = get_string(data, 2, TxnRecordError)
    if pos != len(data):
        raise TxnRecordError("bad key length")
    return transactional_id


def encode_value(value: TxnLogValue) -> bytes:
    out = bytearray(_VALUE_HEAD.pack(TXN_VALUE_VERSION, value.producer_id, value.producer_epoch,
                                     value.timeout_ms, value.state))
    if not value.partitions:
        out += _INT32.pack(-1)  # Kafka writes null for Empty and for an empty set alike
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(value.partitions):
            by_topic.setdefault(topic, []).append(index)
        out += _INT32.pack(len(by_topic))
        for topic, indexes in by_topic.items():
            put_string(out, topic)
            out += _INT32.pack(len(indexes))
            for index in indexes:
                out += _INT32.pack(index)
    out += _TIMES.pack(value.last_update_ms, value.start_ms)
    return bytes(out)


def decode_value(data: bytes) -> TxnLogValue:
    if len(data) < _VALUE_HEAD.size + 4 + _TIMES.size:
        raise TxnRecordError("value too short")
    version, producer_id, epoch, timeout_ms, state = _VALUE_HEAD.unpack_from(data, 0)
    if version != TXN_VALUE_VERSION:
        # Version 1 (flexible, tagged fields) is written only with transaction.version >= 1,
        # which a ZooKeeper-mode cluster never finalizes.
        raise TxnRecordError(f"unknown value version {version}")
    pos = _VALUE_HEAD.size
    (topics,) = _INT32.unpack_from(data, pos)
    pos += 4
    partitions: set[tuple[str, int]] = set()
    for _ in range(max(topics, 0)):
        topic, pos = get_string(data, pos, TxnRecordError)
        if pos + 4 > len(data):
            raise TxnRecordError("truncated partition list")
        (count,) = _INT32.unpack_from(data, pos)
        pos += 4
        if count < 0 or pos + 4 * count > len(data):
            raise TxnRecordError("bad partition list")
        for _ in range(count):
            partitions.add((topic, _INT32.unpack_from(data, pos)[0]))
            pos += 4
    if pos + _TIMES.size != len(data):
        raise TxnRecordError("bad value length")
    last_update_ms, start_ms = _TIMES.unpack_from(data, pos)
    return TxnLogValue(producer_id, epoch, timeout_ms, state, frozenset(partitions), last_update_ms, start_ms)


def txn_batch(transactional_id: str, value: TxnLogValue | None, now_ms: int) -> bytearray:
    """One record batch holding one transaction's record (None: its tombstone)."""
    encoded = None if value is None else encode_value(value)
    return bytearray(build_batch([(encode_key(transactional_id), encoded)], timestamp_ms=now_ms))
