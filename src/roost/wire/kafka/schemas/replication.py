"""The inter-broker APIs of Kafka's ZooKeeper mode, and the follower's OffsetForLeaderEpoch:
LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6), ControlledShutdown (7),
OffsetForLeaderEpoch (23) and AlterPartition (56), from Kafka's <Name>Request.json /
<Name>Response.json as of the 3.x line (the first five were removed in Kafka 4.0; see
tests/wire_kafka/kafka_json/README.md for where the reference definitions come from).

Kafka spells the KIP-866 migration flag "isKRaftController", so its key is
`is_k_raft_controller`. ControlledShutdown v0 has a request header without a client id (see
framing.py); the bodies here know nothing of headers.
"""

from __future__ import annotations

from roost.wire.kafka.schema import Field, Message

# Kafka's commonStruct LeaderAndIsrPartitionState: the v0-1 ungrouped list and the v2+ per-topic
# lists carry the same struct (with the topic name only in v0-1).
_LEADER_AND_ISR_PARTITION_STATE = (
    Field("TopicName", "string", "0-1"),
    Field("PartitionIndex", "int32", "0+"),
    Field("ControllerEpoch", "int32", "0+"),
    Field("Leader", "int32", "0+"),
    Field("LeaderEpoch", "int32", "0+"),
    Field("Isr", "[]int32", "0+"),
    Field("PartitionEpoch", "int32", "0+"),  # the partition state znode's version (zkVersion)
    Field("Replicas", "[]int32", "0+"),
    Field("AddingReplicas", "[]int32", "3+"),
    Field("RemovingReplicas", "[]int32", "3+"),
    Field("IsNew", "bool", "1+", default=False),
    Field("LeaderRecoveryState", "int8", "6+", default=0),  # 1 after an unclean election
)

LEADER_AND_ISR_REQUEST = Message(
    "LeaderAndIsrRequest", api_key=4, kind="request", versions="0-7", flexible="4+", fields=(
        Field("ControllerId", "int32", "0+"),
        Field("isKRaftController", "bool", "7+", default=False),
        Field("ControllerEpoch", "int32", "0+"),
        Field("BrokerEpoch", "int64", "2+", default=-1),
        Field("Type", "int8", "5+"),  # 0 unknown, 1 incremental, 2 full
        Field("UngroupedPartitionStates", "[]LeaderAndIsrPartitionState", "0-1",
              fields=_LEADER_AND_ISR_PARTITION_STATE),
        Field("TopicStates", "[]LeaderAndIsrTopicState", "2+", fields=(
            Field("TopicName", "string", "2+"),
            Field("TopicId", "uuid", "5+"),
            Field("PartitionStates", "[]LeaderAndIsrPartitionState", "2+",
                  fields=_LEADER_AND_ISR_PARTITION_STATE),
        )),
        Field("LiveLeaders", "[]LeaderAndIsrLiveLeader", "0+", fields=(
            Field("BrokerId", "int32", "0+"),
            Field("HostName", "string", "0+"),
            Field("Port", "int32", "0+"),
        )),
    ))

_LEADER_AND_ISR_PARTITION_ERROR = (
    Field("TopicName", "string", "0-4"),
    Field("PartitionIndex", "int32", "0+"),
    Field("ErrorCode", "int16", "0+"),
)

LEADER_AND_ISR_RESPONSE = Message(
    "LeaderAndIsrResponse", api_key=4, kind="response", versions="0-7", flexible="4+", fields=(
        Field("ErrorCode", "int16", "0+"),
        Field("PartitionErrors", "[]LeaderAndIsrPartitionError", "0-4",
              fields=_LEADER_AND_ISR_PARTITION_ERROR),
        Field("Topics", "[]LeaderAndIsrTopicError", "5+", fields=(
            Field("TopicId", "uuid", "5+"),
            Field("PartitionErrors", "[]LeaderAndIsrPartitionError", "5+",
                  fields=_LEADER_AND_ISR_PARTITION_ERROR),
        )),
    ))

