"""The name of one share-partition (a share group's view of one topic partition) and where its
state lives: Kafka's SharePartitionKey and ShareCoordinatorService.partitionFor.

FindCoordinator key type 2 names a share-partition as "<groupId>:<topicId>:<partition>", the
topic id in unpadded base64url (Kafka's Uuid.toString). The key is parsed from the right, so a
group id may itself contain ':' (KAFKA-20183). Its state lives in the `__share_group_state`
partition abs(javaStringHashCode(key)) % partitions (abs(MIN_VALUE) = 0, as Kafka's Utils.abs).
"""

from __future__ import annotations

import base64
import binascii
import uuid
from dataclasses import dataclass

SHARE_STATE_TOPIC = "__share_group_state"


def topic_id_string(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: the 16 bytes in base64url without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def parse_topic_id(text: str) -> uuid.UUID | None:
    if len(text) != 22:
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError):
        return None
    return uuid.UUID(bytes=raw) if len(raw) == 16 else None


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int

    def __str__(self) -> str:
        return f"{self.group_id}:{topic_id_string(self.topic_id)}:{self.partition}"

    @classmethod
    def parse(cls, key: str) -> SharePartitionKey | None:
        """The key FindCoordinator v6 key type 2 carries, or None if it is not one."""
        rest, sep, partition_text = key.rpartition(":")
        if not sep:
            return None
        group_id, sep, topic_text = rest.rpartition(":")
        if not sep or not group_id or not partition_text.isdigit() or len(partition_text) > 10:
            return None
        topic_id = parse_topic_id(topic_text)
        partition = int(partition_text)
        if topic_id is None or partition > 0x7FFFFFFF:
            return None
        return cls(group_id, topic_id, partition)


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def share_state_partition_for(key: SharePartitionKey, partitions: int) -> int:
    """The `__share_group_state` partition holding this share-partition's state."""
    assert partitions > 0
    h = java_string_hash(str(key))
    return 0 if h == -(1 << 31) else abs(h) % partitions
