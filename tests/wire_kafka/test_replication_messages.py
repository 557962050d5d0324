"""The messages a replicated cluster exchanges: the ZooKeeper-mode inter-broker APIs
(LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown, AlterPartition), the follower's
OffsetForLeaderEpoch and replica Fetch, and the cluster admin APIs.

Every version of every message round-trips with a non-default value in every field (tagged and
nullable ones included), and once more with every nullable field null. Golden frames, assembled
here byte by byte with `struct` in the order of Kafka's JSON definitions (kafka-python, the other
independent implementation the suite uses, has no classes for the inter-broker APIs), pin the
encodings of LeaderAndIsr, UpdateMetadata, AlterPartition, OffsetForLeaderEpoch and
ControlledShutdown.
"""

from __future__ import annotations

import random
import struct
import uuid
from typing import Any

import pytest

from roost.wire.kafka import (
    ApiKey,
    KafkaCodecError,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    peek_request_header,
)
from roost.wire.kafka.apis import APIS
from tests.wire_kafka.samples import (
    client_id_for,
    has_nullable_field,
    message_of,
    nondefault_body,
    normalized,
)

NEW_APIS = (ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN,
            ApiKey.OFFSET_FOR_LEADER_EPOCH, ApiKey.ELECT_LEADERS, ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.ALTER_PARTITION, ApiKey.DESCRIBE_CLUSTER)
# The new APIs and the replication side of Fetch and Produce, every version the codec implements.
CASES = [(int(key), version) for key in (*NEW_APIS, ApiKey.FETCH, ApiKey.PRODUCE, ApiKey.METADATA)
         for version in range(APIS[key].request.versions.low, APIS[key].request.versions.high + 1)]
TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


def _case_id(case: tuple[int, int]) -> str:
    return f"{APIS[case[0]].name}-v{case[1]}"


