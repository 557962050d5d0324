"""The member core without sockets or raft: fake links, a fake clock, and batches applied by
hand, to check the pipeline's ordering, session expiry, touch forwarding and quorum loss."""

from __future__ import annotations

from dataclasses import dataclass, field

from roost.keeper.acl import OPEN_ACL_UNSAFE
from roost.keeper.core import Client, CoreSettings, KeeperCore, Slot, decode_touches
from roost.wire.zk.connection import (
    ClientConnection,
    ConnectedEvent,
    ConnectReceived,
    ReplyEvent,
    RequestReceived,
    WatchEvent,
)
from roost.wire.zk.constants import Err, OpCode
from roost.wire.zk.records import (
    ConnectRequest,
    CreateRequest,
    PathWatchRequest,
    Request,
    encode_request_body,
)


@dataclass
class FakeLink:
    peer_host: str = "127.0.0.1"
    sent: list[bytes] = field(default_factory=list)
    closed: bool = False
    paused: bool = False

    def send(self, data: bytes) -> None:
        self.sent.append(data)

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


@dataclass
class FakeEnv:
    now: int = 0
    leader: bool = True
    leader_node: int | None = 1
    to_leader: list[bytes] = field(default_factory=list)
    counter: int = 0

    def mono_ms(self) -> int:
        return self.now

    def wall_ms(self) -> int:
        return 1_700_000_000_000 + self.now

    def random_bits(self, bits: int) -> int:
        self.counter += 1
        return self.counter

    def secret(self, size: int) -> bytes:
        return bytes([self.counter % 256]) * size

    def wake_proposer(self) -> None:
        pass

    def start_reconfig(self, client: Client, slot: Slot) -> None:
        raise AssertionError("no reconfig in these tests")

    def start_sync(self, client: Client, slot: Slot) -> None:
        pass

    def send_to_leader(self, message: bytes) -> bool:
        self.to_leader.append(message)
        return True

    def is_leader(self) -> bool:
        return self.leader

    def leader_id(self) -> int | None:
        return self.leader_node


def commit_all(core: KeeperCore, index: list[int] = [0]) -> None:  # noqa: B006 (a counter)
    while (batch := core.take_batch()) is not None:
        index[0] += 1
        core.apply(index[0], batch[1])


class Session:
    """A client of the core, decoding what the core sends to it."""

    def __init__(self, core: KeeperCore, timeout: int = 4000) -> None:
        self.core = core
        self.link = FakeLink()
        self.client = core.open_client(self.link)
        self.codec = ClientConnection()
        self.xid = 0
        core.on_event(self.client, ConnectReceived(ConnectRequest(0, 0, timeout, 0, bytes(16), False)))

    def send(self, request: Request) -> None:
        self.xid += 1
        self.codec._pending.append((self.xid, request.opcode))
        self.core.on_event(self.client, RequestReceived(self.xid, request.opcode, request,
                                                        encode_request_body(request)))

    def received(self) -> list[object]:
        events = []
        for data in self.link.sent:
            events.extend(self.codec.receive_data(data))
        self.link.sent.clear()
        return events


def make_core(env: FakeEnv, **settings) -> KeeperCore:
    return KeeperCore(CoreSettings(node_id=1, tick_ms=500, min_session_timeout_ms=1000,
                                   max_session_timeout_ms=10000, **settings), env)


def test_connect_then_replies_in_request_order() -> None:
    env = FakeEnv()
    core = make_core(env)
    session = Session(core)
    session.send(PathWatchRequest("/", False, OpCode.EXISTS))  # sent before the session exists
    commit_all(core)
    events = session.received()
    assert isinstance(events[0], ConnectedEvent) and events[0].response.timeout == 4000
    assert isinstance(events[1], ReplyEvent) and events[1].err == Err.OK
    session.send(CreateRequest("/a", b"1", list(OPEN_ACL_UNSAFE), 0))
    session.send(PathWatchRequest("/a", False, OpCode.GET_DATA))  # must wait for the create
    assert session.received() == []
    commit_all(core)
    create_reply, read_reply = session.received()
    assert (create_reply.opcode, create_reply.err) == (OpCode.CREATE, Err.OK)
    assert read_reply.result[0] == b"1"
    assert read_reply.zxid == create_reply.zxid


