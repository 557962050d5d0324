"""Consumer group requests: FindCoordinator, Join/Sync/Heartbeat/Leave, offsets, Describe/List."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from roost.broker.group.coordinator import GroupState
from roost.broker.group.offsets import MAX_METADATA_BYTES, CommittedOffset
from roost.broker.group.service import GroupService, now_ms
from roost.broker.metadata.cache import BrokerEndpoint
from roost.broker.request import Request
from roost.wire.kafka.errors import ErrorCode

FIRST_MEMBER_ID_REQUIRED_VERSION = 4
COORDINATOR_GROUP = 0


@dataclass(frozen=True)
class GroupContext:
    """What the group handlers may use."""

    groups: GroupService
    coordinator_for: Callable[[str], BrokerEndpoint | None]  # group id -> its coordinator
    partition_exists: Callable[[str, int], bool]


def handle_find_coordinator(ctx: GroupContext, request: Request) -> dict[str, Any]:
    body = request.body
    if body.get("key_type", COORDINATOR_GROUP) != COORDINATOR_GROUP:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST,
                "error_message": "only group coordinators are supported (no transactions)",
                "node_id": -1, "host": "", "port": -1}
    endpoint = ctx.coordinator_for(body["key"])
    if endpoint is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "error_message": None, "node_id": -1, "host": "", "port": -1}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "node_id": endpoint.node_id, "host": endpoint.host, "port": endpoint.port}


def handle_join_group(ctx: GroupContext, request: Request) -> Any:
    header, body = request.header, request.body
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[dict[str, Any]] = loop.create_future()

    def reply(response: dict[str, Any]) -> None:
        if not answer.done():
            answer.set_result(response)

    session_timeout = body["session_timeout_ms"]
    ctx.groups.coordinator.join(
        now_ms(),
        group_id=body["group_id"],
        member_id=body["member_id"],
        instance_id=body.get("group_instance_id"),
        client_id=header.client_id or "",
        client_host=request.client_host,
        session_timeout_ms=session_timeout,
        rebalance_timeout_ms=body.get("rebalance_timeout_ms", session_timeout),
        protocol_type=body["protocol_type"],
        protocols=[(p["name"], bytes(p["metadata"])) for p in body["protocols"]],
        require_known_member_id=request.version >= FIRST_MEMBER_ID_REQUIRED_VERSION,
        reply=reply,
    )
    if answer.done():
        return answer.result()
    return answer


def handle_sync_group(ctx: GroupContext, request: Request) -> Any:
    body = request.body
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[dict[str, Any]] = loop.create_future()

    def reply(response: dict[str, Any]) -> None:
        if not answer.done():
            answer.set_result(response)

    ctx.groups.coordinator.sync(
        now_ms(),
        group_id=body["group_id"],
        generation=body["generation_id"],
        member_id=body["member_id"],
        instance_id=body.get("group_instance_id"),
        assignments=[(a["member_id"], bytes(a["assignment"])) for a in body.get("assignments") or []],
        reply=reply,
    )
    if answer.done():
        return answer.result()
    return answer


def handle_heartbeat(ctx: GroupContext, request: Request) -> dict[str, Any]:
    body = request.body
    code = ctx.groups.coordinator.heartbeat(
        now_ms(), group_id=body["group_id"], generation=body["generation_id"],
        member_id=body["member_id"], instance_id=body.get("group_instance_id"))
    return {"throttle_time_ms": 0, "error_code": code}


def handle_leave_group(ctx: GroupContext, request: Request) -> dict[str, Any]:
    body = request.body
    coordinator = ctx.groups.coordinator
    group_id = body["group_id"]
    if "members" not in body:  # v0-2: one member, by id
        code = coordinator.leave(now_ms(), group_id=group_id, member_id=body["member_id"], instance_id=None)
        return {"throttle_time_ms": 0, "error_code": code}
    results = []
    for member in body["members"]:
        code = coordinator.leave(now_ms(), group_id=group_id, member_id=member["member_id"],
                                 instance_id=member.get("group_instance_id"))
        results.append({"member_id": member["member_id"], "group_instance_id": member.get("group_instance_id"),
                        "error_code": code})
    top = ErrorCode.NONE if group_id in coordinator.groups else ErrorCode.UNKNOWN_MEMBER_ID
    return {"throttle_time_ms": 0, "error_code": top, "members": results}


def handle_offset_commit(ctx: GroupContext, request: Request) -> Any:
    body = request.body
    group_id = body["group_id"]
    generation = body.get("generation_id_or_member_epoch", body.get("generation_id", -1))
    member_id = body.get("member_id", "")
    verdict = ctx.groups.coordinator.check_commit(group_id, generation, member_id,
                                                     body.get("group_instance_id"))
    if verdict == ErrorCode.NONE and member_id:
        ctx.groups.coordinator.touch(now_ms(), group_id, member_id)
    now = now_ms()
    accepted: dict[tuple[str, int], CommittedOffset] = {}
    topics_out = []
    for topic in body["topics"]:
        name = topic["name"]
        partitions_out = []
        for request in topic["partitions"]:
            index = request["partition_index"]
            metadata = request.get("committed_metadata") or ""
            code = verdict
            if code == ErrorCode.NONE:
                if not ctx.partition_exists(name, index):
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif len(metadata.encode()) > MAX_METADATA_BYTES:
                    code = ErrorCode.OFFSET_METADATA_TOO_LARGE
                else:
                    accepted[(name, index)] = CommittedOffset(
                        request["committed_offset"], request.get("committed_leader_epoch", -1), metadata, now)
            partitions_out.append({"partition_index": index, "error_code": code})
        topics_out.append({"name": name, "partitions": partitions_out})
    response = {"throttle_time_ms": 0, "topics": topics_out}
    if not accepted:
        return response
    durable = ctx.groups.commit(group_id, accepted)
    if durable is None:
        return response
    return _after(durable, response)


async def _after(durable: asyncio.Future[None], response: dict[str, Any]) -> dict[str, Any]:
    try:
        await durable
    except OSError:
        for topic in response["topics"]:
            for partition in topic["partitions"]:
                partition["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
    return response


def handle_offset_fetch(ctx: GroupContext, request: Request) -> dict[str, Any]:
    body = request.body
    group_id = body["group_id"]
    store = ctx.groups.offsets
    requested = body.get("topics")
    if requested is None:  # all committed offsets of the group
        wanted: dict[str, list[int]] = {}
        for (topic, index) in store.for_group(group_id):
            wanted.setdefault(topic, []).append(index)
    else:
        wanted = {t["name"]: list(t["partition_indexes"]) for t in requested}
    topics_out = []
    for name, indexes in wanted.items():
        partitions_out = []
        for index in indexes:
            committed = store.get(group_id, name, index)
            if committed is None:
                partitions_out.append({"partition_index": index, "committed_offset": -1,
                                       "committed_leader_epoch": -1, "metadata": "", "error_code": 0})
            else:
                partitions_out.append({"partition_index": index, "committed_offset": committed.offset,
                                       "committed_leader_epoch": committed.leader_epoch,
                                       "metadata": committed.metadata, "error_code": 0})
        topics_out.append({"name": name, "partitions": partitions_out})
    return {"throttle_time_ms": 0, "topics": topics_out, "error_code": ErrorCode.NONE}


def handle_describe_groups(ctx: GroupContext, request: Request) -> dict[str, Any]:
    groups = []
    for group_id in request.body["groups"]:
        described = ctx.groups.coordinator.describe(group_id)
        if described["group_state"] == GroupState.DEAD.value and group_id in ctx.groups.offsets.groups():
            described["group_state"] = GroupState.EMPTY.value  # known by its committed offsets
        groups.append(described)
    return {"throttle_time_ms": 0, "groups": groups}


def handle_list_groups(ctx: GroupContext, request: Request) -> dict[str, Any]:
    states_filter = {s.lower() for s in request.body.get("states_filter") or []}
    listed: dict[str, tuple[str, str]] = {g: ("consumer", GroupState.EMPTY.value)
                                          for g in ctx.groups.offsets.groups()}
    for group_id, protocol_type, state in ctx.groups.coordinator.listing():
        listed[group_id] = (protocol_type, state)
    groups = [{"group_id": g, "protocol_type": p, "group_state": s}
              for g, (p, s) in sorted(listed.items())
              if not states_filter or s.lower() in states_filter]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "groups": groups}


def no_coordinator(request: Request) -> dict[str, Any]:
    """Group requests while no coordinator serves here (the top-level shape of each API)."""
    return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "error_message": None,
            "node_id": -1, "host": "", "port": -1, "topics": [], "groups": [], "members": [],
            "generation_id": -1, "protocol_type": None, "protocol_name": None, "leader": "",
            "member_id": "", "assignment": b"", "skip_assignment": False}
