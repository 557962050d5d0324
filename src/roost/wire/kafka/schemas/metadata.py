"""Metadata (3) and ApiVersions (18), from Kafka's MetadataRequest/Response.json and
ApiVersionsRequest/Response.json."""

from __future__ import annotations

from roost.wire.kafka.schema import Field, Message

METADATA_REQUEST = Message(
    "MetadataRequest", api_key=3, kind="request", versions="1-12", flexible="9+", fields=(
        # null asks for every topic; an empty list for none.
        Field("Topics", "[]MetadataRequestTopic", "0+", nullable="1+", fields=(
            Field("TopicId", "uuid", "10+"),
            Field("Name", "string", "0+", nullable="10+"),
        )),
        Field("AllowAutoTopicCreation", "bool", "4+", default=True),
        Field("IncludeClusterAuthorizedOperations", "bool", "8-10"),
        Field("IncludeTopicAuthorizedOperations", "bool", "8+"),
    ))

METADATA_RESPONSE = Message(
    "MetadataResponse", api_key=3, kind="response", versions="1-12", flexible="9+", fields=(
        Field("ThrottleTimeMs", "int32", "3+"),
        Field("Brokers", "[]MetadataResponseBroker", "0+", fields=(
            Field("NodeId", "int32", "0+"),
            Field("Host", "string", "0+"),
            Field("Port", "int32", "0+"),
            Field("Rack", "string", "1+", nullable="1+", default=None),
        )),
        Field("ClusterId", "string", "2+", nullable="2+", default=None),
        Field("ControllerId", "int32", "1+", default=-1),
        Field("Topics", "[]MetadataResponseTopic", "0+", fields=(
            Field("ErrorCode", "int16", "0+"),
            Field("Name", "string", "0+", nullable="12+"),
            Field("TopicId", "uuid", "10+"),
            Field("IsInternal", "bool", "1+", default=False),
            Field("Partitions", "[]MetadataResponsePartition", "0+", fields=(
                Field("ErrorCode", "int16", "0+"),
                Field("PartitionIndex", "int32", "0+"),
                Field("LeaderId", "int32", "0+"),
                Field("LeaderEpoch", "int32", "7+", default=-1),
                Field("ReplicaNodes", "[]int32", "0+"),
                Field("IsrNodes", "[]int32", "0+"),
                Field("OfflineReplicas", "[]int32", "5+"),
            )),
            Field("TopicAuthorizedOperations", "int32", "8+", default=-2147483648),
        )),
        Field("ClusterAuthorizedOperations", "int32", "8-10", default=-2147483648),
        Field("ErrorCode", "int16", "13+"),
    ))

API_VERSIONS_REQUEST = Message(
    "ApiVersionsRequest", api_key=18, kind="request", versions="0-3", flexible="3+", fields=(
        Field("ClientSoftwareName", "string", "3+"),
        Field("ClientSoftwareVersion", "string", "3+"),
    ))

API_VERSIONS_RESPONSE = Message(
    "ApiVersionsResponse", api_key=18, kind="response", versions="0-3", flexible="3+", fields=(
        Field("ErrorCode", "int16", "0+"),
        Field("ApiKeys", "[]ApiVersion", "0+", fields=(
            Field("ApiKey", "int16", "0+"),
            Field("MinVersion", "int16", "0+"),
            Field("MaxVersion", "int16", "0+"),
        )),
        Field("ThrottleTimeMs", "int32", "1+"),
        Field("SupportedFeatures", "[]SupportedFeatureKey", "3+", tagged="3+", tag=0, fields=(
            Field("Name", "string", "3+"),
            Field("MinVersion", "int16", "3+"),
            Field("MaxVersion", "int16", "3+"),
        )),
        Field("FinalizedFeaturesEpoch", "int64", "3+", tagged="3+", tag=1, default=-1),
        Field("FinalizedFeatures", "[]FinalizedFeatureKey", "3+", tagged="3+", tag=2, fields=(
            Field("Name", "string", "3+"),
            Field("MaxVersionLevel", "int16", "3+"),
            Field("MinVersionLevel", "int16", "3+"),
        )),
        Field("ZkMigrationReady", "bool", "3+", tagged="3+", tag=3, default=False),
    ))
