"""Hand-checked encodings, byte for byte, of a few messages whose layout is easy to verify by eye
against the protocol guide: classic and flexible headers, compact strings and arrays, tag sections.
(test_real_clients.py checks the same shapes against what real clients send and accept.)"""

from __future__ import annotations

from roost.wire.kafka import (
    RequestHeader,
    decode_request,
    decode_response,
    encode_api_versions_fallback,
    encode_request,
    encode_response,
)


def _hex(parts: list[bytes | memoryview]) -> str:
    return b"".join(parts).hex(" ")


def test_api_versions_v0_request() -> None:
    parts = encode_request(RequestHeader(18, 0, 1, "c"), {})
    #                 size        key   ver   corr        len   "c"
    assert _hex(parts) == "00 00 00 0b 00 12 00 00 00 00 00 01 00 01 63"
    header, body = decode_request(b"".join(parts)[4:])
    assert (header.api_key, header.api_version, header.client_id, body) == (18, 0, "c", {})


def test_api_versions_v3_request_uses_header_v2_and_compact_strings() -> None:
    parts = encode_request(RequestHeader(18, 3, 2, "c"),
                           {"client_software_name": "a", "client_software_version": "1"})
    # header v2: key, ver, corr, classic client_id, empty tag section; then the flexible body:
    # compact "a", compact "1", empty tag section.
    assert _hex(parts) == ("00 00 00 11 00 12 00 03 00 00 00 02 00 01 63 00 "
                           "02 61 02 31 00")


def test_api_versions_v0_response() -> None:
    parts = encode_response(RequestHeader(18, 0, 1, None), {
        "error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}]})
    #                 size        corr        error array count  key   min   max
    assert _hex(parts) == "00 00 00 10 00 00 00 01 00 00 00 00 00 01 00 12 00 00 00 03"


def test_api_versions_v3_response_keeps_header_v0() -> None:
    body = {"error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}],
            "throttle_time_ms": 0}
    parts = encode_response(RequestHeader(18, 3, 1, None), body)
    # corr (no header tag byte: KIP-511), error, compact count 1+1, entry + its empty tags,
    # throttle, empty tag section.
    assert _hex(parts) == ("00 00 00 13 00 00 00 01 00 00 02 00 12 00 00 00 03 00 "
                           "00 00 00 00 00")
    with_tag = encode_response(RequestHeader(18, 3, 1, None), {**body, "finalized_features_epoch": 5})
    # One tagged field: count 1, tag 1, size 8, the int64.
    assert _hex(with_tag).endswith("00 00 00 00 01 01 08 00 00 00 00 00 00 00 05")
    correlation_id, decoded = decode_response(18, 3, b"".join(with_tag)[4:])
    assert correlation_id == 1 and decoded["finalized_features_epoch"] == 5
    assert decoded["supported_features"] == [] and decoded["zk_migration_ready"] is False


def test_api_versions_fallback_is_v0_shaped() -> None:
    frame = encode_api_versions_fallback(5, 35, [(18, 0, 3), (3, 1, 12)])
    assert frame.hex(" ") == ("00 00 00 16 00 00 00 05 00 23 00 00 00 02 "
                              "00 12 00 00 00 03 00 03 00 01 00 0c")


def test_metadata_v1_request() -> None:
    named = encode_request(RequestHeader(3, 1, 3, "c"), {"topics": [{"name": "t"}]})
    assert _hex(named) == "00 00 00 12 00 03 00 01 00 00 00 03 00 01 63 00 00 00 01 00 01 74"
    everything = encode_request(RequestHeader(3, 1, 3, "c"), {"topics": None})
    assert _hex(everything).endswith("00 01 63 ff ff ff ff")
    _, body = decode_request(b"".join(everything)[4:])
    assert body == {"topics": None}


def test_produce_v3_request() -> None:
    parts = encode_request(RequestHeader(0, 3, 9, None), {
        "acks": -1, "timeout_ms": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"abc"}]}]})
    assert _hex(parts) == (
        "00 00 00 28 "                      # size 40
        "00 00 00 03 00 00 00 09 ff ff "    # key 0, version 3, corr 9, null client_id
        "ff ff ff ff 00 00 03 e8 "          # null transactional_id, acks -1, timeout 1000
        "00 00 00 01 00 01 74 "             # one topic "t"
        "00 00 00 01 00 00 00 00 "          # one partition, index 0
        "00 00 00 03 61 62 63")             # records: int32 length, bytes


def test_librdkafka_all_topics_metadata_request_has_stray_bytes() -> None:
    """Captured from confluent-kafka 2.16 (librdkafka 2.16) AdminClient.list_topics(): the body is
    null topics, allow_auto_topic_creation, include_topic_authorized_operations and an empty tag
    section, followed by three stray bytes. Kafka ignores them, so the lenient default does too."""
    frame = bytes.fromhex("0003 000c 00000003 0007") + b"rdkafka" + bytes.fromhex("00 00000000 010000")
    header, body = decode_request(frame)
    assert (header.api_key, header.api_version, header.client_id) == (3, 12, "rdkafka")
    assert body == {"topics": None, "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False}
