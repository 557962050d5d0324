"""Per-connection limits pause reading (README: `queued.max.requests`, `connection.max.buffered.bytes`).

A raw client pipelines requests without reading the answers. Past the limit the broker stops
reading that connection: a Produce pipelined behind the limit is not appended (another connection
sees the log unchanged) even though the broker has read and answered the request in front of it.
Once the cause goes (the parked fetches are answered, or the client reads), the broker reads on,
answers everything in order, and the connection keeps working.
"""

from __future__ import annotations

import time
from pathlib import Path

from roost.wire.kafka.records import build_batch, iter_batch_headers
from tests.broker.conftest import StartBroker
from tests.support.kafka_wire import WireClient

API_VERSIONS, PRODUCE, FETCH, METADATA, LIST_OFFSETS = 18, 0, 1, 3, 2
NEVER_MS = 600_000  # MaxWaitMs of the parked fetches: they answer because of data, or not at all


def create_topic(client: WireClient, topic: str) -> None:
    client.request(METADATA, 8, {"topics": [{"name": topic}], "allow_auto_topic_creation": True,
                                 "include_cluster_authorized_operations": False,
                                 "include_topic_authorized_operations": False})


def produce_body(topic: str, value: bytes) -> dict:
    batch = build_batch([(None, value)], timestamp_ms=int(time.time() * 1000))
    return {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}


def fetch_body(topic: str, max_wait_ms: int) -> dict:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 8 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
            "forgotten_topics_data": [],
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                        "fetch_offset": 0, "log_start_offset": -1,
                                                        "partition_max_bytes": 8 << 20}]}]}


def log_end(client: WireClient, topic: str) -> int:
    response = client.request(LIST_OFFSETS, 2, {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    return response["topics"][0]["partitions"][0]["offset"]


def fetched_offsets(response: dict) -> list[int]:
    records = bytes(response["responses"][0]["partitions"][0]["records"] or b"")
    return [header.base_offset for _, header in iter_batch_headers(records)]


def test_queued_max_requests_pauses_reading(start_broker: StartBroker) -> None:
    broker = start_broker("--queued.max.requests", "4")
    greedy = WireClient(broker.address("kafka"), timeout=60)
    other = WireClient(broker.address("kafka"))
    try:
        create_topic(other, "parked")
        # In one write: a request answered at once, four fetches that wait for data (the limit),
        # and a produce behind them.
        first, ask = greedy.frame(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        fetches = [greedy.frame(FETCH, 11, fetch_body("parked", NEVER_MS)) for _ in range(4)]
        behind, produce = greedy.frame(PRODUCE, 7, produce_body("parked", b"behind the limit"))
        greedy.send_raw(ask + b"".join(frame for _, frame in fetches) + produce)
        assert greedy.receive(API_VERSIONS, 3, first)["error_code"] == 0  # the broker has read the write
        assert log_end(other, "parked") == 0, "the broker read past queued.max.requests"
        assert not greedy.has_data()

        # Data for the fetches: they answer, their slots free up, the broker reads the produce.
        other.request(PRODUCE, 7, produce_body("parked", b"wakes them"))
        for correlation, _ in fetches:
            assert fetched_offsets(greedy.receive(FETCH, 11, correlation)) == [0]
        answer = greedy.receive(PRODUCE, 7, behind)["responses"][0]["partition_responses"][0]
        assert (answer["error_code"], answer["base_offset"]) == (0, 1)
        assert greedy.request(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})[
            "error_code"] == 0
        assert log_end(other, "parked") == 2
    finally:
        greedy.close()
        other.close()


def kernel_buffer_max(name: str) -> int:
    """The most the kernel lets a loopback socket buffer grow to (autotuned or set)."""
    autotune = int(Path(f"/proc/sys/net/ipv4/tcp_{name}").read_text().split()[2])
    core = int(Path(f"/proc/sys/net/core/{name}_max").read_text())
    return max(autotune, core)


def test_connection_max_buffered_bytes_pauses_reading(start_broker: StartBroker) -> None:
    # 1024 bytes (the least allowed): reading pauses once a quarter of it waits in the broker.
    broker = start_broker("--connection.max.buffered.bytes", "1024")
    receive_buffer = 64 * 1024
    greedy = WireClient(broker.address("kafka"), timeout=60, receive_buffer=receive_buffer)
    other = WireClient(broker.address("kafka"))
    try:
        create_topic(other, "big")
        value = b"b" * (256 * 1024)
        other.request(PRODUCE, 7, produce_body("big", value))
        # Enough fetch answers to fill both sockets' kernel buffers and more: the rest must wait in
        # the broker, which is when it has to stop reading.
        in_kernel = kernel_buffer_max("wmem") + 2 * receive_buffer
        count = in_kernel // len(value) + 8
        first, ask = greedy.frame(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        fetches = [greedy.frame(FETCH, 11, fetch_body("big", 0)) for _ in range(count)]
        behind, produce = greedy.frame(PRODUCE, 7, produce_body("big", b"behind the limit"))
        greedy.send_raw(ask + b"".join(frame for _, frame in fetches) + produce)
        assert greedy.receive(API_VERSIONS, 3, first)["error_code"] == 0  # the broker has read the write
        assert log_end(other, "big") == 1, "the broker read past connection.max.buffered.bytes"

        # The client reads: the broker's buffer drains, it reads on and answers everything.
        for correlation, _ in fetches:
            assert fetched_offsets(greedy.receive(FETCH, 11, correlation)) == [0]
        answer = greedy.receive(PRODUCE, 7, behind)["responses"][0]["partition_responses"][0]
        assert (answer["error_code"], answer["base_offset"]) == (0, 1)
        assert greedy.request(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})[
            "error_code"] == 0
        assert log_end(other, "big") == 2
    finally:
        greedy.close()
        other.close()
