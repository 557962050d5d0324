"""Decoders on hostile input: arbitrary or mutated bytes raise only KafkaCodecError, never another
exception, never hang, and never allocate for lengths the frame cannot back."""

from __future__ import annotations

import random
import struct
import tracemalloc
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roost.wire.kafka import (
    KafkaCodecError,
    RequestHeader,
    decode_consumer_assignment,
    decode_consumer_subscription,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    peek_request_header,
)
from tests.wire_kafka.samples import (
    client_id_for,
    every_api_version,
    message_of,
    nondefault_body,
    sample_body,
)

PAIRS = every_api_version()
TARGETS = [(key, version, is_request) for key, version in PAIRS for is_request in (True, False)]
FUZZ = settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck),
                derandomize=True)


def _request_header(api_key: int, version: int, flexible_header: bool) -> bytes:
    header = struct.pack(">hhih", api_key, version, 7, 1) + b"c"
    return header + (b"\x00" if flexible_header else b"")


def _shapes(target: tuple[int, int, bool], body: bytes) -> list[Callable[[], object]]:
    """Every way `body` is decoded as the body of `target`: a request behind both header shapes
    (with and without the flexible header's tag byte), a response as it is and behind one more
    int. Each shape gets every sample: none is only reached when another decoded cleanly."""
    api_key, version, is_request = target
    if is_request:
        return [lambda: decode_request(_request_header(api_key, version, True) + body),
                lambda: decode_request(_request_header(api_key, version, False) + body)]
    return [lambda: decode_response(api_key, version, body),
            lambda: decode_response(api_key, version, b"\x00\x00\x00\x01" + body)]


def _decode(target: tuple[int, int, bool], body: bytes) -> None:
    """Decode `body` as the body of `target` in every shape; only KafkaCodecError may escape."""
    for decode in _shapes(target, body):
        try:
            decode()
        except KafkaCodecError:
            pass


def _valid_frames() -> list[tuple[tuple[int, int, bool], bytes]]:
    rng = random.Random(11)
    frames = []
    for api_key, version in PAIRS:
        request = sample_body(message_of(api_key, True), version, rng)
        header = RequestHeader(api_key, version, 3, client_id_for(api_key, version, "c"))
        encoded = b"".join(encode_request(header, request))[4:]
        frames.append(((api_key, version, True), encoded))
        response = sample_body(message_of(api_key, False), version, rng)
        encoded = b"".join(encode_response(RequestHeader(api_key, version, 3, "c"), response))[4:]
        frames.append(((api_key, version, False), encoded))
    return frames


VALID_FRAMES = _valid_frames()


def _decode_frame(target: tuple[int, int, bool], frame: bytes) -> None:
    api_key, version, is_request = target
    try:
        if is_request:
            decode_request(frame, strict=True)
        else:
            decode_response(api_key, version, frame)
    except KafkaCodecError:
        pass


@FUZZ
@given(target=st.sampled_from(TARGETS), body=st.binary(max_size=300))
def test_arbitrary_bodies_raise_only_codec_errors(target: tuple[int, int, bool], body: bytes) -> None:
    _decode(target, body)


@FUZZ
@given(frame=st.binary(max_size=64))
def test_arbitrary_request_frames_raise_only_codec_errors(frame: bytes) -> None:
    try:
        peek_request_header(frame)
    except KafkaCodecError:
        pass
    try:
        decode_request(frame)
    except KafkaCodecError:
        pass


@FUZZ
@given(sample=st.sampled_from(VALID_FRAMES), edits=st.lists(
    st.tuples(st.sampled_from(("flip", "cut", "insert", "set")), st.integers(0, 10_000), st.binary(
        min_size=1, max_size=4)), min_size=1, max_size=4))
def test_mutated_frames_raise_only_codec_errors(sample: tuple[tuple[int, int, bool], bytes],
                                                edits: list[tuple[str, int, bytes]]) -> None:
    target, frame = sample
    _decode_frame(target, _mutated(frame, edits))


def _mutated(frame: bytes, edits: list[tuple[str, int, bytes]]) -> bytes:
    data = bytearray(frame)
    for kind, where, payload in edits:
        where %= max(len(data), 1)
        if kind == "flip" and data:
            data[where] ^= payload[0] or 0x80
        elif kind == "cut":
            del data[where:]
        elif kind == "insert":
            data[where:where] = payload
        elif kind == "set" and data:
            data[where] = 0xFF if payload[0] & 1 else 0x7F  # huge lengths and counts
    return bytes(data)


# The inter-broker and cluster-admin APIs get a budget of their own: their bodies are deeper
# (per-topic, per-partition, per-endpoint arrays) and the shared budget above is spread thin.
INTER_BROKER_KEYS = frozenset({4, 5, 6, 7, 23, 43, 45, 46, 56, 60})
INTER_BROKER_TARGETS = [target for target in TARGETS if target[0] in INTER_BROKER_KEYS]


