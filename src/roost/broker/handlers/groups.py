"""Consumer group requests: FindCoordinator, Join/Sync/Heartbeat/Leave, offsets, Describe/List,
DeleteGroups and OffsetDelete.

Every group request first asks the service whether this broker coordinates the group now
(NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS otherwise) and puts that error where Kafka does:
the top-level error of JoinGroup, SyncGroup, Heartbeat and LeaveGroup (during a load Kafka answers
a heartbeat NONE and a sync REBALANCE_IN_PROGRESS, and so does Roost); each partition of
OffsetCommit; each partition of OffsetFetch v1, its top-level error from v2; each group of
DescribeGroups and DeleteGroups; the top-level error of OffsetDelete. ListGroups lists the groups
of the partitions it leads and has loaded, with COORDINATOR_LOAD_IN_PROGRESS while any is still
loading.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from roost.broker.group.classic_protocol import GroupState, join_error, sync_error
from roost.broker.group.offsets import MAX_METADATA_BYTES, CommittedOffset
from roost.broker.group.service import GroupService
from roost.broker.metadata.cache import BrokerEndpoint
from roost.broker.net.request import Request
from roost.broker.share.keys import SharePartitionKey
from roost.wire.kafka.errors import ErrorCode

FIRST_MEMBER_ID_REQUIRED_VERSION = 4
FIRST_NULLABLE_PROTOCOL_NAME_VERSION = 7  # JoinGroup
FIRST_SYNC_PROTOCOL_FIELDS_VERSION = 5  # SyncGroup: protocol type and name must be given
FIRST_OFFSET_FETCH_TOP_LEVEL_ERROR_VERSION = 2
COORDINATOR_GROUP = 0
COORDINATOR_SHARE = 2  # "<group>:<topic id, base64url>:<partition>": the share coordinator (KIP-932)
FIRST_BATCHED_FIND_COORDINATOR_VERSION = 4
FIRST_SHARE_FIND_COORDINATOR_VERSION = 6
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


@dataclass(frozen=True)
class GroupContext:
    """What the group handlers may use."""

    groups: GroupService
    partition_exists: Callable[[str, int], bool]  # in the metadata cache
    # FindCoordinator key type 2: the share coordinator's broker for a parsed share-partition key
    # (its `__share_group_state` partition's leader), or None while there is none. Until a share
    # coordinator is installed, every such key is COORDINATOR_NOT_AVAILABLE.
    share_coordinator_for: Callable[[SharePartitionKey], BrokerEndpoint | None] | None = None
    # DeleteGroups of a share group: removes the state of its share-partitions from the share
    # coordinator first (DeleteShareGroupState) and answers NONE or why the group must stay
    # (NON_EMPTY_GROUP, the persister's error). None: share groups go without their state.
    delete_share_state: Callable[[str], Awaitable[ErrorCode]] | None = None


def handle_find_coordinator(ctx: GroupContext, request: Request) -> dict[str, Any]:
    body = request.body
    if body.get("key_type", COORDINATOR_GROUP) == COORDINATOR_SHARE:
        return _find_share_coordinator(ctx, request)
    if body.get("key_type", COORDINATOR_GROUP) != COORDINATOR_GROUP:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST,
                "error_message": "only group coordinators are found here (transactions: handlers/txn.py)",
                "node_id": -1, "host": "", "port": -1}
    endpoint: BrokerEndpoint | None = ctx.groups.coordinator_for(body["key"])
    if endpoint is not None:
        endpoint = endpoint.on_listener(request.listener)  # the address of the client's listener
    if endpoint is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "error_message": None, "node_id": -1, "host": "", "port": -1}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "node_id": endpoint.node_id, "host": endpoint.host, "port": endpoint.port}


def _find_share_coordinator(ctx: GroupContext, request: Request) -> dict[str, Any]:
    """Kafka's getCoordinator for KeyType SHARE: only from v6, only a well-formed key."""
    def refused(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "node_id": -1, "host": "",
                "port": -1}
    if request.version < FIRST_SHARE_FIND_COORDINATOR_VERSION:
        return refused(ErrorCode.INVALID_REQUEST, "share coordinators are found from FindCoordinator v6 on")
    key = SharePartitionKey.parse(request.body["key"])
    if key is None:
        return refused(ErrorCode.INVALID_REQUEST, f"malformed share coordinator key {request.body['key']!r}")
    endpoint = ctx.share_coordinator_for(key) if ctx.share_coordinator_for is not None else None
    if endpoint is not None:
        endpoint = endpoint.on_listener(request.listener)
    if endpoint is None:
        return refused(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "node_id": endpoint.node_id, "host": endpoint.host, "port": endpoint.port}


