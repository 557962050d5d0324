"""Consumer group requests: FindCoordinator, Join/Sync/Heartbeat/Leave, offsets, Describe/List."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from roost.broker.group.coordinator import GroupState
from roost.broker.group.offsets import MAX_METADATA_BYTES, CommittedOffset
from roost.broker.group.service import now_ms
from roost.wire.kafka import RequestHeader
from roost.wire.kafka.errors import ErrorCode

if TYPE_CHECKING:
    from roost.broker.broker import Broker

FIRST_MEMBER_ID_REQUIRED_VERSION = 4
COORDINATOR_GROUP = 0


def handle_find_coordinator(broker: Broker, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
    if body.get("key_type", COORDINATOR_GROUP) != COORDINATOR_GROUP:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST,
                "error_message": "only group coordinators are supported (no transactions)",
                "node_id": -1, "host": "", "port": -1}
    node_id, host, port = broker.coordinator_endpoint(body["key"])
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "node_id": node_id, "host": host, "port": port}


def handle_join_group(broker: Broker, header: RequestHeader, body: dict[str, Any], client_host: str) -> Any:
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[dict[str, Any]] = loop.create_future()

    def reply(response: dict[str, Any]) -> None:
        if not answer.done():
            answer.set_result(response)

    session_timeout = body["session_timeout_ms"]
    broker.groups.coordinator.join(
        now_ms(),
        group_id=body["group_id"],
        member_id=body["member_id"],
        instance_id=body.get("group_instance_id"),
        client_id=header.client_id or "",
        client_host=client_host,
        session_timeout_ms=session_timeout,
        rebalance_timeout_ms=body.get("rebalance_timeout_ms", session_timeout),
        protocol_type=body["protocol_type"],
        protocols=[(p["name"], bytes(p["metadata"])) for p in body["protocols"]],
        require_known_member_id=header.api_version >= FIRST_MEMBER_ID_REQUIRED_VERSION,
        reply=reply,
    )
    if answer.done():
        return answer.result()
    return answer


def handle_sync_group(broker: Broker, header: RequestHeader, body: dict[str, Any]) -> Any:
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[dict[str, Any]] = loop.create_future()

    def reply(response: dict[str, Any]) -> None:
        if not answer.done():
            answer.set_result(response)

    broker.groups.coordinator.sync(
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


def handle_heartbeat(broker: Broker, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
    code = broker.groups.coordinator.heartbeat(
        now_ms(), group_id=body["group_id"], generation=body["generation_id"],
        member_id=body["member_id"], instance_id=body.get("group_instance_id"))
    return {"throttle_time_ms": 0, "error_code": code}


def handle_leave_group(broker: Broker, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
    coordinator = broker.groups.coordinator
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


def handle_offset_commit(broker: Broker, header: RequestHeader, body: dict[str, Any]) -> Any:
    group_id = body["group_id"]
    generation = body.get("generation_id_or_member_epoch", body.get("generation_id", -1))
    member_id = body.get("member_id", "")
    verdict = broker.groups.coordinator.check_commit(group_id, generation, member_id,
                                                     body.get("group_instance_id"))
    if verdict == ErrorCode.NONE and member_id:
        broker.groups.coordinator.touch(now_ms(), group_id, member_id)
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
                if broker.state.partition(name, index) is None:
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
    durable = broker.groups.commit(group_id, accepted)
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


def handle_offset_fetch(broker: Broker, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
    group_id = body["group_id"]
    store = broker.groups.offsets
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


def handle_describe_groups(broker: Broker, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
    groups = []
    for group_id in body["groups"]:
        described = broker.groups.coordinator.describe(group_id)
        if described["group_state"] == GroupState.DEAD.value and group_id in broker.groups.offsets.groups():
            described["group_state"] = GroupState.EMPTY.value  # known by its committed offsets
        groups.append(described)
    return {"throttle_time_ms": 0, "groups": groups}


def handle_list_groups(broker: Broker, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
    states_filter = {s.lower() for s in body.get("states_filter") or []}
    listed: dict[str, tuple[str, str]] = {g: ("consumer", GroupState.EMPTY.value)
                                          for g in broker.groups.offsets.groups()}
    for group_id, protocol_type, state in broker.groups.coordinator.listing():
        listed[group_id] = (protocol_type, state)
    groups = [{"group_id": g, "protocol_type": p, "group_state": s}
              for g, (p, s) in sorted(listed.items())
              if not states_filter or s.lower() in states_filter]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "groups": groups}