def _request_round_trip(api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
    header = RequestHeader(api_key, version, 41, client_id_for(api_key, version, "broker-1"))
    frame = b"".join(encode_request(header, body))[4:]
    decoded_header, decoded = decode_request(frame, strict=True)
    assert decoded_header == header
    return decoded


def _response_round_trip(api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
    frame = b"".join(encode_response(RequestHeader(api_key, version, 42, None), body))[4:]
    correlation_id, decoded = decode_response(api_key, version, frame)
    assert correlation_id == 42
    return decoded


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_every_field_crosses_the_wire(case: tuple[int, int]) -> None:
    api_key, version = case
    rng = random.Random(f"nondefault-{api_key}-{version}")
    for is_request, round_trip in ((True, _request_round_trip), (False, _response_round_trip)):
        message = message_of(api_key, is_request)
        body = nondefault_body(message, version, rng)
        assert normalized(round_trip(api_key, version, body)) == normalized(body)
        if has_nullable_field(message, version):
            with_nulls = nondefault_body(message, version, rng, nulls=True)
            assert with_nulls != body
            assert normalized(round_trip(api_key, version, with_nulls)) == normalized(with_nulls)


# ------------------------------------------------------------------ bytes assembled by hand

def i8(value: int) -> bytes:
    return struct.pack(">b", value)


def i16(value: int) -> bytes:
    return struct.pack(">h", value)


def i32(value: int) -> bytes:
    return struct.pack(">i", value)


def i64(value: int) -> bytes:
    return struct.pack(">q", value)


def boolean(value: bool) -> bytes:
    return b"\x01" if value else b"\x00"


def string(text: str) -> bytes:
    data = text.encode()
    return i16(len(data)) + data


def compact_string(text: str) -> bytes:
    data = text.encode()
    assert len(data) < 127  # one-byte unsigned varint length (+1)
    return bytes([len(data) + 1]) + data


def array(*items: bytes) -> bytes:
    return i32(len(items)) + b"".join(items)


def compact_array(*items: bytes) -> bytes:
    assert len(items) < 127
    return bytes([len(items) + 1]) + b"".join(items)


NO_TAGS = b"\x00"  # an empty tagged-field section
COMPACT_NULL = b"\x00"


def request_frame(api_key: int, version: int, correlation_id: int, client_id: str, body: bytes, *,
                  flexible: bool) -> bytes:
    """Size prefix, request header v1 (v2 when flexible), body."""
    header = i16(api_key) + i16(version) + i32(correlation_id) + string(client_id)
    frame = header + (NO_TAGS if flexible else b"") + body
    return i32(len(frame)) + frame


def response_frame(correlation_id: int, body: bytes, *, flexible: bool) -> bytes:
    """Size prefix, response header v0 (v1 when flexible), body."""
    frame = i32(correlation_id) + (NO_TAGS if flexible else b"") + body
    return i32(len(frame)) + frame


def _check_request(api_key: int, version: int, body: dict[str, Any], expected: bytes) -> None:
    header = RequestHeader(api_key, version, 7, "c")
    assert b"".join(encode_request(header, body)).hex(" ") == expected.hex(" ")
    decoded_header, decoded = decode_request(expected[4:], strict=True)
    assert decoded_header == header and decoded == body


def _check_response(api_key: int, version: int, body: dict[str, Any], expected: bytes) -> None:
    assert b"".join(encode_response(RequestHeader(api_key, version, 7, None), body)).hex(" ") == \
        expected.hex(" ")
    assert decode_response(api_key, version, expected[4:]) == (7, body)


def test_leader_and_isr_v7_request() -> None:
    body = {
        "controller_id": 1, "is_k_raft_controller": False, "controller_epoch": 5,
        "broker_epoch": 4294967334, "type": 0,
        "topic_states": [{"topic_name": "orders", "topic_id": TOPIC_ID, "partition_states": [{
            "partition_index": 2, "controller_epoch": 5, "leader": 1, "leader_epoch": 7, "isr": [1, 2],
            "partition_epoch": 12, "replicas": [1, 2, 3], "adding_replicas": [3], "removing_replicas": [],
            "is_new": True, "leader_recovery_state": 0}]}],
        "live_leaders": [{"broker_id": 1, "host_name": "127.0.0.1", "port": 9092}]}
    partition = (i32(2) + i32(5) + i32(1) + i32(7) + compact_array(i32(1), i32(2)) + i32(12)
                 + compact_array(i32(1), i32(2), i32(3)) + compact_array(i32(3)) + compact_array()
                 + boolean(True) + i8(0) + NO_TAGS)
    expected = (
        i32(1) + boolean(False) + i32(5) + i64(4294967334) + i8(0)
        + compact_array(compact_string("orders") + TOPIC_ID.bytes + compact_array(partition) + NO_TAGS)
        + compact_array(i32(1) + compact_string("127.0.0.1") + i32(9092) + NO_TAGS)
        + NO_TAGS)
    _check_request(ApiKey.LEADER_AND_ISR, 7, body, request_frame(4, 7, 7, "c", expected, flexible=True))


def test_leader_and_isr_v1_request_lists_partitions_with_their_topic() -> None:
    body = {
        "controller_id": 1, "controller_epoch": 5,
        "ungrouped_partition_states": [{
            "topic_name": "orders", "partition_index": 0, "controller_epoch": 5, "leader": 2,
            "leader_epoch": 3, "isr": [2], "partition_epoch": 4, "replicas": [2, 1], "is_new": False}],
        "live_leaders": [{"broker_id": 2, "host_name": "b2", "port": 9093}]}
    expected = (
        i32(1) + i32(5)
        + array(string("orders") + i32(0) + i32(5) + i32(2) + i32(3) + array(i32(2)) + i32(4)
                + array(i32(2), i32(1)) + boolean(False))
        + array(i32(2) + string("b2") + i32(9093)))
    _check_request(ApiKey.LEADER_AND_ISR, 1, body, request_frame(4, 1, 7, "c", expected, flexible=False))


def test_leader_and_isr_v5_response_groups_errors_by_topic_id() -> None:
    body = {"error_code": 0, "topics": [{"topic_id": TOPIC_ID, "partition_errors": [
        {"partition_index": 2, "error_code": 11}]}]}  # 11: STALE_CONTROLLER_EPOCH
    expected = (i16(0) + compact_array(TOPIC_ID.bytes + compact_array(i32(2) + i16(11) + NO_TAGS) + NO_TAGS)
                + NO_TAGS)
    _check_response(ApiKey.LEADER_AND_ISR, 5, body, response_frame(7, expected, flexible=True))


def test_update_metadata_v8_request_sends_type_in_the_tag_section() -> None:
    body = {
        "controller_id": 1, "is_k_raft_controller": False, "type": 2, "controller_epoch": 5,
        "broker_epoch": 77,
        "topic_states": [{"topic_name": "t", "topic_id": TOPIC_ID, "partition_states": [{
            "partition_index": 0, "controller_epoch": 5, "leader": -1, "leader_epoch": 3, "isr": [2],
            "zk_version": 9, "replicas": [1, 2], "offline_replicas": [1]}]}],
        "live_brokers": [{"id": 2, "endpoints": [
            {"port": 9093, "host": "127.0.0.1", "listener": "PLAINTEXT", "security_protocol": 0}],
            "rack": None}]}
    partition = (i32(0) + i32(5) + i32(-1) + i32(3) + compact_array(i32(2)) + i32(9)
                 + compact_array(i32(1), i32(2)) + compact_array(i32(1)) + NO_TAGS)
    endpoint = i32(9093) + compact_string("127.0.0.1") + compact_string("PLAINTEXT") + i16(0) + NO_TAGS
    expected = (
        i32(1) + boolean(False) + i32(5) + i64(77)  # Type is declared second, but it is tagged
        + compact_array(compact_string("t") + TOPIC_ID.bytes + compact_array(partition) + NO_TAGS)
        + compact_array(i32(2) + compact_array(endpoint) + COMPACT_NULL + NO_TAGS)
        + b"\x01" + b"\x00" + b"\x01" + i8(2))  # one tagged field: tag 0, 1 byte, Type = 2 (full)
    _check_request(ApiKey.UPDATE_METADATA, 8, body, request_frame(6, 8, 7, "c", expected, flexible=True))
    # Type at its default (0) is not sent at all.
    plain = b"".join(encode_request(RequestHeader(6, 8, 7, "c"), {**body, "type": 0}))
    assert plain[4:].endswith(COMPACT_NULL + NO_TAGS + NO_TAGS)
    assert len(plain) == len(request_frame(6, 8, 7, "c", expected, flexible=True)) - 3


def test_update_metadata_v0_request_has_one_host_per_broker() -> None:
    body = {
        "controller_id": 1, "controller_epoch": 5,
        "ungrouped_partition_states": [{
            "topic_name": "t", "partition_index": 0, "controller_epoch": 5, "leader": 2, "leader_epoch": 3,
            "isr": [2], "zk_version": 9, "replicas": [2]}],
        "live_brokers": [{"id": 2, "v0_host": "h2", "v0_port": 9093}]}
    expected = (
        i32(1) + i32(5)
        + array(string("t") + i32(0) + i32(5) + i32(2) + i32(3) + array(i32(2)) + i32(9) + array(i32(2)))
        + array(i32(2) + string("h2") + i32(9093)))
    _check_request(ApiKey.UPDATE_METADATA, 0, body, request_frame(6, 0, 7, "c", expected, flexible=False))


def test_alter_partition_v3_request_carries_broker_epochs() -> None:
    body = {"broker_id": 2, "broker_epoch": 4294967301, "topics": [{"topic_id": TOPIC_ID, "partitions": [{
        "partition_index": 1, "leader_epoch": 4,
        "new_isr_with_epochs": [{"broker_id": 2, "broker_epoch": 4294967301}, {"broker_id": 3, "broker_epoch": -1}],
        "leader_recovery_state": 0, "partition_epoch": 17}]}]}
    partition = (i32(1) + i32(4)
                 + compact_array(i32(2) + i64(4294967301) + NO_TAGS, i32(3) + i64(-1) + NO_TAGS)
                 + i8(0) + i32(17) + NO_TAGS)
    expected = (i32(2) + i64(4294967301) + compact_array(TOPIC_ID.bytes + compact_array(partition) + NO_TAGS)
                + NO_TAGS)
    _check_request(ApiKey.ALTER_PARTITION, 3, body, request_frame(56, 3, 7, "c", expected, flexible=True))


def test_alter_partition_v1_response_names_topics() -> None:
    body = {"throttle_time_ms": 0, "error_code": 0, "topics": [{"topic_name": "t", "partitions": [{
        "partition_index": 1, "error_code": 0, "leader_id": 2, "leader_epoch": 4, "isr": [2, 3],
        "leader_recovery_state": 1, "partition_epoch": 18}]}]}
    partition = (i32(1) + i16(0) + i32(2) + i32(4) + compact_array(i32(2), i32(3)) + i8(1) + i32(18)
                 + NO_TAGS)
    expected = i32(0) + i16(0) + compact_array(compact_string("t") + compact_array(partition) + NO_TAGS) + NO_TAGS
    _check_response(ApiKey.ALTER_PARTITION, 1, body, response_frame(7, expected, flexible=True))


def test_offset_for_leader_epoch_requests() -> None:
    v3 = {"replica_id": 2, "topics": [{"topic": "t", "partitions": [
        {"partition": 0, "current_leader_epoch": 5, "leader_epoch": 4}]}]}
    expected = i32(2) + array(string("t") + array(i32(0) + i32(5) + i32(4)))
    _check_request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, v3, request_frame(23, 3, 7, "c", expected, flexible=False))

    v0 = {"topics": [{"topic": "t", "partitions": [{"partition": 0, "leader_epoch": 4}]}]}
    expected = array(string("t") + array(i32(0) + i32(4)))
    _check_request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, v0, request_frame(23, 0, 7, "c", expected, flexible=False))


