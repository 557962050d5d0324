"""The consumer protocol carried inside JoinGroup metadata and SyncGroup assignments.

Clients assign partitions themselves; the broker passes these bytes along and reads only the
subscribed topics (OffsetDelete asks which topics a group consumes), so the other helpers serve
tests and tools. Each value is an int16 version followed by the struct.
"""

from __future__ import annotations

from typing import Any

from roost.wire.kafka.exceptions import KafkaCodecError
from roost.wire.kafka.framing import decode_versioned_struct, encode_versioned_struct
from roost.wire.kafka.primitives import Buffer

SUBSCRIPTION = "ConsumerProtocolSubscription"
ASSIGNMENT = "ConsumerProtocolAssignment"


def decode_consumer_subscription(data: Buffer) -> tuple[int, dict[str, Any]]:
    """(version, body) of a JoinGroup protocol's metadata: topics, user_data, owned_partitions..."""
    return decode_versioned_struct(SUBSCRIPTION, data)


def subscription_topics(data: Buffer) -> list[str]:
    """The topics a JoinGroup protocol's metadata subscribes to, read as Kafka's group coordinator
    reads them: as version 0, the prefix every version starts with, so that any version parses.
    KafkaCodecError when the bytes are no subscription."""
    raw = bytes(data)
    if len(raw) < 2:
        raise KafkaCodecError(f"{SUBSCRIPTION}: {len(raw)} bytes cannot hold a version")
    if raw[0] & 0x80:
        raise KafkaCodecError(f"{SUBSCRIPTION}: negative version")
    _, body = decode_versioned_struct(SUBSCRIPTION, b"\x00\x00" + raw[2:])
    return list(body["topics"])


def encode_consumer_subscription(version: int, body: dict[str, Any]) -> bytes:
    return encode_versioned_struct(SUBSCRIPTION, version, body)


def decode_consumer_assignment(data: Buffer) -> tuple[int, dict[str, Any]]:
    """(version, body) of a SyncGroup assignment: assigned_partitions, user_data."""
    return decode_versioned_struct(ASSIGNMENT, data)


def encode_consumer_assignment(version: int, body: dict[str, Any]) -> bytes:
    return encode_versioned_struct(ASSIGNMENT, version, body)