def _nondefault_frames() -> list[tuple[tuple[int, int, bool], bytes]]:
    """Full frames of the inter-broker APIs, every array non-empty (so a mutation lands inside)."""
    rng = random.Random(12)
    frames = []
    for api_key, version, is_request in INTER_BROKER_TARGETS:
        body = nondefault_body(message_of(api_key, is_request), version, rng)
        header = RequestHeader(api_key, version, 3, client_id_for(api_key, version, "c"))
        encode = encode_request if is_request else encode_response
        frames.append(((api_key, version, is_request), b"".join(encode(header, body))[4:]))
    return frames


INTER_BROKER_FRAMES = _nondefault_frames()


@FUZZ
@given(target=st.sampled_from(INTER_BROKER_TARGETS), body=st.binary(max_size=300))
def test_inter_broker_bodies_raise_only_codec_errors(target: tuple[int, int, bool], body: bytes) -> None:
    _decode(target, body)


@FUZZ
@given(sample=st.sampled_from(INTER_BROKER_FRAMES), edits=st.lists(
    st.tuples(st.sampled_from(("flip", "cut", "insert", "set")), st.integers(0, 10_000), st.binary(
        min_size=1, max_size=4)), min_size=1, max_size=4))
def test_mutated_inter_broker_frames_raise_only_codec_errors(
        sample: tuple[tuple[int, int, bool], bytes], edits: list[tuple[str, int, bytes]]) -> None:
    target, frame = sample
    _decode_frame(target, _mutated(frame, edits))


@FUZZ
@given(data=st.binary(max_size=120))
def test_consumer_protocol_decoders_raise_only_codec_errors(data: bytes) -> None:
    for decode in (decode_consumer_subscription, decode_consumer_assignment):
        try:
            decode(data)
        except KafkaCodecError:
            pass


# Hand-made lies: a count or length far beyond the frame must fail before anything is allocated.
LIES = [
    # Metadata v1 request: topics array count 2^31-1, no elements.
    ("metadata array count", True, 3, 1, struct.pack(">i", 2**31 - 1)),
    # DescribeGroups v0 request: []string count 2^30.
    ("string array count", True, 15, 0, struct.pack(">i", 2**30)),
    # Metadata v9 response (flexible): replica nodes []int32 with a compact count near 2^32.
    ("compact count", False, 3, 9, None),
    # Produce v3 request: records int32 length 2^31-1 with 3 bytes behind it.
    ("records length", True, 0, 3, b"\xff\xff" + struct.pack(">hi", 1, 100) + struct.pack(">i", 1)
     + b"\x00\x01t" + struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", 2**31 - 1) + b"abc"),
    # ApiVersions v3 request: compact string length varint of five 0xff bytes (too long).
    ("varint overlong", True, 18, 3, b"\xff\xff\xff\xff\xff\x01"),
    # Flexible tag section claiming 2^28 tagged fields.
    ("tag count", True, 18, 3, b"\x01\x01" + b"\x80\x80\x80\x80\x01"),
]


def _metadata_with_lying_replica_count() -> bytes:
    sentinel = struct.pack(">i", 0x5A5A5A5A)
    body = {"brokers": [{"node_id": 1, "host": "h", "port": 9092}], "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "leader_id": 1, "replica_nodes": [0x5A5A5A5A], "isr_nodes": [1]}]}]}
    frame = b"".join(encode_response(RequestHeader(3, 9, 1, None), body))[4:]
    assert frame.count(b"\x02" + sentinel) == 1
    return frame.replace(b"\x02" + sentinel, b"\xff\xff\xff\xff\x0f" + sentinel)


@pytest.mark.parametrize(("label", "is_request", "api_key", "version", "body"), LIES,
                         ids=[lie[0] for lie in LIES])
def test_lying_lengths_fail_before_allocating(label: str, is_request: bool, api_key: int, version: int,
                                              body: bytes | None) -> None:
    if body is None:
        body = _metadata_with_lying_replica_count()
    tracemalloc.start()
    try:
        with pytest.raises(KafkaCodecError):
            if is_request:
                flexible = (api_key, version) in {(18, 3), (3, 9)}
                decode_request(_request_header(api_key, version, flexible) + body)
            else:
                decode_response(api_key, version, body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024, f"{label}: {peak} bytes allocated"


def test_trailing_bytes_are_an_error_when_strict() -> None:
    frame = b"".join(encode_request(RequestHeader(12, 0, 1, "c"), {"group_id": "g"}))[4:]
    assert decode_request(frame, strict=True) == decode_request(frame + b"\x00")  # Kafka ignores them
    with pytest.raises(KafkaCodecError, match="left after"):
        decode_request(frame + b"\x00", strict=True)
    response = b"".join(encode_response(RequestHeader(12, 0, 1, "c"), {}))[4:]
    with pytest.raises(KafkaCodecError, match="left after"):
        decode_response(12, 0, response + b"\x00")


def test_short_header_is_an_error() -> None:
    for size in range(10):
        with pytest.raises(KafkaCodecError):
            peek_request_header(bytes(size))