def handle_join_group(ctx: GroupContext, request: Request) -> Any:
    answer = _join_group(ctx, request)
    if request.version >= FIRST_NULLABLE_PROTOCOL_NAME_VERSION:
        if isinstance(answer, dict):
            return _null_protocol_name_on_error(answer)
        return _join_answer_then(answer, _null_protocol_name_on_error)
    return answer


def _null_protocol_name_on_error(answer: dict[str, Any]) -> dict[str, Any]:
    """JoinGroup v7+: a failed join names no protocol (null, as Kafka answers), not ""."""
    if answer["error_code"] != ErrorCode.NONE and not answer.get("protocol_name"):
        answer["protocol_name"] = None
    return answer


async def _join_answer_then(answer: Awaitable[dict[str, Any]],
                            then: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    return then(await answer)


def _join_group(ctx: GroupContext, request: Request) -> Any:
    header, body = request.header, request.body
    status = ctx.groups.status(body["group_id"])
    if status != ErrorCode.NONE:
        return join_error(status, body["member_id"])
    if body["group_id"] in ctx.groups.share.groups:
        return join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, body["member_id"])
    if ctx.groups.consumer.is_active(body["group_id"]):
        return _classic_join_to_consumer_group(ctx, request)
    if ctx.groups.consumer.remove_empty(body["group_id"]):  # an empty one may switch to classic
        ctx.groups.persist_consumer_group(body["group_id"], ctx.groups.clock_ms())
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[dict[str, Any]] = loop.create_future()

    def reply(response: dict[str, Any]) -> None:
        if not answer.done():
            answer.set_result(response)

    session_timeout = body["session_timeout_ms"]
    ctx.groups.coordinator.join(
        ctx.groups.clock_ms(),
        group_id=body["group_id"],
        member_id=body["member_id"],
        instance_id=body.get("group_instance_id"),
        client_id=header.client_id or "",
        client_host=request.member_host,
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


def _classic_join_to_consumer_group(ctx: GroupContext, request: Request) -> Any:
    """A classic member joins a consumer group with members (Kafka's online migration): answered
    at once, once the group's changed records are written."""
    header, body = request.header, request.body
    group_id = body["group_id"]
    now = ctx.groups.clock_ms()
    session_timeout = body["session_timeout_ms"]
    limits = ctx.groups.coordinator.limits
    if not (limits.min_session_timeout_ms <= session_timeout <= limits.max_session_timeout_ms):
        return join_error(ErrorCode.INVALID_SESSION_TIMEOUT, body["member_id"])
    answer = ctx.groups.consumer.classic_join(
        now, group_id, body["member_id"], body.get("group_instance_id"), header.client_id or "",
        request.member_host, session_timeout, body.get("rebalance_timeout_ms", session_timeout),
        body["protocol_type"], [(p["name"], bytes(p["metadata"])) for p in body["protocols"]],
        request.version >= FIRST_MEMBER_ID_REQUIRED_VERSION, ctx.groups.topic_view())
    if answer["error_code"] != ErrorCode.NONE:
        return answer
    return _when_persisted(ctx, group_id, now, answer, lambda code: join_error(code, answer["member_id"]))


def _when_persisted(ctx: GroupContext, group_id: str, now: int, answer: dict[str, Any],
                    failed: Callable[[ErrorCode], dict[str, Any]]) -> Any:
    """`answer` once the consumer group's changed records are in `__consumer_offsets` (as the
    ConsumerGroupHeartbeat answers), else `failed(the coordinator error)`."""
    persisted = ctx.groups.persist_consumer_group(group_id, now)
    if isinstance(persisted, ErrorCode):
        return answer if persisted == ErrorCode.NONE else failed(persisted)

    async def later(done: Awaitable[ErrorCode]) -> dict[str, Any]:
        code = await done
        return answer if code == ErrorCode.NONE else failed(code)
    return later(persisted)


def handle_sync_group(ctx: GroupContext, request: Request) -> Any:
    body = request.body
    if request.version >= FIRST_SYNC_PROTOCOL_FIELDS_VERSION and (
            body.get("protocol_type") is None or body.get("protocol_name") is None):
        # Kafka's SyncGroupRequest.areMandatoryProtocolTypeAndNamePresent, checked first.
        return sync_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    if not body["group_id"]:
        return sync_error(ErrorCode.INVALID_GROUP_ID)
    status = ctx.groups.status(body["group_id"])
    if status == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
        # Kafka's answer: the rebalance this sync belongs to is lost with the old coordinator;
        # the member joins again here, without looking for the coordinator (old clients do not
        # know COORDINATOR_LOAD_IN_PROGRESS in SyncGroup).
        return sync_error(ErrorCode.REBALANCE_IN_PROGRESS)
    if status != ErrorCode.NONE:
        return sync_error(status)
    if body["group_id"] in ctx.groups.consumer.groups:  # a classic member of a consumer group
        code, assignment = ctx.groups.consumer.classic_sync(
            ctx.groups.clock_ms(), body["group_id"], body["member_id"], body.get("group_instance_id"),
            body["generation_id"], body.get("protocol_type"), body.get("protocol_name"))
        if code != ErrorCode.NONE:
            return sync_error(code)
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "protocol_type": body.get("protocol_type"),
                "protocol_name": body.get("protocol_name"), "assignment": assignment}
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[dict[str, Any]] = loop.create_future()

    def reply(response: dict[str, Any]) -> None:
        if not answer.done():
            answer.set_result(response)

    ctx.groups.coordinator.sync(
        ctx.groups.clock_ms(),
        group_id=body["group_id"],
        generation=body["generation_id"],
        member_id=body["member_id"],
        instance_id=body.get("group_instance_id"),
        assignments=[(a["member_id"], bytes(a["assignment"])) for a in body.get("assignments") or []],
        reply=reply,
        protocol_type=body.get("protocol_type"),
        protocol_name=body.get("protocol_name"),
    )
    if answer.done():
        return answer.result()
    return answer


