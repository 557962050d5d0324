"""ACL administration: DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), from Kafka's
<Name>Request.json / <Name>Response.json: v0-3, flexible from v2; v1 added the pattern type (v0
means LITERAL), v3 allows the USER resource type."""

from __future__ import annotations

from roost.wire.kafka.schema import Field, Message

LITERAL = 3  # PatternType.LITERAL: what a v0 request means


def _filter_fields() -> tuple[Field, ...]:
    return (
        Field("ResourceTypeFilter", "int8", "0+"),
        Field("ResourceNameFilter", "string", "0+", nullable="0+"),
        Field("PatternTypeFilter", "int8", "1+", default=LITERAL),
        Field("PrincipalFilter", "string", "0+", nullable="0+"),
        Field("HostFilter", "string", "0+", nullable="0+"),
        Field("Operation", "int8", "0+"),
        Field("PermissionType", "int8", "0+"),
    )


DESCRIBE_ACLS_REQUEST = Message(
    "DescribeAclsRequest", api_key=29, kind="request", versions="0-3", flexible="2+",
    fields=_filter_fields())

DESCRIBE_ACLS_RESPONSE = Message(
    "DescribeAclsResponse", api_key=29, kind="response", versions="0-3", flexible="2+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("ErrorCode", "int16", "0+"),
        Field("ErrorMessage", "string", "0+", nullable="0+"),
        Field("Resources", "[]DescribeAclsResource", "0+", fields=(
            Field("ResourceType", "int8", "0+"),
            Field("ResourceName", "string", "0+"),
            Field("PatternType", "int8", "1+", default=LITERAL),
            Field("Acls", "[]AclDescription", "0+", fields=(
                Field("Principal", "string", "0+"),
                Field("Host", "string", "0+"),
                Field("Operation", "int8", "0+"),
                Field("PermissionType", "int8", "0+"),
            )),
        )),
    ))

CREATE_ACLS_REQUEST = Message(
    "CreateAclsRequest", api_key=30, kind="request", versions="0-3", flexible="2+", fields=(
        Field("Creations", "[]AclCreation", "0+", fields=(
            Field("ResourceType", "int8", "0+"),
            Field("ResourceName", "string", "0+"),
            Field("ResourcePatternType", "int8", "1+", default=LITERAL),
            Field("Principal", "string", "0+"),
            Field("Host", "string", "0+"),
            Field("Operation", "int8", "0+"),
            Field("PermissionType", "int8", "0+"),
        )),
    ))

CREATE_ACLS_RESPONSE = Message(
    "CreateAclsResponse", api_key=30, kind="response", versions="0-3", flexible="2+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("Results", "[]AclCreationResult", "0+", fields=(
            Field("ErrorCode", "int16", "0+"),
            Field("ErrorMessage", "string", "0+", nullable="0+"),
        )),
    ))

DELETE_ACLS_REQUEST = Message(
    "DeleteAclsRequest", api_key=31, kind="request", versions="0-3", flexible="2+", fields=(
        Field("Filters", "[]DeleteAclsFilter", "0+", fields=_filter_fields()),
    ))

DELETE_ACLS_RESPONSE = Message(
    "DeleteAclsResponse", api_key=31, kind="response", versions="0-3", flexible="2+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("FilterResults", "[]DeleteAclsFilterResult", "0+", fields=(
            Field("ErrorCode", "int16", "0+"),
            Field("ErrorMessage", "string", "0+", nullable="0+"),
            Field("MatchingAcls", "[]DeleteAclsMatchingAcl", "0+", fields=(
                Field("ErrorCode", "int16", "0+"),
                Field("ErrorMessage", "string", "0+", nullable="0+"),
                Field("ResourceType", "int8", "0+"),
                Field("ResourceName", "string", "0+"),
                Field("PatternType", "int8", "1+", default=LITERAL),
                Field("Principal", "string", "0+"),
                Field("Host", "string", "0+"),
                Field("Operation", "int8", "0+"),
                Field("PermissionType", "int8", "0+"),
            )),
        )),
    ))
