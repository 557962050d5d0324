"""The size of each partition replica, from the brokers' DescribeLogDirs.

confluent-kafka's AdminClient (2.16) has no describe_log_dirs, so the request goes over a plain
socket with Roost's own codec (`roost.wire.kafka`), at version 1: the version every Kafka from 1.0
to 4.x and Roost serve. DescribeLogDirs answers for the broker asked, so each broker is asked.
Plaintext listeners only (as `kafka_admin.broker_api_keys`); elsewhere sizes are unknown.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable
from typing import Any

from roost.cli.client_options import Target
from roost.cli.kafka_admin import read_exactly
from roost.wire.kafka import ApiKey, KafkaCodecError, RequestHeader, decode_response, encode_request

DESCRIBE_LOG_DIRS_VERSION = 1
MAX_ANSWER_BYTES = 64 << 20


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
            answer = _describe(host, port, topic, partitions, target.timeout_s)
        except (OSError, KafkaCodecError, struct.error):
            continue
        for result in answer["results"]:
            for named in result["topics"]:
                if named["name"] != topic:
                    continue
                for partition in named["partitions"]:
                    if not partition["is_future_key"]:
                        sizes[(broker_id, partition["partition_index"])] = partition["partition_size"]
    return sizes


def _describe(host: str, port: int, topic: str, partitions: list[int], timeout_s: float) -> dict[str, Any]:
    header = RequestHeader(ApiKey.DESCRIBE_LOG_DIRS, DESCRIBE_LOG_DIRS_VERSION, 1, "roost-cli")
    body = {"topics": [{"topic": topic, "partitions": partitions}]}
    request = b"".join(bytes(part) for part in encode_request(header, body))
    with socket.create_connection((host.strip("[]"), port), timeout=timeout_s) as sock:
        sock.sendall(request)
        size = struct.unpack(">i", read_exactly(sock, 4))[0]
        if not 0 < size <= MAX_ANSWER_BYTES:
            raise OSError(f"implausible answer size {size}")
        _correlation, answer = decode_response(ApiKey.DESCRIBE_LOG_DIRS, DESCRIBE_LOG_DIRS_VERSION,
                                               bytearray(read_exactly(sock, size)))
    return answer