def test_offset_for_leader_epoch_responses() -> None:
    v4 = {"throttle_time_ms": 0, "topics": [{"topic": "t", "partitions": [
        {"error_code": 0, "partition": 0, "leader_epoch": 4, "end_offset": 1234}]}]}
    expected = (i32(0) + compact_array(compact_string("t") + compact_array(
        i16(0) + i32(0) + i32(4) + i64(1234) + NO_TAGS) + NO_TAGS) + NO_TAGS)
    _check_response(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, v4, response_frame(7, expected, flexible=True))

    v0 = {"topics": [{"topic": "t", "partitions": [{"error_code": 0, "partition": 0, "end_offset": 1234}]}]}
    expected = array(string("t") + array(i16(0) + i32(0) + i64(1234)))
    _check_response(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, v0, response_frame(7, expected, flexible=False))


def test_controlled_shutdown_v0_request_header_has_no_client_id() -> None:
    frame = b"".join(encode_request(RequestHeader(7, 0, 9, None), {"broker_id": 3}))
    assert frame.hex(" ") == (i32(12) + i16(7) + i16(0) + i32(9) + i32(3)).hex(" ")
    assert peek_request_header(frame[4:]) == RequestHeader(7, 0, 9, None)
    assert decode_request(frame[4:], strict=True) == (RequestHeader(7, 0, 9, None), {"broker_id": 3})
    with pytest.raises(KafkaCodecError, match="no client_id"):
        encode_request(RequestHeader(7, 0, 9, "c"), {"broker_id": 3})
    # Version 1 is the same body behind the standard header.
    _check_request(ApiKey.CONTROLLED_SHUTDOWN, 1, {"broker_id": 3}, request_frame(7, 1, 7, "c", i32(3), flexible=False))


