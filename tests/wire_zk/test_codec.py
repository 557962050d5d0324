"""The jute codec: round trips, byte-for-byte agreement with kazoo's own serialisers (an
independent implementation), framing, four-letter words and limits."""

from __future__ import annotations

import struct

import pytest
from kazoo.protocol import serialization as kz
from kazoo.security import ACL as KazooACL
from kazoo.security import Id as KazooId

from roost.wire.zk.connection import (
    ClientConnection,
    ConnectReceived,
    FourLetterWord,
    ReplyEvent,
    RequestReceived,
    ServerConnection,
    UnknownRequest,
    WatchEvent,
    encode_connect_response,
    encode_reply,
    encode_request,
    encode_watch_event,
)
from roost.wire.zk.constants import DEFAULT_MAX_BUFFER, Err, EventType, KeeperState, OpCode
from roost.wire.zk.errors import ZkCodecError
from roost.wire.zk.jute import JuteReader, JuteWriter
from roost.wire.zk.records import (
    ACL,
    AuthRequest,
    CheckVersionRequest,
    ConnectRequest,
    ConnectResponse,
    CreateRequest,
    CreateResult,
    DeleteRequest,
    DeleteResult,
    EmptyRequest,
    ErrorResult,
    GetDataResult,
    MultiRequest,
    PathModeRequest,
    PathRequest,
    PathWatchRequest,
    SetACLRequest,
    SetDataRequest,
    SetDataResult,
    SetWatchesRequest,
    Stat,
    decode_request,
    encode_request_body,
    read_multi_response,
    write_multi_response,
)

OPEN = [ACL(31, "world", "anyone")]
STAT = Stat(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)

SAMPLES = [
    CreateRequest("/a/b", b"data", OPEN, 3),
    CreateRequest("/c", b"", [ACL(1, "digest", "u:xyz="), ACL(31, "ip", "10.0.0.0/8")], 0, OpCode.CREATE2),
    CreateRequest("/t", b"x", OPEN, 5, OpCode.CREATE_TTL, ttl=5000),
    DeleteRequest("/a", 7),
    PathWatchRequest("/a", True, OpCode.EXISTS),
    PathWatchRequest("/a", False, OpCode.GET_DATA),
    PathWatchRequest("/a", True, OpCode.GET_CHILDREN2),
    SetDataRequest("/a", b"\x00\xff" * 10, -1),
    # Null data (a buffer of length -1) is not empty data: both must come back as they went.
    CreateRequest("/null", None, OPEN, 0),
    CreateRequest("/empty", b"", OPEN, 0),
    SetDataRequest("/null", None, 3),
    SetDataRequest("/empty", b"", 3),
    MultiRequest([CreateRequest("/m", None, OPEN, 0), SetDataRequest("/m", None, 0),
                  CreateRequest("/n", b"", OPEN, 0), SetDataRequest("/n", b"", 0)]),
    PathRequest("/a", OpCode.GET_ACL),
    PathRequest("/a", OpCode.SYNC),
    SetACLRequest("/a", OPEN, 2),
    CheckVersionRequest("/a", 3),
    MultiRequest([CreateRequest("/m", b"1", OPEN, 0), SetDataRequest("/m", b"2", 0),
                  CheckVersionRequest("/m", 1), DeleteRequest("/m", -1)]),
    SetWatchesRequest(42, ["/d"], ["/e", "/f"], ["/c"]),
    SetWatchesRequest(42, ["/d"], [], [], ["/p"], ["/r"], OpCode.SET_WATCHES2),
    AuthRequest(0, "digest", b"user:pass"),
    PathModeRequest("/w", 1, OpCode.ADD_WATCH),
]


@pytest.mark.parametrize("request_record", SAMPLES, ids=lambda r: type(r).__name__ + str(r.opcode))
def test_request_round_trip(request_record) -> None:
    body = encode_request_body(request_record)
    assert decode_request(request_record.opcode, body) == request_record


def _kazoo_acl(acl: ACL) -> KazooACL:
    return KazooACL(acl.perms, KazooId(acl.scheme, acl.id))


