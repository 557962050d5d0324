"""The records of share groups (KIP-932) in `__consumer_offsets`, from Kafka 4.2's
group-coordinator/src/main/resources/common/message/ShareGroup*{Key,Value}.json.

As for consumer groups: a key is an int16 record type followed by a non-flexible struct (version
0); a value an int16 version (0) and a flexible struct. Types: 10 member metadata, 11 group
metadata, 12 target assignment metadata, 13 a member's target assignment, 14 a member's current
assignment, 15 the share-partitions' initialization state. Roost writes 10, 11, 12, 14 and 15 (a
share member takes its target at once, so 13 would repeat 14; share-partitions are initialized
by their leader on first fetch, so 15 lists only InitializedTopics: the partitions the group was
assigned or had its offsets altered on, which DescribeShareGroupOffsets without topics lists and
DeleteShareGroupOffsets removes) and reads what it writes.
"""

from __future__ import annotations

from roost.wire.kafka.schema import Field, Message

SHARE_MEMBER_METADATA_TYPE, SHARE_GROUP_METADATA_TYPE = 10, 11
SHARE_TARGET_METADATA_TYPE, SHARE_TARGET_MEMBER_TYPE, SHARE_CURRENT_ASSIGNMENT_TYPE = 12, 13, 14
SHARE_STATE_PARTITION_METADATA_TYPE = 15


# Kafka 4.2 declares the keys at version 0 with the record type as their apiKey; on disk the int16
# before the key's struct is the record type (share_records.py writes it).
def _group_key(name: str, _record_type: int) -> Message:
    return Message(name, api_key=None, kind="data", versions="0", flexible="none", fields=(
        Field("GroupId", "string", "0"),
    ))


def _member_key(name: str, _record_type: int) -> Message:
    return Message(name, api_key=None, kind="data", versions="0", flexible="none", fields=(
        Field("GroupId", "string", "0"),
        Field("MemberId", "string", "0"),
    ))


SHARE_GROUP_MEMBER_METADATA_KEY = _member_key("ShareGroupMemberMetadataKey", SHARE_MEMBER_METADATA_TYPE)
SHARE_GROUP_MEMBER_METADATA_VALUE = Message(
    "ShareGroupMemberMetadataValue", api_key=None, kind="data", versions="0", flexible="0+", fields=(
        Field("RackId", "string", "0+", nullable="0+"),
        Field("ClientId", "string", "0+"),
        Field("ClientHost", "string", "0+"),
        Field("SubscribedTopicNames", "[]string", "0+"),
    ))

SHARE_GROUP_METADATA_KEY = _group_key("ShareGroupMetadataKey", SHARE_GROUP_METADATA_TYPE)
SHARE_GROUP_METADATA_VALUE = Message(
    "ShareGroupMetadataValue", api_key=None, kind="data", versions="0", flexible="0+", fields=(
        Field("Epoch", "int32", "0+"),
        Field("MetadataHash", "int64", "0+"),  # of the subscribed topics; Roost writes 0
    ))

SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = _group_key("ShareGroupTargetAssignmentMetadataKey",
                                                        SHARE_TARGET_METADATA_TYPE)
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = Message(
    "ShareGroupTargetAssignmentMetadataValue", api_key=None, kind="data", versions="0", flexible="0+", fields=(
        Field("AssignmentEpoch", "int32", "0+"),
    ))

SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = _member_key("ShareGroupCurrentMemberAssignmentKey",
                                                        SHARE_CURRENT_ASSIGNMENT_TYPE)
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = Message(
    "ShareGroupCurrentMemberAssignmentValue", api_key=None, kind="data", versions="0", flexible="0+", fields=(
        Field("MemberEpoch", "int32", "0+"),
        Field("PreviousMemberEpoch", "int32", "0+"),
        Field("State", "int8", "0+"),  # 0 stable (a share member never waits for revocations)
        Field("AssignedPartitions", "[]TopicPartitions", "0+", fields=(
            Field("TopicId", "uuid", "0+"),
            Field("Partitions", "[]int32", "0+"),
        )),
    ))

SHARE_GROUP_STATE_PARTITION_METADATA_KEY = _group_key("ShareGroupStatePartitionMetadataKey",
                                                     SHARE_STATE_PARTITION_METADATA_TYPE)
SHARE_GROUP_STATE_PARTITION_METADATA_VALUE = Message(
    "ShareGroupStatePartitionMetadataValue", api_key=None, kind="data", versions="0", flexible="0+", fields=(
        Field("InitializingTopics", "[]TopicPartitionsInfo", "0+", fields=(
            Field("TopicId", "uuid", "0+"),
            Field("TopicName", "string", "0+"),
            Field("Partitions", "[]int32", "0+"),
        )),
        Field("InitializedTopics", "[]TopicPartitionsInfo", "0+", fields=(
            Field("TopicId", "uuid", "0+"),
            Field("TopicName", "string", "0+"),
            Field("Partitions", "[]int32", "0+"),
        )),
        Field("DeletingTopics", "[]TopicInfo", "0+", fields=(
            Field("TopicId", "uuid", "0+"),
            Field("TopicName", "string", "0+"),
        )),
    ))

SHARE_GROUP_RECORDS: tuple[Message, ...] = (
    SHARE_GROUP_MEMBER_METADATA_KEY, SHARE_GROUP_MEMBER_METADATA_VALUE,
    SHARE_GROUP_METADATA_KEY, SHARE_GROUP_METADATA_VALUE,
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE,
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
    SHARE_GROUP_STATE_PARTITION_METADATA_KEY, SHARE_GROUP_STATE_PARTITION_METADATA_VALUE,
)
