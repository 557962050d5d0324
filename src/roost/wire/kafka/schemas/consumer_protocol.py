"""The consumer protocol embedded in JoinGroup/SyncGroup bytes (not requests): Kafka's
ConsumerProtocolSubscription.json and ConsumerProtocolAssignment.json. Never flexible."""

from __future__ import annotations

from roost.wire.kafka.schema import Field, Message

CONSUMER_PROTOCOL_SUBSCRIPTION = Message(
    "ConsumerProtocolSubscription", api_key=None, kind="data", versions="0-3", flexible="none",
    fields=(
        Field("Topics", "[]string", "0+"),
        Field("UserData", "bytes", "0+", nullable="0+", default=None),
        Field("OwnedPartitions", "[]TopicPartition", "1+", fields=(
            Field("Topic", "string", "1+"),
            Field("Partitions", "[]int32", "1+"),
        )),
        Field("GenerationId", "int32", "2+", default=-1),
        Field("RackId", "string", "3+", nullable="3+", default=None),
    ))

CONSUMER_PROTOCOL_ASSIGNMENT = Message(
    "ConsumerProtocolAssignment", api_key=None, kind="data", versions="0-3", flexible="none",
    fields=(
        Field("AssignedPartitions", "[]TopicPartition", "0+", fields=(
            Field("Topic", "string", "0+"),
            Field("Partitions", "[]int32", "0+"),
        )),
        Field("UserData", "bytes", "0+", nullable="0+", default=None),
    ))
