"""Topic administration: CreateTopics (19), DeleteTopics (20), DeleteRecords (21),
DescribeConfigs (32), AlterConfigs (33), CreatePartitions (37) and IncrementalAlterConfigs (44),
from Kafka's <Name>Request.json / <Name>Response.json."""

from __future__ import annotations

from roost.wire.kafka.schema import Field, Message

CREATE_TOPICS_REQUEST = Message(
    "CreateTopicsRequest", api_key=19, kind="request", versions="2-5", flexible="5+", fields=(
        Field("Topics", "[]CreatableTopic", "0+", fields=(
            Field("Name", "string", "0+"),
            Field("NumPartitions", "int32", "0+"),  # -1: the broker default (with assignments empty)
            Field("ReplicationFactor", "int16", "0+"),
            Field("Assignments", "[]CreatableReplicaAssignment", "0+", fields=(
                Field("PartitionIndex", "int32", "0+"),
                Field("BrokerIds", "[]int32", "0+"),
            )),
            Field("Configs", "[]CreatableTopicConfig", "0+", fields=(
                Field("Name", "string", "0+"),
                Field("Value", "string", "0+", nullable="0+"),
            )),
        )),
        # Kafka spells these two in lower camel case; the wire does not care.
        Field("timeoutMs", "int32", "0+", default=60000),
        Field("validateOnly", "bool", "1+", default=False),
    ))

CREATE_TOPICS_RESPONSE = Message(
    "CreateTopicsResponse", api_key=19, kind="response", versions="2-5", flexible="5+", fields=(
        Field("ThrottleTimeMs", "int32", "2+"),
        Field("Topics", "[]CreatableTopicResult", "0+", fields=(
            Field("Name", "string", "0+"),
            Field("TopicId", "uuid", "7+"),
            Field("ErrorCode", "int16", "0+"),
            Field("ErrorMessage", "string", "1+", nullable="0+"),
            Field("TopicConfigErrorCode", "int16", "5+", tagged="5+", tag=0),
            Field("NumPartitions", "int32", "5+", default=-1),
            Field("ReplicationFactor", "int16", "5+", default=-1),
            Field("Configs", "[]CreatableTopicConfigs", "5+", nullable="5+", fields=(
                Field("Name", "string", "5+"),
                Field("Value", "string", "5+", nullable="5+"),
                Field("ReadOnly", "bool", "5+"),
                Field("ConfigSource", "int8", "5+", default=-1),
                Field("IsSensitive", "bool", "5+"),
            )),
        )),
    ))

DELETE_TOPICS_REQUEST = Message(
    "DeleteTopicsRequest", api_key=20, kind="request", versions="1-5", flexible="4+", fields=(
        Field("Topics", "[]DeleteTopicState", "6+", fields=(
            Field("Name", "string", "6+", nullable="6+", default=None),
            Field("TopicId", "uuid", "6+"),
        )),
        Field("TopicNames", "[]string", "0-5"),
        Field("TimeoutMs", "int32", "0+"),
    ))

DELETE_TOPICS_RESPONSE = Message(
    "DeleteTopicsResponse", api_key=20, kind="response", versions="1-5", flexible="4+", fields=(
        Field("ThrottleTimeMs", "int32", "1+"),
        Field("Responses", "[]DeletableTopicResult", "0+", fields=(
            Field("Name", "string", "0+", nullable="6+"),
            Field("TopicId", "uuid", "6+"),
            Field("ErrorCode", "int16", "0+"),
            Field("ErrorMessage", "string", "5+", nullable="5+", default=None),
        )),
    ))

DELETE_RECORDS_REQUEST = Message(
    "DeleteRecordsRequest", api_key=21, kind="request", versions="0-2", flexible="2+", fields=(
        Field("Topics", "[]DeleteRecordsTopic", "0+", fields=(
            Field("Name", "string", "0+"),
            Field("Partitions", "[]DeleteRecordsPartition", "0+", fields=(
                Field("PartitionIndex", "int32", "0+"),
                Field("Offset", "int64", "0+"),  # -1: up to the high watermark
            )),
        )),
        Field("TimeoutMs", "int32", "0+"),
    ))

DELETE_RECORDS_RESPONSE = Message(
    "DeleteRecordsResponse", api_key=21, kind="response", versions="0-2", flexible="2+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("Topics", "[]DeleteRecordsTopicResult", "0+", fields=(
            Field("Name", "string", "0+"),
            Field("Partitions", "[]DeleteRecordsPartitionResult", "0+", fields=(
                Field("PartitionIndex", "int32", "0+"),
                Field("LowWatermark", "int64", "0+"),
                Field("ErrorCode", "int16", "0+"),
            )),
        )),
    ))

