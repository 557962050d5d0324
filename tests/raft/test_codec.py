"""The raft wire codec: round trips, and arbitrary bytes raise CodecError only."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roost.raft.codec import (
    CodecError,
    FrameDecoder,
    decode_body,
    decode_hello,
    decode_message,
    encode_hello,
    encode_message,
)
from roost.raft.messages import Entry, EntryKind, Membership, Message, MessageType, Snapshot

u64 = st.integers(0, 2**64 - 1)
u32 = st.integers(0, 2**32 - 1)
entries = st.builds(Entry, u64, u64, st.binary(max_size=64), st.sampled_from(list(EntryKind)))
member_ids = st.frozensets(st.integers(1, 2**32 - 1), max_size=5)
memberships = st.builds(
    lambda voters, learners, context: Membership(voters, learners - voters, context),
    member_ids, member_ids, st.binary(max_size=32))
snapshots = st.none() | st.builds(Snapshot, u64, u64, st.binary(max_size=128), st.none() | memberships)
messages = st.builds(
    Message, st.sampled_from(list(MessageType)), u32, u32, term=u64, log_term=u64, index=u64, commit=u64,
    entries=st.lists(entries, max_size=5).map(tuple), reject=st.booleans(), quiet=st.booleans(), hint_index=u64, hint_term=u64,
    context=u64, request_ids=st.lists(u64, max_size=5).map(tuple), snapshot=snapshots,
    data=st.binary(max_size=64),
)


@settings(max_examples=300, deadline=None)
@given(messages)
def test_round_trip(message: Message) -> None:
    assert decode_message(encode_message(message)) == message


@settings(max_examples=100, deadline=None)
@given(st.lists(messages, min_size=1, max_size=4), st.data())
def test_stream_split_anywhere(batch: list[Message], data: st.DataObject) -> None:
    stream = b"".join(encode_message(m) for m in batch)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    decoder = FrameDecoder()
    out: list[Message] = []
    previous = 0
    for cut in [*cuts, len(stream)]:
        out.extend(decoder.feed(stream[previous:cut]))
        previous = cut
    assert out == batch and decoder.buffered == 0


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300))
def test_garbage_raises_codec_error_only(garbage: bytes) -> None:
    decoder = FrameDecoder(max_frame=1 << 16)
    try:
        decoder.feed(garbage)
    except CodecError:
        pass


@settings(max_examples=300, deadline=None)
@given(messages, st.data())
def test_corrupted_frame_is_detected(message: Message, data: st.DataObject) -> None:
    frame = bytearray(encode_message(message))
    position = data.draw(st.integers(4, len(frame) - 1))  # past the length: version, crc or body
    frame[position] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CodecError):
        decode_message(bytes(frame))


def test_oversized_length_is_refused_before_buffering() -> None:
    decoder = FrameDecoder(max_frame=1024)
    with pytest.raises(CodecError, match="out of bounds"):
        decoder.feed((1 << 20).to_bytes(4, "big") + b"x" * 10)


def test_truncated_frame_waits_for_more() -> None:
    frame = encode_message(Message(MessageType.HEARTBEAT, 1, 2, term=3))
    decoder = FrameDecoder()
    assert decoder.feed(frame[:-1]) == []
    assert decoder.feed(frame[-1:]) == [Message(MessageType.HEARTBEAT, 1, 2, term=3)]


def test_hello() -> None:
    assert decode_hello(encode_hello(7)) == 7
    with pytest.raises(CodecError):
        decode_hello(b"HTTP/1.1")


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=400))
def test_garbage_body_raises_codec_error_only(garbage: bytes) -> None:
    """Past the CRC (a peer with a bug, not line noise): the body parser is strict too."""
    try:
        decode_body(garbage)
    except CodecError:
        pass


@settings(max_examples=300, deadline=None)
@given(messages, st.data())
def test_mutated_body_raises_codec_error_or_decodes(message: Message, data: st.DataObject) -> None:
    body = bytearray(encode_message(message)[9:])
    for _ in range(data.draw(st.integers(1, 4))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(body)))
    try:
        decode_body(bytes(body[:cut]))
    except CodecError:
        pass
