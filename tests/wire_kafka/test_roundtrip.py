"""Every (api, version), request and response: realistic bodies survive encode then decode."""

from __future__ import annotations

import random
import uuid

import pytest

from roost.wire.kafka import (
    ApiKey,
    KafkaCodecError,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from roost.wire.kafka.apis import APIS
from tests.wire_kafka.samples import (
    client_id_for,
    every_api_version,
    message_of,
    normalized,
    sample_body,
)

PAIRS = every_api_version()


def _frame_without_prefix(parts: list[bytes | memoryview]) -> bytes:
    frame = b"".join(parts)
    assert int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4
    return frame[4:]


@pytest.mark.parametrize(("api_key", "version"), PAIRS, ids=lambda value: str(value))
def test_request_round_trip(api_key: int, version: int) -> None:
    rng = random.Random(f"request-{api_key}-{version}")
    for attempt in range(4):
        body = sample_body(message_of(api_key, True), version, rng)
        header = RequestHeader(api_key, version, rng.randint(-(2**31), 2**31 - 1),
                               None if attempt == 0 else client_id_for(api_key, version, "client-ü"))
        frame = _frame_without_prefix(encode_request(header, body))
        decoded_header, decoded = decode_request(frame, strict=True)
        assert decoded_header == header
        assert normalized(decoded) == normalized(body)


@pytest.mark.parametrize(("api_key", "version"), PAIRS, ids=lambda value: str(value))
def test_response_round_trip(api_key: int, version: int) -> None:
    rng = random.Random(f"response-{api_key}-{version}")
    for _ in range(4):
        body = sample_body(message_of(api_key, False), version, rng)
        header = RequestHeader(api_key, version, rng.randint(0, 2**31 - 1), "c")
        correlation_id, decoded = decode_response(
            api_key, version, _frame_without_prefix(encode_response(header, body)))
        assert correlation_id == header.correlation_id
        assert normalized(decoded) == normalized(body)


def test_records_list_is_attached_not_copied() -> None:
    segments = [bytes(range(256)) * 8, memoryview(bytearray(b"\x01" * 3000)), memoryview(b"\x02" * 5000)]
    body = {"responses": [{"topic": "orders", "partitions": [
        {"partition_index": 0, "high_watermark": 10, "records": segments}]}]}
    parts = encode_response(RequestHeader(ApiKey.FETCH, 11, 5, None), body)
    for segment in segments:
        assert any(part is segment for part in parts), "a records buffer was copied"
    assert all(isinstance(part, bytes | memoryview) for part in parts)
    _, decoded = decode_response(ApiKey.FETCH, 11, _frame_without_prefix(parts))
    records = decoded["responses"][0]["partitions"][0]["records"]
    assert isinstance(records, memoryview)
    assert records == b"".join(bytes(segment) for segment in segments)


def test_records_and_bytes_decode_as_views_of_the_frame() -> None:
    batch = bytes(range(256)) * 64
    frame = _frame_without_prefix(encode_request(RequestHeader(ApiKey.PRODUCE, 7, 1, "p"), {
        "acks": -1, "timeout_ms": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 3, "records": batch}]}]}))
    view = memoryview(frame)
    _, body = decode_request(view)
    records = body["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(records, memoryview) and records.obj is frame
    assert records == batch


def test_omitted_fields_take_schema_defaults() -> None:
    # Fetch v12 response: every partition field omitted but the index.
    frame = _frame_without_prefix(encode_response(
        RequestHeader(ApiKey.FETCH, 12, 1, None),
        {"responses": [{"topic": "t", "partitions": [{"partition_index": 2}]}]}))
    _, body = decode_response(ApiKey.FETCH, 12, frame)
    assert body["throttle_time_ms"] == 0 and body["error_code"] == 0 and body["session_id"] == 0
    partition = body["responses"][0]["partitions"][0]
    assert partition["last_stable_offset"] == -1
    assert partition["log_start_offset"] == -1
    assert partition["preferred_read_replica"] == -1
    assert partition["aborted_transactions"] == []
    assert partition["records"] == b""
    # Tagged fields absent from the wire decode to their defaults.
    assert partition["current_leader"] == {"leader_id": -1, "leader_epoch": -1}
    assert partition["diverging_epoch"] == {"epoch": -1, "end_offset": -1}
    assert "node_endpoints" not in body  # a v16 field

    _, request = decode_request(_frame_without_prefix(encode_request(
        RequestHeader(ApiKey.FETCH, 11, 1, None), {"topics": [{"topic": "t", "partitions": [{}]}]})))
    assert request["max_bytes"] == 0x7FFFFFFF and request["replica_id"] == -1
    assert request["session_epoch"] == -1 and request["rack_id"] == ""
    assert request["topics"][0]["partitions"][0]["current_leader_epoch"] == -1

    _, metadata = decode_request(_frame_without_prefix(encode_request(
        RequestHeader(ApiKey.METADATA, 4, 1, None), {})))
    assert metadata == {"topics": [], "allow_auto_topic_creation": True}

    _, sync = decode_response(ApiKey.SYNC_GROUP, 5, _frame_without_prefix(encode_response(
        RequestHeader(ApiKey.SYNC_GROUP, 5, 1, None), {})))
    assert sync == {"throttle_time_ms": 0, "error_code": 0, "protocol_type": None,
                    "protocol_name": None, "assignment": b""}


def test_tagged_fields_are_sent_only_when_not_default() -> None:
    header = RequestHeader(ApiKey.FETCH, 12, 1, None)
    default_leader = {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "current_leader": {"leader_id": -1, "leader_epoch": -1}}]}]}
    plain = {"responses": [{"topic": "t", "partitions": [{"partition_index": 0}]}]}
    assert b"".join(encode_response(header, default_leader)) == b"".join(encode_response(header, plain))
    moved = {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "current_leader": {"leader_id": 3, "leader_epoch": 9}}]}]}
    frame = _frame_without_prefix(encode_response(header, moved))
    # One tagged field: tag (1 byte) + size (1) + leader_id (4) + leader_epoch (4) + the nested
    # struct's own empty tag section (1); the section's count byte was there already.
    assert len(frame) == len(_frame_without_prefix(encode_response(header, plain))) + 11
    _, body = decode_response(ApiKey.FETCH, 12, frame)
    assert body["responses"][0]["partitions"][0]["current_leader"] == {"leader_id": 3, "leader_epoch": 9}


