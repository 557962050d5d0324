"""Produce: the request becomes one call of the replica manager's append door
(`ReplicaManager.append`, origin CLIENT), and the door's per-partition outcomes become the answer
once they are final. The door decides when that is (acks, fsync before ack, the high watermark
for acks=all: `replica/append.py`); this handler only translates.

Batches stay batches: only the batch headers and CRCs are checked, offsets are assigned by
rewriting baseOffset, and the bytes go to the log as they came (compressed ones stay compressed).
A partition this broker does not lead gets NOT_LEADER_OR_FOLLOWER and, from v10, the leader it
knows of (KIP-951), so the client moves at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import weakref
from collections.abc import Callable
from typing import Any

from roost.broker.metadata.cache import MetadataCache
from roost.broker.metadata.catalog import TopicInfo, topic_name_problem
from roost.broker.net.request import NO_RESPONSE, Request
from roost.broker.net.stats import BrokerStats
from roost.broker.replica.append import ACKS_NONE, AppendOrigin, AppendOutcome, refused
from roost.broker.replica.manager import ReplicaManager
from roost.wire.kafka.errors import ErrorCode

FIRST_SUPPORTED_PRODUCE_VERSION = 3  # v0-2 carry old message formats; advertised only for librdkafka
FIRST_LEADER_HINT_VERSION = 10  # KIP-951
AUTO_CREATE_WAIT_S = 3.0


def _partition_response(index: int, outcome: AppendOutcome, error: ErrorCode | None = None) -> dict[str, Any]:
    return {"index": index, "error_code": outcome.error if error is None else error,
            "base_offset": outcome.base_offset,
            "log_append_time_ms": outcome.log_append_time, "log_start_offset": outcome.log_start_offset,
            "error_message": outcome.message,
            "record_errors": [{"batch_index": at, "batch_index_error_message": reason}
                              for at, reason in outcome.record_errors]}


class ProduceApi:
    def __init__(self, replicas: ReplicaManager, metadata: MetadataCache,
                 auto_create: Callable[[str], TopicInfo | None] | None, stats: BrokerStats | None = None) -> None:
        self._replicas = replicas
        self._metadata = metadata
        self._auto_create = auto_create  # None: auto.create.topics.enable is off
        self._stats = stats  # None: metrics are off
        # Per connection, the last of its produces not yet through the append door (see handle).
        # An entry goes when that produce is through, or with its connection: a connection closed
        # before the produce's task ran cancels the task unstarted, and its `finally` never runs.
        self._waiting: weakref.WeakKeyDictionary[object, asyncio.Future[None]] = weakref.WeakKeyDictionary()

    def handle(self, request: Request) -> Any:
        """Unknown topics are created first when auto-creation is on (in a cluster the controller
        gives them leaders: the request waits a bounded while for that, then goes on).

        A connection's produces reach the append door in the order they came, as Kafka, which
        reads a connection's next request only once the previous one is answered: the connection
        hands each request over on arrival, so one that waits for a topic's creation would
        otherwise be overtaken by the next, and an idempotent producer's later batch would be
        appended first (or refused OUT_OF_ORDER_SEQUENCE_NUMBER, after which librdkafka renumbers
        the earlier batch under a new epoch: a record written twice)."""
        creating = self._auto_create_missing(request.body)
        connection = request.connection
        earlier = self._waiting.get(connection) if connection is not None else None
        if not creating and earlier is None:
            return self._handle(request)
        metadata = self._metadata
        appended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if connection is not None:
            self._waiting[connection] = appended  # the next produce of this connection waits for it

        def led() -> bool:
            return all((info := metadata.get(name)) is not None and all(
                (p := metadata.partition(name, i)) is not None and p.leader >= 0 for i in range(info.partitions))
                for name in creating)

        async def in_turn() -> Any:
            try:
                if earlier is not None:
                    await asyncio.shield(earlier)  # set whatever became of it (see finally)
                if creating:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(metadata.wait_until(led), AUTO_CREATE_WAIT_S)
                result = self._handle(request)
            finally:
                appended.set_result(None)
                if connection is not None and self._waiting.get(connection) is appended:
                    del self._waiting[connection]
            return (await result) if inspect.isawaitable(result) else result

        return in_turn()

    def _auto_create_missing(self, body: dict[str, Any]) -> list[str]:
        if self._auto_create is None:
            return []
        creating = []
        for topic in body["topic_data"]:
            name = topic["name"]
            if name not in self._metadata and topic_name_problem(name) is None and self._auto_create(name) is None:
                creating.append(name)
        return creating

    def _handle(self, request: Request) -> Any:
        """The request as one call of the append door, and its outcomes as the answer."""
        body = request.body
        acks = body["acks"]
        version = request.version
        entries = []
        for topic in body["topic_data"]:
            name = topic["name"]
            for pdata in topic["partition_data"]:
                entries.append(((name, pdata["index"]), pdata["records"]))
        if version < FIRST_SUPPORTED_PRODUCE_VERSION:
            appending = refused(entries, ErrorCode.UNSUPPORTED_VERSION,
                                "produce versions 0-2 are not supported; use v3 or later")
        else:
            appending = self._replicas.append(entries, acks, AppendOrigin.CLIENT, body["timeout_ms"] / 1000,
                                              body.get("transactional_id"))
        if self._stats is not None:  # what was appended is known now, whatever the wait
            for ((name, _), records), outcome in zip(entries, appending.outcomes, strict=True):
                if outcome.error == ErrorCode.NONE or name in self._metadata:
                    self._count(name, records, outcome)
        if acks == ACKS_NONE:
            return NO_RESPONSE
        if appending.done is None:
            return self._response(body, version, appending.outcomes, request.listener)
        # A future of the door's kind (the event loop's in a broker, the simulated clock's in the
        # replication simulation, which runs this handler).
        answered: asyncio.Future[dict[str, Any]] = self._replicas.waits.future()

        def settled(_: asyncio.Future[None]) -> None:
            if not answered.done():
                answered.set_result(self._response(body, version, appending.outcomes, request.listener))

        appending.done.add_done_callback(settled)  # a future, no task
        return answered

    def _response(self, body: dict[str, Any], version: int, outcomes: list[AppendOutcome],
                  listener: str) -> dict[str, Any]:
        """The door's outcomes, in the request's order, as the Produce response."""
        hinted: set[int] = set()
        topics_out = []
        position = 0
        for topic in body["topic_data"]:
            name = topic["name"]
            partitions_out = []
            for pdata in topic["partition_data"]:
                index = pdata["index"]
                outcome = outcomes[position]
                position += 1
                error = outcome.error
                if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and name not in self._metadata:
                    error = self._unknown_topic_error(name)  # a missing partition of a topic stays unknown
                entry = _partition_response(index, outcome, error)
                if error == ErrorCode.NOT_LEADER_OR_FOLLOWER and version >= FIRST_LEADER_HINT_VERSION:
                    leader, epoch, _ = self._metadata.leader_endpoint(name, index)
                    entry["current_leader"] = {"leader_id": leader, "leader_epoch": epoch}
                    hinted.add(leader)
                partitions_out.append(entry)
            topics_out.append({"name": name, "partition_responses": partitions_out})
        response: dict[str, Any] = {"responses": topics_out, "throttle_time_ms": 0}
        if hinted:
            response["node_endpoints"] = [
                {"node_id": e.node_id, "host": e.host, "port": e.port, "rack": e.rack}
                for e in (self._metadata.client_endpoint(b, listener) for b in sorted(hinted))
                if e is not None]
        return response

    def _count(self, topic: str, records: Any, outcome: AppendOutcome) -> None:
        """BrokerTopicMetrics of one partition's records (a known topic only: a client's typo
        must not become a series)."""
        assert self._stats is not None
        counters = self._stats.topic(topic)
        if outcome.error != ErrorCode.NONE:
            counters.failed_produce += 1
        elif outcome.appended_records:
            counters.messages_in += outcome.appended_records
            counters.bytes_in += len(records)

    def _unknown_topic_error(self, topic: str) -> ErrorCode:
        """What a producer gets for a topic that is not there (its name may be invalid, or it is
        being created)."""
        if topic_name_problem(topic) is not None:
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        if self._auto_create is not None:
            return ErrorCode.LEADER_NOT_AVAILABLE  # being created: the client retries
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