STOP_REPLICA_REQUEST = Message(
    "StopReplicaRequest", api_key=5, kind="request", versions="0-4", flexible="2+", fields=(
        Field("ControllerId", "int32", "0+"),
        Field("isKRaftController", "bool", "4+", default=False),
        Field("ControllerEpoch", "int32", "0+"),
        Field("BrokerEpoch", "int64", "1+", default=-1),
        Field("DeletePartitions", "bool", "0-2"),
        Field("UngroupedPartitions", "[]StopReplicaPartitionV0", "0", fields=(
            Field("TopicName", "string", "0"),
            Field("PartitionIndex", "int32", "0"),
        )),
        Field("Topics", "[]StopReplicaTopicV1", "1-2", fields=(
            Field("Name", "string", "1-2"),
            Field("PartitionIndexes", "[]int32", "1-2"),
        )),
        Field("TopicStates", "[]StopReplicaTopicState", "3+", fields=(
            Field("TopicName", "string", "3+"),
            Field("PartitionStates", "[]StopReplicaPartitionState", "3+", fields=(
                Field("PartitionIndex", "int32", "3+"),
                # -1: no epoch sent; -2: the topic is being deleted (applied whatever the epoch).
                Field("LeaderEpoch", "int32", "3+", default=-1),
                Field("DeletePartition", "bool", "3+"),
            )),
        )),
    ))

STOP_REPLICA_RESPONSE = Message(
    "StopReplicaResponse", api_key=5, kind="response", versions="0-4", flexible="2+", fields=(
        Field("ErrorCode", "int16", "0+"),
        Field("PartitionErrors", "[]StopReplicaPartitionError", "0+", fields=(
            Field("TopicName", "string", "0+"),
            Field("PartitionIndex", "int32", "0+"),
            Field("ErrorCode", "int16", "0+"),
        )),
    ))

# Kafka's commonStruct UpdateMetadataPartitionState (topic name only in the v0-4 ungrouped list).
_UPDATE_METADATA_PARTITION_STATE = (
    Field("TopicName", "string", "0-4"),
    Field("PartitionIndex", "int32", "0+"),
    Field("ControllerEpoch", "int32", "0+"),
    Field("Leader", "int32", "0+"),
    Field("LeaderEpoch", "int32", "0+"),
    Field("Isr", "[]int32", "0+"),
    Field("ZkVersion", "int32", "0+"),
    Field("Replicas", "[]int32", "0+"),
    Field("OfflineReplicas", "[]int32", "4+"),
)

UPDATE_METADATA_REQUEST = Message(
    "UpdateMetadataRequest", api_key=6, kind="request", versions="0-8", flexible="6+", fields=(
        Field("ControllerId", "int32", "0+"),
        Field("isKRaftController", "bool", "8+", default=False),
        # 0 unknown, 1 incremental, 2 full (sent by a migrating KRaft controller only).
        Field("Type", "int8", "8+", tagged="8+", tag=0, default=0),
        Field("ControllerEpoch", "int32", "0+"),
        Field("BrokerEpoch", "int64", "5+", default=-1),
        Field("UngroupedPartitionStates", "[]UpdateMetadataPartitionState", "0-4",
              fields=_UPDATE_METADATA_PARTITION_STATE),
        Field("TopicStates", "[]UpdateMetadataTopicState", "5+", fields=(
            Field("TopicName", "string", "5+"),
            Field("TopicId", "uuid", "7+"),
            Field("PartitionStates", "[]UpdateMetadataPartitionState", "5+",
                  fields=_UPDATE_METADATA_PARTITION_STATE),
        )),
        Field("LiveBrokers", "[]UpdateMetadataBroker", "0+", fields=(
            Field("Id", "int32", "0+"),
            # v0 carried one host and port per broker; v1+ a list of endpoints.
            Field("V0Host", "string", "0"),
            Field("V0Port", "int32", "0"),
            Field("Endpoints", "[]UpdateMetadataEndpoint", "1+", fields=(
                Field("Port", "int32", "1+"),
                Field("Host", "string", "1+"),
                Field("Listener", "string", "3+"),
                Field("SecurityProtocol", "int16", "1+"),  # 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL
            )),
            Field("Rack", "string", "2+", nullable="0+"),
        )),
    ))

UPDATE_METADATA_RESPONSE = Message(
    "UpdateMetadataResponse", api_key=6, kind="response", versions="0-8", flexible="6+", fields=(
        Field("ErrorCode", "int16", "0+"),
    ))

