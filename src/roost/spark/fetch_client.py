"""A small blocking Kafka client for the source's tasks: Metadata, Fetch and ListOffsets on Roost's
own wire codec, answering record batches as raw bytes.

It does exactly what a task needs and no more: find each partition's leader from Metadata, ask
that broker for an offset range, and hand back the fetched bytes (a memoryview into the response
frame, never copied) for the caller to decode whole batches. No threads, no background work:
every call is one request and one response on a socket held by this object, within a timeout.

Failures the cluster recovers from by itself (a broker restarting, a leader moving, a partition
not yet known) raise `Retriable`; the caller waits and tries again within its own deadline (the
source's `kafkaConsumer.pollTimeoutMs`). A retriable error also drops what the client believed
about the partition, so the next call asks Metadata again. Everything else raises
`KafkaResponseError`.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from roost.spark.offsets import TopicPartition
from roost.wire.kafka import (
    ApiKey,
    ErrorCode,
    KafkaCodecError,
    RequestHeader,
    decode_response,
    encode_request,
)
from roost.wire.kafka.framing import SIZE_PREFIX, frame_size

FETCH_VERSION = 12  # flexible, topics by name (v13+ wants topic ids)
METADATA_VERSION = 12
LIST_OFFSETS_VERSION = 7
API_VERSIONS_VERSION = 0  # every broker answers v0, so an old broker is told apart clearly
NEEDED_VERSIONS = {ApiKey.FETCH: FETCH_VERSION, ApiKey.METADATA: METADATA_VERSION,
                   ApiKey.LIST_OFFSETS: LIST_OFFSETS_VERSION}

READ_COMMITTED = 1  # isolation level: what librdkafka's consumers use by default
EARLIEST_TIMESTAMP = -2  # ListOffsets sentinels
LATEST_TIMESTAMP = -1
MAX_RESPONSE_BYTES = 512 * 1024 * 1024
_ZERO_UUID = uuid.UUID(int=0)

# Errors a Kafka client waits out (Kafka's RetriableException family, for the APIs used here).
RETRIABLE_ERRORS = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.NETWORK_EXCEPTION, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.NOT_CONTROLLER,
})


class Retriable(Exception):
    """The cluster may get over this by itself: wait a little and try again."""


class KafkaResponseError(RuntimeError):
    """A broker answered with an error that waiting will not cure."""

    def __init__(self, what: str, code: int) -> None:
        name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
        super().__init__(f"roost: {what}: {name} (error code {code})")
        self.code = code


def parse_servers(servers: str) -> list[tuple[str, int]]:
    """`host:port[,host:port...]` (IPv6 hosts in brackets) as (host, port) pairs."""
    addresses = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        addresses.append((host.strip("[]"), int(port)))
    if not addresses:
        raise ValueError(f"no bootstrap server in {servers!r}")
    return addresses


def _check(what: str, code: int) -> None:
    if code == ErrorCode.NONE:
        return
    if code in RETRIABLE_ERRORS:
        raise Retriable(f"{what}: {ErrorCode(code).name}")
    raise KafkaResponseError(what, code)


class BrokerConnection:
    """One blocking socket to one broker: a request out, its response in, one at a time."""

    def __init__(self, address: tuple[str, int], client_id: str, timeout: float) -> None:
        self.address = address
        self._client_id = client_id
        self._correlation = 0
        try:
            self._sock = socket.create_connection(address, timeout=timeout)
        except OSError as error:
            raise Retriable(f"cannot connect to {address[0]}:{address[1]}: {error}") from error
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self._check_versions(timeout)
        except BaseException:
            self.close()
            raise

    def _check_versions(self, timeout: float) -> None:
        response = self.request(ApiKey.API_VERSIONS, API_VERSIONS_VERSION, {}, timeout)
        _check("ApiVersions", response["error_code"])
        ranges = {entry["api_key"]: (entry["min_version"], entry["max_version"]) for entry in response["api_keys"]}
        for api, version in NEEDED_VERSIONS.items():
            low, high = ranges.get(api, (0, -1))
            if not low <= version <= high:
                raise KafkaResponseError(
                    f"broker {self.address[0]}:{self.address[1]} does not serve {api.name} v{version} "
                    f"(it serves v{low}-v{high})", ErrorCode.UNSUPPORTED_VERSION)

    def request(self, api_key: int, version: int, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request and return its decoded response; Retriable on any socket failure."""
        self._correlation += 1
        header = RequestHeader(api_key, version, self._correlation, self._client_id)
        try:
            self._sock.settimeout(timeout)
            self._sock.sendall(b"".join(encode_request(header, body)))
            frame = self._read_frame()
        except OSError as error:  # refused, reset, timed out: the broker may be restarting
            self.close()
            raise Retriable(f"request to {self.address[0]}:{self.address[1]} failed: {error!r}") from error
        try:
            correlation, response = decode_response(api_key, version, frame)
        except KafkaCodecError:
            self.close()
            raise
        if correlation != self._correlation:
            self.close()
            raise KafkaCodecError(f"response correlation id {correlation}, expected {self._correlation}")
        return response

    def _read_frame(self) -> memoryview:
        prefix = self._read_exactly(SIZE_PREFIX.size)
        return self._read_exactly(frame_size(prefix, MAX_RESPONSE_BYTES))

    def _read_exactly(self, size: int) -> memoryview:
        # A fresh buffer per frame: the records of a Fetch response are views into it.
        view = memoryview(bytearray(size))
        got = 0
        while got < size:
            count = self._sock.recv_into(view[got:])
            if count == 0:
                raise ConnectionResetError("the broker closed the connection")
            got += count
        return view

    def close(self) -> None:
        self._sock.close()