def test_requests_match_kazoo_bytes() -> None:
    kazoo_acl = [_kazoo_acl(a) for a in OPEN]
    pairs = [
        (kz.Create("/a/b", b"data", kazoo_acl, 3), CreateRequest("/a/b", b"data", OPEN, 3)),
        (kz.Create("/a/b", None, kazoo_acl, 0), CreateRequest("/a/b", None, OPEN, 0)),
        (kz.Create("/a/b", b"", kazoo_acl, 0), CreateRequest("/a/b", b"", OPEN, 0)),
        (kz.SetData("/a", None, -1), SetDataRequest("/a", None, -1)),
        (kz.SetData("/a", b"", -1), SetDataRequest("/a", b"", -1)),
        (kz.Delete("/a", 7), DeleteRequest("/a", 7)),
        (kz.Exists("/a", True), PathWatchRequest("/a", True, OpCode.EXISTS)),
        (kz.GetData("/a", False), PathWatchRequest("/a", False, OpCode.GET_DATA)),
        (kz.SetData("/a", b"v", 4), SetDataRequest("/a", b"v", 4)),
        (kz.GetACL("/a"), PathRequest("/a", OpCode.GET_ACL)),
        (kz.SetACL("/a", kazoo_acl, 1), SetACLRequest("/a", OPEN, 1)),
        (kz.GetChildren2("/a", True), PathWatchRequest("/a", True, OpCode.GET_CHILDREN2)),
        (kz.Sync("/a"), PathRequest("/a", OpCode.SYNC)),
        (kz.Auth(0, "digest", "u:p"), AuthRequest(0, "digest", b"u:p")),
        (kz.Transaction([kz.Create("/m", b"1", kazoo_acl, 0), kz.CheckVersion("/m", 0),
                         kz.Delete("/m", -1)]),
         MultiRequest([CreateRequest("/m", b"1", OPEN, 0), CheckVersionRequest("/m", 0),
                       DeleteRequest("/m", -1)])),
    ]
    for theirs, ours in pairs:
        assert bytes(theirs.serialize()) == encode_request_body(ours), type(theirs).__name__
        assert theirs.type == ours.opcode
        assert decode_request(theirs.type, bytes(theirs.serialize())) == ours


def test_multi_read_results_keep_null_apart_from_empty() -> None:
    results = [GetDataResult(None, STAT), GetDataResult(b"", STAT), GetDataResult(b"x", STAT)]
    w = JuteWriter()
    write_multi_response(w, results)
    assert read_multi_response(JuteReader(w.getvalue())) == results
    assert w.getvalue().count(struct.pack("!i", -1) + struct.pack("!qqqqiiiqiiq", *STAT)) == 1


def test_connect_request_from_kazoo() -> None:
    data = bytes(kz.Connect(0, 77, 10000, 0x1234, b"p" * 16, False).serialize())
    request = ConnectRequest.read(JuteReader(data))
    assert request == ConnectRequest(0, 77, 10000, 0x1234, b"p" * 16, False, True)
    old_client = ConnectRequest.read(JuteReader(data[:-1]))
    assert not old_client.has_read_only


def test_responses_decode_with_kazoo() -> None:
    response = ConnectResponse(0, 4000, 99, b"s" * 16, False, True)
    frame = encode_connect_response(response)
    decoded, _ = kz.Connect.deserialize(frame[4:], 0)
    assert (decoded.time_out, decoded.session_id, decoded.passwd) == (4000, 99, b"s" * 16)
    body = JuteWriter().buffer(b"hello").stat(STAT).getvalue()
    data, stat = kz.GetData.deserialize(body, 0)
    assert data == b"hello" and tuple(stat) == tuple(STAT)
    assert kz.GetData.deserialize(JuteWriter().buffer(None).stat(STAT).getvalue(), 0)[0] is None
    assert kz.GetData.deserialize(JuteWriter().buffer(b"").stat(STAT).getvalue(), 0)[0] == b""
    w = JuteWriter()
    write_multi_response(w, [CreateResult("/m"), SetDataResult(STAT), DeleteResult()])
    results = kz.Transaction.deserialize(w.getvalue(), 0)
    assert results[0] == "/m" and tuple(results[1]) == tuple(STAT) and results[2] is True
    w = JuteWriter()
    write_multi_response(w, [ErrorResult(Err.OK), ErrorResult(Err.NODE_EXISTS),
                             ErrorResult(Err.RUNTIME_INCONSISTENCY)])
    assert [type(e).__name__ for e in kz.Transaction.deserialize(w.getvalue(), 0)] == [
        "RolledBackError", "NodeExistsError", "RuntimeInconsistency"]
    assert read_multi_response(JuteReader(w.getvalue())) == [
        ErrorResult(0), ErrorResult(Err.NODE_EXISTS), ErrorResult(Err.RUNTIME_INCONSISTENCY)]
    header, offset = kz.ReplyHeader.deserialize(encode_reply(5, 17, Err.NO_NODE)[4:], 0)
    assert (header.xid, header.zxid, header.err) == (5, 17, Err.NO_NODE)
    event_frame = encode_watch_event(EventType.NODE_DELETED, KeeperState.SYNC_CONNECTED, "/x")
    header, offset = kz.ReplyHeader.deserialize(event_frame[4:], 0)
    watch, _ = kz.Watch.deserialize(event_frame[4:], offset)
    assert (header.xid, watch.type, watch.state, watch.path) == (-1, 2, 3, "/x")


