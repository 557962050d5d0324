"""Fetch: serve whole batches from the segment files, or wait until there is enough to serve.

Consumers read below the high watermark; followers (a replica id >= 0: other brokers of the
cluster) read up to the log end, and their fetch offset tells the leader what they hold, which
moves the high watermark. A fetch that finds less than MinBytes waits on its partitions: an
append wakes followers, a high watermark move wakes consumers (no polling); MaxWaitMs bounds the
wait. Records are never parsed: the response carries the segment bytes read.

Per partition, Kafka's checks: the leader epoch the fetcher believes in (KIP-320: older ->
FENCED_LEADER_EPOCH, newer -> UNKNOWN_LEADER_EPOCH), leadership (NOT_LEADER_OR_FOLLOWER with the
leader we know of, KIP-951), and for followers the divergence of their log (DivergingEpoch).

A follower fetches all its partitions from one leader in one request, one at a time. When this
broker becomes a partition's leader (a failover), its followers must add the partition to that
request; a follower's fetch already parked here for its other partitions would hold the new one
back for up to its MaxWaitMs (500 ms by default) — and with it every acks=all produce to the new
partition, and, behind those on the producer's connection, the producer's Metadata answers. So a
new leadership answers the parked fetches of that partition's followers at once, and for a short
while (NEW_LEADERSHIP_S) a follower fetch that leaves out a partition the follower should fetch
from here parks at most MISSING_PARTITION_WAIT_S (the follower has not yet heard of the change).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from roost.broker.metadata.cache import MetadataCache
from roost.broker.replica.manager import OffsetOutOfRange, ReplicaManager
from roost.broker.replica.partition import Partition
from roost.broker.replica.waits import Waits
from roost.broker.request import Request
from roost.broker.stats import BrokerStats
from roost.wire.kafka.errors import ErrorCode

log = logging.getLogger("roost.broker.fetch")

FIRST_TOPIC_ID_VERSION = 13
FIRST_REPLICA_STATE_VERSION = 15
FIRST_NODE_ENDPOINTS_VERSION = 16
FIRST_LEADER_HINT_VERSION = 12
NO_EPOCH = -1
READ_COMMITTED = 1
ZERO_UUID = uuid.UUID(int=0)
NEW_LEADERSHIP_S = 2.0  # how long after becoming leader a follower's fetch is expected to change
MISSING_PARTITION_WAIT_S = 0.05  # the longest park of a follower fetch that leaves one out meanwhile


def _replica_id(version: int, body: dict[str, Any]) -> int:
    if version >= FIRST_REPLICA_STATE_VERSION:
        state = body.get("replica_state") or {}
        return state.get("replica_id", -1)
    return body.get("replica_id", -1)


class _FetchPlan:
    """The partitions one Fetch request asked for, resolved and checked once, read as often as needed."""

    def __init__(self, replicas: ReplicaManager, metadata: MetadataCache, version: int, replica_id: int,
                 body: dict[str, Any], listener: str = "") -> None:
        self.listener = listener  # the client's listener: leader hints give its addresses
        self.replicas = replicas
        self.metadata = metadata
        self.version = version
        self.replica_id = replica_id
        self.follower = replica_id >= 0
        self.max_bytes: int = body.get("max_bytes", 0x7FFFFFFF)
        # read_committed (isolation level 1): data below the LSO, with the aborted transactions in it.
        self.read_committed = not self.follower and body.get("isolation_level", 0) == READ_COMMITTED
        self.hinted: set[int] = set()
        by_id = version >= FIRST_TOPIC_ID_VERSION
        # (topic name, topic id, request partition, Partition or the error to answer)
        self.entries: list[tuple[str, uuid.UUID, dict[str, Any], Partition | ErrorCode]] = []
        self.diverging: dict[int, tuple[int, int]] = {}  # entry index -> (epoch, end offset)
        for topic in body["topics"]:
            if by_id:
                info = metadata.by_id(topic["topic_id"])
                name = info.name if info else ""
                topic_id = topic["topic_id"]
                missing = ErrorCode.UNKNOWN_TOPIC_ID
            else:
                name = topic["topic"]
                info = metadata.get(name)
                topic_id = info.topic_id if info else ZERO_UUID
                missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            for wanted in topic["partitions"]:
                target = self._resolve(name if info else None, wanted) if info else missing
                if isinstance(target, Partition) and self.follower:
                    target = self._follower_checks(target, wanted)
                self.entries.append((name, topic_id, wanted, target))

    def _resolve(self, name: str | None, wanted: dict[str, Any]) -> Partition | ErrorCode:
        assert name is not None
        if self.replicas.is_offline(name, wanted["partition"]):
            return ErrorCode.KAFKA_STORAGE_ERROR  # its log directory failed
        partition = self.replicas.partition(name, wanted["partition"])
        if partition is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        epoch = wanted.get("current_leader_epoch", NO_EPOCH)
        if epoch != NO_EPOCH and epoch < partition.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if epoch != NO_EPOCH and epoch > partition.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        if not partition.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return partition

    def _follower_checks(self, partition: Partition, wanted: dict[str, Any]) -> Partition | ErrorCode:
        if not partition.has_replica(self.replica_id):
            log.warning("fetch for %s-%d from replica %d, which is not one of its replicas %s",
                        partition.topic, partition.index, self.replica_id, list(partition.replicas()))
            epoch = wanted.get("current_leader_epoch", NO_EPOCH)
            return ErrorCode.UNKNOWN_LEADER_EPOCH if epoch != NO_EPOCH else ErrorCode.NOT_LEADER_OR_FOLLOWER
        fetch_offset = wanted["fetch_offset"]
        if fetch_offset > partition.log_end_offset:
            # A follower cannot hold more than its leader: a confused or forged fetch. It must not
            # move the high watermark; it gets OFFSET_OUT_OF_RANGE and truncates.
            log.warning("fetch for %s-%d from replica %d at offset %d, past the log end %d",
                        partition.topic, partition.index, self.replica_id, fetch_offset, partition.log_end_offset)
            return ErrorCode.OFFSET_OUT_OF_RANGE
        diverging = self.replicas.diverging_epoch(partition, wanted.get("last_fetched_epoch", NO_EPOCH),
                                                  fetch_offset)
        if diverging is not None:
            self.diverging[len(self.entries)] = diverging
        else:
            self.replicas.follower_fetched(partition, self.replica_id, fetch_offset)
        return partition

    def partitions(self) -> list[Partition]:
        return [p for i, (_, _, _, p) in enumerate(self.entries) if isinstance(p, Partition) and i not in self.diverging]

    def read(self) -> tuple[dict[str, Any], int, bool]:
        """Read every partition once: (response body, bytes found, any partition in error)."""
        remaining = self.max_bytes
        total = 0
        errored = False
        # What this read sends and fails, per topic: counted once, for the read that answers.
        self.bytes_by_topic: dict[str, int] = {}
        self.failed_by_topic: dict[str, int] = {}
        topics_out: list[dict[str, Any]] = []
        by_topic: dict[tuple[str, uuid.UUID], list[dict[str, Any]]] = {}
        for position, (name, topic_id, wanted, partition) in enumerate(self.entries):
            key = (name, topic_id)
            out = by_topic.get(key)
            if out is None:
                out = by_topic[key] = []
                topics_out.append({"topic": name, "topic_id": topic_id, "partitions": out})
            index = wanted["partition"]
            if not isinstance(partition, Partition):
                out.append(self._error(name, index, partition))
                errored = True
                if name in self.metadata:  # a known topic only: a typo must not become a series
                    self.failed_by_topic[name] = self.failed_by_topic.get(name, 0) + 1
                continue
            refused = self._refusal(partition, wanted)
            if refused is not None:
                out.append(self._error(name, index, refused))
                errored = True
                self.failed_by_topic[name] = self.failed_by_topic.get(name, 0) + 1
                continue
            diverging = self.diverging.get(position)
            if diverging is not None:
                entry = _partition_result(index, ErrorCode.NONE, partition)
                entry["diverging_epoch"] = {"epoch": diverging[0], "end_offset": diverging[1]}
                out.append(entry)
                errored = True  # answer at once: the follower must truncate first
                continue
            limit = min(wanted["partition_max_bytes"], remaining)
            try:
                result = self.replicas.read(partition, wanted["fetch_offset"], limit,
                                            min_one_batch=total == 0, follower=self.follower,
                                            read_committed=self.read_committed)
            except OffsetOutOfRange:
                out.append(_partition_result(index, ErrorCode.OFFSET_OUT_OF_RANGE, partition))
                errored = True
                self.failed_by_topic[name] = self.failed_by_topic.get(name, 0) + 1
                continue
            total += result.size
            if result.size:
                self.bytes_by_topic[name] = self.bytes_by_topic.get(name, 0) + result.size
            remaining = max(0, remaining - result.size)
            entry = _partition_result(index, ErrorCode.NONE, partition)
            entry["records"] = result.buffers
            if self.read_committed:
                entry["aborted_transactions"] = [
                    {"producer_id": pid, "first_offset": first}
                    for pid, first in partition.aborted_transactions(wanted["fetch_offset"], result.next_offset)]
            out.append(entry)
        response: dict[str, Any] = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": topics_out}
        if self.hinted and self.version >= FIRST_NODE_ENDPOINTS_VERSION:
            response["node_endpoints"] = [
                {"node_id": e.node_id, "host": e.host, "port": e.port, "rack": e.rack}
                for e in (self.metadata.client_endpoint(b, self.listener) for b in sorted(self.hinted))
                if e is not None]
        return response, total, errored

    def _refusal(self, partition: Partition, wanted: dict[str, Any]) -> ErrorCode | None:
        """Why a partition the fetch found is not read now (it may have waited parked), if it is not."""
        if partition.closed or not partition.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self._fenced_while_parked(partition, wanted):
            return ErrorCode.FENCED_LEADER_EPOCH
        return None

    def _fenced_while_parked(self, partition: Partition, wanted: dict[str, Any]) -> bool:
        """A consumer's fetch whose leader epoch the partition left while the fetch waited here
        (an ISR shrink bumps the epoch and the leader stays). Kafka's DelayedFetch answers it
        FENCED_LEADER_EPOCH; records of the new epoch would reach a consumer that has not yet
        validated its position against that epoch, and librdkafka, whose validation then finds
        its fetch position past the old epoch's end, takes it for a truncation and seeks back
        there, dropping the records it had fetched but not yet handed to the application: those
        are never read (seen in the transaction chaos loop, issue 20). Followers are left as
        they were: their truncation goes by DivergingEpoch, checked when the fetch came."""
        epoch = wanted.get("current_leader_epoch", NO_EPOCH)
        return not self.follower and epoch != NO_EPOCH and epoch < partition.leader_epoch

    def _error(self, name: str, index: int, code: ErrorCode) -> dict[str, Any]:
        entry = _partition_result(index, code)
        if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH) \
                and self.version >= FIRST_LEADER_HINT_VERSION:
            leader, epoch, endpoint = self.metadata.leader_endpoint(name, index)
            if leader >= 0:
                entry["current_leader"] = {"leader_id": leader, "leader_epoch": epoch}
                if endpoint is not None:
                    self.hinted.add(leader)
        return entry


def _partition_result(index: int, error: ErrorCode, partition: Partition | None = None) -> dict[str, Any]:
    hw = partition.high_watermark if partition else -1
    lso = partition.last_stable_offset if partition else -1
    return {"partition_index": index, "error_code": error, "high_watermark": hw,
            "last_stable_offset": lso, "log_start_offset": partition.log_start_offset if partition else -1,
            "aborted_transactions": None, "preferred_read_replica": -1, "records": b""}


class FetchApi:
    def __init__(self, replicas: ReplicaManager, metadata: MetadataCache, stats: BrokerStats | None = None) -> None:
        self._replicas = replicas
        self._metadata = metadata
        self._stats = stats  # None: metrics are off
        self._parked_by_follower: dict[int, set[DelayedFetch]] = {}
        self._new_leaderships: dict[Partition, float] = {}  # partitions led here since (waits.time())
        replicas.leadership_listeners.append(self._leadership_changed)

    def _leadership_changed(self, partition: Partition, leader: bool) -> None:
        """Newly the leader: answer the parked fetches of its followers now (see the docstring)."""
        if not leader:
            self._new_leaderships.pop(partition, None)
            return
        now = self._replicas.waits.time()  # the injected clock: the replication simulation's time there
        self._new_leaderships = {p: t for p, t in self._new_leaderships.items() if now - t < NEW_LEADERSHIP_S}
        self._new_leaderships[partition] = now
        for replica in partition.state.replicas:
            for parked in list(self._parked_by_follower.get(replica, ())):
                parked.answer_now()

    def _missing_new_partition(self, plan: _FetchPlan, replica_id: int) -> bool:
        """Does this follower's fetch leave out a partition it replicates that is newly led here?"""
        if not self._new_leaderships:
            return False
        now = self._replicas.waits.time()
        asked = set(map(id, plan.partitions()))
        return any(now - since < NEW_LEADERSHIP_S and id(partition) not in asked and partition.is_leader
                   and replica_id in partition.state.replicas
                   for partition, since in self._new_leaderships.items())

    def handle(self, request: Request) -> Any:
        body = request.body
        replica_id = _replica_id(request.version, body)
        if replica_id >= 0 and replica_id not in self._metadata.brokers:
            log.warning("replica fetch from %s claims broker id %d, which is not a live broker; refused",
                        request.client_host, replica_id)
            return _refuse_all(body, request.version)
        plan = _FetchPlan(self._replicas, self._metadata, request.version, replica_id, body, request.listener)
        response, found, errored = plan.read()
        max_wait_ms = body["max_wait_ms"]
        # Fetch sessions (KIP-227) are declined by answering session id 0: clients send full fetches.
        if found >= body["min_bytes"] or errored or max_wait_ms <= 0 or not plan.partitions():
            if self._stats is not None:
                self._count(plan)
            return response
        max_wait = max_wait_ms / 1000
        if replica_id >= 0 and self._missing_new_partition(plan, replica_id):
            max_wait = min(max_wait, MISSING_PARTITION_WAIT_S)
        parked = DelayedFetch(plan, body["min_bytes"], max_wait, self._replicas.waits)
        done = parked.done
        if replica_id >= 0:
            self._parked_by_follower.setdefault(replica_id, set()).add(parked)
            done.add_done_callback(lambda _f: self._unpark(replica_id, parked))
        if self._stats is not None:
            done.add_done_callback(lambda future: future.cancelled() or self._count(plan))
        return done

    def _unpark(self, replica_id: int, parked: DelayedFetch) -> None:
        waiting = self._parked_by_follower.get(replica_id)
        if waiting is not None:
            waiting.discard(parked)
            if not waiting:
                del self._parked_by_follower[replica_id]

    def _count(self, plan: _FetchPlan) -> None:
        """BrokerTopicMetrics of the read that answered `plan`'s fetch."""
        assert self._stats is not None
        topic = self._stats.topic
        for name, size in plan.bytes_by_topic.items():
            topic(name).bytes_out += size
        for name, failed in plan.failed_by_topic.items():
            topic(name).failed_fetch += failed


