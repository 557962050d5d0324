"""The records of KIP-848 consumer groups in `__consumer_offsets`, from Kafka's
group-coordinator/src/main/resources/common/message/ConsumerGroup*{Key,Value}.json.

A key is an int16 record type (3 group metadata, 5 member metadata, 6 target assignment
metadata, 7 a member's target assignment, 8 a member's current assignment; 4, the partition
metadata, Kafka 4.1 no longer writes) followed by a non-flexible struct of that version; a
value is an int16 version (0) followed by a flexible struct. Tagged fields Kafka added later
(MetadataHash, AssignmentEpochs, ...) are not written and are skipped when read.
"""

from __future__ import annotations

from roost.wire.kafka.schema import Field, Message

GROUP_METADATA_TYPE, MEMBER_METADATA_TYPE = 3, 5
TARGET_METADATA_TYPE, TARGET_MEMBER_TYPE, CURRENT_ASSIGNMENT_TYPE = 6, 7, 8


def _group_key(name: str, version: int) -> Message:
    return Message(name, api_key=None, kind="data", versions=str(version), flexible="none", fields=(
        Field("GroupId", "string", str(version)),
    ))


def _member_key(name: str, version: int) -> Message:
    return Message(name, api_key=None, kind="data", versions=str(version), flexible="none", fields=(
        Field("GroupId", "string", str(version)),
        Field("MemberId", "string", str(version)),
    ))


def _topic_partitions(name: str, struct: str = "TopicPartitions") -> Field:
    """Topic ids with partition lists (the struct's name is Kafka's, which differs by record)."""
    return Field(name, f"[]{struct}", "0+", fields=(
        Field("TopicId", "uuid", "0+"),
        Field("Partitions", "[]int32", "0+"),
    ))


CONSUMER_GROUP_METADATA_KEY = _group_key("ConsumerGroupMetadataKey", GROUP_METADATA_TYPE)
CONSUMER_GROUP_METADATA_VALUE = Message(
    "ConsumerGroupMetadataValue", api_key=None, kind="data", versions="0", flexible="0+", fields=(
        Field("Epoch", "int32", "0+"),
    ))

CONSUMER_GROUP_MEMBER_METADATA_KEY = _member_key("ConsumerGroupMemberMetadataKey", MEMBER_METADATA_TYPE)
CONSUMER_GROUP_MEMBER_METADATA_VALUE = Message(
    "ConsumerGroupMemberMetadataValue", api_key=None, kind="data", versions="0", flexible="0+", fields=(
        Field("InstanceId", "string", "0+", nullable="0+"),
        Field("RackId", "string", "0+", nullable="0+"),
        Field("ClientId", "string", "0+"),
        Field("ClientHost", "string", "0+"),
        Field("SubscribedTopicNames", "[]string", "0+"),
        Field("SubscribedTopicRegex", "string", "0+", nullable="0+"),
        Field("RebalanceTimeoutMs", "int32", "0+", default=-1),
        Field("ServerAssignor", "string", "0+", nullable="0+"),
        # A classic member of a consumer group (online migration, KIP-848/KIP-1022): its session
        # timeout and JoinGroup protocols; null (absent) for a consumer-protocol member.
        Field("ClassicMemberMetadata", "ClassicMemberMetadata", "0+", nullable="0+", default=None, tagged="0+",
              tag=0, fields=(
                  Field("SessionTimeoutMs", "int32", "0+"),
                  Field("SupportedProtocols", "[]ClassicProtocol", "0+", fields=(
                      Field("Name", "string", "0+"),
                      Field("Metadata", "bytes", "0+"),
                  )),
              )),
    ))

CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = _group_key("ConsumerGroupTargetAssignmentMetadataKey",
                                                           TARGET_METADATA_TYPE)
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = Message(
    "ConsumerGroupTargetAssignmentMetadataValue", api_key=None, kind="data", versions="0", flexible="0+", fields=(
        Field("AssignmentEpoch", "int32", "0+"),
    ))

CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = _member_key("ConsumerGroupTargetAssignmentMemberKey",
                                                          TARGET_MEMBER_TYPE)
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = Message(
    "ConsumerGroupTargetAssignmentMemberValue", api_key=None, kind="data", versions="0", flexible="0+", fields=(
        _topic_partitions("TopicPartitions", "TopicPartition"),
    ))

CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = _member_key("ConsumerGroupCurrentMemberAssignmentKey",
                                                           CURRENT_ASSIGNMENT_TYPE)
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = Message(
    "ConsumerGroupCurrentMemberAssignmentValue", api_key=None, kind="data", versions="0", flexible="0+", fields=(
        Field("MemberEpoch", "int32", "0+"),
        Field("PreviousMemberEpoch", "int32", "0+"),
        Field("State", "int8", "0+"),  # 0 stable, 1 unrevoked partitions, 2 unreleased partitions
        _topic_partitions("AssignedPartitions"),
        _topic_partitions("PartitionsPendingRevocation"),
    ))

CONSUMER_GROUP_RECORDS: tuple[Message, ...] = (
    CONSUMER_GROUP_METADATA_KEY, CONSUMER_GROUP_METADATA_VALUE,
    CONSUMER_GROUP_MEMBER_METADATA_KEY, CONSUMER_GROUP_MEMBER_METADATA_VALUE,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE,
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
)
