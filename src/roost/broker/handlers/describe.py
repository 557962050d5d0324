"""DescribeTopicPartitions (75) and DescribeProducers (61): what is there, partition by partition.

DescribeTopicPartitions (KIP-966) is Metadata's partition part, paged: topics in name order, at
most ResponsePartitionLimit partitions per answer, and a cursor (topic, partition) saying where the
next request starts. Any broker answers from its metadata cache, as Kafka's brokers do.

DescribeProducers (KIP-664) lists the idempotent producers a partition's log knows. Kafka answers
it on any replica that hosts the partition's log (the Java admin can ask a follower by broker id),
so a broker answers NOT_LEADER_OR_FOLLOWER only when it hosts no replica of a partition that
exists, and UNKNOWN_TOPIC_OR_PARTITION when the partition does not exist.
"""

from __future__ import annotations

import uuid
from typing import Any

from roost.broker.handlers.metadata import partition_entry
from roost.broker.metadata.cache import MetadataCache
from roost.broker.metadata.catalog import INTERNAL_TOPICS, TopicInfo, topic_name_problem
from roost.broker.net.request import Request
from roost.broker.replica.manager import ReplicaManager
from roost.wire.kafka.errors import ErrorCode

# Kafka's max.request.partition.size.limit (default 2000): the most partitions in one answer,
# whatever the request asks for.
MAX_PARTITIONS_PER_RESPONSE = 2000
NO_AUTHORIZED_OPERATIONS = -2147483648
ZERO_UUID = uuid.UUID(int=0)


class DescribeTopicPartitionsApi:
    def __init__(self, cache: MetadataCache) -> None:
        self._cache = cache

    def handle(self, request: Request) -> dict[str, Any]:
        body = request.body
        asked = sorted({topic["name"] for topic in body["topics"]})
        cursor = body.get("cursor")
        if cursor is not None and asked and cursor["topic_name"] not in asked:
            # Kafka: "topic list should contain the cursor topic" (InvalidRequestException).
            return _answer([_topic_error(name, ErrorCode.INVALID_REQUEST) for name in asked], None)
        # Fewer than one partition per answer could never get past the cursor.
        limit = min(max(body.get("response_partition_limit", MAX_PARTITIONS_PER_RESPONSE), 1),
                    MAX_PARTITIONS_PER_RESPONSE)
        # Unknown topics stay as their names. No topics asked for: every topic, in name order.
        infos: list[TopicInfo | str] = [self._cache.get(name) or name for name in asked] if asked \
            else list(self._cache)
        if cursor is not None:
            infos = [info for info in infos if _name(info) >= cursor["topic_name"]]
        topics: list[dict[str, Any]] = []
        next_cursor: dict[str, Any] | None = None
        remaining = limit
        for info in infos:
            if remaining == 0:
                # The answer is full: the next one starts at this topic (known or not, as Kafka).
                next_cursor = {"topic_name": _name(info), "partition_index": 0}
                break
            if isinstance(info, str):
                error = ErrorCode.INVALID_TOPIC_EXCEPTION if topic_name_problem(info) is not None \
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                topics.append(_topic_error(info, error))
                continue
            on_cursor = cursor is not None and info.name == cursor["topic_name"]
            first = max(cursor["partition_index"], 0) if on_cursor else 0
            end = min(info.partitions, first + remaining)  # exclusive
            topics.append({
                "error_code": ErrorCode.NONE,
                "name": info.name,
                "topic_id": info.topic_id,
                "is_internal": info.is_internal,
                "partitions": [self._partition(info.name, index) for index in range(first, end)],
                "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS,
            })
            if end < info.partitions:
                next_cursor = {"topic_name": info.name, "partition_index": end}
                break
            remaining -= max(end - first, 0)
            assert remaining >= 0, "an answer took more partitions than its limit"
        return _answer(topics, next_cursor)

    def _partition(self, topic: str, index: int) -> dict[str, Any]:
        # No eligible leader replicas (KIP-966's ELR is KRaft's): both lists are empty, never
        # null. Kafka always sends lists here, and the Java admin client (3.9) reads them without
        # a null check: a null made every `describeTopics` (and kafka-topics --describe) fail
        # with a NullPointerException.
        return {**partition_entry(self._cache, topic, index), "eligible_leader_replicas": [], "last_known_elr": []}