def _refuse_all(body: dict[str, Any], version: int) -> dict[str, Any]:
    by_id = version >= FIRST_TOPIC_ID_VERSION
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": topic.get("topic", ""), "topic_id": topic.get("topic_id", ZERO_UUID) if by_id else ZERO_UUID,
         "partitions": [_partition_result(p["partition"], ErrorCode.NOT_LEADER_OR_FOLLOWER)
                        for p in topic["partitions"]]}
        for topic in body["topics"]]}


class DelayedFetch:
    """A fetch parked until its partitions have enough (Kafka's DelayedFetch), with callbacks only:
    woken by the partitions it reads (appends for followers, HW moves for consumers), answered
    when MinBytes are there, a partition errs, or MaxWaitMs passes. `done` holds the answer."""

    def __init__(self, plan: _FetchPlan, min_bytes: int, max_wait: float, waits: Waits) -> None:
        self._waits = waits
        self._plan = plan
        self._min_bytes = min_bytes
        self._deadline = waits.time() + max_wait
        self._partitions = plan.partitions()
        self._wake = self._woken  # one bound method: it is what the partitions hold
        self._check_scheduled = False
        self.done: asyncio.Future[dict[str, Any]] = waits.future()
        self.done.add_done_callback(self._cleanup)
        self._timer = waits.call_later(max_wait, self._expire)
        self._park()

    def _park(self) -> None:
        for partition in self._partitions:
            partition.add_waiter(self._wake, follower=self._plan.follower)
        # Read again once parked: an append between the first read and now has woken nobody.
        self._check()

    def _woken(self) -> None:
        # Answer on the next loop turn: the append that woke us answers its own producer first.
        if not self._check_scheduled and not self.done.done():
            self._check_scheduled = True
            self._waits.call_soon(self._check)

    def _check(self) -> None:
        self._check_scheduled = False
        if self.done.done():
            return
        response, found, errored = self._plan.read()
        if found >= self._min_bytes or errored or self._waits.time() >= self._deadline:
            self.done.set_result(response)
            return
        for partition in self._partitions:  # woken waiters were dropped: park again
            partition.add_waiter(self._wake, follower=self._plan.follower)

    def _expire(self) -> None:
        if not self.done.done():
            self.done.set_result(self._plan.read()[0])

    def answer_now(self) -> None:
        """Answer with what there is (the follower has a partition to add to its next fetch)."""
        self._expire()

    def _cleanup(self, _: asyncio.Future[dict[str, Any]]) -> None:
        self._timer.cancel()
        for partition in self._partitions:
            partition.remove_waiter(self._wake)
