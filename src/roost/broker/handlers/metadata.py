"""Metadata and ApiVersions: what clients learn before they do anything else."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roost.broker.topics import topic_name_problem
from roost.wire.kafka import RequestHeader
from roost.wire.kafka.errors import ErrorCode

if TYPE_CHECKING:
    from roost.broker.broker import Broker

FIRST_AUTO_CREATE_FLAG_VERSION = 4


def handle_api_versions(broker: Broker, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.NONE,
        "api_keys": [
            {"api_key": key, "min_version": low, "max_version": high}
            for key, (low, high) in sorted(broker.advertised_versions.items())
        ],
        "throttle_time_ms": 0,
    }


def handle_metadata(broker: Broker, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
    state = broker.state
    requested = body.get("topics")
    allow_auto_create = body.get("allow_auto_topic_creation", True)
    if header.api_version < FIRST_AUTO_CREATE_FLAG_VERSION:
        allow_auto_create = True
    topics_out: list[dict[str, Any]] = []
    if requested is None:
        names = [info.name for info in state.topics]
    else:
        names = []
        for topic in requested:
            if topic.get("name") is not None:
                names.append(topic["name"])
                continue
            # v12+: a topic asked for by id alone.
            by_id = state.topics.by_id(topic["topic_id"])
            if by_id is None:
                topics_out.append({"error_code": ErrorCode.UNKNOWN_TOPIC_ID, "name": None,
                                   "topic_id": topic["topic_id"], "is_internal": False, "partitions": []})
            else:
                names.append(by_id.name)
    for name in names:
        info = state.topics.get(name)
        if info is None:
            problem = topic_name_problem(name)
            if problem is not None:
                topics_out.append({"error_code": ErrorCode.INVALID_TOPIC_EXCEPTION, "name": name,
                                   "is_internal": False, "partitions": []})
                continue
            if allow_auto_create and broker.auto_create_enabled:
                info = broker.auto_create_topic(name)
            if info is None:
                topics_out.append({"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name,
                                   "is_internal": False, "partitions": []})
                continue
        topics_out.append({
            "error_code": ErrorCode.NONE,
            "name": info.name,
            "topic_id": info.topic_id,
            "is_internal": info.is_internal,
            "partitions": [broker.partition_metadata(info.name, index) for index in range(info.partitions)],
            "topic_authorized_operations": -2147483648,
        })
    return {
        "throttle_time_ms": 0,
        "brokers": broker.broker_endpoints(),
        "cluster_id": broker.cluster_id,
        # Clients send admin requests to the controller: it must be a broker listed above.
        "controller_id": broker.controller_id,
        "topics": topics_out,
        "cluster_authorized_operations": -2147483648,
    }
