"""Cluster administration: ElectLeaders (43), AlterPartitionReassignments (45),
ListPartitionReassignments (46) and DescribeCluster (60), from Kafka's <Name>Request.json /
<Name>Response.json."""

from __future__ import annotations

from roost.wire.kafka.schema import Field, Message

ELECT_LEADERS_REQUEST = Message(
    "ElectLeadersRequest", api_key=43, kind="request", versions="0-2", flexible="2+", fields=(
        Field("ElectionType", "int8", "1+"),  # 0 preferred, 1 unclean
        Field("TopicPartitions", "[]TopicPartitions", "0+", nullable="0+", fields=(  # null: all
            Field("Topic", "string", "0+"),
            Field("Partitions", "[]int32", "0+"),
        )),
        Field("TimeoutMs", "int32", "0+", default=60000),
    ))

ELECT_LEADERS_RESPONSE = Message(
    "ElectLeadersResponse", api_key=43, kind="response", versions="0-2", flexible="2+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("ErrorCode", "int16", "1+"),
        Field("ReplicaElectionResults", "[]ReplicaElectionResult", "0+", fields=(
            Field("Topic", "string", "0+"),
            Field("PartitionResult", "[]PartitionResult", "0+", fields=(
                Field("PartitionId", "int32", "0+"),
                Field("ErrorCode", "int16", "0+"),
                Field("ErrorMessage", "string", "0+", nullable="0+"),
            )),
        )),
    ))

ALTER_PARTITION_REASSIGNMENTS_REQUEST = Message(
    "AlterPartitionReassignmentsRequest", api_key=45, kind="request", versions="0-1", flexible="0+",
    fields=(
        Field("TimeoutMs", "int32", "0+", default=60000),
        Field("AllowReplicationFactorChange", "bool", "1+", default=True),
        Field("Topics", "[]ReassignableTopic", "0+", fields=(
            Field("Name", "string", "0+"),
            Field("Partitions", "[]ReassignablePartition", "0+", fields=(
                Field("PartitionIndex", "int32", "0+"),
                # null cancels a pending reassignment of the partition.
                Field("Replicas", "[]int32", "0+", nullable="0+", default=None),
            )),
        )),
    ))

ALTER_PARTITION_REASSIGNMENTS_RESPONSE = Message(
    "AlterPartitionReassignmentsResponse", api_key=45, kind="response", versions="0-1", flexible="0+",
    fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("AllowReplicationFactorChange", "bool", "1+", default=True),
        Field("ErrorCode", "int16", "0+"),
        Field("ErrorMessage", "string", "0+", nullable="0+"),
        Field("Responses", "[]ReassignableTopicResponse", "0+", fields=(
            Field("Name", "string", "0+"),
            Field("Partitions", "[]ReassignablePartitionResponse", "0+", fields=(
                Field("PartitionIndex", "int32", "0+"),
                Field("ErrorCode", "int16", "0+"),
                Field("ErrorMessage", "string", "0+", nullable="0+"),
            )),
        )),
    ))

LIST_PARTITION_REASSIGNMENTS_REQUEST = Message(
    "ListPartitionReassignmentsRequest", api_key=46, kind="request", versions="0", flexible="0+",
    fields=(
        Field("TimeoutMs", "int32", "0+", default=60000),
        Field("Topics", "[]ListPartitionReassignmentsTopics", "0+", nullable="0+", default=None,
              fields=(  # null: every reassignment in progress
                  Field("Name", "string", "0+"),
                  Field("PartitionIndexes", "[]int32", "0+"),
              )),
    ))

LIST_PARTITION_REASSIGNMENTS_RESPONSE = Message(
    "ListPartitionReassignmentsResponse", api_key=46, kind="response", versions="0", flexible="0+",
    fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("ErrorCode", "int16", "0+"),
        Field("ErrorMessage", "string", "0+", nullable="0+"),
        Field("Topics", "[]OngoingTopicReassignment", "0+", fields=(
            Field("Name", "string", "0+"),
            Field("Partitions", "[]OngoingPartitionReassignment", "0+", fields=(
                Field("PartitionIndex", "int32", "0+"),
                Field("Replicas", "[]int32", "0+"),
                Field("AddingReplicas", "[]int32", "0+"),
                Field("RemovingReplicas", "[]int32", "0+"),
            )),
        )),
    ))

DESCRIBE_CLUSTER_REQUEST = Message(
    "DescribeClusterRequest", api_key=60, kind="request", versions="0-1", flexible="0+", fields=(
        Field("IncludeClusterAuthorizedOperations", "bool", "0+"),
        Field("EndpointType", "int8", "1+", default=1),  # 1 brokers, 2 controllers
        Field("IncludeFencedBrokers", "bool", "2+"),
    ))

DESCRIBE_CLUSTER_RESPONSE = Message(
    "DescribeClusterResponse", api_key=60, kind="response", versions="0-1", flexible="0+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("ErrorCode", "int16", "0+"),
        Field("ErrorMessage", "string", "0+", nullable="0+", default=None),
        Field("EndpointType", "int8", "1+", default=1),
        Field("ClusterId", "string", "0+"),
        Field("ControllerId", "int32", "0+", default=-1),
        Field("Brokers", "[]DescribeClusterBroker", "0+", fields=(
            Field("BrokerId", "int32", "0+"),
            Field("Host", "string", "0+"),
            Field("Port", "int32", "0+"),
            Field("Rack", "string", "0+", nullable="0+", default=None),
            Field("IsFenced", "bool", "2+"),
        )),
        Field("ClusterAuthorizedOperations", "int32", "0+", default=-2147483648),
    ))