def test_controlled_shutdown_v3() -> None:
    _check_request(ApiKey.CONTROLLED_SHUTDOWN, 3, {"broker_id": 3, "broker_epoch": 4294967301},
                   request_frame(7, 3, 7, "c", i32(3) + i64(4294967301) + NO_TAGS, flexible=True))
    body = {"error_code": 0, "remaining_partitions": [{"topic_name": "t", "partition_index": 1}]}
    expected = i16(0) + compact_array(compact_string("t") + i32(1) + NO_TAGS) + NO_TAGS
    _check_response(ApiKey.CONTROLLED_SHUTDOWN, 3, body, response_frame(7, expected, flexible=True))


# ------------------------------------------------------------------ replica Fetch and KIP-951 hints

def test_follower_fetch_fields_cross_the_wire() -> None:
    """What a follower sends (ReplicaState, LastFetchedEpoch) and what the leader answers
    (DivergingEpoch, CurrentLeader, NodeEndpoints): tagged fields that a client never sets."""
    request = {"replica_state": {"replica_id": 2, "replica_epoch": 4294967301}, "max_wait_ms": 500,
               "min_bytes": 1, "topics": [{"topic_id": TOPIC_ID, "partitions": [{
                   "partition": 0, "current_leader_epoch": 7, "fetch_offset": 120, "last_fetched_epoch": 6,
                   "log_start_offset": 0, "partition_max_bytes": 1048576}]}]}
    decoded = _request_round_trip(ApiKey.FETCH, 15, request)
    assert decoded["replica_state"] == {"replica_id": 2, "replica_epoch": 4294967301}
    assert decoded["topics"][0]["partitions"][0]["last_fetched_epoch"] == 6
    # Before v15 the replica id is a plain field; v15+ drops it from the body.
    assert _request_round_trip(ApiKey.FETCH, 14, {"replica_id": 2})["replica_id"] == 2
    assert "replica_id" not in _request_round_trip(ApiKey.FETCH, 15, {})

    response = {"responses": [{"topic_id": TOPIC_ID, "partitions": [{
        "partition_index": 0, "error_code": 6, "high_watermark": 100, "log_start_offset": 0,
        "diverging_epoch": {"epoch": 5, "end_offset": 90},
        "current_leader": {"leader_id": 3, "leader_epoch": 8}, "records": b""}]}],
        "node_endpoints": [{"node_id": 3, "host": "127.0.0.1", "port": 9094, "rack": None}]}
    partition = _response_round_trip(ApiKey.FETCH, 16, response)["responses"][0]["partitions"][0]
    assert partition["diverging_epoch"] == {"epoch": 5, "end_offset": 90}
    assert partition["current_leader"] == {"leader_id": 3, "leader_epoch": 8}
    decoded = _response_round_trip(ApiKey.FETCH, 16, response)
    assert decoded["node_endpoints"] == response["node_endpoints"]


def test_produce_v10_response_carries_the_new_leader() -> None:
    response = {"responses": [{"name": "t", "partition_responses": [{
        "index": 0, "error_code": 6, "base_offset": -1,
        "current_leader": {"leader_id": 3, "leader_epoch": 8}}]}],
        "node_endpoints": [{"node_id": 3, "host": "127.0.0.1", "port": 9094, "rack": "r1"}]}
    decoded = _response_round_trip(ApiKey.PRODUCE, 10, response)
    assert decoded["responses"][0]["partition_responses"][0]["current_leader"] == \
        {"leader_id": 3, "leader_epoch": 8}
    assert decoded["node_endpoints"] == response["node_endpoints"]
