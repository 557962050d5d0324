"""Fetch: the request becomes one call of the replica manager's fetch door
(`ReplicaManager.fetch`), and the door's per-partition outcomes become the answer once they are
final. The door makes the leader-side checks, reads, and parks a fetch that found less than
MinBytes (`replica/fetch.py`, `replica/purgatory.py`); this handler only translates: topic ids
and names to partitions (an unknown topic answers UNKNOWN_TOPIC_ID or UNKNOWN_TOPIC_OR_PARTITION,
and the fetch at once), who may fetch as a follower (a live broker of the cluster), the leader
hints of KIP-951, the topic counters, and what the client's fetch quota allows
(`Request.fetch_allowance`: a cap on the bytes read, or an empty answer while it is over).

Consumers read below the high watermark; followers (a replica id >= 0: other brokers of the
cluster) read up to the log end. Records are never parsed: the response carries the segment
bytes read. Fetch sessions (KIP-227) are declined by answering session id 0: clients send full
fetches.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from roost.broker.metadata.cache import MetadataCache
from roost.broker.net.request import Request
from roost.broker.net.stats import BrokerStats
from roost.broker.quotas.throttle import FetchAllowance
from roost.broker.replica.fetch import NO_EPOCH, FetchOutcome, FetchParams, FetchWanted
from roost.broker.replica.manager import ReplicaManager
from roost.wire.kafka.errors import ErrorCode

log = logging.getLogger("roost.broker.fetch")

FIRST_TOPIC_ID_VERSION = 13
FIRST_REPLICA_STATE_VERSION = 15
FIRST_NODE_ENDPOINTS_VERSION = 16
FIRST_LEADER_HINT_VERSION = 12
READ_COMMITTED = 1
ZERO_UUID = uuid.UUID(int=0)


def _replica_id(version: int, body: dict[str, Any]) -> int:
    if version >= FIRST_REPLICA_STATE_VERSION:
        state = body.get("replica_state") or {}
        return state.get("replica_id", -1)
    return body.get("replica_id", -1)


def _partition_result(index: int, outcome: FetchOutcome) -> dict[str, Any]:
    aborted = outcome.aborted
    return {"partition_index": index, "error_code": outcome.error, "high_watermark": outcome.high_watermark,
            "last_stable_offset": outcome.last_stable_offset, "log_start_offset": outcome.log_start_offset,
            "aborted_transactions": None if aborted is None else [
                {"producer_id": pid, "first_offset": first} for pid, first in aborted],
            "preferred_read_replica": -1, "records": outcome.records}


class _Asked:
    """One Fetch request as the door's terms: what it asks for, where each answer goes."""

    __slots__ = ("missing", "slots", "wanted")

    def __init__(self, metadata: MetadataCache, version: int, body: dict[str, Any]) -> None:
        by_id = version >= FIRST_TOPIC_ID_VERSION
        self.wanted: list[FetchWanted] = []
        # Per partition asked, in order: (topic name, topic id, partition index, index into
        # `wanted`, or the error of a topic unknown here).
        self.slots: list[tuple[str, uuid.UUID, int, int | ErrorCode]] = []
        self.missing = False
        for topic in body["topics"]:
            if by_id:
                topic_id = topic["topic_id"]
                info = metadata.by_id(topic_id)
                name = info.name if info else ""
                unknown = ErrorCode.UNKNOWN_TOPIC_ID
            else:
                name = topic["topic"]
                info = metadata.get(name)
                topic_id = info.topic_id if info else ZERO_UUID
                unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            for wanted in topic["partitions"]:
                index = wanted["partition"]
                if info is None:
                    self.slots.append((name, topic_id, index, unknown))
                    self.missing = True
                    continue
                self.slots.append((name, topic_id, index, len(self.wanted)))
                self.wanted.append(FetchWanted(name, index, wanted["fetch_offset"], wanted["partition_max_bytes"],
                                               wanted.get("current_leader_epoch", NO_EPOCH),
                                               wanted.get("last_fetched_epoch", NO_EPOCH)))


