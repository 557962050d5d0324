"""Fetch semantics on the wire: whole batches, byte limits, at least one batch, waiting fetches
woken by an append, MinBytes."""

from __future__ import annotations

import time

from roost.wire.kafka.records import build_batch, iter_batch_headers
from tests.broker.test_idempotence import produce_batch
from tests.support.kafka_wire import WireClient
from tests.support.procs import RoostProcess

FETCH, METADATA = 1, 3


def fetch(client: WireClient, topic: str, offset: int, *, max_wait_ms: int = 0, min_bytes: int = 1,
          max_bytes: int = 1 << 20, partition_max_bytes: int = 1 << 20, version: int = 11) -> dict:
    response = client.request(FETCH, version, {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
        "forgotten_topics_data": [],
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                    "fetch_offset": offset, "log_start_offset": -1,
                                                    "partition_max_bytes": partition_max_bytes}]}],
    })
    return response["responses"][0]["partitions"][0]


def batches_in(partition: dict) -> list:
    data = bytes(partition["records"] or b"")
    headers = [h for _, h in iter_batch_headers(data)]
    assert sum(h.size for h in headers) == len(data), "the response holds whole batches only"
    return headers


def setup_topic(client: WireClient, topic: str, batches: int, records_per_batch: int, value_size: int) -> None:
    client.request(METADATA, 8, {"topics": [{"name": topic}], "allow_auto_topic_creation": True,
                                 "include_cluster_authorized_operations": False,
                                 "include_topic_authorized_operations": False})
    now = int(time.time() * 1000)
    for b in range(batches):
        records = [(None, bytes([65 + b % 26]) * value_size) for _ in range(records_per_batch)]
        assert produce_batch(client, topic, build_batch(records, timestamp_ms=now))["error_code"] == 0


def test_whole_batches_within_limits_and_at_least_one(broker: RoostProcess) -> None:
    client = WireClient(broker.address("kafka"))
    try:
        setup_topic(client, "limits", batches=10, records_per_batch=10, value_size=1000)  # ~10 KB batches
        everything = batches_in(fetch(client, "limits", 0))
        assert [h.base_offset for h in everything] == list(range(0, 100, 10))
        size = everything[0].size

        # partition_max_bytes of 2.5 batches: two whole batches, never a partial third.
        two = batches_in(fetch(client, "limits", 0, partition_max_bytes=int(size * 2.5)))
        assert [h.base_offset for h in two] == [0, 10]
        # A limit smaller than one batch still returns that one whole batch (progress guaranteed).
        one = batches_in(fetch(client, "limits", 35, partition_max_bytes=100))
        assert [h.base_offset for h in one] == [30]
        one = batches_in(fetch(client, "limits", 0, max_bytes=10))
        assert len(one) == 1
        # At the end of the log: no records, high watermark reported.
        end = fetch(client, "limits", 100)
        assert batches_in(end) == [] and end["high_watermark"] == 100
    finally:
        client.close()


# MaxWaitMs for fetches that must be woken by data: far beyond the client's read timeout, so a
# fetch that is not woken fails the test (by that timeout) instead of answering when time runs out.
NEVER_MS = 600_000


def send_fetch(client: WireClient, topic: str, offset: int, *, max_wait_ms: int, min_bytes: int = 1,
               version: int = 11) -> int:
    """Send a Fetch without waiting for its answer; returns its correlation id."""
    return client.send(FETCH, version, {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
        "forgotten_topics_data": [],
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                    "fetch_offset": offset, "log_start_offset": -1,
                                                    "partition_max_bytes": 1 << 20}]}],
    })


def assert_parked(waiting: WireClient, other: WireClient, topic: str) -> None:
    """The fetch sent on `waiting` is parked: a request sent later on another connection has been
    answered (the broker's loop has taken the fetch and moved on) and the fetch has not."""
    other.request(METADATA, 8, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                "include_cluster_authorized_operations": False,
                                "include_topic_authorized_operations": False})
    assert not waiting.has_data(), "the fetch was answered without the data it waits for"


def test_waiting_fetch_is_woken_by_an_append(broker: RoostProcess) -> None:
    client = WireClient(broker.address("kafka"), timeout=60)
    writer = WireClient(broker.address("kafka"))
    try:
        setup_topic(client, "wakeup", batches=1, records_per_batch=1, value_size=10)
        correlation = send_fetch(client, "wakeup", 1, max_wait_ms=NEVER_MS)
        assert_parked(client, writer, "wakeup")
        assert produce_batch(writer, "wakeup", build_batch([(None, b"wake")], timestamp_ms=0))["error_code"] == 0
        # Answered at all (within the read timeout, far below MaxWaitMs): the append woke it.
        partition = client.receive(FETCH, 11, correlation)["responses"][0]["partitions"][0]
        assert [h.base_offset for h in batches_in(partition)] == [1]
    finally:
        client.close()
        writer.close()


def test_min_bytes_waits_for_enough_data(broker: RoostProcess) -> None:
    client = WireClient(broker.address("kafka"), timeout=60)
    writer = WireClient(broker.address("kafka"))
    try:
        setup_topic(client, "minbytes", batches=1, records_per_batch=1, value_size=10)
        correlation = send_fetch(client, "minbytes", 1, max_wait_ms=NEVER_MS, min_bytes=5000)
        assert_parked(client, writer, "minbytes")
        now = int(time.time() * 1000)
        # Small appends do not satisfy MinBytes: each is acknowledged, and the fetch still waits.
        for _ in range(3):
            assert produce_batch(writer, "minbytes", build_batch([(None, b"x" * 100)], timestamp_ms=now))[
                "error_code"] == 0
            assert_parked(client, writer, "minbytes")
        produce_batch(writer, "minbytes", build_batch([(None, b"y" * 6000)], timestamp_ms=now))
        partition = client.receive(FETCH, 11, correlation)["responses"][0]["partitions"][0]
        # All four: answered after the last append, not after any of the small ones.
        assert [h.base_offset for h in batches_in(partition)] == [1, 2, 3, 4]
    finally:
        client.close()
        writer.close()


def test_fetch_by_topic_id_v13_plus(broker: RoostProcess) -> None:
    client = WireClient(broker.address("kafka"))
    try:
        setup_topic(client, "by-id", batches=2, records_per_batch=3, value_size=10)
        metadata = client.request(METADATA, 12, {"topics": [{"name": "by-id"}],
                                                 "allow_auto_topic_creation": False,
                                                 "include_topic_authorized_operations": False})
        topic_id = metadata["topics"][0]["topic_id"]
        response = client.request(FETCH, 16, {
            "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic_id": topic_id, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                              "fetch_offset": 0, "last_fetched_epoch": -1,
                                                              "log_start_offset": -1,
                                                              "partition_max_bytes": 1 << 20}]}],
        })
        topic = response["responses"][0]
        assert topic["topic_id"] == topic_id
        assert [h.base_offset for h in batches_in(topic["partitions"][0])] == [0, 3]
    finally:
        client.close()
