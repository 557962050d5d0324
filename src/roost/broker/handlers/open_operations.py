"""Authorized operations on a broker with no authorizer: every operation of the resource's type.

Asked for them (Metadata's `include_*_authorized_operations`, DescribeGroups',
ConsumerGroupDescribe's and ShareGroupDescribe's `include_authorized_operations`, DescribeCluster's
`include_cluster_authorized_operations`; DescribeTopicPartitions unasked), Kafka without an
authorizer answers every operation the resource type has (AuthHelper.authorizedOperations), where
the handlers leave the schema's "not asked" value. With an authorizer, `api_rules.guard` fills
them in from the ACLs instead; this wraps the same routes when there is none. Decisions are pure
(`fill`); `with_every_operation` only wraps the handlers.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Mapping
from typing import Any

from roost.broker.net.request import NO_RESPONSE, Handler, Request
from roost.broker.security.acl import VALID_OPERATIONS, ResourceType
from roost.wire.kafka import ApiKey

ALL: dict[ResourceType, int] = {kind: sum(1 << op for op in ops) for kind, ops in VALID_OPERATIONS.items()}
LAST_METADATA_CLUSTER_OPERATIONS_VERSION = 10  # Metadata v11 dropped them (KIP-700: DescribeCluster)


def fill(key: ApiKey, version: int, body: Mapping[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    """`response` (in place) with the operations Kafka's no-authorizer answer carries."""
    if key == ApiKey.METADATA:
        if body.get("include_topic_authorized_operations"):
            for topic in response["topics"]:  # Kafka sets them for every listed topic, errors too
                topic["topic_authorized_operations"] = ALL[ResourceType.TOPIC]
        if body.get("include_cluster_authorized_operations") and version <= LAST_METADATA_CLUSTER_OPERATIONS_VERSION:
            response["cluster_authorized_operations"] = ALL[ResourceType.CLUSTER]
    elif key in (ApiKey.DESCRIBE_GROUPS, ApiKey.CONSUMER_GROUP_DESCRIBE, ApiKey.SHARE_GROUP_DESCRIBE):
        if body.get("include_authorized_operations"):
            for group in response["groups"]:
                if group.get("error_code", 0) == 0:
                    group["authorized_operations"] = ALL[ResourceType.GROUP]
    elif key == ApiKey.DESCRIBE_CLUSTER:
        if body.get("include_cluster_authorized_operations") and response.get("error_code", 0) == 0:
            response["cluster_authorized_operations"] = ALL[ResourceType.CLUSTER]
    elif key == ApiKey.DESCRIBE_TOPIC_PARTITIONS:
        for topic in response["topics"]:
            if topic.get("error_code", 0) == 0 and topic.get("name"):
                topic["topic_authorized_operations"] = ALL[ResourceType.TOPIC]
    return response


FILLED = (ApiKey.METADATA, ApiKey.DESCRIBE_GROUPS, ApiKey.CONSUMER_GROUP_DESCRIBE, ApiKey.SHARE_GROUP_DESCRIBE,
          ApiKey.DESCRIBE_CLUSTER, ApiKey.DESCRIBE_TOPIC_PARTITIONS)


def with_every_operation(routes: Mapping[ApiKey, Handler]) -> dict[ApiKey, Handler]:
    """`routes` with the describing ones wrapped to fill in every operation (no authorizer)."""
    wrapped = dict(routes)
    for key in FILLED:
        if key in wrapped:
            wrapped[key] = _filling(key, wrapped[key])
    return wrapped


def _filling(key: ApiKey, handler: Handler) -> Handler:
    def handle(request: Request) -> Any:
        result = handler(request)
        if type(result) is dict:
            return fill(key, request.version, request.body, result)
        if result is NO_RESPONSE or not inspect.isawaitable(result):
            return result
        return _later(key, request, result)
    return handle


async def _later(key: ApiKey, request: Request, result: Awaitable[Any]) -> Any:
    response = await result
    return fill(key, request.version, request.body, response) if type(response) is dict else response