def handle_heartbeat(ctx: GroupContext, request: Request) -> dict[str, Any]:
    body = request.body
    if not body["group_id"]:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_GROUP_ID}
    status = ctx.groups.status(body["group_id"])
    if status == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
        # Kafka answers a heartbeat blindly while the group loads: the member stays put.
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE}
    if status != ErrorCode.NONE:
        return {"throttle_time_ms": 0, "error_code": status}
    if body["group_id"] in ctx.groups.consumer.groups:  # a classic member of a consumer group
        code = ctx.groups.consumer.classic_heartbeat(
            ctx.groups.clock_ms(), body["group_id"], body["member_id"], body.get("group_instance_id"),
            body["generation_id"])
        return {"throttle_time_ms": 0, "error_code": code}
    code = ctx.groups.coordinator.heartbeat(
        ctx.groups.clock_ms(), group_id=body["group_id"], generation=body["generation_id"],
        member_id=body["member_id"], instance_id=body.get("group_instance_id"))
    return {"throttle_time_ms": 0, "error_code": code}


def handle_leave_group(ctx: GroupContext, request: Request) -> Any:
    body = request.body
    coordinator = ctx.groups.coordinator
    group_id = body["group_id"]
    status = ctx.groups.status(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
    if status != ErrorCode.NONE:
        return {"throttle_time_ms": 0, "error_code": status, "members": []}
    if group_id in ctx.groups.consumer.groups:
        return _classic_leave_from_consumer_group(ctx, request)
    if "members" not in body:  # v0-2: one member, by id
        code = coordinator.leave(ctx.groups.clock_ms(), group_id=group_id, member_id=body["member_id"], instance_id=None)
        return {"throttle_time_ms": 0, "error_code": code}
    results = []
    for member in body["members"]:
        code = coordinator.leave(ctx.groups.clock_ms(), group_id=group_id, member_id=member["member_id"],
                                 instance_id=member.get("group_instance_id"))
        results.append({"member_id": member["member_id"], "group_instance_id": member.get("group_instance_id"),
                        "error_code": code})
    top = ErrorCode.NONE if group_id in coordinator.groups else ErrorCode.UNKNOWN_MEMBER_ID
    return {"throttle_time_ms": 0, "error_code": top, "members": results}


def _classic_leave_from_consumer_group(ctx: GroupContext, request: Request) -> Any:
    """Classic members leave a consumer group (Kafka's classicGroupLeaveToConsumerGroup); if only
    classic members remain, it converts back to a classic group."""
    body = request.body
    group_id = body["group_id"]
    now = ctx.groups.clock_ms()
    leaving = body["members"] if "members" in body else [{"member_id": body["member_id"]}]
    results = []
    for member in leaving:
        code = ctx.groups.consumer.classic_leave(group_id, member["member_id"], member.get("group_instance_id"))
        results.append({"member_id": member["member_id"], "group_instance_id": member.get("group_instance_id"),
                        "error_code": code})
    if any(r["error_code"] == ErrorCode.NONE for r in results):
        ctx.groups.maybe_downgrade(group_id, now)
    answer: dict[str, Any] = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "members": results}
    if "members" not in body:
        answer = {"throttle_time_ms": 0, "error_code": results[0]["error_code"]}
    return _when_persisted(ctx, group_id, now, answer,
                           lambda code: {"throttle_time_ms": 0, "error_code": code, "members": []})


