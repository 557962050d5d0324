"""Produce: turn each partition's records into a replica manager append, and answer when the
acknowledgement may go (at once, or after the fsync the topic asks for).

Batches stay batches: only the batch headers and CRCs are checked, offsets are assigned by
rewriting baseOffset, and the bytes go to the log as they came (compressed ones stay compressed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from roost.broker.metadata.catalog import TopicCatalog, TopicInfo, topic_name_problem
from roost.broker.replica.manager import ACKS_NONE, AppendOutcome, ReplicaManager
from roost.broker.replica.partition import Partition
from roost.broker.request import NO_RESPONSE, Request
from roost.wire.kafka.errors import ErrorCode

FIRST_SUPPORTED_PRODUCE_VERSION = 3  # v0-2 carry old message formats; advertised only for librdkafka
VALID_ACKS = (0, 1, -1)


def _partition_response(index: int, outcome: AppendOutcome) -> dict[str, Any]:
    return {"index": index, "error_code": outcome.error, "base_offset": outcome.base_offset,
            "log_append_time_ms": outcome.log_append_time, "log_start_offset": outcome.log_start_offset,
            "error_message": outcome.message}


class ProduceApi:
    def __init__(self, replicas: ReplicaManager, catalog: TopicCatalog,
                 auto_create: Callable[[str], TopicInfo | None] | None) -> None:
        self._replicas = replicas
        self._catalog = catalog
        self._auto_create = auto_create  # None: auto.create.topics.enable is off

    def handle(self, request: Request) -> Any:
        body = request.body
        acks = body["acks"]
        version = request.version
        durable_waits: list[asyncio.Future[None]] = []
        topics_out = []
        for topic in body["topic_data"]:
            name = topic["name"]
            partitions_out = []
            for pdata in topic["partition_data"]:
                index = pdata["index"]
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
                partitions_out.append(_partition_response(index, outcome))
            topics_out.append({"name": name, "partition_responses": partitions_out})
        response = {"responses": topics_out, "throttle_time_ms": 0}
        if acks == ACKS_NONE:
            if durable_waits:
                # Nobody waits for the answer, but the fsync must still happen.
                asyncio.gather(*durable_waits, return_exceptions=True)
            return NO_RESPONSE
        if not durable_waits:
            return response
        return _after_fsync(durable_waits, response)

    def _partition_for_write(self, topic: str, index: int) -> tuple[Partition | None, ErrorCode]:
        partition = self._replicas.partition(topic, index)
        if partition is not None:
            return partition, ErrorCode.NONE
        if topic not in self._catalog:
            if topic_name_problem(topic) is not None:
                return None, ErrorCode.INVALID_TOPIC_EXCEPTION
            if self._auto_create is not None:
                self._auto_create(topic)
                partition = self._replicas.partition(topic, index)
                if partition is not None:
                    return partition, ErrorCode.NONE
        return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def _after_fsync(waits: list[asyncio.Future[None]], response: dict[str, Any]) -> dict[str, Any]:
    results = await asyncio.gather(*waits, return_exceptions=True)
    if any(isinstance(r, BaseException) for r in results):
        # Could not make the data durable: the client must not treat it as acknowledged.
        for topic in response["responses"]:
            for partition in topic["partition_responses"]:
                if partition["error_code"] == ErrorCode.NONE:
                    partition["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
    return response
