"""The one framing module: cutting a byte stream into size-prefixed frames."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roost.wire.kafka import (
    FrameSizeError,
    FrameSplitter,
    KafkaCodecError,
    RequestHeader,
    UnsupportedVersionError,
    decode_request,
    decode_request_body,
    encode_request,
    read_request_header,
)


def _stream(frames: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(f)) + f for f in frames)


@given(frames=st.lists(st.binary(min_size=0, max_size=300), max_size=20),
       cuts=st.lists(st.integers(min_value=0, max_value=7000), max_size=30))
def test_any_chunking_yields_the_same_frames(frames: list[bytes], cuts: list[int]) -> None:
    data = _stream(frames)
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    splitter = FrameSplitter(max_frame_bytes=300)
    got: list[bytes] = []
    for start, end in itertools.pairwise(points):
        got.extend(bytes(f) for f in splitter.split(data[start:end]))
    assert got == frames
    assert splitter.buffered == 0


def test_frames_are_writable_copies() -> None:
    splitter = FrameSplitter(max_frame_bytes=100)
    (frame,) = splitter.split(_stream([b"abcdefgh"]))
    frame[0:1] = b"X"  # a broker rewrites base offsets in place
    assert bytes(frame) == b"Xbcdefgh"


@pytest.mark.parametrize("size", [-1, 3, 101, 2**31 - 1])
def test_a_size_outside_the_limits_is_refused_before_buffering(size: int) -> None:
    splitter = FrameSplitter(max_frame_bytes=100, min_frame_bytes=4)
    with pytest.raises(FrameSizeError, match=str(size)):
        splitter.split(struct.pack(">i", size) + b"x" * 10)
    assert splitter.buffered == 0


def test_a_partial_frame_waits_for_the_rest() -> None:
    splitter = FrameSplitter(max_frame_bytes=100)
    data = _stream([b"hello world"])
    assert splitter.split(data[:6]) == []
    assert splitter.buffered == 6
    assert [bytes(f) for f in splitter.split(data[6:])] == [b"hello world"]


def test_a_header_read_first_is_not_parsed_again() -> None:
    """read_request_header + decode_request_body give what decode_request gives, errors included."""
    for header in (RequestHeader(0, 9, 41, "rdkafka"), RequestHeader(7, 0, 42, None), RequestHeader(12, 0, 43, None)):
        body = {"acks": -1, "timeout_ms": 5, "topic_data": [{"name": "t", "partition_data": [
            {"index": 1, "records": b"\x00" * 70}]}]} if header.api_key == 0 else {}
        frame = bytearray(b"".join(encode_request(header, body))[4:])
        peeked, header_end = read_request_header(frame)
        assert peeked == header
        assert (peeked, decode_request_body(peeked, frame, header_end)) == decode_request(frame)
        with pytest.raises(KafkaCodecError, match="left after"):
            decode_request_body(peeked, frame + b"\x00", header_end, strict=True)
        with pytest.raises(KafkaCodecError, match="malformed"):
            decode_request_body(peeked, frame[:header_end + 3], header_end)
    unsupported = bytearray(b"".join(encode_request(RequestHeader(0, 9, 1, "c"), {}))[4:])
    unsupported[2:4] = b"\x00\x63"  # Produce v99
    peeked, header_end = read_request_header(unsupported)
    assert (peeked.api_version, peeked.correlation_id) == (99, 1)
    with pytest.raises(UnsupportedVersionError):
        decode_request_body(peeked, unsupported, header_end)
