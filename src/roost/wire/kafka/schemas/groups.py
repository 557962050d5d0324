"""The classic consumer-group APIs: FindCoordinator (10), JoinGroup (11), Heartbeat (12),
LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16), DeleteGroups (42) and
OffsetDelete (47), from Kafka's <Name>Request.json / <Name>Response.json."""

from __future__ import annotations

from roost.wire.kafka.schema import Field, Message

FIND_COORDINATOR_REQUEST = Message(
    "FindCoordinatorRequest", api_key=10, kind="request", versions="0-6", flexible="3+", fields=(
        Field("Key", "string", "0-3"),
        Field("KeyType", "int8", "1+", default=0),  # 0 group, 1 transaction, 2 share (v6+)
        # v4+: a batch of keys of one type; v5 may answer TRANSACTION_ABORTABLE (not sent).
        Field("CoordinatorKeys", "[]string", "4+"),
    ))

FIND_COORDINATOR_RESPONSE = Message(
    "FindCoordinatorResponse", api_key=10, kind="response", versions="0-6", flexible="3+", fields=(
        Field("ThrottleTimeMs", "int32", "1+"),
        Field("ErrorCode", "int16", "0-3"),
        Field("ErrorMessage", "string", "1-3", nullable="1-3"),
        Field("NodeId", "int32", "0-3"),
        Field("Host", "string", "0-3"),
        Field("Port", "int32", "0-3"),
        Field("Coordinators", "[]Coordinator", "4+", fields=(
            Field("Key", "string", "4+"),
            Field("NodeId", "int32", "4+"),
            Field("Host", "string", "4+"),
            Field("Port", "int32", "4+"),
            Field("ErrorCode", "int16", "4+"),
            Field("ErrorMessage", "string", "4+", nullable="4+"),
        )),
    ))

JOIN_GROUP_REQUEST = Message(
    "JoinGroupRequest", api_key=11, kind="request", versions="0-7", flexible="6+", fields=(
        Field("GroupId", "string", "0+"),
        Field("SessionTimeoutMs", "int32", "0+"),
        Field("RebalanceTimeoutMs", "int32", "1+", default=-1),
        Field("MemberId", "string", "0+"),
        Field("GroupInstanceId", "string", "5+", nullable="5+", default=None),
        Field("ProtocolType", "string", "0+"),
        Field("Protocols", "[]JoinGroupRequestProtocol", "0+", fields=(
            Field("Name", "string", "0+"),
            Field("Metadata", "bytes", "0+"),
        )),
        Field("Reason", "string", "8+", nullable="8+", default=None),
    ))

JOIN_GROUP_RESPONSE = Message(
    "JoinGroupResponse", api_key=11, kind="response", versions="0-7", flexible="6+", fields=(
        Field("ThrottleTimeMs", "int32", "2+"),
        Field("ErrorCode", "int16", "0+"),
        Field("GenerationId", "int32", "0+", default=-1),
        Field("ProtocolType", "string", "7+", nullable="7+", default=None),
        Field("ProtocolName", "string", "0+", nullable="7+"),
        Field("Leader", "string", "0+"),
        Field("SkipAssignment", "bool", "9+", default=False),
        Field("MemberId", "string", "0+"),
        Field("Members", "[]JoinGroupResponseMember", "0+", fields=(
            Field("MemberId", "string", "0+"),
            Field("GroupInstanceId", "string", "5+", nullable="5+", default=None),
            Field("Metadata", "bytes", "0+"),
        )),
    ))

HEARTBEAT_REQUEST = Message(
    "HeartbeatRequest", api_key=12, kind="request", versions="0-4", flexible="4+", fields=(
        Field("GroupId", "string", "0+"),
        Field("GenerationId", "int32", "0+"),
        Field("MemberId", "string", "0+"),
        Field("GroupInstanceId", "string", "3+", nullable="3+", default=None),
    ))

HEARTBEAT_RESPONSE = Message(
    "HeartbeatResponse", api_key=12, kind="response", versions="0-4", flexible="4+", fields=(
        Field("ThrottleTimeMs", "int32", "1+"),
        Field("ErrorCode", "int16", "0+"),
    ))

LEAVE_GROUP_REQUEST = Message(
    "LeaveGroupRequest", api_key=13, kind="request", versions="0-4", flexible="4+", fields=(
        Field("GroupId", "string", "0+"),
        Field("MemberId", "string", "0-2"),
        Field("Members", "[]MemberIdentity", "3+", fields=(
            Field("MemberId", "string", "3+"),
            Field("GroupInstanceId", "string", "3+", nullable="3+", default=None),
            Field("Reason", "string", "5+", nullable="5+", default=None),
        )),
    ))

LEAVE_GROUP_RESPONSE = Message(
    "LeaveGroupResponse", api_key=13, kind="response", versions="0-4", flexible="4+", fields=(
        Field("ThrottleTimeMs", "int32", "1+"),
        Field("ErrorCode", "int16", "0+"),
        Field("Members", "[]MemberResponse", "3+", fields=(
            Field("MemberId", "string", "3+"),
            Field("GroupInstanceId", "string", "3+", nullable="3+"),
            Field("ErrorCode", "int16", "3+"),
        )),
    ))

