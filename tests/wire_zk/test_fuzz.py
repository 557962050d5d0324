"""Hypothesis fuzzing: whatever bytes arrive, the decoders raise ZkCodecError and nothing else
(no IndexError, struct.error, MemoryError, UnicodeDecodeError ...)."""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roost.keeper.commands import Batch, Command, CommandKind
from roost.keeper.core import decode_touches
from roost.keeper.tree import DataTree
from roost.wire.zk.connection import ClientConnection, ServerConnection, encode_request
from roost.wire.zk.constants import OpCode
from roost.wire.zk.errors import ZkCodecError
from roost.wire.zk.jute import JuteWriter
from roost.wire.zk.records import (
    ACL,
    REQUEST_READERS,
    ConnectRequest,
    CreateRequest,
    MultiRequest,
    PathWatchRequest,
    SetDataRequest,
    decode_request,
)

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
OPCODES = sorted(REQUEST_READERS)


def _connect_frame() -> bytes:
    w = JuteWriter()
    ConnectRequest(0, 0, 4000, 0, bytes(16), False).write(w)
    return struct.pack("!i", len(w.out)) + bytes(w.out)


VALID_FRAMES = [
    encode_request(1, CreateRequest("/a", b"x", [ACL(31, "world", "anyone")], 0)),
    encode_request(2, PathWatchRequest("/a", True, OpCode.GET_DATA)),
    encode_request(3, SetDataRequest("/a", b"y", 1)),
    encode_request(4, MultiRequest([CreateRequest("/b", b"", [ACL(31, "world", "anyone")], 2)])),
]


def _only_codec_errors(call) -> None:
    try:
        call()
    except ZkCodecError:
        pass


@FUZZ
@given(st.binary(max_size=512))
def test_fresh_server_connection(data: bytes) -> None:
    _only_codec_errors(lambda: ServerConnection(max_frame=4096).receive_data(data))


@FUZZ
@given(st.lists(st.binary(max_size=128), max_size=8))
def test_connected_server_connection_in_chunks(chunks: list[bytes]) -> None:
    conn = ServerConnection(max_frame=4096)
    conn.receive_data(_connect_frame())

    def feed() -> None:
        for chunk in chunks:
            conn.receive_data(chunk)

    _only_codec_errors(feed)


@FUZZ
@given(st.sampled_from(VALID_FRAMES), st.data())
def test_mutated_valid_frames(frame: bytes, data: st.DataObject) -> None:
    mutated = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(mutated) - 1))
        mutated[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(mutated)))
    conn = ServerConnection(max_frame=4096)
    conn.receive_data(_connect_frame())
    _only_codec_errors(lambda: conn.receive_data(bytes(mutated[:cut])))


@FUZZ
@given(st.sampled_from(OPCODES), st.binary(max_size=256))
def test_every_request_decoder(opcode: int, body: bytes) -> None:
    _only_codec_errors(lambda: decode_request(opcode, body))


@FUZZ
@given(st.binary(max_size=512))
def test_client_connection(data: bytes) -> None:
    client = ClientConnection(max_frame=4096)
    client.connected = True
    client.send(PathWatchRequest("/a", False, OpCode.GET_DATA))
    client.send(MultiRequest([]))
    _only_codec_errors(lambda: client.receive_data(data))


@FUZZ
@given(st.binary(max_size=512))
def test_replicated_batch_and_snapshot_and_touches(data: bytes) -> None:
    _only_codec_errors(lambda: Batch.decode(data))
    _only_codec_errors(lambda: DataTree.from_snapshot(data))
    _only_codec_errors(lambda: decode_touches(data))


@FUZZ
@given(st.data())
def test_mutated_batches(data: st.DataObject) -> None:
    batch = Batch(1, 2, 0, 3, 4, [
        Command(CommandKind.CREATE_SESSION, 5, timeout=4000, passwd=b"p" * 16),
        Command(CommandKind.REQUEST, 5, xid=1, opcode=OpCode.CREATE, body=b"\x00" * 20),
        Command(CommandKind.DELETE_CONTAINER, 0, path="/c"),
    ]).encode()
    mutated = bytearray(batch)
    position = data.draw(st.integers(0, len(mutated) - 1))
    mutated[position] = data.draw(st.integers(0, 255))
    _only_codec_errors(lambda: Batch.decode(bytes(mutated[: data.draw(st.integers(0, len(mutated)))])))