CONTROLLED_SHUTDOWN_REQUEST = Message(
    "ControlledShutdownRequest", api_key=7, kind="request", versions="0-3", flexible="3+", fields=(
        Field("BrokerId", "int32", "0+"),
        Field("BrokerEpoch", "int64", "2+", default=-1),
    ))

CONTROLLED_SHUTDOWN_RESPONSE = Message(
    "ControlledShutdownResponse", api_key=7, kind="response", versions="0-3", flexible="3+", fields=(
        Field("ErrorCode", "int16", "0+"),
        Field("RemainingPartitions", "[]RemainingPartition", "0+", fields=(
            Field("TopicName", "string", "0+"),
            Field("PartitionIndex", "int32", "0+"),
        )),
    ))

OFFSET_FOR_LEADER_EPOCH_REQUEST = Message(
    "OffsetForLeaderEpochRequest", api_key=23, kind="request", versions="0-4", flexible="4+",
    fields=(
        # -2: a "debug" consumer that may see past the high watermark; -1 a consumer; else a broker.
        Field("ReplicaId", "int32", "3+", default=-2),
        Field("Topics", "[]OffsetForLeaderTopic", "0+", fields=(
            Field("Topic", "string", "0+"),
            Field("Partitions", "[]OffsetForLeaderPartition", "0+", fields=(
                Field("Partition", "int32", "0+"),
                Field("CurrentLeaderEpoch", "int32", "2+", default=-1),  # -1: not fenced
                Field("LeaderEpoch", "int32", "0+"),
            )),
        )),
    ))

OFFSET_FOR_LEADER_EPOCH_RESPONSE = Message(
    "OffsetForLeaderEpochResponse", api_key=23, kind="response", versions="0-4", flexible="4+",
    fields=(
        Field("ThrottleTimeMs", "int32", "2+"),
        Field("Topics", "[]OffsetForLeaderTopicResult", "0+", fields=(
            Field("Topic", "string", "0+"),
            Field("Partitions", "[]EpochEndOffset", "0+", fields=(
                Field("ErrorCode", "int16", "0+"),
                Field("Partition", "int32", "0+"),
                Field("LeaderEpoch", "int32", "1+", default=-1),
                Field("EndOffset", "int64", "0+", default=-1),
            )),
        )),
    ))

ALTER_PARTITION_REQUEST = Message(
    "AlterPartitionRequest", api_key=56, kind="request", versions="0-3", flexible="0+", fields=(
        Field("BrokerId", "int32", "0+"),
        Field("BrokerEpoch", "int64", "0+", default=-1),
        Field("Topics", "[]TopicData", "0+", fields=(
            Field("TopicName", "string", "0-1"),
            Field("TopicId", "uuid", "2+"),
            Field("Partitions", "[]PartitionData", "0+", fields=(
                Field("PartitionIndex", "int32", "0+"),
                Field("LeaderEpoch", "int32", "0+"),
                Field("NewIsr", "[]int32", "0-2"),
                Field("NewIsrWithEpochs", "[]BrokerState", "3+", fields=(  # KIP-903
                    Field("BrokerId", "int32", "3+"),
                    Field("BrokerEpoch", "int64", "3+", default=-1),  # -1: not checked
                )),
                Field("LeaderRecoveryState", "int8", "1+", default=0),
                Field("PartitionEpoch", "int32", "0+"),
            )),
        )),
    ))

ALTER_PARTITION_RESPONSE = Message(
    "AlterPartitionResponse", api_key=56, kind="response", versions="0-3", flexible="0+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("ErrorCode", "int16", "0+"),
        Field("Topics", "[]TopicData", "0+", fields=(
            Field("TopicName", "string", "0-1"),
            Field("TopicId", "uuid", "2+"),
            Field("Partitions", "[]PartitionData", "0+", fields=(
                Field("PartitionIndex", "int32", "0+"),
                Field("ErrorCode", "int16", "0+"),
                Field("LeaderId", "int32", "0+"),
                Field("LeaderEpoch", "int32", "0+"),
                Field("Isr", "[]int32", "0+"),
                Field("LeaderRecoveryState", "int8", "1+", default=0),
                Field("PartitionEpoch", "int32", "0+"),
            )),
        )),
    ))