class FetchApi:
    def __init__(self, replicas: ReplicaManager, metadata: MetadataCache, stats: BrokerStats | None = None) -> None:
        self._replicas = replicas
        self._metadata = metadata
        self._stats = stats  # None: metrics are off

    def handle(self, request: Request) -> Any:
        """The request as one call of the fetch door, and its outcomes as the answer."""
        body = request.body
        version = request.version
        replica_id = _replica_id(version, body)
        if replica_id >= 0 and replica_id not in self._metadata.brokers:
            log.warning("replica fetch from %s claims broker id %d, which is not a live broker; refused",
                        request.client_host, replica_id)
            return _refuse_all(body, version)
        follower = replica_id >= 0
        max_bytes, min_bytes = body.get("max_bytes", 0x7FFFFFFF), body["min_bytes"]
        allowance = None if follower else request.fetch_allowance  # a follower's fetch has no quota
        if allowance is not None:
            if allowance.over_quota_ms > 0:
                return _throttled(allowance.over_quota_ms)
            max_bytes = allowance.cap(max_bytes)
            min_bytes = min(min_bytes, max_bytes)
        asked = _Asked(self._metadata, version, body)
        # An unknown topic is an error in the answer: like a partition in error, it answers at once.
        max_wait_s = 0.0 if asked.missing else body["max_wait_ms"] / 1000
        params = FetchParams(replica_id, max_wait_s, min_bytes, max_bytes,
                             read_committed=not follower and body.get("isolation_level", 0) == READ_COMMITTED)
        fetching = self._replicas.fetch(params, asked.wanted)
        if fetching.done is None:
            return self._answer(asked, fetching.outcomes, version, request.listener, allowance)
        # A future of the door's kind (the event loop's in a broker, the simulated clock's in the
        # replication simulation, which runs this handler).
        door = fetching.done
        answered: asyncio.Future[dict[str, Any]] = self._replicas.waits.future()

        def settled(done: Any) -> None:
            if not answered.done() and not done.cancelled():
                answered.set_result(self._answer(asked, done.result(), version, request.listener, allowance))

        def abandoned(answer: Any) -> None:
            if answer.cancelled():  # the connection closed: the parked fetch goes too
                door.cancel()

        door.add_done_callback(settled)  # futures, no task
        answered.add_done_callback(abandoned)
        return answered

    def _answer(self, asked: _Asked, outcomes: list[FetchOutcome], version: int, listener: str,
                allowance: FetchAllowance | None = None) -> dict[str, Any]:
        """The door's outcomes, in the request's order, as the Fetch response (and the topic
        counters of the read that answers); empty when the read would put the client over its
        fetch quota (`allowance`)."""
        if allowance is not None:
            over_ms = allowance.charge_unless_over(sum(outcome.size for outcome in outcomes))
            if over_ms > 0:
                return _throttled(over_ms)
        metadata = self._metadata
        hints = version >= FIRST_LEADER_HINT_VERSION
        hinted: set[int] = set()
        topics_out: list[dict[str, Any]] = []
        by_topic: dict[tuple[str, uuid.UUID], list[dict[str, Any]]] = {}
        stats = self._stats
        for name, topic_id, index, slot in asked.slots:
            key = (name, topic_id)
            out = by_topic.get(key)
            if out is None:
                out = by_topic[key] = []
                topics_out.append({"topic": name, "topic_id": topic_id, "partitions": out})
            if isinstance(slot, ErrorCode):  # an IntEnum: an int too
                out.append(_partition_result(index, FetchOutcome(slot)))
                continue
            outcome = outcomes[slot]
            entry = _partition_result(index, outcome)
            if outcome.diverging is not None:
                entry["diverging_epoch"] = {"epoch": outcome.diverging[0], "end_offset": outcome.diverging[1]}
            elif outcome.name_leader and hints:
                leader, epoch, endpoint = metadata.leader_endpoint(name, index)
                if leader >= 0:
                    entry["current_leader"] = {"leader_id": leader, "leader_epoch": epoch}
                    if endpoint is not None:
                        hinted.add(leader)
            out.append(entry)
            if stats is not None:
                if outcome.size:
                    stats.topic(name).bytes_out += outcome.size
                elif outcome.failed and (outcome.hosted or name in metadata):
                    # A known topic only: a client's typo must not become a series.
                    stats.topic(name).failed_fetch += 1
        response: dict[str, Any] = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": topics_out}
        if hinted and version >= FIRST_NODE_ENDPOINTS_VERSION:
            response["node_endpoints"] = [
                {"node_id": e.node_id, "host": e.host, "port": e.port, "rack": e.rack}
                for e in (metadata.client_endpoint(b, listener) for b in sorted(hinted))
                if e is not None]
        return response


def _throttled(throttle_ms: int) -> dict[str, Any]:
    """A client over its fetch quota: no partitions, read nothing (Kafka's throttled response
    of a sessionless fetch); it fetches again from the same offsets once the throttle ends."""
    return {"throttle_time_ms": throttle_ms, "error_code": 0, "session_id": 0, "responses": []}


def _refuse_all(body: dict[str, Any], version: int) -> dict[str, Any]:
    by_id = version >= FIRST_TOPIC_ID_VERSION
    refused = FetchOutcome(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": topic.get("topic", ""), "topic_id": topic.get("topic_id", ZERO_UUID) if by_id else ZERO_UUID,
         "partitions": [_partition_result(p["partition"], refused) for p in topic["partitions"]]}
        for topic in body["topics"]]}
