"""Produce: turn each partition's records into an append on its leader, and answer when the
acknowledgement may go: at once (acks=1), after the fsync the topic asks for, and for acks=all
once the high watermark covers the records (every in-sync replica has them).

Batches stay batches: only the batch headers and CRCs are checked, offsets are assigned by
rewriting baseOffset, and the bytes go to the log as they came (compressed ones stay compressed).
A partition this broker does not lead gets NOT_LEADER_OR_FOLLOWER and, from v10, the leader it
knows of (KIP-951), so the client moves at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Callable
from typing import Any

from roost.broker.metadata.cache import MetadataCache
from roost.broker.metadata.catalog import TopicInfo, topic_name_problem
from roost.broker.replica.manager import ACKS_ALL, ACKS_NONE, AppendOutcome, AwaitedAppend, ReplicaManager
from roost.broker.replica.partition import Partition
from roost.broker.request import NO_RESPONSE, Request, when_all
from roost.broker.stats import BrokerStats
from roost.wire.kafka.errors import ErrorCode

FIRST_SUPPORTED_PRODUCE_VERSION = 3  # v0-2 carry old message formats; advertised only for librdkafka
FIRST_LEADER_HINT_VERSION = 10  # KIP-951
VALID_ACKS = (0, 1, -1)
AUTO_CREATE_WAIT_S = 3.0


def _partition_response(index: int, outcome: AppendOutcome) -> dict[str, Any]:
    return {"index": index, "error_code": outcome.error, "base_offset": outcome.base_offset,
            "log_append_time_ms": outcome.log_append_time, "log_start_offset": outcome.log_start_offset,
            "error_message": outcome.message}


class ProduceApi:
    def __init__(self, replicas: ReplicaManager, metadata: MetadataCache,
                 auto_create: Callable[[str], TopicInfo | None] | None, stats: BrokerStats | None = None) -> None:
        self._replicas = replicas
        self._metadata = metadata
        self._auto_create = auto_create  # None: auto.create.topics.enable is off
        self._stats = stats  # None: metrics are off

    def handle(self, request: Request) -> Any:
        """Unknown topics are created first when auto-creation is on (in a cluster the controller
        gives them leaders: the request waits a bounded while for that, then goes on)."""
        creating = self._auto_create_missing(request.body)
        if not creating:
            return self._handle(request)
        metadata = self._metadata

        def led() -> bool:
            return all((info := metadata.get(name)) is not None and all(
                (p := metadata.partition(name, i)) is not None and p.leader >= 0 for i in range(info.partitions))
                for name in creating)

        async def after_creation() -> Any:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(metadata.wait_until(led), AUTO_CREATE_WAIT_S)
            result = self._handle(request)
            return (await result) if inspect.isawaitable(result) else result

        return after_creation()

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
        body = request.body
        acks = body["acks"]
        version = request.version
        durable_waits: list[asyncio.Future[None]] = []
        awaited: list[AwaitedAppend] = []
        hinted: set[int] = set()
        topics_out = []
        for topic in body["topic_data"]:
            name = topic["name"]
            partitions_out = []
            for pdata in topic["partition_data"]:
                index = pdata["index"]
                partition: Partition | None = None
                if version < FIRST_SUPPORTED_PRODUCE_VERSION:
                    outcome = AppendOutcome(ErrorCode.UNSUPPORTED_VERSION,
                                            "produce versions 0-2 are not supported; use v3 or later")
                elif acks not in VALID_ACKS:
                    outcome = AppendOutcome(ErrorCode.INVALID_REQUIRED_ACKS)
                else:
                    partition, error = self._partition_for_write(name, index)
                    if partition is None:
                        outcome = AppendOutcome(error)
                    else:
                        outcome = self._replicas.append_records(partition, pdata["records"], acks)
                        if outcome.durable is not None:
                            durable_waits.append(outcome.durable)
                if self._stats is not None and (partition is not None or name in self._metadata):
                    self._count(name, pdata["records"], outcome)
                entry = _partition_response(index, outcome)
                if outcome.error == ErrorCode.NOT_LEADER_OR_FOLLOWER and version >= FIRST_LEADER_HINT_VERSION:
                    leader, epoch, _ = self._metadata.leader_endpoint(name, index)
                    entry["current_leader"] = {"leader_id": leader, "leader_epoch": epoch}
                    hinted.add(leader)
                if partition is not None and acks == ACKS_ALL and outcome.error == ErrorCode.NONE \
                        and outcome.required_offset > partition.high_watermark:
                    awaited.append(AwaitedAppend(partition, outcome.required_offset, outcome.leader_epoch, entry))
                partitions_out.append(entry)
            topics_out.append({"name": name, "partition_responses": partitions_out})
        response: dict[str, Any] = {"responses": topics_out, "throttle_time_ms": 0}
        if hinted:
            response["node_endpoints"] = [
                {"node_id": e.node_id, "host": e.host, "port": e.port, "rack": e.rack}
                for e in (self._metadata.client_endpoint(b, request.listener) for b in sorted(hinted))
                if e is not None]
        if acks == ACKS_NONE:
            if durable_waits:
                # Nobody waits for the answer, but the fsync must still happen.
                asyncio.gather(*durable_waits, return_exceptions=True)
            return NO_RESPONSE
        if awaited:
            replicated = self._replicas.wait_for_replication(awaited, body["timeout_ms"] / 1000)
            if replicated is not None:
                durable_waits.append(replicated)
        if not durable_waits:
            return response
        return _after(durable_waits, response)

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

    def _partition_for_write(self, topic: str, index: int) -> tuple[Partition | None, ErrorCode]:
        partition, error = self._replicas.leader_partition(topic, index)
        if partition is not None or error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
            return partition, error
        if topic_name_problem(topic) is not None:
            return None, ErrorCode.INVALID_TOPIC_EXCEPTION
        if self._auto_create is not None:
            return None, ErrorCode.LEADER_NOT_AVAILABLE  # being created: the client retries
        return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _after(waits: list[asyncio.Future[None]], response: dict[str, Any]) -> asyncio.Future[dict[str, Any]]:
    """The response, once every wait is over (fsyncs, replication): a future, no task."""
    answered: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

    def all_done(outcomes: asyncio.Future[list[BaseException | None]]) -> None:
        if any(error is not None for error in outcomes.result()):
            # Could not make the data durable: the client must not treat it as acknowledged.
            for topic in response["responses"]:
                for partition in topic["partition_responses"]:
                    if partition["error_code"] == ErrorCode.NONE:
                        partition["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
        if not answered.done():
            answered.set_result(response)

    when_all(waits).add_done_callback(all_done)
    return answered
