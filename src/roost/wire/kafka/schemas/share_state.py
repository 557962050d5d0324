"""The share coordinator's state APIs (KIP-932; KIP-1226 adds DeliveryCompleteCount):
InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85),
DeleteShareGroupState (86) and ReadShareGroupStateSummary (87), which a share-partition leader
sends to the share coordinator, and the records of `__share_group_state` (ShareSnapshot and
ShareUpdate keys and values), from Kafka 4.2's clients/src/main/resources/common/message/*.json
and share-coordinator/src/main/resources/common/message/*.json. All flexible from v0; the
responses carry no ThrottleTimeMs."""

from __future__ import annotations

from roost.wire.kafka.schema import Field, Message

SHARE_SNAPSHOT_TYPE, SHARE_UPDATE_TYPE = 0, 1


def _state_batches(versions: str = "0+") -> Field:
    return Field("StateBatches", "[]StateBatch", versions, fields=(
        Field("FirstOffset", "int64", "0+"),
        Field("LastOffset", "int64", "0+"),
        Field("DeliveryState", "int8", "0+"),
        Field("DeliveryCount", "int16", "0+"),
    ))


def _request(name: str, api_key: int, versions: str, struct: str, partition_fields: tuple[Field, ...]) -> Message:
    return Message(name, api_key=api_key, kind="request", versions=versions, flexible="0+", fields=(
        Field("GroupId", "string", "0+"),
        Field("Topics", f"[]{struct}", "0+", fields=(
            Field("TopicId", "uuid", "0+"),
            Field("Partitions", "[]PartitionData", "0+", fields=(
                Field("Partition", "int32", "0+"),
                *partition_fields,
            )),
        )),
    ))


def _response(name: str, api_key: int, versions: str, struct: str, partition_fields: tuple[Field, ...]) -> Message:
    return Message(name, api_key=api_key, kind="response", versions=versions, flexible="0+", fields=(
        Field("Results", f"[]{struct}", "0+", fields=(
            Field("TopicId", "uuid", "0+"),
            Field("Partitions", "[]PartitionResult", "0+", fields=(
                Field("Partition", "int32", "0+"),
                Field("ErrorCode", "int16", "0+"),
                Field("ErrorMessage", "string", "0+", nullable="0+", default=None),
                *partition_fields,
            )),
        )),
    ))


INITIALIZE_SHARE_GROUP_STATE_REQUEST = _request(
    "InitializeShareGroupStateRequest", 83, "0", "InitializeStateData", (
        Field("StateEpoch", "int32", "0+"),
        Field("StartOffset", "int64", "0+"),
    ))
INITIALIZE_SHARE_GROUP_STATE_RESPONSE = _response(
    "InitializeShareGroupStateResponse", 83, "0", "InitializeStateResult", ())

READ_SHARE_GROUP_STATE_REQUEST = _request(
    "ReadShareGroupStateRequest", 84, "0", "ReadStateData", (
        Field("LeaderEpoch", "int32", "0+"),
    ))
READ_SHARE_GROUP_STATE_RESPONSE = _response(
    "ReadShareGroupStateResponse", 84, "0", "ReadStateResult", (
        Field("StateEpoch", "int32", "0+"),
        Field("StartOffset", "int64", "0+"),
        _state_batches(),
    ))

WRITE_SHARE_GROUP_STATE_REQUEST = _request(
    "WriteShareGroupStateRequest", 85, "0-1", "WriteStateData", (
        Field("StateEpoch", "int32", "0+"),
        Field("LeaderEpoch", "int32", "0+"),
        Field("StartOffset", "int64", "0+"),
        Field("DeliveryCompleteCount", "int32", "1+", default=-1),
        _state_batches(),
    ))
WRITE_SHARE_GROUP_STATE_RESPONSE = _response(
    "WriteShareGroupStateResponse", 85, "0-1", "WriteStateResult", ())

DELETE_SHARE_GROUP_STATE_REQUEST = _request(
    "DeleteShareGroupStateRequest", 86, "0", "DeleteStateData", ())
DELETE_SHARE_GROUP_STATE_RESPONSE = _response(
    "DeleteShareGroupStateResponse", 86, "0", "DeleteStateResult", ())

READ_SHARE_GROUP_STATE_SUMMARY_REQUEST = _request(
    "ReadShareGroupStateSummaryRequest", 87, "0-1", "ReadStateSummaryData", (
        Field("LeaderEpoch", "int32", "0+"),
    ))
READ_SHARE_GROUP_STATE_SUMMARY_RESPONSE = _response(
    "ReadShareGroupStateSummaryResponse", 87, "0-1", "ReadStateSummaryResult", (
        Field("StateEpoch", "int32", "0+"),
        Field("LeaderEpoch", "int32", "0+"),
        Field("StartOffset", "int64", "0+"),
        Field("DeliveryCompleteCount", "int32", "1+", default=-1),
    ))


# `__share_group_state`: key = int16 record type + a non-flexible v0 struct; value = int16
# version 0 + a flexible struct (null: the key's tombstone).
def _key(name: str) -> Message:
    return Message(name, api_key=None, kind="data", versions="0", flexible="none", fields=(
        Field("GroupId", "string", "0"),
        Field("TopicId", "uuid", "0"),
        Field("Partition", "int32", "0"),
    ))


SHARE_SNAPSHOT_KEY = _key("ShareSnapshotKey")
SHARE_UPDATE_KEY = _key("ShareUpdateKey")
_COMPLETE_COUNT = Field("DeliveryCompleteCount", "int32", "0+", default=-1, tagged="0+", tag=0)
SHARE_SNAPSHOT_VALUE = Message("ShareSnapshotValue", api_key=None, kind="data", versions="0", flexible="0+", fields=(
    Field("SnapshotEpoch", "int32", "0+"),
    Field("StateEpoch", "int32", "0+"),
    Field("LeaderEpoch", "int32", "0+"),
    Field("StartOffset", "int64", "0+"),
    _COMPLETE_COUNT,
    Field("CreateTimestamp", "int64", "0+"),
    Field("WriteTimestamp", "int64", "0+"),
    _state_batches(),
))
SHARE_UPDATE_VALUE = Message("ShareUpdateValue", api_key=None, kind="data", versions="0", flexible="0+", fields=(
    Field("SnapshotEpoch", "int32", "0+"),
    Field("LeaderEpoch", "int32", "0+"),
    Field("StartOffset", "int64", "0+"),
    _COMPLETE_COUNT,
    _state_batches(),
))

SHARE_STATE_RECORDS: tuple[Message, ...] = (SHARE_SNAPSHOT_KEY, SHARE_UPDATE_KEY, SHARE_SNAPSHOT_VALUE,
                                           SHARE_UPDATE_VALUE)