DESCRIBE_CONFIGS_REQUEST = Message(
    "DescribeConfigsRequest", api_key=32, kind="request", versions="1-3", flexible="4+", fields=(
        Field("Resources", "[]DescribeConfigsResource", "0+", fields=(
            Field("ResourceType", "int8", "0+"),  # 2 topic, 4 broker, 8 broker logger
            Field("ResourceName", "string", "0+"),
            Field("ConfigurationKeys", "[]string", "0+", nullable="0+"),  # null: all of them
        )),
        Field("IncludeSynonyms", "bool", "1+", default=False),
        Field("IncludeDocumentation", "bool", "3+", default=False),
    ))

DESCRIBE_CONFIGS_RESPONSE = Message(
    "DescribeConfigsResponse", api_key=32, kind="response", versions="1-3", flexible="4+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("Results", "[]DescribeConfigsResult", "0+", fields=(
            Field("ErrorCode", "int16", "0+"),
            Field("ErrorMessage", "string", "0+", nullable="0+"),
            Field("ResourceType", "int8", "0+"),
            Field("ResourceName", "string", "0+"),
            Field("Configs", "[]DescribeConfigsResourceResult", "0+", fields=(
                Field("Name", "string", "0+"),
                Field("Value", "string", "0+", nullable="0+"),
                Field("ReadOnly", "bool", "0+"),
                Field("ConfigSource", "int8", "1+", default=-1),
                Field("IsDefault", "bool", "0"),
                Field("IsSensitive", "bool", "0+"),
                Field("Synonyms", "[]DescribeConfigsSynonym", "1+", fields=(
                    Field("Name", "string", "1+"),
                    Field("Value", "string", "1+", nullable="0+"),
                    Field("Source", "int8", "1+"),
                )),
                Field("ConfigType", "int8", "3+", default=0),
                Field("Documentation", "string", "3+", nullable="0+"),
            )),
        )),
    ))

CREATE_PARTITIONS_REQUEST = Message(
    "CreatePartitionsRequest", api_key=37, kind="request", versions="0-2", flexible="2+", fields=(
        Field("Topics", "[]CreatePartitionsTopic", "0+", fields=(
            Field("Name", "string", "0+"),
            Field("Count", "int32", "0+"),
            Field("Assignments", "[]CreatePartitionsAssignment", "0+", nullable="0+", fields=(
                Field("BrokerIds", "[]int32", "0+"),
            )),
        )),
        Field("TimeoutMs", "int32", "0+"),
        Field("ValidateOnly", "bool", "0+"),
    ))

CREATE_PARTITIONS_RESPONSE = Message(
    "CreatePartitionsResponse", api_key=37, kind="response", versions="0-2", flexible="2+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("Results", "[]CreatePartitionsTopicResult", "0+", fields=(
            Field("Name", "string", "0+"),
            Field("ErrorCode", "int16", "0+"),
            Field("ErrorMessage", "string", "0+", nullable="0+", default=None),
        )),
    ))

ALTER_CONFIGS_REQUEST = Message(
    "AlterConfigsRequest", api_key=33, kind="request", versions="0-2", flexible="2+", fields=(
        Field("Resources", "[]AlterConfigsResource", "0+", fields=(
            Field("ResourceType", "int8", "0+"),  # 2 topic, 4 broker
            Field("ResourceName", "string", "0+"),
            Field("Configs", "[]AlterableConfig", "0+", fields=(
                Field("Name", "string", "0+"),
                Field("Value", "string", "0+", nullable="0+"),
            )),
        )),
        Field("ValidateOnly", "bool", "0+"),
    ))

ALTER_CONFIGS_RESPONSE = Message(
    "AlterConfigsResponse", api_key=33, kind="response", versions="0-2", flexible="2+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("Responses", "[]AlterConfigsResourceResponse", "0+", fields=(
            Field("ErrorCode", "int16", "0+"),
            Field("ErrorMessage", "string", "0+", nullable="0+"),
            Field("ResourceType", "int8", "0+"),
            Field("ResourceName", "string", "0+"),
        )),
    ))

INCREMENTAL_ALTER_CONFIGS_REQUEST = Message(
    "IncrementalAlterConfigsRequest", api_key=44, kind="request", versions="0-1", flexible="1+", fields=(
        Field("Resources", "[]AlterConfigsResource", "0+", fields=(
            Field("ResourceType", "int8", "0+"),
            Field("ResourceName", "string", "0+"),
            Field("Configs", "[]AlterableConfig", "0+", fields=(
                Field("Name", "string", "0+"),
                Field("ConfigOperation", "int8", "0+"),  # 0 set, 1 delete, 2 append, 3 subtract
                Field("Value", "string", "0+", nullable="0+"),
            )),
        )),
        Field("ValidateOnly", "bool", "0+"),
    ))

INCREMENTAL_ALTER_CONFIGS_RESPONSE = Message(
    "IncrementalAlterConfigsResponse", api_key=44, kind="response", versions="0-1", flexible="1+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("Responses", "[]AlterConfigsResourceResponse", "0+", fields=(
            Field("ErrorCode", "int16", "0+"),
            Field("ErrorMessage", "string", "0+", nullable="0+"),
            Field("ResourceType", "int8", "0+"),
            Field("ResourceName", "string", "0+"),
        )),
    ))