def handle_offset_commit(ctx: GroupContext, request: Request) -> Any:
    body = request.body
    group_id = body["group_id"]
    generation = body.get("generation_id_or_member_epoch", body.get("generation_id", -1))
    member_id = body.get("member_id", "")
    verdict = ctx.groups.status(group_id)
    consumer_protocol = group_id in ctx.groups.consumer.groups
    if verdict == ErrorCode.NONE and consumer_protocol:
        # KIP-848: the generation field carries the member epoch (STALE_MEMBER_EPOCH if not the current).
        verdict = ctx.groups.consumer.check_commit(group_id, member_id, generation, request.version)
    elif verdict == ErrorCode.NONE:
        verdict = ctx.groups.coordinator.check_commit(group_id, generation, member_id,
                                                      body.get("group_instance_id"))
    now = ctx.groups.clock_ms()
    if verdict == ErrorCode.NONE and member_id:
        (ctx.groups.consumer if consumer_protocol else ctx.groups.coordinator).touch(now, group_id, member_id)
    accepted: dict[tuple[str, int], CommittedOffset] = {}
    waiting: list[dict[str, Any]] = []  # the entries whose code is the commit's outcome
    topics_out = []
    for topic in body["topics"]:
        name = topic["name"]
        partitions_out = []
        for wanted in topic["partitions"]:
            index = wanted["partition_index"]
            metadata = wanted.get("committed_metadata") or ""
            code = verdict
            if code == ErrorCode.NONE:
                if not ctx.partition_exists(name, index):
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif len(metadata.encode()) > MAX_METADATA_BYTES:
                    code = ErrorCode.OFFSET_METADATA_TOO_LARGE
                else:
                    accepted[(name, index)] = CommittedOffset(
                        wanted["committed_offset"], wanted.get("committed_leader_epoch", -1), metadata, now)
            entry = {"partition_index": index, "error_code": code}
            if (name, index) in accepted:
                waiting.append(entry)
            partitions_out.append(entry)
        topics_out.append({"name": name, "partitions": partitions_out})
    response = {"throttle_time_ms": 0, "topics": topics_out}
    if not accepted:
        return response
    outcome = ctx.groups.commit(group_id, accepted, now)
    if isinstance(outcome, ErrorCode):
        _set_codes(waiting, outcome)
        return response
    return _after(outcome, waiting, response)


def _set_codes(entries: list[dict[str, Any]], code: ErrorCode) -> None:
    for entry in entries:
        entry["error_code"] = code


async def _after(outcome: Awaitable[ErrorCode], waiting: list[dict[str, Any]],
                 response: dict[str, Any]) -> dict[str, Any]:
    _set_codes(waiting, await outcome)
    return response