def _name(info: TopicInfo | str) -> str:
    return info if isinstance(info, str) else info.name


def _topic_error(name: str, error: ErrorCode) -> dict[str, Any]:
    return {"error_code": error, "name": name, "topic_id": ZERO_UUID, "is_internal": name in INTERNAL_TOPICS,
            "partitions": [],
            "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS}


def _answer(topics: list[dict[str, Any]], next_cursor: dict[str, Any] | None) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "topics": topics, "next_cursor": next_cursor}


class DescribeProducersApi:
    def __init__(self, replicas: ReplicaManager, cache: MetadataCache) -> None:
        self._replicas = replicas
        self._cache = cache

    def handle(self, request: Request) -> dict[str, Any]:
        topics = []
        for topic in request.body["topics"]:
            name = topic["name"]
            partitions = [self._partition(name, index) for index in topic["partition_indexes"]]
            topics.append({"name": name, "partitions": partitions})
        return {"throttle_time_ms": 0, "topics": topics}

    def _partition(self, topic: str, index: int) -> dict[str, Any]:
        info = self._cache.get(topic)
        if info is None or not 0 <= index < info.partitions:
            return _producers_error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        partition = self._replicas.partition(topic, index)
        if partition is None or partition.closed:
            return _producers_error(index, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        producers = [
            {"producer_id": entry.producer_id, "producer_epoch": entry.epoch, "last_sequence": entry.last_seq,
             "last_timestamp": entry.last_timestamp, "coordinator_epoch": entry.coordinator_epoch,
             "current_txn_start_offset": entry.current_txn_first_offset}
            for entry in partition.producers()
        ]
        return {"partition_index": index, "error_code": ErrorCode.NONE, "error_message": None,
                "active_producers": producers}


def _producers_error(index: int, error: ErrorCode) -> dict[str, Any]:
    return {"partition_index": index, "error_code": error, "error_message": error.name, "active_producers": []}


# Kafka's ConfigResource.Type codes.
TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE, CLIENT_METRICS_RESOURCE, GROUP_RESOURCE = 2, 4, 8, 16, 32
# What an empty ResourceTypes asks for: the types a ZooKeeper-mode broker can hold configs for,
# and the two Kafka 4.1 lists that Roost has none of (it keeps no client-metrics subscriptions and
# no group configs), answered empty.
LISTED_RESOURCE_TYPES = (TOPIC_RESOURCE, BROKER_RESOURCE, CLIENT_METRICS_RESOURCE, GROUP_RESOURCE)


def list_config_resources(version: int, types: list[int], topics: list[str], broker_ids: list[int]) -> dict[str, Any]:
    """ListConfigResources (74): the resources DescribeConfigs can be asked about, by type. Version 0
    (ListClientMetricsResources) lists client-metrics resources only: none here. A type Roost keeps
    no configs for (broker loggers, or one Kafka does not have) is INVALID_REQUEST."""
    wanted = [CLIENT_METRICS_RESOURCE] if version == 0 else (list(types) or list(LISTED_RESOURCE_TYPES))
    if any(kind not in LISTED_RESOURCE_TYPES for kind in wanted):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "config_resources": []}
    resources: list[dict[str, Any]] = []
    if TOPIC_RESOURCE in wanted:
        resources += [{"resource_name": name, "resource_type": TOPIC_RESOURCE} for name in sorted(topics)]
    if BROKER_RESOURCE in wanted:
        resources += [{"resource_name": str(broker), "resource_type": BROKER_RESOURCE} for broker in sorted(broker_ids)]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "config_resources": resources}


class ListConfigResourcesApi:
    def __init__(self, cache: MetadataCache) -> None:
        self._cache = cache

    def handle(self, request: Request) -> dict[str, Any]:
        return list_config_resources(request.version, request.body.get("resource_types") or [],
                                     [info.name for info in self._cache], self._cache.live_broker_ids())
