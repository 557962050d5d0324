"""Transaction requests: FindCoordinator for key type 1, InitProducerId with a transactional id,
AddPartitionsToTxn (the client form), AddOffsetsToTxn, EndTxn, TxnOffsetCommit, WriteTxnMarkers
(from the coordinator to the partitions' leaders), DescribeTransactions and ListTransactions.

Errors go where Kafka puts them: the coordinator's errors at the top of InitProducerId,
AddOffsetsToTxn and EndTxn, on every partition of AddPartitionsToTxn and TxnOffsetCommit.
KIP-588: clients of InitProducerId < 4 and of AddPartitionsToTxn / AddOffsetsToTxn / EndTxn < 2
do not know PRODUCER_FENCED and get INVALID_PRODUCER_EPOCH instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from roost.broker.group.offsets import MAX_METADATA_BYTES, CommittedOffset
from roost.broker.group.service import GroupService
from roost.broker.handlers import admin
from roost.broker.handlers import groups as group_handlers
from roost.broker.metadata.catalog import OFFSETS_TOPIC
from roost.broker.net.request import Request
from roost.broker.replica.append import ACKS_ALL, AppendOrigin
from roost.broker.replica.manager import ReplicaManager
from roost.broker.txn.core import TxnState
from roost.broker.txn.service import TxnService
from roost.log.transactions import build_marker
from roost.wire.kafka.errors import ErrorCode

COORDINATOR_TRANSACTION = 1
FIRST_PRODUCER_FENCED_INIT_VERSION = 4
FIRST_PRODUCER_FENCED_TXN_VERSION = 2
# Below the coordinator's request timeout (txn/service.py), so that an answer comes before it gives up.
MARKER_APPEND_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class TxnContext:
    txns: TxnService
    groups: GroupService
    replicas: ReplicaManager
    partition_exists: Callable[[str, int], bool]


def _downgrade(code: ErrorCode, version: int, first: int) -> ErrorCode:
    if code == ErrorCode.PRODUCER_FENCED and version < first:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def handle_find_coordinator(ctx: TxnContext, group_ctx: group_handlers.GroupContext, request: Request) -> Any:
    """One key (v0-3), or from v4 a batch of keys of one type, each answered as v0-3 would be."""
    if request.version < group_handlers.FIRST_BATCHED_FIND_COORDINATOR_VERSION:
        return _find_one_coordinator(ctx, group_ctx, request)
    coordinators = []
    for key in request.body["coordinator_keys"]:
        one = Request(request.header, {"key": key, "key_type": request.body.get("key_type", 0)},
                      request.client_host, request.principal, request.listener)
        found = _find_one_coordinator(ctx, group_ctx, one)
        coordinators.append({"key": key, "node_id": found["node_id"], "host": found["host"],
                             "port": found["port"], "error_code": found["error_code"],
                             "error_message": found["error_message"]})
    return {"throttle_time_ms": 0, "coordinators": coordinators}


def _find_one_coordinator(ctx: TxnContext, group_ctx: group_handlers.GroupContext, request: Request) -> Any:
    body = request.body
    if body.get("key_type", 0) != COORDINATOR_TRANSACTION:
        return group_handlers.handle_find_coordinator(group_ctx, request)
    endpoint = ctx.txns.coordinator_for(body["key"])
    if endpoint is not None:
        endpoint = endpoint.on_listener(request.listener)
    if endpoint is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "error_message": None, "node_id": -1, "host": "", "port": -1}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "node_id": endpoint.node_id, "host": endpoint.host, "port": endpoint.port}


def handle_init_producer_id(ctx: TxnContext, admin_ctx: admin.AdminContext, request: Request) -> Any:
    """A transactional id: the transaction coordinator's; none: an idempotent producer's id."""
    if request.body.get("transactional_id") is None:
        return admin.handle_init_producer_id(admin_ctx, request)
    return init_transactional_producer(ctx, request)


async def init_transactional_producer(ctx: TxnContext, request: Request) -> dict[str, Any]:
    body = request.body
    code, producer_id, epoch = await ctx.txns.init_producer_id(
        body["transactional_id"], body["transaction_timeout_ms"], body.get("producer_id", -1),
        body.get("producer_epoch", -1))
    return {"throttle_time_ms": 0, "error_code": _downgrade(code, request.version, FIRST_PRODUCER_FENCED_INIT_VERSION),
            "producer_id": producer_id, "producer_epoch": epoch}


async def handle_add_partitions_to_txn(ctx: TxnContext, request: Request) -> dict[str, Any]:
    body = request.body
    wanted = [(t["name"], index) for t in body["v3_and_below_topics"] for index in t["partitions"]]
    unknown = {p for p in wanted if not ctx.partition_exists(*p)}
    if unknown:
        # Kafka's answer: the unknown partitions' error, the rest not attempted.
        codes = {p: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if p in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                 for p in wanted}
    else:
        code = await ctx.txns.add_partitions(body["v3_and_below_transactional_id"],
                                             body["v3_and_below_producer_id"],
                                             body["v3_and_below_producer_epoch"], wanted)
        code = _downgrade(code, request.version, FIRST_PRODUCER_FENCED_TXN_VERSION)
        codes = dict.fromkeys(wanted, code)
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
        {"name": t["name"], "results_by_partition": [
            {"partition_index": index, "partition_error_code": codes[(t["name"], index)]}
            for index in t["partitions"]]}
        for t in body["v3_and_below_topics"]]}


async def handle_add_offsets_to_txn(ctx: TxnContext, request: Request) -> dict[str, Any]:
    body = request.body
    offsets_partition = (OFFSETS_TOPIC, ctx.groups.partition_for(body["group_id"]))
    code = await ctx.txns.add_partitions(body["transactional_id"], body["producer_id"], body["producer_epoch"],
                                         [offsets_partition])
    return {"throttle_time_ms": 0,
            "error_code": _downgrade(code, request.version, FIRST_PRODUCER_FENCED_TXN_VERSION)}


async def handle_end_txn(ctx: TxnContext, request: Request) -> dict[str, Any]:
    body = request.body
    code = await ctx.txns.end_txn(body["transactional_id"], body["producer_id"], body["producer_epoch"],
                                  body["committed"])
    return {"throttle_time_ms": 0,
            "error_code": _downgrade(code, request.version, FIRST_PRODUCER_FENCED_TXN_VERSION)}


def handle_txn_offset_commit(ctx: TxnContext, request: Request) -> Any:
    body = request.body
    group_id = body["group_id"]
    verdict = ctx.groups.status(group_id)
    if verdict == ErrorCode.NONE:
        verdict = ctx.groups.check_txn_commit(group_id, body.get("generation_id", -1), body.get("member_id", ""))
    now = ctx.groups.clock_ms()
    accepted: dict[tuple[str, int], CommittedOffset] = {}
    waiting: list[dict[str, Any]] = []
    topics_out = []
    for topic in body["topics"]:
        partitions_out = []
        for wanted in topic["partitions"]:
            index = wanted["partition_index"]
            metadata = wanted.get("committed_metadata") or ""
            code = verdict
            if code == ErrorCode.NONE:
                if not ctx.partition_exists(topic["name"], index):
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif len(metadata.encode()) > MAX_METADATA_BYTES:
                    code = ErrorCode.OFFSET_METADATA_TOO_LARGE
                else:
                    accepted[(topic["name"], index)] = CommittedOffset(
                        wanted["committed_offset"], wanted.get("committed_leader_epoch", -1), metadata, now)
            entry = {"partition_index": index, "error_code": code}
            if (topic["name"], index) in accepted:
                waiting.append(entry)
            partitions_out.append(entry)
        topics_out.append({"name": topic["name"], "partitions": partitions_out})
    response = {"throttle_time_ms": 0, "topics": topics_out}
    if not accepted:
        return response
    outcome = ctx.groups.txn_commit(group_id, body["producer_id"], body["producer_epoch"], accepted, now)
    if isinstance(outcome, ErrorCode):
        for entry in waiting:
            entry["error_code"] = outcome
        return response

    async def settled() -> dict[str, Any]:
        code = await outcome
        for entry in waiting:
            entry["error_code"] = code
        return response
    return settled()


async def handle_write_txn_markers(ctx: TxnContext, request: Request) -> dict[str, Any]:
    """WriteTxnMarkers from another broker's coordinator (this broker's own coordinator calls
    `write_txn_markers` directly: TxnService.local_markers)."""
    return await write_txn_markers(ctx, request.body)


async def write_txn_markers(ctx: TxnContext, body: dict[str, Any]) -> dict[str, Any]:
    """Append each marker to each named partition this broker leads, through the append door
    (acks=-1), after the producer state's check: a marker of an older producer epoch is
    INVALID_PRODUCER_EPOCH, one from an older coordinator epoch TRANSACTION_COORDINATOR_FENCED. A
    marker on an offsets partition then settles that producer's transactional offsets. `body`
    and the answer are WriteTxnMarkers' request and response bodies."""
    results = []
    for marker in body["markers"]:
        pid, epoch, commit = marker["producer_id"], marker["producer_epoch"], marker["transaction_result"]
        coordinator_epoch = marker["coordinator_epoch"]
        answers: list[tuple[str, int, Any]] = []
        for topic in marker["topics"]:
            for index in topic["partition_indexes"]:
                answers.append((topic["name"], index, _write_marker(ctx, topic["name"], index, pid, epoch, commit,
                                                                    coordinator_epoch)))
        topics: dict[str, list[dict[str, Any]]] = {}
        for name, index, answer in answers:
            code = (await answer) if asyncio.isfuture(answer) or asyncio.iscoroutine(answer) else answer
            if code == ErrorCode.NONE and name == OFFSETS_TOPIC:
                ctx.groups.txn_marker_written(index, pid, commit)
            topics.setdefault(name, []).append({"partition_index": index, "error_code": code})
        results.append({"producer_id": pid, "topics": [{"name": n, "partitions": p} for n, p in topics.items()]})
    return {"markers": results}