def handle_offset_fetch(ctx: GroupContext, request: Request) -> dict[str, Any]:
    body = request.body
    stable = bool(body.get("require_stable"))
    if "groups" in body:  # v8+: a batch of groups, each with its own error
        answers = []
        for wanted in body["groups"]:
            code, topics = _offset_fetch_group(ctx, wanted["group_id"], wanted.get("topics"), stable,
                                               wanted.get("member_id"), wanted.get("member_epoch", -1))
            answers.append({"group_id": wanted["group_id"], "topics": topics, "error_code": code})
        return {"throttle_time_ms": 0, "groups": answers}
    group_id = body["group_id"]
    requested = body.get("topics")
    status = ctx.groups.status(group_id)
    if status != ErrorCode.NONE and request.version < FIRST_OFFSET_FETCH_TOP_LEVEL_ERROR_VERSION:
        return {"throttle_time_ms": 0, "error_code": status, "topics": [
            {"name": t["name"], "partitions": [_fetched(index, None, status) for index in t["partition_indexes"]]}
            for t in requested or []]}
    code, topics_out = _offset_fetch_group(ctx, group_id, requested, stable, None, -1)
    return {"throttle_time_ms": 0, "topics": topics_out, "error_code": code}


def _offset_fetch_group(ctx: GroupContext, group_id: str, requested: list[dict[str, Any]] | None, stable: bool,
                        member_id: str | None, member_epoch: int) -> tuple[ErrorCode, list[dict[str, Any]]]:
    """One group's committed offsets: (the group's error, its topics). `member_id` and
    `member_epoch` (OffsetFetch v9) are checked for a consumer-protocol group's member; none and
    -1 are an admin's request."""
    status = ctx.groups.status(group_id)
    if status == ErrorCode.NONE and (member_id is not None or member_epoch >= 0) \
            and group_id in ctx.groups.consumer.groups:
        status = ctx.groups.consumer.check_fetch(group_id, member_id or "", member_epoch)
    if status != ErrorCode.NONE:
        return status, []
    store = ctx.groups.offsets(group_id)
    if requested is None:  # all committed offsets of the group
        wanted: dict[str, list[int]] = {}
        for (topic, index) in store.for_group(group_id):
            wanted.setdefault(topic, []).append(index)
    else:
        wanted = {t["name"]: list(t["partition_indexes"]) for t in requested}
    # KIP-447: a read_committed consumer asks for stable offsets; a partition with a transactional
    # commit awaiting its marker answers UNSTABLE_OFFSET_COMMIT (retriable) instead of a value.
    topics_out = [{"name": name, "partitions": [
        _fetched(index, None, ErrorCode.UNSTABLE_OFFSET_COMMIT) if stable and store.has_unstable(group_id, name, index)
        else _fetched(index, store.get(group_id, name, index), ErrorCode.NONE) for index in indexes]}
        for name, indexes in wanted.items()]
    return ErrorCode.NONE, topics_out


def _fetched(index: int, committed: CommittedOffset | None, code: ErrorCode) -> dict[str, Any]:
    if committed is None:
        return {"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1,
                "metadata": "", "error_code": code}
    return {"partition_index": index, "committed_offset": committed.offset,
            "committed_leader_epoch": committed.leader_epoch, "metadata": committed.metadata,
            "error_code": code}