SYNC_GROUP_REQUEST = Message(
    "SyncGroupRequest", api_key=14, kind="request", versions="0-5", flexible="4+", fields=(
        Field("GroupId", "string", "0+"),
        Field("GenerationId", "int32", "0+"),
        Field("MemberId", "string", "0+"),
        Field("GroupInstanceId", "string", "3+", nullable="3+", default=None),
        Field("ProtocolType", "string", "5+", nullable="5+", default=None),
        Field("ProtocolName", "string", "5+", nullable="5+", default=None),
        Field("Assignments", "[]SyncGroupRequestAssignment", "0+", fields=(
            Field("MemberId", "string", "0+"),
            Field("Assignment", "bytes", "0+"),
        )),
    ))

SYNC_GROUP_RESPONSE = Message(
    "SyncGroupResponse", api_key=14, kind="response", versions="0-5", flexible="4+", fields=(
        Field("ThrottleTimeMs", "int32", "1+"),
        Field("ErrorCode", "int16", "0+"),
        Field("ProtocolType", "string", "5+", nullable="5+", default=None),
        Field("ProtocolName", "string", "5+", nullable="5+", default=None),
        Field("Assignment", "bytes", "0+"),
    ))

DESCRIBE_GROUPS_REQUEST = Message(
    "DescribeGroupsRequest", api_key=15, kind="request", versions="0-5", flexible="5+", fields=(
        Field("Groups", "[]string", "0+"),
        Field("IncludeAuthorizedOperations", "bool", "3+"),
    ))

DESCRIBE_GROUPS_RESPONSE = Message(
    "DescribeGroupsResponse", api_key=15, kind="response", versions="0-5", flexible="5+", fields=(
        Field("ThrottleTimeMs", "int32", "1+"),
        Field("Groups", "[]DescribedGroup", "0+", fields=(
            Field("ErrorCode", "int16", "0+"),
            Field("ErrorMessage", "string", "6+", nullable="6+", default=None),
            Field("GroupId", "string", "0+"),
            Field("GroupState", "string", "0+"),
            Field("ProtocolType", "string", "0+"),
            Field("ProtocolData", "string", "0+"),
            Field("Members", "[]DescribedGroupMember", "0+", fields=(
                Field("MemberId", "string", "0+"),
                Field("GroupInstanceId", "string", "4+", nullable="4+", default=None),
                Field("ClientId", "string", "0+"),
                Field("ClientHost", "string", "0+"),
                Field("MemberMetadata", "bytes", "0+"),
                Field("MemberAssignment", "bytes", "0+"),
            )),
            Field("AuthorizedOperations", "int32", "3+", default=-2147483648),
        )),
    ))

LIST_GROUPS_REQUEST = Message(
    "ListGroupsRequest", api_key=16, kind="request", versions="0-5", flexible="3+", fields=(
        Field("StatesFilter", "[]string", "4+"),
        Field("TypesFilter", "[]string", "5+"),
    ))

LIST_GROUPS_RESPONSE = Message(
    "ListGroupsResponse", api_key=16, kind="response", versions="0-5", flexible="3+", fields=(
        Field("ThrottleTimeMs", "int32", "1+"),
        Field("ErrorCode", "int16", "0+"),
        Field("Groups", "[]ListedGroup", "0+", fields=(
            Field("GroupId", "string", "0+"),
            Field("ProtocolType", "string", "0+"),
            Field("GroupState", "string", "4+"),
            Field("GroupType", "string", "5+"),
        )),
    ))

DELETE_GROUPS_REQUEST = Message(
    "DeleteGroupsRequest", api_key=42, kind="request", versions="0-2", flexible="2+", fields=(
        Field("GroupsNames", "[]string", "0+"),
    ))

DELETE_GROUPS_RESPONSE = Message(
    "DeleteGroupsResponse", api_key=42, kind="response", versions="0-2", flexible="2+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("Results", "[]DeletableGroupResult", "0+", fields=(
            Field("GroupId", "string", "0+"),
            Field("ErrorCode", "int16", "0+"),
        )),
    ))

OFFSET_DELETE_REQUEST = Message(
    "OffsetDeleteRequest", api_key=47, kind="request", versions="0", flexible="none", fields=(
        Field("GroupId", "string", "0+"),
        Field("Topics", "[]OffsetDeleteRequestTopic", "0+", fields=(
            Field("Name", "string", "0+"),
            Field("Partitions", "[]OffsetDeleteRequestPartition", "0+", fields=(
                Field("PartitionIndex", "int32", "0+"),
            )),
        )),
    ))

OFFSET_DELETE_RESPONSE = Message(
    "OffsetDeleteResponse", api_key=47, kind="response", versions="0", flexible="none", fields=(
        Field("ErrorCode", "int16", "0+"),
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("Topics", "[]OffsetDeleteResponseTopic", "0+", fields=(
            Field("Name", "string", "0+"),
            Field("Partitions", "[]OffsetDeleteResponsePartition", "0+", fields=(
                Field("PartitionIndex", "int32", "0+"),
                Field("ErrorCode", "int16", "0+"),
            )),
        )),
    ))
