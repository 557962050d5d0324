"""Fetch: serve whole batches from the segment files, or wait until there is enough to serve.

A fetch that finds less than MinBytes waits on the partitions it asked for; an append wakes it at
once (no polling), and MaxWaitMs bounds the wait. Records are never parsed: the response carries
the segment bytes read for the requested offsets.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from roost.broker.metadata.catalog import TopicCatalog
from roost.broker.replica.manager import OffsetOutOfRange, ReplicaManager
from roost.broker.replica.partition import Partition
from roost.broker.request import Request
from roost.wire.kafka.errors import ErrorCode

FIRST_TOPIC_ID_VERSION = 13
ZERO_UUID = uuid.UUID(int=0)


class _FetchPlan:
    """The partitions one Fetch request asked for, resolved once and read as often as needed."""

    def __init__(self, replicas: ReplicaManager, catalog: TopicCatalog, version: int,
                 body: dict[str, Any]) -> None:
        self.replicas = replicas
        self.version = version
        self.max_bytes: int = body.get("max_bytes", 0x7FFFFFFF)
        self.by_id = self.version >= FIRST_TOPIC_ID_VERSION
        # (topic name or None, topic id, request partition, Partition or error code)
        self.entries: list[tuple[str, uuid.UUID, dict[str, Any], Partition | ErrorCode]] = []
        for topic in body["topics"]:
            if self.by_id:
                info = catalog.by_id(topic["topic_id"])
                name = info.name if info else ""
                topic_id = topic["topic_id"]
                missing = ErrorCode.UNKNOWN_TOPIC_ID
            else:
                name = topic["topic"]
                info = catalog.get(name)
                topic_id = info.topic_id if info else ZERO_UUID
                missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            for request_partition in topic["partitions"]:
                partition = replicas.partition(name, request_partition["partition"]) if info else None
                self.entries.append((name, topic_id, request_partition, partition or missing))

    def partitions(self) -> list[Partition]:
        return [p for _, _, _, p in self.entries if isinstance(p, Partition)]

    def read(self) -> tuple[dict[str, Any], int, bool]:
        """Read every partition once: (response body, bytes found, any partition in error)."""
        remaining = self.max_bytes
        total = 0
        errored = False
        topics_out: list[dict[str, Any]] = []
        by_topic: dict[tuple[str, uuid.UUID], list[dict[str, Any]]] = {}
        for name, topic_id, request_partition, partition in self.entries:
            key = (name, topic_id)
            out = by_topic.get(key)
            if out is None:
                out = by_topic[key] = []
                topics_out.append({"topic": name, "topic_id": topic_id, "partitions": out})
            index = request_partition["partition"]
            if not isinstance(partition, Partition):
                out.append(_partition_result(index, partition))
                errored = True
                continue
            limit = min(request_partition["partition_max_bytes"], remaining)
            try:
                result = self.replicas.read(partition, request_partition["fetch_offset"], limit,
                                            min_one_batch=total == 0)
            except OffsetOutOfRange:
                out.append(_partition_result(index, ErrorCode.OFFSET_OUT_OF_RANGE, partition))
                errored = True
                continue
            total += result.size
            remaining = max(0, remaining - result.size)
            entry = _partition_result(index, ErrorCode.NONE, partition)
            entry["records"] = result.buffers
            out.append(entry)
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": topics_out}, total, errored


def _partition_result(index: int, error: ErrorCode, partition: Partition | None = None) -> dict[str, Any]:
    hw = partition.high_watermark if partition else -1
    return {"partition_index": index, "error_code": error, "high_watermark": hw,
            "last_stable_offset": hw, "log_start_offset": partition.log_start_offset if partition else -1,
            "aborted_transactions": None, "preferred_read_replica": -1, "records": b""}


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class FetchApi:
    def __init__(self, replicas: ReplicaManager, catalog: TopicCatalog) -> None:
        self._replicas = replicas
        self._catalog = catalog

    def handle(self, request: Request) -> Any:
        body = request.body
        plan = _FetchPlan(self._replicas, self._catalog, request.version, body)
        response, found, errored = plan.read()
        max_wait_ms = body["max_wait_ms"]
        # Fetch sessions (KIP-227) are declined by answering session id 0: clients send full fetches.
        if found >= body["min_bytes"] or errored or max_wait_ms <= 0 or not plan.partitions():
            return response
        return _wait_then_read(plan, body["min_bytes"], max_wait_ms / 1000)


async def _wait_then_read(plan: _FetchPlan, min_bytes: int, max_wait: float) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait
    partitions = plan.partitions()
    while True:
        waiter: asyncio.Future[None] = loop.create_future()
        for partition in partitions:
            partition.add_waiter(waiter)
        try:
            # Read again once the waiter is in place: an append that landed after the last read
            # (e.g. between handle_fetch and this task's first step) has already woken nobody.
            response, found, errored = plan.read()
            remaining = deadline - loop.time()
            if found >= min_bytes or errored or remaining <= 0:
                return response
            # A timer rather than wait_for: no extra task per waiting fetch.
            timer = loop.call_later(remaining, _release, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
        finally:
            for partition in partitions:
                partition.remove_waiter(waiter)