def _write_marker(ctx: TxnContext, topic: str, index: int, producer_id: int, producer_epoch: int, commit: bool,
                  coordinator_epoch: int) -> Any:
    partition = ctx.replicas.partitions.get((topic, index))
    if partition is not None and partition.is_leader:
        refused = partition.log.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        if refused != ErrorCode.NONE:
            return refused
    # Checked and appended in one step of the event loop: nothing can come between.
    marker = build_marker(producer_id, producer_epoch, commit=commit, coordinator_epoch=coordinator_epoch,
                          timestamp_ms=ctx.txns.clock_ms())
    appending = ctx.replicas.append([((topic, index), marker)], ACKS_ALL, AppendOrigin.COORDINATOR,
                                    MARKER_APPEND_TIMEOUT_S)
    outcome = appending.outcomes[0]
    if appending.done is None:
        return outcome.error

    async def settled() -> ErrorCode:
        await asyncio.shield(appending.done)  # type: ignore[arg-type]
        return outcome.error
    return settled()


def handle_describe_transactions(ctx: TxnContext, request: Request) -> dict[str, Any]:
    """Each id's state as its coordinator knows it (this broker must be it: else NOT_COORDINATOR,
    COORDINATOR_LOAD_IN_PROGRESS); an unknown id is TRANSACTIONAL_ID_NOT_FOUND."""
    states = []
    for transactional_id in request.body["transactional_ids"]:
        code = ctx.txns.status(transactional_id)
        md = ctx.txns.core.txns.get(transactional_id) if code == ErrorCode.NONE else None
        if code == ErrorCode.NONE and md is None:
            code = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        if md is None:  # the schema's defaults, as Kafka leaves them in an error entry
            states.append({"error_code": code, "transactional_id": transactional_id, "transaction_state": "",
                           "transaction_timeout_ms": 0, "transaction_start_time_ms": 0, "producer_id": 0,
                           "producer_epoch": 0, "topics": []})
            continue
        topics: dict[str, list[int]] = {}
        for topic, index in sorted(md.partitions):
            topics.setdefault(topic, []).append(index)
        states.append({"error_code": ErrorCode.NONE, "transactional_id": transactional_id,
                       "transaction_state": md.shown_state().label, "transaction_timeout_ms": md.timeout_ms,
                       "transaction_start_time_ms": md.start_ms, "producer_id": md.producer_id,
                       "producer_epoch": md.producer_epoch,
                       "topics": [{"topic": t, "partitions": p} for t, p in topics.items()]})
    return {"throttle_time_ms": 0, "transaction_states": states}


def handle_list_transactions(ctx: TxnContext, request: Request) -> dict[str, Any]:
    """The transactions this broker coordinates, filtered by state, producer id and (v1) how long
    they have been running; COORDINATOR_LOAD_IN_PROGRESS while a partition loads."""
    body = request.body
    known = {state.label: state for state in TxnState}
    wanted_states = set(body.get("state_filters") or [])
    unknown = sorted(s for s in wanted_states if s not in known)
    producers = set(body.get("producer_id_filters") or [])
    duration = body.get("duration_filter", -1)
    now = ctx.txns.clock_ms()
    listed = []
    for transactional_id, producer_id, state in ctx.txns.listing():
        md = ctx.txns.core.txns[transactional_id]
        if wanted_states and state.label not in wanted_states:
            continue
        if producers and producer_id not in producers:
            continue
        if duration >= 0 and (md.state != TxnState.ONGOING or now - md.start_ms < duration):
            continue
        listed.append({"transactional_id": transactional_id, "producer_id": producer_id,
                       "transaction_state": state.label})
    code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if ctx.txns.is_loading() else ErrorCode.NONE
    return {"throttle_time_ms": 0, "error_code": code, "unknown_state_filters": unknown,
            "transaction_states": listed}
