"""The consumer protocol embedded in JoinGroup and SyncGroup: round trips, Kafka's forward
compatibility, and the subscription a real client (kafka-python) puts in its JoinGroup."""

from __future__ import annotations

import struct
import time

import pytest

from roost.wire.kafka import (
    ApiKey,
    KafkaCodecError,
    decode_consumer_assignment,
    decode_consumer_subscription,
    decode_struct,
    encode_consumer_assignment,
    encode_consumer_subscription,
    encode_struct,
)
from tests.support import referees
from tests.wire_kafka.peer import TOPIC, running_peer


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_round_trip(version: int) -> None:
    body = {"topics": ["orders", "payments"], "user_data": b"\x00\x01",
            "owned_partitions": [{"topic": "orders", "partitions": [0, 2]}],
            "generation_id": 7, "rack_id": "rack-a"}
    data = encode_consumer_subscription(version, body)
    assert data[:2] == struct.pack(">h", version)
    decoded_version, decoded = decode_consumer_subscription(data)
    assert decoded_version == version
    expected = {"topics": ["orders", "payments"], "user_data": b"\x00\x01"}
    if version >= 1:
        expected["owned_partitions"] = [{"topic": "orders", "partitions": [0, 2]}]
    if version >= 2:
        expected["generation_id"] = 7
    if version >= 3:
        expected["rack_id"] = "rack-a"
    assert decoded == expected


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_assignment_round_trip(version: int) -> None:
    body = {"assigned_partitions": [{"topic": "orders", "partitions": [1, 3]}], "user_data": None}
    data = encode_consumer_assignment(version, body)
    assert decode_consumer_assignment(data) == (version, body)
    assert decode_struct("ConsumerProtocolAssignment", version, data[2:]) == body
    assert encode_struct("ConsumerProtocolAssignment", version, body) == data[2:]


def test_newer_versions_parse_as_our_newest_and_ignore_what_follows() -> None:
    """Kafka reads a subscription from a newer client with its newest schema; so do we."""
    newest = encode_consumer_subscription(3, {"topics": ["t"], "rack_id": "r"})
    from_the_future = struct.pack(">h", 9) + newest[2:] + b"fields we do not know"
    version, body = decode_consumer_subscription(from_the_future)
    assert version == 9 and body["topics"] == ["t"] and body["rack_id"] == "r"


def test_malformed_consumer_protocol_raises_codec_errors() -> None:
    for data in (b"", b"\x00", b"\xff\xff", b"\x00\x00\x00\x00\x00\x05\x00\x01t"):
        with pytest.raises(KafkaCodecError):
            decode_consumer_subscription(data)
    with pytest.raises(KafkaCodecError):
        decode_struct("NoSuchStruct", 0, b"")


@pytest.mark.timeout(120)
def test_kafka_python_join_group_subscription_decodes() -> None:
    kafka = referees.import_or_skip("kafka", "kafka-python")
    with running_peer() as peer:
        consumer = kafka.KafkaConsumer(
            bootstrap_servers=f"127.0.0.1:{peer.port}", group_id="codec-group",
            client_id="codec-kafka-python", request_timeout_ms=5000, session_timeout_ms=6000,
            heartbeat_interval_ms=1000, enable_auto_commit=False)
        try:
            consumer.subscribe([TOPIC])
            deadline = time.monotonic() + 60
            for _ in range(1200):  # bounded by the deadline: a loaded machine slows the coordinator lookup
                consumer.poll(timeout_ms=100)
                if peer.requests(ApiKey.JOIN_GROUP) or time.monotonic() > deadline:
                    break
        finally:
            consumer.close(autocommit=False)
        joins = peer.requests(ApiKey.JOIN_GROUP)
        assert joins, "kafka-python never sent JoinGroup"
        join = joins[0].body
        assert join is not None
        assert join["group_id"] == "codec-group" and join["protocol_type"] == "consumer"
        assert join["protocols"], "no assignment strategies offered"
        for protocol in join["protocols"]:
            version, subscription = decode_consumer_subscription(protocol["metadata"])
            assert version >= 0
            assert subscription["topics"] == [TOPIC]
