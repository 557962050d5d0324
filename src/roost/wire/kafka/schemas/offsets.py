"""OffsetCommit (8) and OffsetFetch (9), from Kafka's OffsetCommitRequest/Response.json and
OffsetFetchRequest/Response.json.

Kafka renamed OffsetCommitRequest's GenerationId to GenerationIdOrMemberEpoch (KIP-848); the wire
is the same, and we use the current name."""

from __future__ import annotations

from roost.wire.kafka.schema import Field, Message

OFFSET_COMMIT_REQUEST = Message(
    "OffsetCommitRequest", api_key=8, kind="request", versions="2-9", flexible="8+", fields=(
        Field("GroupId", "string", "0+"),
        Field("GenerationIdOrMemberEpoch", "int32", "1+", default=-1),
        Field("MemberId", "string", "1+"),
        Field("GroupInstanceId", "string", "7+", nullable="7+", default=None),
        Field("RetentionTimeMs", "int64", "2-4", default=-1),
        Field("Topics", "[]OffsetCommitRequestTopic", "0+", fields=(
            Field("Name", "string", "0-9"),
            Field("TopicId", "uuid", "10+"),
            Field("Partitions", "[]OffsetCommitRequestPartition", "0+", fields=(
                Field("PartitionIndex", "int32", "0+"),
                Field("CommittedOffset", "int64", "0+"),
                Field("CommittedLeaderEpoch", "int32", "6+", default=-1),
                Field("CommitTimestamp", "int64", "1", default=-1),
                Field("CommittedMetadata", "string", "0+", nullable="0+"),
            )),
        )),
    ))

OFFSET_COMMIT_RESPONSE = Message(
    "OffsetCommitResponse", api_key=8, kind="response", versions="2-9", flexible="8+", fields=(
        Field("ThrottleTimeMs", "int32", "3+"),
        Field("Topics", "[]OffsetCommitResponseTopic", "0+", fields=(
            Field("Name", "string", "0-9"),
            Field("TopicId", "uuid", "10+"),
            Field("Partitions", "[]OffsetCommitResponsePartition", "0+", fields=(
                Field("PartitionIndex", "int32", "0+"),
                Field("ErrorCode", "int16", "0+"),
            )),
        )),
    ))

OFFSET_FETCH_REQUEST = Message(
    "OffsetFetchRequest", api_key=9, kind="request", versions="1-9", flexible="6+", fields=(
        Field("GroupId", "string", "0-7"),
        # null (v2+) asks for every partition the group has committed.
        Field("Topics", "[]OffsetFetchRequestTopic", "0-7", nullable="2-7", fields=(
            Field("Name", "string", "0-7"),
            Field("PartitionIndexes", "[]int32", "0-7"),
        )),
        Field("Groups", "[]OffsetFetchRequestGroup", "8+", fields=(
            Field("GroupId", "string", "8+"),
            Field("MemberId", "string", "9+", nullable="9+", default=None),
            Field("MemberEpoch", "int32", "9+", default=-1),
            Field("Topics", "[]OffsetFetchRequestTopics", "8+", nullable="8+", fields=(
                Field("Name", "string", "8-9"),
                Field("TopicId", "uuid", "10+"),
                Field("PartitionIndexes", "[]int32", "8+"),
            )),
        )),
        Field("RequireStable", "bool", "7+", default=False),
    ))

OFFSET_FETCH_RESPONSE = Message(
    "OffsetFetchResponse", api_key=9, kind="response", versions="1-9", flexible="6+", fields=(
        Field("ThrottleTimeMs", "int32", "3+"),
        Field("Topics", "[]OffsetFetchResponseTopic", "0-7", fields=(
            Field("Name", "string", "0-7"),
            Field("Partitions", "[]OffsetFetchResponsePartition", "0-7", fields=(
                Field("PartitionIndex", "int32", "0-7"),
                Field("CommittedOffset", "int64", "0-7"),
                Field("CommittedLeaderEpoch", "int32", "5-7", default=-1),
                Field("Metadata", "string", "0-7", nullable="0-7"),
                Field("ErrorCode", "int16", "0-7"),
            )),
        )),
        Field("ErrorCode", "int16", "2-7", default=0),
        Field("Groups", "[]OffsetFetchResponseGroup", "8+", fields=(
            Field("GroupId", "string", "8+"),
            Field("Topics", "[]OffsetFetchResponseTopics", "8+", fields=(
                Field("Name", "string", "8-9"),
                Field("TopicId", "uuid", "10+"),
                Field("Partitions", "[]OffsetFetchResponsePartitions", "8+", fields=(
                    Field("PartitionIndex", "int32", "8+"),
                    Field("CommittedOffset", "int64", "8+"),
                    Field("CommittedLeaderEpoch", "int32", "8+", default=-1),
                    Field("Metadata", "string", "8+", nullable="8+"),
                    Field("ErrorCode", "int16", "8+"),
                )),
            )),
            Field("ErrorCode", "int16", "8+", default=0),
        )),
    ))
