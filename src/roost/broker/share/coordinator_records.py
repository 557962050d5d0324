"""The records of `__share_group_state` and where a share-partition's records go.

Kafka's layouts (wire/kafka/schemas/share_state.py): key = int16 record type (0 ShareSnapshot,
1 ShareUpdate) + the v0 struct {GroupId, TopicId, Partition}; value = int16 version 0 + the
flexible ShareSnapshotValue / ShareUpdateValue; a null value is the key's tombstone
(DeleteShareGroupState). A share-partition's records go to partition
abs(Java String.hashCode("<group>:<topic id, base64url>:<partition>")) % partitions
(ShareCoordinatorService.partitionFor on SharePartitionKey.asCoordinatorKey), whose leader is its
share coordinator; FindCoordinator key type 2 names it by the same string.
"""

from __future__ import annotations

import base64
import functools
import uuid
from dataclasses import dataclass
from typing import Any

from roost.broker.group.offsets import offsets_partition_for
from roost.broker.metadata.catalog import SHARE_GROUP_STATE_TOPIC
from roost.wire.kafka.exceptions import KafkaCodecError
from roost.wire.kafka.framing import (
    decode_struct,
    decode_versioned_struct,
    encode_struct,
    encode_versioned_struct,
)
from roost.wire.kafka.primitives import INT16
from roost.wire.kafka.schemas.share_state import SHARE_SNAPSHOT_TYPE, SHARE_UPDATE_TYPE

VALUE_VERSION = 0


__all__ = ["SHARE_GROUP_STATE_TOPIC", "ShareKey", "ShareRecordError", "decode_key", "decode_value", "encode_key",
           "encode_value", "parse_coordinator_key", "share_partition_for", "topic_id_text"]


class ShareRecordError(ValueError):
    """A record in __share_group_state that this broker cannot read."""


@dataclass(frozen=True, slots=True, order=True)
class ShareKey:
    """A share-partition: a share group's view of one topic partition (SharePartitionKey)."""

    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """SharePartitionKey.asCoordinatorKey: the FindCoordinator key (type 2) and the hash input."""
        return f"{self.group_id}:{topic_id_text(self.topic_id)}:{self.partition}"


def topic_id_text(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: base64url without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def parse_coordinator_key(key: str) -> ShareKey:
    """SharePartitionKey.getInstance(String): parsed from the right, so a group id may hold ':'.
    ValueError for a malformed key (FindCoordinator answers INVALID_REQUEST)."""
    tokens = key.split(":")
    if len(tokens) < 3:
        raise ValueError(f"invalid key format: expected groupId:topicId:partition, found {key!r}")
    group_id = ":".join(tokens[:-2])
    if not group_id.strip():
        raise ValueError("group id must not be empty")
    raw = tokens[-2]
    try:
        data = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
        if len(data) != 16:
            raise ValueError
        topic_id = uuid.UUID(bytes=data)
    except ValueError:
        raise ValueError(f"invalid topic id: {raw!r}") from None
    try:
        partition = int(tokens[-1])
    except ValueError:
        raise ValueError(f"invalid partition: {tokens[-1]!r}") from None
    if not -(2**31) <= partition < 2**31:
        raise ValueError(f"invalid partition: {tokens[-1]!r}")
    return ShareKey(group_id, topic_id, partition)


# Cached: each state write asks several times (status, placement, append), and the key's text
# (base64 of the topic id) and its Java string hash were a twentieth of a share consumer's broker CPU.
@functools.lru_cache(maxsize=65536)
def share_partition_for(key: ShareKey, partitions: int) -> int:
    return offsets_partition_for(key.coordinator_key(), partitions)


def encode_key(record_type: int, key: ShareKey) -> bytes:
    assert record_type in (SHARE_SNAPSHOT_TYPE, SHARE_UPDATE_TYPE)
    name = "ShareSnapshotKey" if record_type == SHARE_SNAPSHOT_TYPE else "ShareUpdateKey"
    body = {"group_id": key.group_id, "topic_id": key.topic_id, "partition": key.partition}
    return INT16.pack(record_type) + bytes(encode_struct(name, 0, body))


def decode_key(data: bytes) -> tuple[int, ShareKey]:
    if len(data) < 2:
        raise ShareRecordError("key too short")
    (record_type,) = INT16.unpack_from(data, 0)
    if record_type not in (SHARE_SNAPSHOT_TYPE, SHARE_UPDATE_TYPE):
        raise ShareRecordError(f"unknown record type {record_type}")
    name = "ShareSnapshotKey" if record_type == SHARE_SNAPSHOT_TYPE else "ShareUpdateKey"
    try:
        body = decode_struct(name, 0, memoryview(data)[2:])
    except KafkaCodecError as error:
        raise ShareRecordError(str(error)) from None
    return record_type, ShareKey(body["group_id"], body["topic_id"], body["partition"])


def encode_value(record_type: int, value: dict[str, Any]) -> bytes:
    name = "ShareSnapshotValue" if record_type == SHARE_SNAPSHOT_TYPE else "ShareUpdateValue"
    return encode_versioned_struct(name, VALUE_VERSION, value)


def decode_value(record_type: int, data: bytes) -> dict[str, Any]:
    name = "ShareSnapshotValue" if record_type == SHARE_SNAPSHOT_TYPE else "ShareUpdateValue"
    try:
        _version, body = decode_versioned_struct(name, data)
    except KafkaCodecError as error:
        raise ShareRecordError(str(error)) from None
    return body