@dataclass(frozen=True)
class Leader:
    node_id: int
    epoch: int


@dataclass
class Fetched:
    """One partition's part of a Fetch response."""

    error_code: int
    high_watermark: int
    log_start_offset: int
    aborted: list[tuple[int, int]]  # (producer id, first offset) of aborted transactions
    records: memoryview


class ClusterClient:
    """Blocking requests to the brokers of one cluster, each sent to the partition's leader."""

    def __init__(self, bootstrap_servers: str, client_id: str = "roost-spark", request_timeout: float = 10.0) -> None:
        self._bootstrap = parse_servers(bootstrap_servers)
        self._client_id = client_id
        self._timeout = request_timeout
        self._brokers: dict[int, tuple[str, int]] = {}
        self._leaders: dict[TopicPartition, Leader] = {}
        self._connections: dict[tuple[str, int], BrokerConnection] = {}
        self._next_bootstrap = 0

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    def _connection(self, address: tuple[str, int]) -> BrokerConnection:
        connection = self._connections.get(address)
        if connection is None:
            connection = BrokerConnection(address, self._client_id, self._timeout)
            self._connections[address] = connection
        return connection

    def _request(self, address: tuple[str, int], api_key: int, version: int, body: dict[str, Any],
                 timeout: float) -> dict[str, Any]:
        try:
            return self._connection(address).request(api_key, version, body, timeout)
        except (Retriable, KafkaCodecError):
            self._forget_connection(address)
            raise

    def _forget_connection(self, address: tuple[str, int]) -> None:
        connection = self._connections.pop(address, None)
        if connection is not None:
            connection.close()

    def forget(self, tp: TopicPartition) -> None:
        """Ask Metadata again before the next request for `tp` (its leader may have moved)."""
        self._leaders.pop(tp, None)

    def _metadata(self, topic: str | None) -> dict[str, Any]:
        """A Metadata response for `topic` (None: every topic) from any broker that answers: known
        ones first, then the bootstrap servers."""
        candidates = list(dict.fromkeys([*self._brokers.values(), *self._rotated_bootstrap()]))
        body = {"topics": None if topic is None else [{"topic_id": _ZERO_UUID, "name": topic}],
                "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
        failures = []
        for address in candidates:
            try:
                return self._request(address, ApiKey.METADATA, METADATA_VERSION, body, self._timeout)
            except Retriable as error:
                failures.append(str(error))
        raise Retriable("no broker answered Metadata: " + "; ".join(failures))

    def _rotated_bootstrap(self) -> list[tuple[str, int]]:
        start = self._next_bootstrap % len(self._bootstrap)
        self._next_bootstrap += 1
        return self._bootstrap[start:] + self._bootstrap[:start]

    def leader(self, tp: TopicPartition) -> tuple[tuple[str, int], Leader]:
        """The address and leadership of `tp`'s leader, from Metadata when not known yet."""
        leader = self._leaders.get(tp)
        if leader is None or leader.node_id not in self._brokers:
            response = self._metadata(tp.topic)
            self._brokers = {b["node_id"]: (b["host"], b["port"]) for b in response["brokers"]}
            for topic in response["topics"]:
                if topic["name"] != tp.topic:
                    continue
                _check(f"Metadata for {tp.topic}", topic["error_code"])
                for partition in topic["partitions"]:
                    if partition["error_code"] == ErrorCode.NONE and partition["leader_id"] >= 0:
                        self._leaders[TopicPartition(tp.topic, partition["partition_index"])] = \
                            Leader(partition["leader_id"], partition["leader_epoch"])
            leader = self._leaders.get(tp)
            if leader is None:
                raise Retriable(f"no leader known for {tp}")
            if leader.node_id not in self._brokers:
                raise Retriable(f"the leader of {tp}, broker {leader.node_id}, is not in the metadata")
        return self._brokers[leader.node_id], leader

    def fetch(self, tp: TopicPartition, offset: int, max_wait_ms: int, partition_max_bytes: int) -> Fetched:
        """Records of `tp` from `offset` (whole batches; the first one may start before it).

        OFFSET_OUT_OF_RANGE is answered, not raised: the caller decides what the loss means."""
        address, leader = self.leader(tp)
        body = {
            "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": partition_max_bytes,
            "isolation_level": READ_COMMITTED, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": tp.topic, "partitions": [{
                "partition": tp.partition, "current_leader_epoch": leader.epoch, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": partition_max_bytes}]}],
            "forgotten_topics_data": [], "rack_id": "",
        }
        response = self._answer(tp, address, ApiKey.FETCH, FETCH_VERSION, body, self._timeout + max_wait_ms / 1000)
        _check(f"Fetch of {tp}", response["error_code"])
        partition = self._partition_of(tp, response["responses"], "topic")
        code = partition["error_code"]
        if code != ErrorCode.OFFSET_OUT_OF_RANGE:
            self._check_partition(tp, f"Fetch of {tp} at offset {offset}", code)
        aborted = [(entry["producer_id"], entry["first_offset"]) for entry in partition["aborted_transactions"] or ()]
        records = partition["records"]
        return Fetched(code, partition["high_watermark"], partition["log_start_offset"], aborted,
                       records if records is not None else memoryview(b""))

    def list_offset(self, tp: TopicPartition, timestamp: int) -> int:
        """The earliest (-2) or latest (-1) offset of `tp`, from its leader."""
        return self.list_offsets([tp], timestamp)[tp]

    def list_offsets(self, tps: list[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
        """The earliest (-2) or latest (-1) offset of each partition: one request per leader."""
        by_leader: dict[tuple[str, int], list[tuple[TopicPartition, Leader]]] = {}
        for tp in tps:
            address, leader = self.leader(tp)
            by_leader.setdefault(address, []).append((tp, leader))
        found: dict[TopicPartition, int] = {}
        for address, entries in by_leader.items():
            topics: dict[str, list[dict[str, Any]]] = {}
            for tp, leader in entries:
                topics.setdefault(tp.topic, []).append({"partition_index": tp.partition,
                                                        "current_leader_epoch": leader.epoch, "timestamp": timestamp})
            body = {"replica_id": -1, "isolation_level": READ_COMMITTED,
                    "topics": [{"name": name, "partitions": partitions} for name, partitions in topics.items()]}
            try:
                response = self._request(address, ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, body, self._timeout)
            except Retriable:
                for tp, _leader in entries:
                    self.forget(tp)
                raise
            for tp, _leader in entries:
                partition = self._partition_of(tp, response["topics"], "name")
                self._check_partition(tp, f"ListOffsets of {tp}", partition["error_code"])
                found[tp] = partition["offset"]
        return found

    def topics(self, wanted: Callable[[str], bool]) -> dict[str, list[int]]:
        """The `wanted` topics the cluster knows and their partition indexes. An error on a wanted
        topic is raised (Retriable when it passes, e.g. a topic being created); others are ignored."""
        response = self._metadata(None)
        self._brokers = {b["node_id"]: (b["host"], b["port"]) for b in response["brokers"]}
        found: dict[str, list[int]] = {}
        for topic in response["topics"]:
            name = topic["name"]
            if not wanted(name) or topic["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                continue
            _check(f"Metadata for {name}", topic["error_code"])
            found[name] = sorted(p["partition_index"] for p in topic["partitions"])
            for partition in topic["partitions"]:
                if partition["error_code"] == ErrorCode.NONE and partition["leader_id"] >= 0:
                    self._leaders[TopicPartition(name, partition["partition_index"])] = \
                        Leader(partition["leader_id"], partition["leader_epoch"])
        return found

    def _answer(self, tp: TopicPartition, address: tuple[str, int], api_key: int, version: int,
                body: dict[str, Any], timeout: float) -> dict[str, Any]:
        try:
            return self._request(address, api_key, version, body, timeout)
        except Retriable:
            self.forget(tp)
            raise

    def _check_partition(self, tp: TopicPartition, what: str, code: int) -> None:
        try:
            _check(what, code)
        except Retriable:
            self.forget(tp)
            raise

    @staticmethod
    def _partition_of(tp: TopicPartition, topics: list[dict[str, Any]], name_field: str) -> dict[str, Any]:
        for topic in topics:
            if topic[name_field] != tp.topic:
                continue
            for partition in topic["partitions"]:
                if partition["partition_index"] == tp.partition:
                    return partition
        raise KafkaCodecError(f"the response does not mention {tp}")
