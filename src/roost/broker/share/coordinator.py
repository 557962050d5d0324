"""The share coordinator's asyncio shell: which share-partitions' state this broker keeps, the
appends to `__share_group_state`, the state RPCs' answers.

Kafka's placement, as for groups and transactions: a share-partition's coordinator is the leader
of its `__share_group_state` partition (`share_partition_for`). The replica manager's leadership
listener tells this service when that changes:

- on election the partition is read back from its log start (snapshots replace, updates merge,
  tombstones forget); meanwhile its keys answer COORDINATOR_LOAD_IN_PROGRESS;
- on resignation its keys are dropped and answer NOT_COORDINATOR.

A request is decided by the pure core (coordinator_core.py) under the key's lock; the record it
asks for is appended with acks=-1 through the append door (origin COORDINATOR) and replayed into
the core once replicated to min.insync.replicas, and only then answered: durable before
acknowledged. Every `share.coordinator.state.topic.prune.interval.ms` the log below the
earliest snapshot any key still needs is deleted (the topic's cleanup.policy is delete).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from roost.broker.coordinators.load import LoadState, coordinator_status, log_chunks
from roost.broker.metadata.cache import BrokerEndpoint, MetadataCache
from roost.broker.net.request import Request
from roost.broker.replica.append import ACKS_ALL, AppendOrigin
from roost.broker.replica.manager import ReplicaManager
from roost.broker.replica.partition import Partition
from roost.broker.share.coordinator_core import (
    Decision,
    ShareCoordinatorCore,
    ShareGroupOffset,
    StateRecord,
    batches_from_wire,
    batches_to_wire,
)
from roost.broker.share.coordinator_records import (
    SHARE_GROUP_STATE_TOPIC,
    ShareKey,
    ShareRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    parse_coordinator_key,
    share_partition_for,
)
from roost.clock import now_ms
from roost.config import BrokerConfig
from roost.log import OffsetOutOfRange
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import build_batch, iter_records

log = logging.getLogger("roost.broker.share.coordinator")

LOAD_TIMES_KEPT = 64

# A failed append to __share_group_state, as the state RPCs answer it (the persister retries the
# first group, looks the coordinator up again for the second).
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}


def share_state_topic_settings(config: BrokerConfig, brokers: int) -> tuple[int, int, dict[str, Any]]:
    """(partitions, replication factor, topic configs) `__share_group_state` is created with: the
    replication factor capped at the cluster's size, min.insync.replicas at the replication
    factor, so a small cluster can still make state durable."""
    replication = max(1, min(config["share.coordinator.state.topic.replication.factor"], max(brokers, 1)))
    configs = {"cleanup.policy": "delete", "retention.ms": -1,
               "segment.bytes": config["share.coordinator.state.topic.segment.bytes"],
               "min.insync.replicas": min(config["share.coordinator.state.topic.min.isr"], replication)}
    return config["share.coordinator.state.topic.num.partitions"], replication, configs


@dataclass(eq=False)
class OwnedStatePartition:
    partition: Partition
    state: LoadState = LoadState.LOADING
    task: asyncio.Task[None] | None = None


@dataclass
class ShareCoordinatorCounts:
    """What /metrics reports (Kafka's share-coordinator-metrics)."""

    writes: int = 0
    write_latency_ms: deque[float] = field(default_factory=lambda: deque(maxlen=256))
    load_times_ms: deque[float] = field(default_factory=lambda: deque(maxlen=LOAD_TIMES_KEPT))
    last_pruned_offset: dict[int, int] = field(default_factory=dict)


class ShareCoordinatorService:
    def __init__(self, config: BrokerConfig, replicas: ReplicaManager, metadata: MetadataCache) -> None:
        self.core = ShareCoordinatorCore(config["share.coordinator.snapshot.update.records.per.snapshot"])
        self._config = config
        self._replicas = replicas
        self._metadata = metadata
        self._owned: dict[int, OwnedStatePartition] = {}
        self._locks: dict[ShareKey, asyncio.Lock] = {}  # one request at a time per share-partition
        self._lock_users: dict[ShareKey, int] = {}
        self._write_timeout_s = config["share.coordinator.write.timeout.ms"] / 1000
        self._prune_interval_s = config["share.coordinator.state.topic.prune.interval.ms"] / 1000
        self._tasks: set[asyncio.Future[Any]] = set()
        self._started = False
        self.counts = ShareCoordinatorCounts()
        # Called when a lookup finds no `__share_group_state` (must not block): creates it.
        self.on_topic_missing: Callable[[], None] = lambda: None
        # Whether the data partition exists (topic id, index); the broker may set a stricter one.
        self.partition_exists: Callable[[uuid.UUID, int], bool] = self._partition_in_metadata
        replicas.leadership_listeners.append(self.leadership_changed)

    # lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        self._started = True
        for partition in self._replicas.hosted():
            if partition.topic == SHARE_GROUP_STATE_TOPIC and partition.is_leader:
                self._elected(partition)
        self._spawn(self._prune_loop())

    async def stop(self) -> None:
        self._started = False
        tasks = list(self._tasks) + [o.task for o in self._owned.values() if o.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    def _spawn(self, work: Awaitable[Any]) -> asyncio.Future[Any]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # leadership -------------------------------------------------------------------------------
    def leadership_changed(self, partition: Partition, leader: bool) -> None:
        if partition.topic != SHARE_GROUP_STATE_TOPIC or not self._started:
            return
        if leader:
            self._elected(partition)
        else:
            self._resigned(partition)

    def _elected(self, partition: Partition) -> None:
        known = self._owned.get(partition.index)
        if known is not None:
            if known.partition is partition and known.state != LoadState.FAILED:
                return
            self._resigned(known.partition)
        owned = OwnedStatePartition(partition)
        self._owned[partition.index] = owned
        owned.task = asyncio.ensure_future(self._load(owned))
        log.info("share coordinator for %s-%d: loading", SHARE_GROUP_STATE_TOPIC, partition.index)

    def _resigned(self, partition: Partition) -> None:
        owned = self._owned.get(partition.index)
        if owned is None or owned.partition is not partition:
            return
        del self._owned[partition.index]
        if owned.task is not None:
            owned.task.cancel()
        keys = [k for k in self.core.states if self.partition_for(k) == partition.index]
        self.core.forget(keys)
        log.info("no longer share coordinator for %s-%d: unloaded %d share-partitions", SHARE_GROUP_STATE_TOPIC,
                 partition.index, len(keys))

    async def _load(self, owned: OwnedStatePartition) -> None:
        partition = owned.partition
        where = f"{SHARE_GROUP_STATE_TOPIC}-{partition.index}"
        started = time.monotonic()
        keys: set[ShareKey] = set()
        try:
            async for chunk in log_chunks(partition):
                for record in iter_records(chunk, include_control=False):
                    if record.key is None:
                        continue
                    try:
                        record_type, key = decode_key(bytes(record.key))
                        value = None if record.value is None else decode_value(record_type, bytes(record.value))
                    except ShareRecordError as error:
                        log.warning("skipping unreadable record at offset %d of %s: %s", record.offset, where, error)
                        continue
                    self.core.replay(StateRecord(record_type, key, value), record.offset)
                    keys.add(key)
        except (OSError, OffsetOutOfRange):
            log.exception("loading %s failed; answering NOT_COORDINATOR for its share-partitions", where)
            owned.state = LoadState.FAILED
            return
        owned.state = LoadState.LOADED
        self.counts.load_times_ms.append((time.monotonic() - started) * 1000)
        log.info("loaded %s: %d share-partitions", where, sum(1 for k in keys if k in self.core.states))

    def is_loading(self) -> bool:
        return any(owned.state == LoadState.LOADING for owned in self._owned.values())

    # placement --------------------------------------------------------------------------------
    def partition_count(self) -> int:
        info = self._metadata.get(SHARE_GROUP_STATE_TOPIC)
        return info.partitions if info is not None else self._config["share.coordinator.state.topic.num.partitions"]

    def partition_for(self, key: ShareKey) -> int:
        return share_partition_for(key, self.partition_count())

    def status(self, key: ShareKey) -> ErrorCode:
        return coordinator_status(self._owned.get(self.partition_for(key)))

    def coordinator_for(self, key: ShareKey) -> BrokerEndpoint | None:
        """The broker coordinating `key` (None: not known yet; the topic is created if missing)."""
        if SHARE_GROUP_STATE_TOPIC not in self._metadata:
            self.on_topic_missing()
            if SHARE_GROUP_STATE_TOPIC not in self._metadata:
                return None
        return self._metadata.coordinator_endpoint(SHARE_GROUP_STATE_TOPIC, self.partition_for(key))

    def find_coordinator(self, key_text: str) -> tuple[ErrorCode, BrokerEndpoint | None, str | None]:
        """FindCoordinator key type 2 ("<group>:<topic id>:<partition>"): (error, coordinator,
        message). A malformed key is INVALID_REQUEST; no leader yet COORDINATOR_NOT_AVAILABLE."""
        try:
            key = parse_coordinator_key(key_text)
        except ValueError as error:
            return ErrorCode.INVALID_REQUEST, None, str(error)
        endpoint = self.coordinator_for(key)
        if endpoint is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, None
        return ErrorCode.NONE, endpoint, None

    def _partition_in_metadata(self, topic_id: uuid.UUID, index: int) -> bool:
        info = self._metadata.by_id(topic_id)
        return info is not None and 0 <= index < info.partitions

    # the state operations ---------------------------------------------------------------------
    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> Decision:
        return await self._decide(key, lambda: self.core.initialize(key, state_epoch, start_offset, now_ms()))

    async def read(self, key: ShareKey, leader_epoch: int) -> Decision:
        return await self._decide(key, lambda: self.core.read(key, leader_epoch, now_ms()), answer_state=True)

    async def write(self, key: ShareKey, *, state_epoch: int, leader_epoch: int, start_offset: int,
                    delivery_complete_count: int, batches: Iterable[Any]) -> Decision:
        wanted = tuple(batches)
        return await self._decide(key, lambda: self.core.write(
            key, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
            delivery_complete_count=delivery_complete_count, batches=wanted, now=now_ms()))

    async def delete(self, key: ShareKey) -> Decision:
        return await self._decide(key, lambda: self.core.delete(key))

    async def summary(self, key: ShareKey, leader_epoch: int) -> Decision:
        return await self._decide(key, lambda: self.core.summary(key, leader_epoch))

    async def _decide(self, key: ShareKey, decide: Callable[[], Decision], answer_state: bool = False) -> Decision:
        code = self.status(key)
        if code != ErrorCode.NONE:
            self.coordinator_for(key)  # creates __share_group_state if this is its first use
            return Decision(code)
        if key.partition < 0:
            return Decision(ErrorCode.INVALID_REQUEST, "negative partition")
        if not self.partition_exists(key.topic_id, key.partition):
            return Decision(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        self._lock_users[key] = self._lock_users.get(key, 0) + 1
        try:
            async with lock:
                code = self.status(key)  # the partition may have moved while we waited
                if code != ErrorCode.NONE:
                    return Decision(code)
                decision = decide()
                if decision.error != ErrorCode.NONE or decision.record is None:
                    return decision
                code = await self._append(key, decision.record)
                if code != ErrorCode.NONE:
                    return Decision(code)
                if answer_state:
                    decision.state = self.core.states.get(key, decision.state)
                return decision
        finally:
            users = self._lock_users[key] - 1
            if users:
                self._lock_users[key] = users
            else:  # nobody waits: the lock goes, so they do not pile up for every key ever seen
                del self._lock_users[key]
                del self._locks[key]

    async def _append(self, key: ShareKey, record: StateRecord) -> ErrorCode:
        """Append `record` (acks=-1) and replay it once replicated; the answer's error."""
        owned = self._owned.get(self.partition_for(key))
        if owned is None or owned.state != LoadState.LOADED:
            return ErrorCode.NOT_COORDINATOR
        value = None if record.value is None else encode_value(record.record_type, record.value)
        batch = bytearray(build_batch([(encode_key(record.record_type, key), value)], timestamp_ms=now_ms()))
        started = time.monotonic()
        appending = self._replicas.append([((SHARE_GROUP_STATE_TOPIC, owned.partition.index), batch)], ACKS_ALL,
                                          AppendOrigin.COORDINATOR, self._write_timeout_s)
        if appending.done is not None:
            await asyncio.shield(appending.done)
        outcome = appending.outcomes[0]
        code = _APPEND_ERRORS.get(outcome.error, outcome.error)
        if code == ErrorCode.NONE and (self._owned.get(owned.partition.index) is not owned
                                       or not owned.partition.is_leader):
            code = ErrorCode.NOT_COORDINATOR
        if code != ErrorCode.NONE:
            log.warning("share-partition %s: writing its state failed: %s", key.coordinator_key(), code.name)
            return code
        self.core.replay(record, outcome.base_offset)
        self.counts.writes += 1
        self.counts.write_latency_ms.append((time.monotonic() - started) * 1000)
        return ErrorCode.NONE

    # pruning ----------------------------------------------------------------------------------
    async def _prune_loop(self) -> None:
        while True:
            await asyncio.sleep(self._prune_interval_s)
            self.prune()

    def prune(self) -> None:
        """Delete what no key needs any more from each loaded partition's log: the records before
        the earliest last snapshot of its keys."""
        by_partition: dict[int, list[ShareKey]] = {}
        for key in self.core.states:
            by_partition.setdefault(self.partition_for(key), []).append(key)
        for index, owned in list(self._owned.items()):
            if owned.state != LoadState.LOADED or not owned.partition.is_leader:
                continue
            keys = by_partition.get(index)
            offset = self.core.prune_offset(keys) if keys else None
            if offset is None or offset <= owned.partition.log_start_offset:
                continue
            code, low = self._replicas.delete_records(owned.partition, offset)
            if code == ErrorCode.NONE:
                self.counts.last_pruned_offset[index] = low
            else:
                log.info("pruning %s-%d to %d: %s", SHARE_GROUP_STATE_TOPIC, index, offset, code.name)

    # questions --------------------------------------------------------------------------------
    def loaded_state(self, key: ShareKey) -> ShareGroupOffset | None:
        return self.core.states.get(key) if self.status(key) == ErrorCode.NONE else None


# The state RPCs' bodies ---------------------------------------------------------------------------
def _partition_keys(body: dict[str, Any]) -> list[tuple[ShareKey, dict[str, Any]]]:
    group = body["group_id"]
    return [(ShareKey(group, topic["topic_id"], p["partition"]), p) for topic in body["topics"]
            for p in topic["partitions"]]


def _results(entries: list[tuple[ShareKey, dict[str, Any]]]) -> dict[str, Any]:
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for key, result in entries:
        by_topic.setdefault(key.topic_id, []).append({"partition": key.partition, **result})
    return {"results": [{"topic_id": t, "partitions": p} for t, p in by_topic.items()]}


def _error(decision: Decision) -> dict[str, Any]:
    return {"error_code": int(decision.error), "error_message": decision.message if decision.error else None}


async def _each(service: ShareCoordinatorService, body: dict[str, Any],
                one: Callable[[ShareKey, dict[str, Any]], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    if not body["group_id"]:
        entries = [(k, {"error_code": int(ErrorCode.INVALID_REQUEST), "error_message": "empty group id"})
                   for k, _ in _partition_keys(body)]
        return _results(entries)
    keyed = _partition_keys(body)
    answers = await asyncio.gather(*(one(key, p) for key, p in keyed))
    return _results([(key, answer) for (key, _), answer in zip(keyed, answers, strict=True)])


async def handle_initialize(service: ShareCoordinatorService, body: dict[str, Any]) -> dict[str, Any]:
    async def one(key: ShareKey, p: dict[str, Any]) -> dict[str, Any]:
        return _error(await service.initialize(key, p["state_epoch"], p["start_offset"]))
    return await _each(service, body, one)


async def handle_read(service: ShareCoordinatorService, body: dict[str, Any]) -> dict[str, Any]:
    async def one(key: ShareKey, p: dict[str, Any]) -> dict[str, Any]:
        decision = await service.read(key, p["leader_epoch"])
        state = decision.state
        if decision.error != ErrorCode.NONE or state is None:
            return {**_error(decision), "state_epoch": 0, "start_offset": -1, "state_batches": []}
        return {**_error(decision), "state_epoch": state.state_epoch, "start_offset": state.start_offset,
                "state_batches": batches_to_wire(state.batches)}
    return await _each(service, body, one)


async def handle_write(service: ShareCoordinatorService, body: dict[str, Any]) -> dict[str, Any]:
    async def one(key: ShareKey, p: dict[str, Any]) -> dict[str, Any]:
        return _error(await service.write(
            key, state_epoch=p["state_epoch"], leader_epoch=p["leader_epoch"], start_offset=p["start_offset"],
            delivery_complete_count=p.get("delivery_complete_count", -1),
            batches=batches_from_wire(p["state_batches"])))
    return await _each(service, body, one)


async def handle_delete(service: ShareCoordinatorService, body: dict[str, Any]) -> dict[str, Any]:
    async def one(key: ShareKey, p: dict[str, Any]) -> dict[str, Any]:
        return _error(await service.delete(key))
    return await _each(service, body, one)


async def handle_summary(service: ShareCoordinatorService, body: dict[str, Any]) -> dict[str, Any]:
    async def one(key: ShareKey, p: dict[str, Any]) -> dict[str, Any]:
        decision = await service.summary(key, p["leader_epoch"])
        state = decision.state
        if decision.error != ErrorCode.NONE or state is None:
            return {**_error(decision), "state_epoch": 0, "leader_epoch": -1, "start_offset": -1,
                    "delivery_complete_count": -1}
        return {**_error(decision), "state_epoch": state.state_epoch, "leader_epoch": state.leader_epoch,
                "start_offset": state.start_offset, "delivery_complete_count": state.delivery_complete_count}
    return await _each(service, body, one)


def state_routes(service: ShareCoordinatorService) -> dict[ApiKey, Callable[[Request], Awaitable[dict[str, Any]]]]:
    """The broker's handlers of the five state APIs (CLUSTER_ACTION is checked before them)."""
    def route(handle: Callable[[ShareCoordinatorService, dict[str, Any]], Awaitable[dict[str, Any]]],
              ) -> Callable[[Request], Awaitable[dict[str, Any]]]:
        return lambda request: handle(service, request.body)
    return {
        ApiKey.INITIALIZE_SHARE_GROUP_STATE: route(handle_initialize),
        ApiKey.READ_SHARE_GROUP_STATE: route(handle_read),
        ApiKey.WRITE_SHARE_GROUP_STATE: route(handle_write),
        ApiKey.DELETE_SHARE_GROUP_STATE: route(handle_delete),
        ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: route(handle_summary),
    }
