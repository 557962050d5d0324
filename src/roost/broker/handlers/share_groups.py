"""KIP-932's group requests: ShareGroupHeartbeat (76) and ShareGroupDescribe (77).

The decisions are `ShareGroupCoordinator`'s (group/share_group.py); this module checks that
this broker coordinates the group now (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as the
top-level error), keeps share groups apart from classic and consumer groups (an id held by one of
those is GROUP_ID_NOT_FOUND, as Kafka answers), takes the group's heartbeat interval from its
configs, and answers only once the group's changed records are in `__consumer_offsets`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from roost.broker.group.share_group import ShareHeartbeatRequest, by_topic
from roost.broker.handlers.groups import GroupContext
from roost.broker.net.request import Request
from roost.broker.share.group_configs import GroupConfigStore
from roost.clock import now_ms
from roost.wire.kafka.errors import ErrorCode


def _heartbeat_error(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "member_id": None,
            "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}


def handle_share_group_heartbeat(ctx: GroupContext, configs: GroupConfigStore, request: Request) -> Any:
    body = request.body
    group_id = body["group_id"]
    status = ctx.groups.status(group_id) if group_id else ErrorCode.NONE
    if status != ErrorCode.NONE:
        return _heartbeat_error(status)
    if group_id in ctx.groups.consumer.groups or group_id in ctx.groups.coordinator.groups:
        return _heartbeat_error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
    names = body.get("subscribed_topic_names")
    now = now_ms()
    result = ctx.groups.share.heartbeat(now, ShareHeartbeatRequest(
        group_id=group_id,
        member_id=body["member_id"],
        member_epoch=body["member_epoch"],
        rack_id=body.get("rack_id"),
        subscribed_topic_names=tuple(names) if names is not None else None,
        client_id=request.header.client_id or "",
        client_host=request.member_host,
    ), ctx.groups.topic_view(), configs.settings(group_id).heartbeat_interval_ms if group_id else 0)
    assignment = None if result.assignment is None else {"topic_partitions": [
        {"topic_id": topic_id, "partitions": indexes} for topic_id, indexes in by_topic(result.assignment)]}
    response = {"throttle_time_ms": 0, "error_code": result.error, "error_message": result.message,
                "member_id": result.member_id, "member_epoch": result.member_epoch,
                "heartbeat_interval_ms": result.heartbeat_interval_ms, "assignment": assignment}
    if result.error != ErrorCode.NONE:
        return response
    persisted = ctx.groups.persist_consumer_group(group_id, now)
    if isinstance(persisted, ErrorCode):
        return response if persisted == ErrorCode.NONE else _heartbeat_error(persisted)
    return _after_persisted(persisted, response)


async def _after_persisted(persisted: Awaitable[ErrorCode], response: dict[str, Any]) -> dict[str, Any]:
    code = await persisted
    return response if code == ErrorCode.NONE else _heartbeat_error(code)


def handle_share_group_describe(ctx: GroupContext, request: Request) -> dict[str, Any]:
    groups = []
    for group_id in request.body["group_ids"]:
        status = ctx.groups.status(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        described = ctx.groups.share.describe(group_id) if status == ErrorCode.NONE else None
        if described is not None:
            groups.append(described)
            continue
        message = None
        if status == ErrorCode.NONE:
            status = ErrorCode.GROUP_ID_NOT_FOUND
            other = group_id in ctx.groups.coordinator.groups or group_id in ctx.groups.consumer.groups
            message = f"Group {group_id} is not a share group." if other else f"Group {group_id} not found."
        groups.append({"error_code": status, "error_message": message, "group_id": group_id, "group_state": "Dead",
                       "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": []})
    return {"throttle_time_ms": 0, "groups": groups}


def session_timeouts(configs: GroupConfigStore) -> Callable[[str], int]:
    """The group service's source of each share group's session timeout."""
    return lambda group_id: configs.settings(group_id).session_timeout_ms
