"""The share-partition leader's client of the share coordinator (Kafka's Persister /
PersisterStateManager): initialize, read, write, delete and read the summary of a
share-partition's durable state in `__share_group_state`.

Every call finds the coordinator of its key (the leader of its `__share_group_state` partition,
from this broker's metadata: the same answer FindCoordinator key type 2 gives, without the
round trip), sends the state RPC (in-process when that is this broker: the same decision and the
same acks=-1 append as a remote call) and retries NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE and broken connections with a backoff (RETRY_BACKOFF_S doubling to
RETRY_BACKOFF_MAX_S; Kafka uses 1 s to 30 s, too slow for a failover measured in seconds), until
`timeout_s`. Any other error is final and returned.

Writes of one share-partition go one at a time, in the order they were asked for (each waits for
the one before it, retries included): the coordinator merges them newest-last, so a reordered
pair could undo a state. `write` answers NONE only once the coordinator has the state durable, so
the shell answers an acknowledgement only after `await persister.write(...)` returned NONE:

    result = part.acknowledge(member, batches, now=now)
    if result.change is not None:
        code = await persister.write_change(key, state_epoch, leader_epoch, result.change)
        part.complete(result.change) if code == ErrorCode.NONE else part.fail(result.change)

A failed or timed-out write may still have been applied (the answer was lost): the leader treats
it as failed and the records stay acquired; the state the coordinator holds is never behind an
answered acknowledgement, which is what matters.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from roost.broker.metadata.cache import MetadataCache
from roost.broker.net.peer import PeerError, PeerPool
from roost.broker.share.coordinator import ShareCoordinatorService
from roost.broker.share.coordinator_core import Decision, batches_from_wire, batches_to_wire
from roost.broker.share.coordinator_records import SHARE_GROUP_STATE_TOPIC, ShareKey
from roost.broker.share.partition import StateBatch, StateChange
from roost.wire.kafka import ApiKey, KafkaCodecError
from roost.wire.kafka.errors import ErrorCode

log = logging.getLogger("roost.broker.share.persister")

RETRY_BACKOFF_S = 0.05
RETRY_BACKOFF_MAX_S = 1.0
REQUEST_TIMEOUT_S = 10.0
DEFAULT_TIMEOUT_S = 30.0
RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                       ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT})
WRITE_VERSION = 1  # v1 carries DeliveryCompleteCount (KIP-1226)
SUMMARY_VERSION = 1


class SharePartitionName(Protocol):
    """Any share-partition name (read-only, so frozen keys of either module fit)."""

    @property
    def group_id(self) -> str: ...
    @property
    def topic_id(self) -> uuid.UUID: ...
    @property
    def partition(self) -> int: ...


@dataclass(frozen=True, slots=True)
class ReadResult:
    error: ErrorCode
    state_epoch: int = 0
    start_offset: int = -1  # -1: initialized without a start offset (resolve share.auto.offset.reset)
    batches: tuple[StateBatch, ...] = ()
    message: str | None = None


@dataclass(frozen=True, slots=True)
class SummaryResult:
    error: ErrorCode
    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = -1
    delivery_complete_count: int = -1
    message: str | None = None


def client_error(code: ErrorCode) -> ErrorCode:
    """What a ShareFetch/ShareAcknowledge partition answers when its state write failed with
    `code` (SharePartition's mapping): fenced epochs mean this broker no longer leads it."""
    if code in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if code in RETRIABLE or code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return code


def _key(name: SharePartitionName) -> ShareKey:
    return name if isinstance(name, ShareKey) else ShareKey(name.group_id, name.topic_id, name.partition)


class Persister:
    def __init__(self, broker_id: int, coordinator: ShareCoordinatorService, metadata: MetadataCache,
                 peers: PeerPool, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.broker_id = broker_id
        self._coordinator = coordinator
        self._metadata = metadata
        self._peers = peers
        self.timeout_s = timeout_s
        self._write_order: dict[ShareKey, asyncio.Lock] = {}
        self._write_users: dict[ShareKey, int] = {}
        self._stopped = False

    async def stop(self) -> None:
        self._stopped = True

    # the calls --------------------------------------------------------------------------------
    async def initialize(self, name: SharePartitionName, state_epoch: int, start_offset: int = -1) -> ErrorCode:
        key = _key(name)
        answer = await self._call(key, ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0,
                                  {"partition": key.partition, "state_epoch": state_epoch, "start_offset": start_offset},
                                  lambda: self._coordinator.initialize(key, state_epoch, start_offset))
        return ErrorCode(answer["error_code"])

    async def read(self, name: SharePartitionName, leader_epoch: int) -> ReadResult:
        key = _key(name)

        async def local() -> Decision:
            return await self._coordinator.read(key, leader_epoch)
        answer = await self._call(key, ApiKey.READ_SHARE_GROUP_STATE, 0,
                                  {"partition": key.partition, "leader_epoch": leader_epoch}, local)
        code = ErrorCode(answer["error_code"])
        if code != ErrorCode.NONE:
            return ReadResult(code, message=answer.get("error_message"))
        return ReadResult(code, answer["state_epoch"], answer["start_offset"],
                          batches_from_wire(answer["state_batches"]))

    async def write(self, name: SharePartitionName, *, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: Sequence[StateBatch], delivery_complete_count: int = -1) -> ErrorCode:
        key = _key(name)
        body = {"partition": key.partition, "state_epoch": state_epoch, "leader_epoch": leader_epoch,
                "start_offset": start_offset, "delivery_complete_count": delivery_complete_count,
                "state_batches": batches_to_wire(batches)}
        lock = self._write_order.get(key)
        if lock is None:
            lock = self._write_order[key] = asyncio.Lock()
        self._write_users[key] = self._write_users.get(key, 0) + 1
        try:
            async with lock:
                answer = await self._call(key, ApiKey.WRITE_SHARE_GROUP_STATE, WRITE_VERSION, body,
                                          lambda: self._coordinator.write(
                                              key, state_epoch=state_epoch, leader_epoch=leader_epoch,
                                              start_offset=start_offset,
                                              delivery_complete_count=delivery_complete_count, batches=batches))
        finally:
            users = self._write_users[key] - 1
            if users:
                self._write_users[key] = users
            else:
                del self._write_users[key]
                del self._write_order[key]
        return ErrorCode(answer["error_code"])

    async def write_change(self, name: SharePartitionName, state_epoch: int, leader_epoch: int,
                           change: StateChange) -> ErrorCode:
        """Write what the share-partition core returned (SharePartition.acknowledge, tick,
        release_member, acquire): NONE once durable."""
        return await self.write(name, state_epoch=state_epoch, leader_epoch=leader_epoch,
                                start_offset=change.start_offset, batches=change.batches,
                                delivery_complete_count=change.delivery_complete_count)

    async def delete(self, name: SharePartitionName) -> ErrorCode:
        key = _key(name)
        answer = await self._call(key, ApiKey.DELETE_SHARE_GROUP_STATE, 0, {"partition": key.partition},
                                  lambda: self._coordinator.delete(key))
        return ErrorCode(answer["error_code"])

    async def read_summary(self, name: SharePartitionName, leader_epoch: int) -> SummaryResult:
        key = _key(name)
        answer = await self._call(key, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, SUMMARY_VERSION,
                                  {"partition": key.partition, "leader_epoch": leader_epoch},
                                  lambda: self._coordinator.summary(key, leader_epoch))
        code = ErrorCode(answer["error_code"])
        if code != ErrorCode.NONE:
            return SummaryResult(code, message=answer.get("error_message"))
        return SummaryResult(code, answer["state_epoch"], answer["leader_epoch"], answer["start_offset"],
                             answer.get("delivery_complete_count", -1))

    # the transport ----------------------------------------------------------------------------
    async def _call(self, key: ShareKey, api: ApiKey, version: int, partition: dict[str, Any],
                    local: Callable[[], Awaitable[Decision]]) -> dict[str, Any]:
        """One partition's answer (its PartitionResult fields), retried while the coordinator is
        moving, until `timeout_s`."""
        deadline = time.monotonic() + self.timeout_s
        backoff = RETRY_BACKOFF_S
        while True:
            answer = await self._once(key, api, version, partition, local)
            code = ErrorCode(answer["error_code"])
            if code not in RETRIABLE or self._stopped or time.monotonic() + backoff > deadline:
                if code in RETRIABLE:
                    log.info("share-partition %s: %s gave up after %.0f s: %s", key.coordinator_key(), api.name,
                             self.timeout_s, code.name)
                return answer
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)

    async def _once(self, key: ShareKey, api: ApiKey, version: int, partition: dict[str, Any],
                    local: Callable[[], Awaitable[Decision]]) -> dict[str, Any]:
        endpoint = self._coordinator.coordinator_for(key)
        if endpoint is None:
            return {"error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE)}
        if endpoint.node_id == self.broker_id:
            decision = await local()
            return _from_decision(decision)
        body = {"group_id": key.group_id, "topics": [{"topic_id": key.topic_id, "partitions": [partition]}]}
        try:
            peer = self._peers.get(endpoint.node_id, endpoint.host, endpoint.port)
            response = await peer.request(api, version, body, REQUEST_TIMEOUT_S)
        except (PeerError, KafkaCodecError, OSError, TimeoutError) as error:
            log.info("share-partition %s: %s to broker %d failed: %s", key.coordinator_key(), api.name,
                     endpoint.node_id, error)
            return {"error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE)}
        for topic in response.get("results", []):
            for result in topic["partitions"]:
                if result["partition"] == key.partition:
                    return dict(result)
        return {"error_code": int(ErrorCode.UNKNOWN_SERVER_ERROR), "error_message": "no answer for the partition"}


def _from_decision(decision: Decision) -> dict[str, Any]:
    out: dict[str, Any] = {"error_code": int(decision.error), "error_message": decision.message}
    state = decision.state
    if state is not None:
        out.update(state_epoch=state.state_epoch, leader_epoch=state.leader_epoch, start_offset=state.start_offset,
                   delivery_complete_count=state.delivery_complete_count,
                   state_batches=batches_to_wire(state.batches))
    return out



class CoordinatorStateStore:
    """The share-partition leader's state store (share/leader.py's StateStore) on the share
    coordinator: `load` reads the state with the leader's epoch (which fences older leaders) and
    initializes a share-partition the group coordinator has not initialized yet (start offset -1:
    the leader resolves share.auto.offset.reset, persisted with its first write); `write`
    returns NONE only once the change is durable."""

    def __init__(self, persister: Persister) -> None:
        self.persister = persister

    async def load(self, key: SharePartitionName, leader_epoch: int) -> tuple[ErrorCode, int, int, tuple[StateBatch, ...]]:
        result = await self.persister.read(key, leader_epoch)
        if result.error == ErrorCode.INVALID_REQUEST:  # never initialized
            code = await self.persister.initialize(key, 0, -1)
            if code not in (ErrorCode.NONE, ErrorCode.FENCED_STATE_EPOCH):  # fenced: initialized meanwhile
                return code, 0, -1, ()
            result = await self.persister.read(key, leader_epoch)
        if result.error != ErrorCode.NONE:
            return result.error, 0, -1, ()
        return ErrorCode.NONE, result.state_epoch, result.start_offset, result.batches

    async def write(self, key: SharePartitionName, state_epoch: int, leader_epoch: int,
                    change: StateChange) -> ErrorCode:
        return await self.persister.write_change(key, state_epoch, leader_epoch, change)

    async def state_epoch(self, key: SharePartitionName) -> int | ErrorCode:
        summary = await self.persister.read_summary(key, -1)
        return summary.state_epoch if summary.error == ErrorCode.NONE else summary.error


__all__ = ["SHARE_GROUP_STATE_TOPIC", "CoordinatorStateStore", "Persister", "ReadResult", "SummaryResult", "client_error"]
