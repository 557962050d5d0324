"""Describing what is there: DescribeProducers (61), ListConfigResources (74) and DescribeTopicPartitions (75), from
Kafka's <Name>Request.json / <Name>Response.json (both flexible from their first version)."""

from __future__ import annotations

from roost.wire.kafka.schema import Field, Message

DESCRIBE_PRODUCERS_REQUEST = Message(
    "DescribeProducersRequest", api_key=61, kind="request", versions="0", flexible="0+", fields=(
        Field("Topics", "[]TopicRequest", "0+", fields=(
            Field("Name", "string", "0+"),
            Field("PartitionIndexes", "[]int32", "0+"),
        )),
    ))

DESCRIBE_PRODUCERS_RESPONSE = Message(
    "DescribeProducersResponse", api_key=61, kind="response", versions="0", flexible="0+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("Topics", "[]TopicResponse", "0+", fields=(
            Field("Name", "string", "0+"),
            Field("Partitions", "[]PartitionResponse", "0+", fields=(
                Field("PartitionIndex", "int32", "0+"),
                Field("ErrorCode", "int16", "0+"),
                Field("ErrorMessage", "string", "0+", nullable="0+", default=None),
                Field("ActiveProducers", "[]ProducerState", "0+", fields=(
                    Field("ProducerId", "int64", "0+"),
                    Field("ProducerEpoch", "int32", "0+"),
                    Field("LastSequence", "int32", "0+", default=-1),
                    Field("LastTimestamp", "int64", "0+", default=-1),
                    Field("CoordinatorEpoch", "int32", "0+"),
                    Field("CurrentTxnStartOffset", "int64", "0+", default=-1),
                )),
            )),
        )),
    ))

DESCRIBE_TOPIC_PARTITIONS_REQUEST = Message(
    "DescribeTopicPartitionsRequest", api_key=75, kind="request", versions="0", flexible="0+", fields=(
        Field("Topics", "[]TopicRequest", "0+", fields=(
            Field("Name", "string", "0+"),
        )),
        Field("ResponsePartitionLimit", "int32", "0+", default=2000),
        # Where to start: null from the first partition of the first topic asked for.
        Field("Cursor", "Cursor", "0+", nullable="0+", default=None, fields=(
            Field("TopicName", "string", "0+"),
            Field("PartitionIndex", "int32", "0+"),
        )),
    ))

DESCRIBE_TOPIC_PARTITIONS_RESPONSE = Message(
    "DescribeTopicPartitionsResponse", api_key=75, kind="response", versions="0", flexible="0+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("Topics", "[]DescribeTopicPartitionsResponseTopic", "0+", fields=(
            Field("ErrorCode", "int16", "0+"),
            Field("Name", "string", "0+", nullable="0+"),
            Field("TopicId", "uuid", "0+"),
            Field("IsInternal", "bool", "0+", default=False),
            Field("Partitions", "[]DescribeTopicPartitionsResponsePartition", "0+", fields=(
                Field("ErrorCode", "int16", "0+"),
                Field("PartitionIndex", "int32", "0+"),
                Field("LeaderId", "int32", "0+"),
                Field("LeaderEpoch", "int32", "0+", default=-1),
                Field("ReplicaNodes", "[]int32", "0+"),
                Field("IsrNodes", "[]int32", "0+"),
                Field("EligibleLeaderReplicas", "[]int32", "0+", nullable="0+", default=None),
                Field("LastKnownElr", "[]int32", "0+", nullable="0+", default=None),
                Field("OfflineReplicas", "[]int32", "0+"),
            )),
            Field("TopicAuthorizedOperations", "int32", "0+", default=-2147483648),
        )),
        # Where the next request starts; null when every partition asked for was described.
        Field("NextCursor", "Cursor", "0+", nullable="0+", default=None, fields=(
            Field("TopicName", "string", "0+"),
            Field("PartitionIndex", "int32", "0+"),
        )),
    ))


# Kafka 4.1 (KIP-1142); version 0 was ListClientMetricsResources (Kafka 3.7), which listed only
# client-metrics resources and had no ResourceTypes.
LIST_CONFIG_RESOURCES_REQUEST = Message(
    "ListConfigResourcesRequest", api_key=74, kind="request", versions="0-1", flexible="0+", fields=(
        Field("ResourceTypes", "[]int8", "1+"),
    ))

LIST_CONFIG_RESOURCES_RESPONSE = Message(
    "ListConfigResourcesResponse", api_key=74, kind="response", versions="0-1", flexible="0+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("ErrorCode", "int16", "0+"),
        Field("ConfigResources", "[]ConfigResource", "0+", fields=(
            Field("ResourceName", "string", "0+"),
            Field("ResourceType", "int8", "1+", default=16),
        )),
    ))