def _connect_frame() -> bytes:
    w = JuteWriter()
    ConnectRequest(0, 0, 4000, 0, bytes(16), False).write(w)
    return struct.pack("!i", len(w.out)) + bytes(w.out)


def test_server_connection_byte_by_byte() -> None:
    conn = ServerConnection()
    stream = _connect_frame() + encode_request(1, PathWatchRequest("/a", True, OpCode.GET_DATA)) + \
        encode_request(2, SetDataRequest("/a", b"x", -1)) + struct.pack("!iii", 8, 3, 777)
    events = []
    for byte in stream:
        events.extend(conn.receive_data(bytes([byte])))
    assert isinstance(events[0], ConnectReceived)
    assert isinstance(events[1], RequestReceived) and events[1].request == PathWatchRequest("/a", True, OpCode.GET_DATA)
    assert isinstance(events[2], RequestReceived) and events[2].opcode == OpCode.SET_DATA
    assert events[2].body == encode_request_body(SetDataRequest("/a", b"x", -1))
    assert events[3] == UnknownRequest(3, 777)


def test_four_letter_words_only_on_a_fresh_connection() -> None:
    assert ServerConnection().receive_data(b"ru") == []
    conn = ServerConnection()
    conn.receive_data(b"ru")
    assert conn.receive_data(b"ok") == [FourLetterWord("ruok")]
    assert conn.closed
    with pytest.raises(ZkCodecError):
        conn.receive_data(b"more")
    connected = ServerConnection()
    connected.receive_data(_connect_frame())
    with pytest.raises(ZkCodecError):  # "ruok" read as a frame length far above the limit
        connected.receive_data(b"ruok")
    with pytest.raises(ZkCodecError):
        ServerConnection(allow_four_letter_words=False).receive_data(b"ruok")


def test_frame_limit_is_checked_before_buffering() -> None:
    conn = ServerConnection(max_frame=1024)
    conn.receive_data(_connect_frame())
    assert conn.receive_data(struct.pack("!i", 1024)) == []  # at the limit: waits for the body
    conn = ServerConnection(max_frame=1024)
    conn.receive_data(_connect_frame())
    with pytest.raises(ZkCodecError, match="frame length 1025"):
        conn.receive_data(struct.pack("!i", 1025))
    assert DEFAULT_MAX_BUFFER == 0xFFFFF


def test_client_connection_matches_replies() -> None:
    client = ClientConnection()
    xid, data = client.send(PathWatchRequest("/a", False, OpCode.GET_DATA))
    assert data == encode_request(xid, PathWatchRequest("/a", False, OpCode.GET_DATA))
    stream = encode_connect_response(ConnectResponse(0, 4000, 5, bytes(16)))
    stream += encode_watch_event(EventType.NODE_CREATED, KeeperState.SYNC_CONNECTED, "/b")
    stream += encode_reply(xid, 9, 0, JuteWriter().buffer(b"v").stat(STAT).getvalue())
    events = client.receive_data(stream)
    assert isinstance(events[1], WatchEvent) and events[1].event.path == "/b"
    assert events[2] == ReplyEvent(xid, 9, 0, OpCode.GET_DATA, (b"v", STAT))
    with pytest.raises(ZkCodecError):
        client.receive_data(encode_reply(1234, 9, 0))


def test_client_connection_matches_pings_out_of_turn() -> None:
    """The keeper answers a ping at once, ahead of a write still in flight: a ping reply is
    matched by its xid, never against the queue of pending requests."""
    client = ClientConnection(max_request=1024)
    client.receive_data(encode_connect_response(ConnectResponse(0, 4000, 5, bytes(16))))
    xid, _ = client.send(PathWatchRequest("/a", False, OpCode.EXISTS))
    ping_xid, _ = client.send(EmptyRequest(OpCode.PING))
    assert client.pending == 1
    events = client.receive_data(encode_reply(ping_xid, 3, 0) + encode_reply(xid, 3, Err.NO_NODE))
    assert [(e.xid, e.opcode) for e in events] == [(ping_xid, OpCode.PING), (xid, OpCode.EXISTS)]
    assert client.pending == 0
    with pytest.raises(ZkCodecError, match="exceeds the 1024-byte limit"):
        client.send(SetDataRequest("/a", b"x" * 1024, -1))
    assert client.pending == 0