def test_unknown_key_is_an_error_but_other_versions_fields_are_skipped() -> None:
    header = RequestHeader(ApiKey.PRODUCE, 2, 1, None)
    with pytest.raises(KafkaCodecError, match="partiton_index"):
        encode_response(header, {"responses": [{"name": "t", "partition_responses": [
            {"partiton_index": 0}]}]})
    # record_errors exists from v8 and topic_id from v13: skipped at v2, not an error.
    plain = {"responses": [{"name": "t", "partition_responses": [{"index": 0, "base_offset": 5}]}]}
    rich = {"responses": [{"name": "t", "topic_id": uuid.uuid4(), "partition_responses": [
        {"index": 0, "base_offset": 5, "record_errors": [{"batch_index": 1}]}]}]}
    assert b"".join(encode_response(header, rich)) == b"".join(encode_response(header, plain))


def test_encoding_bad_values_raises_codec_error() -> None:
    header = RequestHeader(ApiKey.HEARTBEAT, 0, 1, None)
    with pytest.raises(KafkaCodecError):
        encode_request(header, {"group_id": None})  # not nullable
    with pytest.raises(KafkaCodecError):
        encode_request(header, {"generation_id": 2**31})  # int32 overflow
    with pytest.raises(KafkaCodecError):
        encode_request(header, {"group_id": 5})  # not a string


