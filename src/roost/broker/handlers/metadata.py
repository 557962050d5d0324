"""Metadata and ApiVersions: what clients learn before they do anything else."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable, Mapping
from typing import Any

from roost.broker.metadata.cache import MetadataCache
from roost.broker.metadata.catalog import TopicCatalog, TopicInfo, topic_name_problem
from roost.broker.net.request import Request
from roost.wire.kafka.errors import ErrorCode

FIRST_AUTO_CREATE_FLAG_VERSION = 4
AUTO_CREATE_WAIT_S = 3.0
NO_AUTHORIZED_OPERATIONS = -2147483648


# KIP-511: what a client may call itself and its version (Kafka's ApiVersionsRequest pattern).
SOFTWARE_NAME_OR_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


class ApiVersionsApi:
    def __init__(self, advertised: Mapping[int, tuple[int, int]]) -> None:
        self._api_keys = [{"api_key": key, "min_version": low, "max_version": high}
                          for key, (low, high) in sorted(advertised.items())]

    def handle(self, request: Request) -> dict[str, Any]:
        body = request.body
        if request.version >= 3 and not (
                SOFTWARE_NAME_OR_VERSION.fullmatch(body.get("client_software_name") or "")
                and SOFTWARE_NAME_OR_VERSION.fullmatch(body.get("client_software_version") or "")):
            # Kafka's ApiVersionsRequest.isValid: INVALID_REQUEST, and no API listed.
            return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": [], "throttle_time_ms": 0}
        return {"error_code": ErrorCode.NONE, "api_keys": self._api_keys, "throttle_time_ms": 0}


class MetadataApi:
    def __init__(self, cache: MetadataCache, catalog: TopicCatalog | MetadataCache, cluster_id: Callable[[], str],
                 auto_create: Callable[[str], TopicInfo | None] | None) -> None:
        self._cache = cache
        self._catalog = catalog
        self._cluster_id = cluster_id
        self._auto_create = auto_create  # None: auto.create.topics.enable is off

    def handle(self, request: Request) -> Any:
        """Auto-created topics: a cluster creates them through the controller, which takes a
        moment; rather than answer LEADER_NOT_AVAILABLE at once (Kafka's way, the client retries),
        the answer waits a bounded while for their leaders."""
        creating = self._auto_create_missing(request)
        if not creating:
            return self._after_this_turns_io(request)
        cache = self._cache

        def led() -> bool:
            for name in creating:
                info = cache.get(name)
                if info is None or any((p := cache.partition(name, i)) is None or p.leader < 0
                                       for i in range(info.partitions)):
                    return False
            return True

        async def after_creation() -> dict[str, Any]:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(cache.wait_until(led), AUTO_CREATE_WAIT_S)
            return self._answer(request)

        return after_creation()

    async def _after_this_turns_io(self, request: Request) -> dict[str, Any]:
        """The answer, decided once the I/O the event loop read in this turn has been handled (a
        task's first step runs after it): a peer's connection that ended in the same turn — a
        dead leader, for the reachability hint — is already counted. Without it a client that
        asks the moment its own connection to the dead leader breaks was told that leader again
        about half the time, and librdkafka then waited a second before asking again."""
        return self._answer(request)

    def _auto_create_missing(self, request: Request) -> list[str]:
        """Start creating the unknown topics asked for (if allowed); those still being created."""
        body = request.body
        allow = body.get("allow_auto_topic_creation", True) or request.version < FIRST_AUTO_CREATE_FLAG_VERSION
        if self._auto_create is None or not allow or body.get("topics") is None:
            return []
        creating = []
        for topic in body["topics"]:
            name = topic.get("name")
            if name is None or name in self._catalog or topic_name_problem(name) is not None:
                continue
            if self._auto_create(name) is None:
                creating.append(name)
        return creating

    def _answer(self, request: Request) -> dict[str, Any]:
        body = request.body
        requested = body.get("topics")
        allow_auto_create = body.get("allow_auto_topic_creation", True)
        if request.version < FIRST_AUTO_CREATE_FLAG_VERSION:
            allow_auto_create = True
        topics_out: list[dict[str, Any]] = []
        if requested is None:
            names = [info.name for info in self._catalog]
        else:
            names = []
            for topic in requested:
                if topic.get("name") is not None:
                    names.append(topic["name"])
                    continue
                # v12+: a topic asked for by id alone.
                by_id = self._catalog.by_id(topic["topic_id"])
                if by_id is None:
                    topics_out.append({"error_code": ErrorCode.UNKNOWN_TOPIC_ID, "name": None,
                                       "topic_id": topic["topic_id"], "is_internal": False, "partitions": []})
                else:
                    names.append(by_id.name)
        for name in names:
            info = self._catalog.get(name)
            if info is None:
                if topic_name_problem(name) is not None:
                    topics_out.append({"error_code": ErrorCode.INVALID_TOPIC_EXCEPTION, "name": name,
                                       "is_internal": False, "partitions": []})
                    continue
                if allow_auto_create and self._auto_create is not None:
                    info = self._auto_create(name)
                    if info is None:
                        # Being created in the cluster: leaders come soon, the client retries.
                        topics_out.append({"error_code": ErrorCode.LEADER_NOT_AVAILABLE, "name": name,
                                           "is_internal": False, "partitions": []})
                        continue
                if info is None:
                    topics_out.append({"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name,
                                       "is_internal": False, "partitions": []})
                    continue
            topics_out.append({
                "error_code": ErrorCode.NONE,
                "name": info.name,
                "topic_id": info.topic_id,
                "is_internal": info.is_internal,
                "partitions": [self._partition(info.name, index) for index in range(info.partitions)],
                "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS,
            })
        cache = self._cache
        return {
            "throttle_time_ms": 0,
            # The addresses of the listener the client came in on (Kafka's rule).
            "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                        for b in cache.metadata_brokers(request.listener)],
            "cluster_id": self._cluster_id(),
            # Clients send admin requests to the controller: it must be a broker listed above.
            "controller_id": cache.controller_id,
            "topics": topics_out,
            "cluster_authorized_operations": NO_AUTHORIZED_OPERATIONS,
        }

    def _partition(self, topic: str, index: int) -> dict[str, Any]:
        return partition_entry(self._cache, topic, index)


def partition_entry(cache: MetadataCache, topic: str, index: int) -> dict[str, Any]:
    """One partition as Metadata and DescribeTopicPartitions answer it (the same fields)."""
    info = cache.partition(topic, index)
    if info is None:
        return {"error_code": ErrorCode.LEADER_NOT_AVAILABLE, "partition_index": index, "leader_id": -1,
                "leader_epoch": -1, "replica_nodes": [], "isr_nodes": [], "offline_replicas": []}
    leader = info.leader if info.leader not in cache.unreachable else -1
    error = ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE
    return {"error_code": error, "partition_index": index, "leader_id": leader,
            "leader_epoch": info.leader_epoch, "replica_nodes": list(info.replicas),
            "isr_nodes": list(info.isr), "offline_replicas": list(info.offline_replicas)}
