"""Bad input and limits: a misbehaving connection is closed with a log line, and only that one;
every other session carries on. The closing behaviour is compared with a real ZooKeeper."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from roost.wire.zk.connection import ClientConnection, ReplyEvent, encode_request
from roost.wire.zk.constants import Err, OpCode
from roost.wire.zk.records import PathWatchRequest
from tests.keeper.zkharness import (
    RawClient,
    global_sessions,
    kazoo,
    keeper_process,
    reap_abandoned,
    remember_abandoned,
    unique_root,
    wait_until,
)
from tests.support.procs import RoostProcess


def _open(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


def _drain_until_closed(sock: socket.socket, timeout: float = 10.0) -> tuple[bool, bytes]:
    """Read until the server closes; (closed, bytes received)."""
    sock.settimeout(timeout)
    received = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                return True, received
            received += chunk
    except (ConnectionResetError, BrokenPipeError):
        return True, received
    except TimeoutError:
        return False, received
    return False, received


def _connected(address: str) -> socket.socket:
    """A connection with a new session. The session outlives the connection (the bad input closes
    only the connection), so it is noted for the `server` fixture to close after the test."""
    client = RawClient(address, timeout_ms=4000)
    remember_abandoned(address, client.response.session_id, client.response.passwd)
    return client.sock


BAD_INPUTS = {
    # name: (needs a session first, bytes)
    "garbage on a fresh connection": (False, b"\xde\xad\xbe\xef" * 8),
    "negative frame length": (True, struct.pack("!i", -5) + b"x" * 8),
    "oversized frame length": (True, struct.pack("!i", 0x7FFFFFF0)),
    "frame just over jute.maxbuffer": (True, struct.pack("!i", 0xFFFFF + 1) + b"\x00" * 64),
    "truncated getData body": (True, struct.pack("!iii", 12, 1, OpCode.GET_DATA) + struct.pack("!i", 50)),
    "string length beyond the frame": (True, struct.pack("!iiii", 16, 1, OpCode.GET_DATA, 1000) + b"abcd"),
    "frame shorter than a header": (True, struct.pack("!i", 3) + b"abc"),
    "malformed connect request": (False, struct.pack("!i", 6) + b"\x00\x00\x00\x00\x00\x00"),
}


@pytest.fixture(params=["keeper", "zookeeper"])
def server(request: pytest.FixtureRequest) -> Iterator[str]:
    """A shared server (the differential tests use it too): every session a test opens there is
    closed when it ends. Left to expire, a session would take a zxid in some later scenario."""
    address = request.getfixturevalue(request.param)
    before = global_sessions(address)
    yield address
    reap_abandoned(address)
    # At once, not eventually: closing is synchronous, whereas waiting would let them expire.
    assert global_sessions(address) <= before, "the test left a session open on a shared server"


@pytest.fixture
def bystander(server: str) -> Iterator[KazooClient]:
    client = kazoo(server)
    try:
        yield client
    finally:
        client.stop()
        client.close()


# A well-framed request whose body does not parse: ZooKeeper answers MarshallingError and keeps
# the connection (until the session times out); the keeper closes it at once, as the issue asks
# for bad input. Every other case: both close at once.
MALFORMED_BODIES = {"truncated getData body", "string length beyond the frame"}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_closes_only_that_connection(server: str, bystander: KazooClient, case: str,
                                               request: pytest.FixtureRequest) -> None:
    needs_session, payload = BAD_INPUTS[case]
    is_zookeeper = "zookeeper" in request.node.callspec.id
    root = unique_root("bystander")
    bystander.create(root, b"before")
    sock = _connected(server) if needs_session else _open(server)
    try:
        sock.sendall(payload)
        if is_zookeeper and case in MALFORMED_BODIES:
            received = b""
            while len(received) < 20:
                chunk = sock.recv(20 - len(received))
                assert chunk, "ZooKeeper closed instead of answering"
                received += chunk
            assert struct.unpack_from("!iiqi", received)[3] == Err.MARSHALLING_ERROR
        else:
            closed, _ = _drain_until_closed(sock)
            assert closed, f"{case}: the server kept the connection open"
    finally:
        sock.close()
    # The bystander's session is unaffected.
    bystander.set(root, b"after")
    assert bystander.get(root)[0] == b"after"


def test_unknown_opcode_gets_unimplemented_then_close(server: str, bystander: KazooClient) -> None:
    sock = _connected(server)
    try:
        sock.sendall(struct.pack("!iii", 8, 7, 9999))
        closed, received = _drain_until_closed(sock)
    finally:
        sock.close()
    assert closed
    codec = ClientConnection()
    codec.connected = True
    codec._pending.append((7, 9999))
    events = codec.receive_data(received)
    assert events and isinstance(events[0], ReplyEvent)
    assert (events[0].xid, events[0].err) == (7, Err.UNIMPLEMENTED)
    assert bystander.exists("/") is not None


def test_bad_input_is_logged(keeper_proc_for_logs: RoostProcess) -> None:
    address = keeper_proc_for_logs.address("keeper")
    sock = _connected(address)
    sock.sendall(struct.pack("!i", 0x7FFFFFF0))
    assert _drain_until_closed(sock)[0]
    sock.close()
    wait_until(lambda: "bad input: frame length 2147483632" in keeper_proc_for_logs.text(), 10,
               "the log line about the bad frame")


# ----------------------------------------------------------------------------------- limits


@pytest.fixture(scope="module")
def keeper_proc_for_logs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    with keeper_process(tmp_path_factory.mktemp("keeper-limits"),
                        extra={"maxOutstandingRequests": 4, "maxWatchesPerSession": 10,
                               "maxClientCnxns": 3}) as proc:
        yield proc


def test_max_client_connections_per_address(keeper_proc_for_logs: RoostProcess) -> None:
    address = keeper_proc_for_logs.address("keeper")
    keep = [RawClient(address) for _ in range(3)]
    try:
        extra = _open(address)
        try:
            assert _drain_until_closed(extra)[0]
        finally:
            extra.close()
        wait_until(lambda: "maxClientCnxns=3" in keeper_proc_for_logs.text(), 10, "the log line")
        # The three admitted sessions still work.
        for client in keep:
            assert client.request(PathWatchRequest("/", False, OpCode.EXISTS)).err == Err.OK
    finally:
        for client in keep:
            client.abandon()


def test_pipelined_requests_beyond_the_outstanding_limit_are_all_answered(
        keeper_proc_for_logs: RoostProcess) -> None:
    address = keeper_proc_for_logs.address("keeper")
    client = RawClient(address)
    try:
        root = unique_root("pipeline")
        writes = []
        from roost.keeper.acl import OPEN_ACL_UNSAFE
        from roost.wire.zk.records import CreateRequest

        # Interleave writes and reads well past maxOutstandingRequests (4): the server stops
        # reading for a while, but answers everything, in order.
        client.request(CreateRequest(root, b"", list(OPEN_ACL_UNSAFE), 0))
        for i in range(100):
            _, data = client.codec.send(CreateRequest(f"{root}/n{i}", b"x", list(OPEN_ACL_UNSAFE), 0))
            writes.append(data)
            _, data = client.codec.send(PathWatchRequest(f"{root}/n{i}", False, OpCode.EXISTS))
            writes.append(data)
        client.sock.sendall(b"".join(writes))
        replies: list[ReplyEvent] = []
        deadline = time.monotonic() + 30
        while len(replies) < 200 and time.monotonic() < deadline:
            data = client.sock.recv(1 << 16)
            assert data, "connection closed"
            replies.extend(e for e in client.codec.receive_data(data) if isinstance(e, ReplyEvent))
        assert len(replies) == 200
        assert all(reply.err == Err.OK for reply in replies)
        assert [reply.xid for reply in replies] == sorted(reply.xid for reply in replies)
    finally:
        client.abandon()


def test_watch_limit_closes_the_greedy_connection(keeper_proc_for_logs: RoostProcess) -> None:
    address = keeper_proc_for_logs.address("keeper")
    greedy = RawClient(address)
    other = RawClient(address)
    try:
        for i in range(10):
            assert greedy.request(PathWatchRequest(f"/w{i}", True, OpCode.EXISTS)).err == Err.NO_NODE
        greedy.sock.sendall(encode_request(99, PathWatchRequest("/w10", True, OpCode.EXISTS)))
        assert greedy.closed_by_server()
        wait_until(lambda: "watch limit" in keeper_proc_for_logs.text(), 10, "the log line")
        assert other.request(PathWatchRequest("/", True, OpCode.EXISTS)).err == Err.OK
    finally:
        greedy.abandon()
        other.abandon()