def test_flexible_versions_use_compact_encodings_and_tag_sections() -> None:
    # Heartbeat v3 (classic) vs v4 (flexible): same fields, different encodings.
    body = {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}
    classic = _frame_without_prefix(encode_request(RequestHeader(ApiKey.HEARTBEAT, 3, 9, "c"), body))
    flexible = _frame_without_prefix(encode_request(RequestHeader(ApiKey.HEARTBEAT, 4, 9, "c"), body))
    header_v1 = bytes.fromhex("000c 0003 00000009 0001") + b"c"
    assert classic == header_v1 + bytes.fromhex("0001") + b"g" + bytes.fromhex("00000001 0001") + b"m" + \
        bytes.fromhex("ffff")
    header_v2 = bytes.fromhex("000c 0004 00000009 0001") + b"c" + b"\x00"
    assert flexible == header_v2 + b"\x02g" + bytes.fromhex("00000001") + b"\x02m" + b"\x00" + b"\x00"


def test_every_api_has_both_directions_in_the_table() -> None:
    assert {int(key) for key in ApiKey} == set(APIS)


def test_public_version_table_is_the_agreed_contract() -> None:
    from roost.wire.kafka import API_NAMES, SUPPORTED_VERSIONS

    assert SUPPORTED_VERSIONS == {
        0: (0, 11), 1: (4, 17), 2: (1, 7), 3: (1, 12), 4: (0, 7), 5: (0, 4), 6: (0, 8), 7: (0, 3),
        8: (2, 9), 9: (1, 9), 10: (0, 6), 11: (0, 7), 12: (0, 4), 13: (0, 4), 14: (0, 5), 15: (0, 5),
        16: (0, 5), 17: (0, 1), 18: (0, 3), 19: (2, 5), 20: (1, 5), 21: (0, 2), 22: (0, 4), 23: (0, 4),
        24: (0, 3), 25: (0, 3), 26: (0, 3), 27: (1, 1), 28: (0, 3),
        29: (0, 3), 30: (0, 3), 31: (0, 3), 32: (1, 3),
        33: (0, 2), 34: (1, 2), 35: (1, 4), 36: (0, 2), 37: (0, 2), 42: (0, 2), 43: (0, 2), 44: (0, 1), 45: (0, 1),
        46: (0, 0), 47: (0, 0), 48: (0, 1), 49: (0, 1), 50: (0, 0), 51: (0, 0), 56: (0, 3), 60: (0, 1), 61: (0, 0), 65: (0, 0), 66: (0, 1), 68: (0, 1), 69: (0, 0),
        74: (0, 1), 75: (0, 0), 76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2),
        83: (0, 0), 84: (0, 0), 85: (0, 1), 86: (0, 0), 87: (0, 1), 90: (0, 1), 91: (0, 0), 92: (0, 0)}
    assert API_NAMES[0] == "Produce" and API_NAMES[18] == "ApiVersions" and set(API_NAMES) == set(APIS)
    assert ApiKey.CREATE_PARTITIONS == 37 and ApiKey.INIT_PRODUCER_ID == 22


def test_nullable_struct_is_a_marker_byte_then_the_struct() -> None:
    """DescribeTopicPartitions' Cursor: a struct that may be null, preceded by an int8 (-1 null,
    1 present), as Kafka's generated code writes it."""
    header = RequestHeader(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 7, "c")
    topics = {"topics": [{"name": "t"}], "response_partition_limit": 5}
    without = _frame_without_prefix(encode_request(header, {**topics, "cursor": None}))
    with_cursor = _frame_without_prefix(encode_request(
        header, {**topics, "cursor": {"topic_name": "t", "partition_index": 3}}))
    head = bytes.fromhex("004b 0000 00000007 0001") + b"c" + b"\x00"
    body = b"\x02" + b"\x02t" + b"\x00" + bytes.fromhex("00000005")
    assert without == head + body + b"\xff" + b"\x00"
    assert with_cursor == head + body + b"\x01" + b"\x02t" + bytes.fromhex("00000003") + b"\x00" + b"\x00"
    for frame, cursor in ((without, None), (with_cursor, {"topic_name": "t", "partition_index": 3})):
        _, decoded = decode_request(bytearray(frame))
        assert decoded["cursor"] == cursor
    # Left out, the cursor takes Kafka's default: null.
    assert _frame_without_prefix(encode_request(header, topics)) == without
