"""KIP-848's requests: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).

The decisions are `ConsumerGroupCoordinator`'s; this module checks that this broker coordinates
the group now (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS otherwise, as the top-level
error), keeps the two protocols apart (a classic group with members refuses consumer-protocol
heartbeats with GROUP_ID_NOT_FOUND unless it converts, as Kafka's online upgrade does
(broker/group/migration.py, `group.consumer.migration.policy`); an empty classic group switches;
a consumer group left with classic members only converts back), and
translates between the wire's topic ids and the core's partitions.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from typing import Any

from roost.broker.group.assignors import TopicPartition
from roost.broker.group.classic_protocol import GroupState
from roost.broker.group.consumer_protocol import LEAVE_EPOCH, MAY_DESCRIBE_TOPIC, HeartbeatRequest
from roost.broker.handlers.groups import GroupContext
from roost.broker.net.request import Request
from roost.wire.kafka.errors import ErrorCode


def _heartbeat_error(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "member_id": None,
            "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}


def _by_topic(partitions: frozenset[TopicPartition]) -> list[dict[str, Any]]:
    grouped: dict[uuid.UUID, list[int]] = {}
    for topic_id, index in sorted(partitions):
        grouped.setdefault(topic_id, []).append(index)
    return [{"topic_id": topic_id, "partitions": indexes} for topic_id, indexes in grouped.items()]


def handle_consumer_group_heartbeat(ctx: GroupContext, request: Request) -> Any:
    body = request.body
    group_id = body["group_id"]
    status = ctx.groups.status(group_id) if group_id else ErrorCode.NONE
    if status != ErrorCode.NONE:
        return _heartbeat_error(status)
    if group_id in ctx.groups.share.groups:
        return _heartbeat_error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
    classic = ctx.groups.coordinator.groups.get(group_id)
    now = ctx.groups.clock_ms()
    owned = body.get("topic_partitions")
    names = body.get("subscribed_topic_names")
    heartbeat = HeartbeatRequest(
        group_id=group_id,
        member_id=body["member_id"],
        member_epoch=body["member_epoch"],
        instance_id=body.get("instance_id"),
        rack_id=body.get("rack_id"),
        rebalance_timeout_ms=body.get("rebalance_timeout_ms", -1),
        subscribed_topic_names=tuple(names) if names is not None else None,
        subscribed_topic_regex=body.get("subscribed_topic_regex"),
        server_assignor=body.get("server_assignor"),
        owned=None if owned is None else frozenset(
            (t["topic_id"], index) for t in owned for index in t["partitions"]),
        client_id=request.header.client_id or "",
        client_host=request.member_host,
        may_describe=body.get(MAY_DESCRIBE_TOPIC),
    )
    if classic is not None:
        invalid = ctx.groups.consumer.invalid(heartbeat)
        if invalid is not None:  # refused before anything changes
            return _heartbeat_error(invalid.error, invalid.message)
        if body["member_epoch"] != 0:
            return _heartbeat_error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if classic.is_empty() and classic.state == GroupState.EMPTY:
            ctx.groups.coordinator.remove_empty(group_id)  # an empty classic group may switch
        else:
            refused = ctx.groups.upgrade(group_id, now)  # a live one converts, if it may
            if refused is not None:
                return _heartbeat_error(ErrorCode.GROUP_ID_NOT_FOUND, refused)
    result = ctx.groups.consumer.heartbeat(now, heartbeat, ctx.groups.topic_view())
    response = {"throttle_time_ms": 0, "error_code": result.error, "error_message": result.message,
                "member_id": result.member_id, "member_epoch": result.member_epoch,
                "heartbeat_interval_ms": result.heartbeat_interval_ms,
                "assignment": None if result.assignment is None else {"topic_partitions": _by_topic(result.assignment)}}
    if result.error == ErrorCode.NONE and body["member_epoch"] == LEAVE_EPOCH:
        ctx.groups.maybe_downgrade(group_id, now)  # only classic members left: a classic group again
    # As Kafka: the answer waits until the group's changed records are in `__consumer_offsets`
    # (replicated as commits are); if they cannot be written, the member is told to retry
    # elsewhere, and its retry with the same epoch is accepted (a lost answer).
    persisted = ctx.groups.persist_consumer_group(group_id, now) if group_id else ErrorCode.NONE
    if isinstance(persisted, ErrorCode):
        return response if persisted == ErrorCode.NONE else _heartbeat_error(persisted)
    return _after_persisted(persisted, response)


async def _after_persisted(persisted: Awaitable[ErrorCode], response: dict[str, Any]) -> dict[str, Any]:
    code = await persisted
    return response if code == ErrorCode.NONE else _heartbeat_error(code)


def handle_consumer_group_describe(ctx: GroupContext, request: Request) -> dict[str, Any]:
    groups = []
    for group_id in request.body["group_ids"]:
        status = ctx.groups.status(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        described = ctx.groups.consumer.describe(group_id) if status == ErrorCode.NONE else None
        if described is not None:
            groups.append(described)
            continue
        message = None
        if status == ErrorCode.NONE:
            status = ErrorCode.GROUP_ID_NOT_FOUND
            message = (f"Group {group_id} is not a consumer group." if group_id in ctx.groups.coordinator.groups
                       else f"Group {group_id} not found.")
        groups.append({"error_code": status, "error_message": message, "group_id": group_id, "group_state": "",
                       "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": []})
    return {"throttle_time_ms": 0, "groups": groups}