def test_watch_event_goes_out_before_the_writers_reply() -> None:
    env = FakeEnv()
    core = make_core(env)
    watcher, writer = Session(core), Session(core)
    commit_all(core)
    watcher.received(), writer.received()
    watcher.send(PathWatchRequest("/w", True, OpCode.EXISTS))
    writer.send(CreateRequest("/w", b"", list(OPEN_ACL_UNSAFE), 0))
    commit_all(core)
    watcher_events = watcher.received()
    assert isinstance(watcher_events[-1], WatchEvent) and watcher_events[-1].event.path == "/w"
    assert isinstance(writer.received()[0], ReplyEvent)


def test_leader_expires_silent_sessions_and_deletes_their_ephemerals() -> None:
    env = FakeEnv()
    core = make_core(env)
    owner, observer = Session(core, timeout=1000), Session(core, timeout=10000)
    commit_all(core)
    core.tick()
    owner.send(CreateRequest("/e", b"", list(OPEN_ACL_UNSAFE), 1))
    commit_all(core)
    owner.received(), observer.received()
    observer.send(PathWatchRequest("/e", True, OpCode.EXISTS))
    for step in range(1, 15):  # the observer keeps pinging, the owner is silent
        env.now = step * 100
        observer.send(PathWatchRequest("/", False, OpCode.EXISTS))
        core.tick()
        commit_all(core)
    assert core.tree.get("/e") is None
    assert owner.link.closed and not observer.link.closed
    assert any(isinstance(e, WatchEvent) and e.event.path == "/e" for e in observer.received())


def test_follower_forwards_touches_and_closes_clients_without_a_leader() -> None:
    env = FakeEnv(leader=False, leader_node=2)
    core = make_core(env)
    session = Session(core)
    commit_all(core)
    session_id = session.client.session_id
    env.now = 300
    session.send(PathWatchRequest("/", False, OpCode.EXISTS))
    core.tick()
    assert session_id in decode_touches(env.to_leader[-1])
    env.leader_node = None
    env.now = 400
    core.tick()
    assert not session.link.closed
    env.now = 400 + 2 * 500
    core.tick()
    assert session.link.closed
    refused = Session(core)
    assert refused.link.closed and refused.link.sent == []


def test_a_new_leader_restarts_every_session_clock() -> None:
    env = FakeEnv(leader=False, leader_node=2)
    core = make_core(env)
    session = Session(core, timeout=1000)
    commit_all(core)
    session_id = session.client.session_id
    env.now = 5000  # long past the timeout, but a follower never expires sessions
    core.tick()
    commit_all(core)
    assert session_id in core.tree.sessions
    env.leader, env.leader_node = True, 1
    core.leadership_changed(True)
    env.now = 5900
    core.tick()
    commit_all(core)
    assert session_id in core.tree.sessions  # the clock restarted at 5000
    env.now = 6200
    core.tick()
    commit_all(core)
    assert session_id not in core.tree.sessions


def test_failed_batch_closes_its_clients() -> None:
    env = FakeEnv()
    core = make_core(env)
    session = Session(core)
    commit_all(core)
    session.send(CreateRequest("/a", b"", list(OPEN_ACL_UNSAFE), 0))
    sequence, _entry = core.take_batch()
    core.batch_failed(sequence, "no quorum")
    assert session.link.closed


def test_a_failed_batch_that_commits_late_is_skipped_after_newer_writes() -> None:
    env = FakeEnv()
    core = make_core(env)
    first, second = Session(core), Session(core)
    commit_all(core)
    first.send(CreateRequest("/late", b"old", list(OPEN_ACL_UNSAFE), 0))
    old_sequence, old_entry = core.take_batch()
    core.batch_failed(old_sequence, "the leader changed")  # first is closed: ConnectionLoss
    assert first.link.closed
    second.send(CreateRequest("/late", b"new", list(OPEN_ACL_UNSAFE), 0))
    commit_all(core)
    core.apply(1000, old_entry)  # the abandoned proposal lands after all
    assert core.tree.get("/late").data == b"new"


def test_outstanding_limit_pauses_and_resumes_reading() -> None:
    env = FakeEnv()
    core = make_core(env, max_outstanding=4)
    session = Session(core)
    commit_all(core)
    for i in range(4):
        session.send(CreateRequest(f"/n{i}", b"", list(OPEN_ACL_UNSAFE), 0))
    assert session.link.paused
    commit_all(core)
    assert not session.link.paused
    assert len([e for e in session.received() if isinstance(e, ReplyEvent)]) == 4
