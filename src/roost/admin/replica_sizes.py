"""The size of each partition replica, from the brokers' DescribeLogDirs; used by `roost topic
describe` (its SIZE column) and by the console (topic sizes and bytes per second).

confluent-kafka's AdminClient (2.16) has no describe_log_dirs, so the request goes over a plain
socket with Roost's own codec (`roost.wire.kafka`), at version 1: the version every Kafka from 1.0
to 4.x and Roost serve. DescribeLogDirs answers for the broker asked, so each broker is asked.
Plaintext listeners only (as `kafka_client.broker_api_keys`); elsewhere sizes are unknown.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable
from typing import Any

from roost.admin.kafka_client import read_exactly
from roost.admin.target import Target
from roost.wire.kafka import ApiKey, KafkaCodecError, RequestHeader, decode_response, encode_request

DESCRIBE_LOG_DIRS_VERSION = 1
MAX_ANSWER_BYTES = 64 << 20

# What a broker that cannot be asked raises: no connection, a closed one (a broker without the
# API drops the connection), or an answer the codec cannot read.
UNANSWERED = (OSError, KafkaCodecError, struct.error)


def replica_sizes(target: Target, brokers: Iterable[tuple[int, str, int]], topic: str,
                  partitions: list[int]) -> dict[tuple[int, int], int]:
    """{(broker id, partition): bytes} of the current replicas (not future copies being moved in)
    of `topic`'s `partitions` on the brokers (id, host, port) that answer; a broker that cannot be
    asked is left out."""
    if target.settings.get("security.protocol", "plaintext").lower() != "plaintext":
        return {}
    sizes: dict[tuple[int, int], int] = {}
    for broker_id, host, port in brokers:
        try:
            found = broker_replica_sizes(host, port, {topic: partitions}, target.timeout_s, "roost-cli")
        except UNANSWERED:
            continue
        for (name, index), size in found.items():
            if name == topic:
                sizes[(broker_id, index)] = size
    return sizes


def broker_replica_sizes(host: str, port: int, topics: dict[str, list[int]] | None, timeout_s: float,
                         client_id: str) -> dict[tuple[str, int], int]:
    """{(topic, partition): bytes} of the current replicas on the one broker at host:port, of
    `topics` (name -> partitions) or, with None, of every partition it holds (one request either
    way). Raises one of UNANSWERED when the broker cannot be asked."""
    answer = _describe(host, port, None if topics is None else
                       [{"topic": name, "partitions": partitions} for name, partitions in topics.items()],
                       timeout_s, client_id)
    sizes: dict[tuple[str, int], int] = {}
    for result in answer["results"]:
        if result["error_code"] != 0:  # a failed directory: its replicas are unreadable
            continue
        for named in result["topics"]:
            for partition in named["partitions"]:
                if not partition["is_future_key"]:
                    sizes[(named["name"], partition["partition_index"])] = partition["partition_size"]
    return sizes


def _describe(host: str, port: int, topics: list[dict[str, Any]] | None, timeout_s: float,
              client_id: str) -> dict[str, Any]:
    header = RequestHeader(ApiKey.DESCRIBE_LOG_DIRS, DESCRIBE_LOG_DIRS_VERSION, 1, client_id)
    request = b"".join(bytes(part) for part in encode_request(header, {"topics": topics}))
    with socket.create_connection((host.strip("[]"), port), timeout=timeout_s) as sock:
        sock.sendall(request)
        size = struct.unpack(">i", read_exactly(sock, 4))[0]
        if not 0 < size <= MAX_ANSWER_BYTES:
            raise OSError(f"implausible answer size {size}")
        _correlation, answer = decode_response(ApiKey.DESCRIBE_LOG_DIRS, DESCRIBE_LOG_DIRS_VERSION,
                                               bytearray(read_exactly(sock, size)))
    return answer
