"""DescribeClientQuotas (48) and AlterClientQuotas (49), from Kafka's message JSON files of the
same names."""

from __future__ import annotations

from roost.wire.kafka.schema import Field, Message

_ENTITY = (
    Field("EntityType", "string", "0+"),
    Field("EntityName", "string", "0+", nullable="0+"),
)

DESCRIBE_CLIENT_QUOTAS_REQUEST = Message(
    "DescribeClientQuotasRequest", api_key=48, kind="request", versions="0-1", flexible="1+", fields=(
        Field("Components", "[]ComponentData", "0+", fields=(
            Field("EntityType", "string", "0+"),
            Field("MatchType", "int8", "0+"),
            Field("Match", "string", "0+", nullable="0+"),
        )),
        Field("Strict", "bool", "0+"),
    ))

DESCRIBE_CLIENT_QUOTAS_RESPONSE = Message(
    "DescribeClientQuotasResponse", api_key=48, kind="response", versions="0-1", flexible="1+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("ErrorCode", "int16", "0+"),
        Field("ErrorMessage", "string", "0+", nullable="0+"),
        Field("Entries", "[]EntryData", "0+", nullable="0+", fields=(
            Field("Entity", "[]EntityData", "0+", fields=_ENTITY),
            Field("Values", "[]ValueData", "0+", fields=(
                Field("Key", "string", "0+"),
                Field("Value", "float64", "0+"),
            )),
        )),
    ))

ALTER_CLIENT_QUOTAS_REQUEST = Message(
    "AlterClientQuotasRequest", api_key=49, kind="request", versions="0-1", flexible="1+", fields=(
        Field("Entries", "[]EntryData", "0+", fields=(
            Field("Entity", "[]EntityData", "0+", fields=_ENTITY),
            Field("Ops", "[]OpData", "0+", fields=(
                Field("Key", "string", "0+"),
                Field("Value", "float64", "0+"),
                Field("Remove", "bool", "0+"),
            )),
        )),
        Field("ValidateOnly", "bool", "0+"),
    ))

ALTER_CLIENT_QUOTAS_RESPONSE = Message(
    "AlterClientQuotasResponse", api_key=49, kind="response", versions="0-1", flexible="1+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("Entries", "[]EntryData", "0+", fields=(
            Field("ErrorCode", "int16", "0+"),
            Field("ErrorMessage", "string", "0+", nullable="0+"),
            Field("Entity", "[]EntityData", "0+", fields=_ENTITY),
        )),
    ))
