"""Fetch (1) and ListOffsets (2), from Kafka's FetchRequest/Response.json and
ListOffsetsRequest/Response.json."""

from __future__ import annotations

from roost.wire.kafka.schema import Field, Message

FETCH_REQUEST = Message(
    "FetchRequest", api_key=1, kind="request", versions="4-17", flexible="12+", fields=(
        Field("ClusterId", "string", "12+", nullable="12+", default=None, tagged="12+", tag=0),
        Field("ReplicaId", "int32", "0-14", default=-1),
        Field("ReplicaState", "ReplicaState", "15+", tagged="15+", tag=1, fields=(
            Field("ReplicaId", "int32", "15+", default=-1),
            Field("ReplicaEpoch", "int64", "15+", default=-1),
        )),
        Field("MaxWaitMs", "int32", "0+"),
        Field("MinBytes", "int32", "0+"),
        Field("MaxBytes", "int32", "3+", default=0x7FFFFFFF),
        Field("IsolationLevel", "int8", "4+", default=0),
        Field("SessionId", "int32", "7+", default=0),
        Field("SessionEpoch", "int32", "7+", default=-1),
        Field("Topics", "[]FetchTopic", "0+", fields=(
            Field("Topic", "string", "0-12"),
            Field("TopicId", "uuid", "13+"),
            Field("Partitions", "[]FetchPartition", "0+", fields=(
                Field("Partition", "int32", "0+"),
                Field("CurrentLeaderEpoch", "int32", "9+", default=-1),
                Field("FetchOffset", "int64", "0+"),
                Field("LastFetchedEpoch", "int32", "12+", default=-1),
                Field("LogStartOffset", "int64", "5+", default=-1),
                Field("PartitionMaxBytes", "int32", "0+"),
                Field("ReplicaDirectoryId", "uuid", "17+", tagged="17+", tag=0),
                Field("HighWatermark", "int64", "18+", tagged="18+", tag=1, default=0x7FFFFFFFFFFFFFFF),
            )),
        )),
        Field("ForgottenTopicsData", "[]ForgottenTopic", "7+", fields=(
            Field("Topic", "string", "7-12"),
            Field("TopicId", "uuid", "13+"),
            Field("Partitions", "[]int32", "7+"),
        )),
        Field("RackId", "string", "11+", default=""),
    ))

FETCH_RESPONSE = Message(
    "FetchResponse", api_key=1, kind="response", versions="4-17", flexible="12+", fields=(
        Field("ThrottleTimeMs", "int32", "1+"),
        Field("ErrorCode", "int16", "7+"),
        Field("SessionId", "int32", "7+", default=0),
        Field("Responses", "[]FetchableTopicResponse", "0+", fields=(
            Field("Topic", "string", "0-12"),
            Field("TopicId", "uuid", "13+"),
            Field("Partitions", "[]PartitionData", "0+", fields=(
                Field("PartitionIndex", "int32", "0+"),
                Field("ErrorCode", "int16", "0+"),
                Field("HighWatermark", "int64", "0+"),
                Field("LastStableOffset", "int64", "4+", default=-1),
                Field("LogStartOffset", "int64", "5+", default=-1),
                Field("DivergingEpoch", "EpochEndOffset", "12+", tagged="12+", tag=0, fields=(
                    Field("Epoch", "int32", "12+", default=-1),
                    Field("EndOffset", "int64", "12+", default=-1),
                )),
                Field("CurrentLeader", "LeaderIdAndEpoch", "12+", tagged="12+", tag=1, fields=(
                    Field("LeaderId", "int32", "12+", default=-1),
                    Field("LeaderEpoch", "int32", "12+", default=-1),
                )),
                Field("SnapshotId", "SnapshotId", "12+", tagged="12+", tag=2, fields=(
                    Field("EndOffset", "int64", "0+", default=-1),
                    Field("Epoch", "int32", "0+", default=-1),
                )),
                Field("AbortedTransactions", "[]AbortedTransaction", "4+", nullable="4+", fields=(
                    Field("ProducerId", "int64", "4+"),
                    Field("FirstOffset", "int64", "4+"),
                )),
                Field("PreferredReadReplica", "int32", "11+", default=-1),
                Field("Records", "records", "0+", nullable="0+"),
            )),
        )),
        Field("NodeEndpoints", "[]NodeEndpoint", "16+", tagged="16+", tag=0, fields=(
            Field("NodeId", "int32", "16+"),
            Field("Host", "string", "16+"),
            Field("Port", "int32", "16+"),
            Field("Rack", "string", "16+", nullable="16+", default=None),
        )),
    ))

LIST_OFFSETS_REQUEST = Message(
    "ListOffsetsRequest", api_key=2, kind="request", versions="1-7", flexible="6+", fields=(
        Field("ReplicaId", "int32", "0+"),
        Field("IsolationLevel", "int8", "2+"),
        Field("Topics", "[]ListOffsetsTopic", "0+", fields=(
            Field("Name", "string", "0+"),
            Field("Partitions", "[]ListOffsetsPartition", "0+", fields=(
                Field("PartitionIndex", "int32", "0+"),
                Field("CurrentLeaderEpoch", "int32", "4+", default=-1),
                Field("Timestamp", "int64", "0+"),
                Field("MaxNumOffsets", "int32", "0", default=1),
            )),
        )),
        Field("TimeoutMs", "int32", "10+"),
    ))

LIST_OFFSETS_RESPONSE = Message(
    "ListOffsetsResponse", api_key=2, kind="response", versions="1-7", flexible="6+", fields=(
        Field("ThrottleTimeMs", "int32", "2+"),
        Field("Topics", "[]ListOffsetsTopicResponse", "0+", fields=(
            Field("Name", "string", "0+"),
            Field("Partitions", "[]ListOffsetsPartitionResponse", "0+", fields=(
                Field("PartitionIndex", "int32", "0+"),
                Field("ErrorCode", "int16", "0+"),
                Field("OldStyleOffsets", "[]int64", "0"),
                Field("Timestamp", "int64", "1+", default=-1),
                Field("Offset", "int64", "1+", default=-1),
                Field("LeaderEpoch", "int32", "4+", default=-1),
            )),
        )),
    ))
