"""The classic protocol's embedded consumer protocol, read and written for a consumer group's
classic members (online migration between the protocols, KIP-848).

A classic member's JoinGroup protocols carry its subscription (topics, the partitions it owns,
its rack); its SyncGroup answer carries its assignment. The consumer group keeps partitions as
(topic id, index) and topics by name; these helpers translate with the topics the broker knows
(a topic it does not know is left out, as Kafka's toTopicPartitions does). Pure.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from roost.broker.group.assignors import TopicPartition
from roost.wire.kafka.consumer_protocol import (
    decode_consumer_assignment,
    decode_consumer_subscription,
    encode_consumer_assignment,
)
from roost.wire.kafka.exceptions import KafkaCodecError

MAX_ASSIGNMENT_VERSION = 3  # ConsumerProtocolAssignment's versions: 0-3


class KnownTopic(Protocol):
    @property
    def topic_id(self) -> uuid.UUID: ...


@dataclass(frozen=True)
class ClassicSubscription:
    version: int
    topics: tuple[str, ...]
    owned: frozenset[TopicPartition] | None  # None: the version (0) does not report them
    rack_id: str | None


def read_subscription(protocols: Sequence[tuple[str, bytes]], topics: Mapping[str, KnownTopic]) -> ClassicSubscription:
    """The subscription of a member's first protocol that parses (Kafka's deserializeSubscription);
    KafkaCodecError if none does."""
    last: KafkaCodecError | None = None
    for _name, metadata in protocols:
        try:
            version, body = decode_consumer_subscription(metadata)
        except KafkaCodecError as error:
            last = error
            continue
        owned = to_partitions(body.get("owned_partitions") or [], topics) if version >= 1 else None
        return ClassicSubscription(version, tuple(sorted(body["topics"])), owned, body.get("rack_id"))
    raise last or KafkaCodecError("no protocol")


def read_assignment(data: bytes, topics: Mapping[str, KnownTopic]) -> frozenset[TopicPartition]:
    """The partitions a SyncGroup assignment gives (empty bytes: none)."""
    if not data:
        return frozenset()
    _, body = decode_consumer_assignment(data)
    return to_partitions(body["assigned_partitions"], topics)


def to_partitions(entries: list[dict[str, Any]], topics: Mapping[str, KnownTopic]) -> frozenset[TopicPartition]:
    return frozenset((topics[e["topic"]].topic_id, index) for e in entries if e["topic"] in topics
                     for index in e["partitions"])


def write_assignment(partitions: frozenset[TopicPartition], names: Mapping[uuid.UUID, str], version: int) -> bytes:
    """A SyncGroup assignment of `partitions`, in the member's subscription version (Kafka's
    prepareAssignment), topics by name."""
    by_topic: dict[str, list[int]] = {}
    for topic_id, index in sorted(partitions):
        if topic_id in names:
            by_topic.setdefault(names[topic_id], []).append(index)
    body = {"assigned_partitions": [{"topic": t, "partitions": p} for t, p in sorted(by_topic.items())],
            "user_data": None}
    return encode_consumer_assignment(min(max(version, 0), MAX_ASSIGNMENT_VERSION), body)


def subscription_version(protocols: Sequence[tuple[str, bytes]]) -> int:
    """The version of the first protocol's subscription (0 if it cannot be read)."""
    try:
        return decode_consumer_subscription(protocols[0][1])[0]
    except (KafkaCodecError, IndexError):
        return 0