def handle_describe_groups(ctx: GroupContext, request: Request) -> dict[str, Any]:
    groups = []
    for group_id in request.body["groups"]:
        status = ctx.groups.status(group_id)
        if status != ErrorCode.NONE:
            groups.append({"error_code": status, "group_id": group_id, "group_state": "", "protocol_type": "",
                           "protocol_data": "", "members": [],
                           "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
            continue
        if group_id in ctx.groups.consumer.groups:
            # Kafka's answer (GroupMetadataManager.describeGroups): a consumer-protocol group is no
            # classic group, described as Dead; ConsumerGroupDescribe describes it.
            groups.append({"error_code": ErrorCode.NONE, "group_id": group_id,
                           "group_state": GroupState.DEAD.value, "protocol_type": "", "protocol_data": "",
                           "members": [], "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
            continue
        described = ctx.groups.coordinator.describe(group_id)
        if described["group_state"] == GroupState.DEAD.value and ctx.groups.offsets(group_id).has_group(group_id):
            described["group_state"] = GroupState.EMPTY.value  # known by its committed offsets
        groups.append(described)
    return {"throttle_time_ms": 0, "groups": groups}


def handle_list_groups(ctx: GroupContext, request: Request) -> dict[str, Any]:
    states_filter = {s.lower() for s in request.body.get("states_filter") or []}
    types_filter = {t.lower() for t in request.body.get("types_filter") or []}
    groups = [{"group_id": g, "protocol_type": p, "group_state": s, "group_type": ctx.groups.group_type(g)}
              for g, p, s in ctx.groups.listing()
              if not states_filter or s.lower() in states_filter]
    if types_filter:
        groups = [g for g in groups if g["group_type"] in types_filter]
    # Kafka's answer while a partition loads: what is known so far, and a retriable error.
    code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if ctx.groups.is_loading() else ErrorCode.NONE
    return {"throttle_time_ms": 0, "error_code": code, "groups": groups}


def handle_delete_groups(ctx: GroupContext, request: Request) -> Any:
    names = list(dict.fromkeys(request.body["groups_names"]))  # Kafka takes them as a set
    if ctx.delete_share_state is not None and any(g in ctx.groups.share.groups for g in names):
        return _delete_share_groups(ctx, ctx.delete_share_state, names)
    return _delete_groups(ctx, names, {})


async def _delete_share_groups(ctx: GroupContext, delete_state: Callable[[str], Awaitable[ErrorCode]],
                               names: list[str]) -> dict[str, Any]:
    """As Kafka's GroupCoordinatorService.deleteGroups: the share groups' state goes first, and a
    group whose state could not be deleted (or that has members) stays, with that error. While
    its state is deleted, a member may not join it (`ShareGroupCoordinator.deleting`)."""
    marked = [g for g in names if g not in ctx.groups.share.deleting]  # not another deletion's mark
    try:
        codes = await asyncio.gather(*(delete_state(g) for g in names))
        refused: dict[str, ErrorCode] = {g: c for g, c in zip(names, codes, strict=True) if c != ErrorCode.NONE}
        # Removed (or kept) in this same step, before a join marked off meanwhile can come in.
        answer = _delete_groups(ctx, names, refused)
    finally:
        ctx.groups.share.deleting.difference_update(marked)
    return await answer if isinstance(answer, Awaitable) else answer


def _delete_groups(ctx: GroupContext, names: list[str], refused: dict[str, ErrorCode]) -> Any:
    now = ctx.groups.clock_ms()
    results: list[dict[str, Any]] = []
    pending: list[tuple[dict[str, Any], Awaitable[ErrorCode]]] = []
    for group_id in names:
        outcome = refused.get(group_id) or ctx.groups.delete_group(group_id, now)
        entry = {"group_id": group_id, "error_code": outcome if isinstance(outcome, ErrorCode) else ErrorCode.NONE}
        if not isinstance(outcome, ErrorCode):
            pending.append((entry, outcome))
        results.append(entry)
    response = {"throttle_time_ms": 0, "results": results}
    return _settle(pending, response) if pending else response


def handle_offset_delete(ctx: GroupContext, request: Request) -> Any:
    body = request.body
    requested = list(dict.fromkeys((t["name"], p["partition_index"]) for t in body["topics"] for p in t["partitions"]))
    # Kafka answers partitions missing from its metadata itself and asks the coordinator about the rest.
    known = [(topic, index) for topic, index in requested if ctx.partition_exists(topic, index)]
    group_error, answers = ctx.groups.delete_offsets(body["group_id"], known, ctx.groups.clock_ms())
    if group_error != ErrorCode.NONE:
        return {"error_code": group_error, "throttle_time_ms": 0, "topics": []}
    topics_out: dict[str, list[dict[str, Any]]] = {}
    pending: list[tuple[dict[str, Any], Awaitable[ErrorCode]]] = []
    for topic, index in requested:
        outcome = answers.get((topic, index), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        entry = {"partition_index": index,
                 "error_code": outcome if isinstance(outcome, ErrorCode) else ErrorCode.NONE}
        if not isinstance(outcome, ErrorCode):
            pending.append((entry, outcome))
        topics_out.setdefault(topic, []).append(entry)
    response = {"error_code": ErrorCode.NONE, "throttle_time_ms": 0,
                "topics": [{"name": name, "partitions": partitions} for name, partitions in topics_out.items()]}
    return _settle(pending, response) if pending else response


async def _settle(pending: list[tuple[dict[str, Any], Awaitable[ErrorCode]]],
                  response: dict[str, Any]) -> dict[str, Any]:
    """The response once every entry waiting for its tombstones has its answer."""
    for entry, outcome in pending:
        entry["error_code"] = await outcome
    return response
