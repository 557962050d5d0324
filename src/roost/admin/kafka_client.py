"""What the Kafka client commands (`roost topic`, `roost group`, `roost cluster`) and the console
share: an AdminClient bounded by the target's timeout, its failures turned into one-line
AdminErrors, offsets by partition, the APIs a broker advertises, internal-topic rules.

    admin = open_admin(target)
    metadata = fetch_metadata(admin, target)                 # AdminError if unreachable in time
    ends = list_offsets(admin, target, partitions, OffsetSpec.latest())

confluent-kafka never gives up on an unreachable cluster by itself: every call here waits at
most `target.timeout_s` for its answer.
"""

from __future__ import annotations

import concurrent.futures
import logging
import socket
import struct
from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, OffsetSpec

from roost.admin.errors import AdminError
from roost.admin.target import Target

# librdkafka's own log lines (connection refused, ...) would add to the one-line error; they go
# to a logger that drops them.
_SILENT = logging.getLogger("roost.cli.librdkafka")
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False

# Error codes that mean the broker does not implement the request at all.
_UNSUPPORTED = {KafkaError._UNSUPPORTED_FEATURE, KafkaError.UNSUPPORTED_VERSION, KafkaError.INVALID_REQUEST}
_UNREACHABLE = {KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
                KafkaError._RESOLVE}


def open_admin(target: Target) -> AdminClient:
    """An AdminClient for `target`, its requests bounded by the target's timeout."""
    timeout_ms = int(target.timeout_s * 1000)
    try:
        return AdminClient(target.client_config(**{
            "logger": _SILENT,
            "socket.timeout.ms": max(timeout_ms, 10),
            "socket.connection.setup.timeout.ms": max(timeout_ms, 1000),
        }))
    except (KafkaException, ValueError, TypeError) as error:  # e.g. an unknown -X setting
        kafka_error = error.args[0] if error.args else error
        text = kafka_error.str() if isinstance(kafka_error, KafkaError) else str(kafka_error)
        raise AdminError(f"client settings: {text}") from None


def describe_error(error: BaseException, what: str, target: Target) -> str:
    """One line for a failed `what`."""
    kafka_error = error.args[0] if isinstance(error, KafkaException) and error.args else error
    if isinstance(kafka_error, KafkaError):
        code = kafka_error.code()
        if code in _UNREACHABLE:
            return f"{what}: cannot reach the cluster at {target.bootstrap} within {target.timeout_s:g}s"
        if code in _UNSUPPORTED:
            return f"{what}: the broker does not support this request ({kafka_error.str()})"
        return f"{what}: {kafka_error.str()}"
    return f"{what}: {error}"


def await_result(future: concurrent.futures.Future[Any], target: Target, what: str) -> Any:
    """`future`'s result within the target's timeout, or an AdminError saying what failed."""
    try:
        return future.result(timeout=target.timeout_s)
    except concurrent.futures.TimeoutError:
        raise AdminError(f"{what}: no answer from {target.bootstrap} within {target.timeout_s:g}s") from None
    except (KafkaException, ValueError, TypeError) as error:
        raise AdminError(describe_error(error, what, target)) from None


def fetch_metadata(admin: AdminClient, target: Target, topic: str | None = None) -> ClusterMetadata:
    """The cluster's metadata (brokers, controller, topics and their partitions)."""
    try:
        return admin.list_topics(topic=topic, timeout=target.timeout_s)
    except KafkaException as error:
        raise AdminError(describe_error(error, "metadata", target)) from None


def list_offsets(admin: AdminClient, target: Target, partitions: Iterable[tuple[str, int]],
                 spec: OffsetSpec, strict: bool = True) -> dict[tuple[str, int], int | None]:
    """The offset `spec` names (earliest, latest, for a timestamp) of each (topic, partition);
    -1 where there is none (no record at or after a timestamp). A partition that cannot answer
    (offline, deleted) is an AdminError, or with `strict=False` None: a report goes on without it."""
    request = {TopicPartition(topic, index): spec for topic, index in partitions}
    if not request:
        return {}
    futures = admin.list_offsets(request, request_timeout=target.timeout_s)
    offsets: dict[tuple[str, int], int | None] = {}
    for tp, future in futures.items():
        try:
            offsets[(tp.topic, tp.partition)] = await_result(future, target,
                                                             f"offsets of {tp.topic}[{tp.partition}]").offset
        except AdminError:
            if strict:
                raise
            offsets[(tp.topic, tp.partition)] = None
    return offsets


def topic_partitions(metadata: ClusterMetadata, topics: Iterable[str]) -> list[tuple[str, int]]:
    """Every (topic, partition) of `topics`, in order."""
    return [(topic, index) for topic in topics for index in sorted(metadata.topics[topic].partitions)]


def is_internal(topic: str) -> bool:
    """Kafka's internal topics (__consumer_offsets, __transaction_state) start with two underscores."""
    return topic.startswith("__")


API_VERSIONS_KEY = 18
# An ApiVersions v0 answer: correlation id, error code, the array's count, then 6 bytes per API;
# Kafka has under 100 APIs, so an answer over 64 KiB is not one and is not read.
API_VERSIONS_HEAD = 10
MAX_API_VERSIONS_BYTES = 64 * 1024
DELETE_GROUPS_KEY = 42


def broker_api_keys(target: Target) -> set[int] | None:
    """The API keys the first bootstrap broker advertises (an ApiVersions v0 exchange over
    plaintext), or None when that cannot be learned (a TLS or SASL listener, no answer).

    Why: librdkafka 2.x aborts the whole process (an assertion in rd_kafka_q_destroy0) when an
    AdminClient that was refused DeleteGroups as unsupported is destroyed, so such requests are
    checked for before they are sent."""
    if target.settings.get("security.protocol", "plaintext").lower() != "plaintext":
        return None
    host, _, port = target.bootstrap.split(",")[0].strip().rpartition(":")
    client_id = b"roost-cli"
    header = struct.pack(">hhih", API_VERSIONS_KEY, 0, 1, len(client_id)) + client_id
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=target.timeout_s) as sock:
            sock.sendall(struct.pack(">i", len(header)) + header)
            size = struct.unpack(">i", read_exactly(sock, 4))[0]
            if not API_VERSIONS_HEAD <= size <= MAX_API_VERSIONS_BYTES:  # not an ApiVersions v0 answer
                return None
            body = read_exactly(sock, size)
    except (OSError, ValueError, struct.error):
        return None
    _correlation, error, count = struct.unpack_from(">ihi", body)
    if error != 0 or count < 0 or len(body) < API_VERSIONS_HEAD + 6 * count:
        return None
    return {struct.unpack_from(">h", body, API_VERSIONS_HEAD + 6 * i)[0] for i in range(count)}


def read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, remaining = [], size
    while remaining > 0:
        chunk = sock.recv(min(remaining, 65536))
        if not chunk:
            raise OSError("connection closed")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def require_api(target: Target, api_key: int, name: str, what: str) -> None:
    """An AdminError when the cluster is known not to implement `name`."""
    keys = broker_api_keys(target)
    if keys is not None and api_key not in keys:
        raise AdminError(f"{what}: the broker does not support this request ({name} is not among its APIs)")
