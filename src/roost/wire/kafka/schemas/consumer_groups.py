"""The consumer group protocol of KIP-848: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe
(69), from Kafka's <Name>Request.json / <Name>Response.json. Both are flexible from v0.
ConsumerGroupHeartbeat v1 adds the subscription by regular expression (evaluated on the broker);
ConsumerGroupDescribe v1 (Kafka 4.0, the member type of KIP-1099) is not implemented."""

from __future__ import annotations

from roost.wire.kafka.schema import Field, Message

CONSUMER_GROUP_HEARTBEAT_REQUEST = Message(
    "ConsumerGroupHeartbeatRequest", api_key=68, kind="request", versions="0-1", flexible="0+", fields=(
        Field("GroupId", "string", "0+"),
        Field("MemberId", "string", "0+"),
        # 0 joins, -1 leaves, -2 a static member leaves for a while (keeps its assignment).
        Field("MemberEpoch", "int32", "0+"),
        Field("InstanceId", "string", "0+", nullable="0+", default=None),
        Field("RackId", "string", "0+", nullable="0+", default=None),
        Field("RebalanceTimeoutMs", "int32", "0+", default=-1),  # -1: unchanged
        Field("SubscribedTopicNames", "[]string", "0+", nullable="0+", default=None),  # null: unchanged
        Field("SubscribedTopicRegex", "string", "1+", nullable="1+", default=None),
        Field("ServerAssignor", "string", "0+", nullable="0+", default=None),
        # The partitions the member owns now; null: unchanged since the last heartbeat.
        Field("TopicPartitions", "[]TopicPartitions", "0+", nullable="0+", default=None, fields=(
            Field("TopicId", "uuid", "0+"),
            Field("Partitions", "[]int32", "0+"),
        )),
    ))

CONSUMER_GROUP_HEARTBEAT_RESPONSE = Message(
    "ConsumerGroupHeartbeatResponse", api_key=68, kind="response", versions="0-1", flexible="0+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("ErrorCode", "int16", "0+"),
        Field("ErrorMessage", "string", "0+", nullable="0+", default=None),
        Field("MemberId", "string", "0+", nullable="0+", default=None),
        Field("MemberEpoch", "int32", "0+"),
        Field("HeartbeatIntervalMs", "int32", "0+"),
        # The partitions the member may use now; null: unchanged.
        Field("Assignment", "Assignment", "0+", nullable="0+", default=None, fields=(
            Field("TopicPartitions", "[]TopicPartitions", "0+", fields=(
                Field("TopicId", "uuid", "0+"),
                Field("Partitions", "[]int32", "0+"),
            )),
        )),
    ))

CONSUMER_GROUP_DESCRIBE_REQUEST = Message(
    "ConsumerGroupDescribeRequest", api_key=69, kind="request", versions="0", flexible="0+", fields=(
        Field("GroupIds", "[]string", "0+"),
        Field("IncludeAuthorizedOperations", "bool", "0+"),
    ))

_TOPIC_PARTITIONS = (
    Field("TopicId", "uuid", "0+"),
    Field("TopicName", "string", "0+"),
    Field("Partitions", "[]int32", "0+"),
)

CONSUMER_GROUP_DESCRIBE_RESPONSE = Message(
    "ConsumerGroupDescribeResponse", api_key=69, kind="response", versions="0", flexible="0+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("Groups", "[]DescribedGroup", "0+", fields=(
            Field("ErrorCode", "int16", "0+"),
            Field("ErrorMessage", "string", "0+", nullable="0+", default=None),
            Field("GroupId", "string", "0+"),
            Field("GroupState", "string", "0+"),
            Field("GroupEpoch", "int32", "0+"),
            Field("AssignmentEpoch", "int32", "0+"),
            Field("AssignorName", "string", "0+"),
            Field("Members", "[]Member", "0+", fields=(
                Field("MemberId", "string", "0+"),
                Field("InstanceId", "string", "0+", nullable="0+", default=None),
                Field("RackId", "string", "0+", nullable="0+", default=None),
                Field("MemberEpoch", "int32", "0+"),
                Field("ClientId", "string", "0+"),
                Field("ClientHost", "string", "0+"),
                Field("SubscribedTopicNames", "[]string", "0+"),
                Field("SubscribedTopicRegex", "string", "0+", nullable="0+", default=None),
                Field("Assignment", "Assignment", "0+", fields=(
                    Field("TopicPartitions", "[]TopicPartitions", "0+", fields=_TOPIC_PARTITIONS),
                )),
                Field("TargetAssignment", "Assignment", "0+", fields=(
                    Field("TopicPartitions", "[]TopicPartitions", "0+", fields=_TOPIC_PARTITIONS),
                )),
            )),
            Field("AuthorizedOperations", "int32", "0+", default=-2147483648),
        )),
    ))
