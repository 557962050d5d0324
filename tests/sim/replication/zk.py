"""A simulated ZooKeeper: the keeper's own `DataTree` (Roost's ZooKeeper state machine, checked
against Apache ZooKeeper by the keeper's differential tests) as the server, plus sessions that
expire, one-shot watches, and a client per broker process that behaves like `roost.zkclient`.

Server: writes are `DataTree.apply` commands (versions, czxids, ephemerals, multi all-or-nothing
with check ops are the tree's); watches are the keeper's `WatchManager`. A session expires when
it has had no contact (its broker is dead or cut off from ZooKeeper) for its timeout.

Client (`SimZkClient`), as roost.zkclient's rules say: a call made while disconnected waits for
the connection; a call whose connection drops while it is on the wire fails with
ConnectionLossError (it is not applied here); when no server answered for a session timeout the
client declares the session EXPIRED itself (waiting calls fail with SessionExpiredError,
listeners hear EXPIRED), and once a server is reachable it closes that old session if the server
still holds it and opens a new one (CONNECTED, new_session=True). Watch events reach the client
in order, after the network latency; while it is cut off they wait and arrive on reconnection
(the real client re-arms its watches, which fires changes made meanwhile), and an expired
session's watches are gone.

Simplifications: ZooKeeper itself never fails (no ensemble, no leader election of its own); an
op takes one network latency and is applied atomically when it arrives.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from roost.keeper.commands import Command, CommandKind
from roost.keeper.tree import DataTree, Znode
from roost.keeper.watches import WatchKind, WatchManager
from roost.wire.zk.constants import Err, EventType
from roost.wire.zk.jute import JuteReader
from roost.wire.zk.records import ErrorResult, MultiRequest, read_multi_response
from roost.zkclient import (
    OPEN_ACL_UNSAFE,
    ConnectionLossError,
    Create,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
    SetData,
    error_for,
    parse_connect_string,
)
from roost.zkclient.ops import Op, to_request
from tests.sim.replication.runtime import Task, TaskLoop, World

CONNECT = parse_connect_string("127.0.0.1:2181")


@dataclass(frozen=True)
class Event:
    """A watch event as a watcher sees it."""

    type: int  # EventType
    path: str


@dataclass
class ZkCall:
    """What a task yields to wait for its ZooKeeper connection (see SimZkClient.call)."""

    client: SimZkClient


WriteHook = Callable[[int, list[Op], int], None]  # (session, ops, zxid) after a successful write


class SimZooKeeper:
    def __init__(self, world: World) -> None:
        self.world = world
        self.tree = DataTree()
        self.watches: WatchManager[int] = WatchManager(10**7)
        self.clients: dict[int, SimZkClient] = {}  # session -> the client holding it
        self.owners: dict[int, int] = {}  # session -> broker id
        self.write_hooks: list[WriteHook] = []
        self._next_session = 0x1000
        self._lost: dict[int, int] = {}  # session -> since when nothing was heard from it

    # sessions -------------------------------------------------------------------------------
    def create_session(self, client: SimZkClient, timeout_ms: int) -> int:
        self._next_session += 1
        session = self._next_session
        result = self.tree.apply(Command(CommandKind.CREATE_SESSION, session, timeout=timeout_ms,
                                         passwd=b"sim"), self.world.now)
        assert result.err == Err.OK
        self.clients[session] = client
        self.owners[session] = client.broker_id
        return session

    def alive(self, session: int | None) -> bool:
        return session is not None and session in self.tree.sessions

    def contact_lost(self, session: int | None) -> None:
        """The session's client went silent (dead, or cut off): it expires a timeout later
        unless it is heard from again."""
        if session is None or not self.alive(session) or session in self._lost:
            return
        self._lost[session] = self.world.now
        timeout = self.tree.sessions[session].timeout
        skew = self.world.rng.randint(-timeout // 10, timeout // 10)
        self.world.after(timeout + skew, self._maybe_expire, session, self.world.now)

    def contact_restored(self, session: int | None) -> None:
        if session is not None:
            self._lost.pop(session, None)

    def _maybe_expire(self, session: int, since: int) -> None:
        if self._lost.get(session) == since:
            self.end_session(session, expired=True)

    def end_session(self, session: int, expired: bool) -> None:
        """The session expires (no contact for its timeout) or its client closes it."""
        if session not in self.tree.sessions:
            return
        kind = CommandKind.EXPIRE_SESSION if expired else CommandKind.CLOSE_SESSION
        result = self.tree.apply(Command(kind, session), self.world.now)
        self._lost.pop(session, None)
        self.watches.remove_watcher(session)
        self.clients.pop(session, None)
        self._fire(result.triggers)

    # reads ----------------------------------------------------------------------------------
    def _session(self, session: int) -> None:
        if session not in self.tree.sessions:
            raise SessionExpiredError(f"session 0x{session:x}")

    def get(self, session: int, path: str, watch: bool = False) -> tuple[bytes, Znode]:
        self._session(session)
        node = self.tree.get(path)
        if node is None:
            raise NoNodeError(path)
        if watch:
            self.watches.add(WatchKind.DATA, path, session)
        return node.data, node

    def exists(self, session: int, path: str, watch: bool = False) -> Znode | None:
        self._session(session)
        if watch:
            self.watches.add(WatchKind.DATA, path, session)
        return self.tree.get(path)

    def get_children(self, session: int, path: str, watch: bool = False) -> list[str]:
        self._session(session)
        node = self.tree.get(path)
        if node is None:
            raise NoNodeError(path)
        if watch:
            self.watches.add(WatchKind.CHILD, path, session)
        return sorted(node.children)

    # writes ---------------------------------------------------------------------------------
    def write(self, session: int, ops: list[Op], multi: bool) -> None:
        """Apply one op (multi=False) or a multi; raises the failing op's ZkError."""
        requests = [to_request(op, CONNECT, OPEN_ACL_UNSAFE) for op in ops]
        request = MultiRequest(requests) if multi else requests[0]
        result = self.tree.apply(Command(CommandKind.REQUEST, session, opcode=request.opcode, request=request),
                                 self.world.now)
        if result.err != Err.OK:
            raise error_for(result.err, f"{ops[0]!r}")
        if multi:
            results = read_multi_response(JuteReader(result.body))
            failed = [r for r in results if isinstance(r, ErrorResult)
                      and r.err not in (Err.OK, Err.RUNTIME_INCONSISTENCY)]
            if failed:
                raise error_for(failed[0].err, f"multi {ops!r}")
        for hook in self.write_hooks:
            hook(session, ops, result.zxid)
        self._fire(result.triggers)

    def _fire(self, triggers: list[tuple[int, str]]) -> None:
        for event_type, path in triggers:
            for session in sorted(self.watches.trigger(event_type, path)):
                client = self.clients.get(session)
                if client is not None:
                    client.notify(session, Event(event_type, path))


class SimZkClient:
    """One broker process's ZooKeeper client (see the module docstring)."""

    def __init__(self, server: SimZooKeeper, world: World, loop: TaskLoop, broker_id: int, timeout_ms: int,
                 link_up: Callable[[], bool], latency: Callable[[], int],
                 lost_reply: Callable[[list[Op]], bool]) -> None:
        self.server = server
        self.world = world
        self.loop = loop
        self.broker_id = broker_id
        self.session_timeout = timeout_ms
        self.session_id: int | None = None
        self.link_up = link_up
        self.latency = latency
        self.lost_reply = lost_reply
        self.closed = False
        self.listeners: list[Callable[[str, int, bool], None]] = []  # (state, session, new_session)
        self._watchers: dict[tuple[int, int, str], list[Callable[[Event], None]]] = {}
        self._blocked: list[tuple[Task, int]] = []
        self._held_events: list[tuple[int, Event]] = []
        self._last_delivery = 0
        self._cut_since: int | None = None  # when the link went down (None: up)
        self._cut_generation = 0
        self._orphans: list[int] = []  # sessions given up here that a server may still hold

    # the connection ---------------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        return (not self.closed and self.link_up() and self.session_id is not None
                and self.server.alive(self.session_id) and self._cut_since is None)

    def start(self) -> None:
        self._try_connect()

    def _try_connect(self) -> None:
        """Open a session when there is none and a server is reachable."""
        if self.closed or not self.loop.alive or not self.link_up():
            return
        self._cut_since = None
        for orphan in self._orphans:
            self.server.end_session(orphan, expired=False)
        self._orphans = []
        if self.session_id is not None and not self.server.alive(self.session_id):
            self._expired("the server expired the session while we were cut off")
        self.server.contact_restored(self.session_id)
        if self.session_id is None:
            self.session_id = self.server.create_session(self, self.session_timeout)
            self._tell("connected", self.session_id, True)
        held, self._held_events = self._held_events, []
        for session, event in held:
            if session == self.session_id:
                self._deliver_later(session, event)
        blocked, self._blocked = self._blocked, []
        for task, token in blocked:
            self.loop.resume_token(task, token, self.latency())

    def link_changed(self, up: bool) -> None:
        """The cluster's nemesis cut or healed this broker's link to ZooKeeper."""
        if self.closed or not self.loop.alive:
            return
        if up:
            self._try_connect()
            return
        if self._cut_since is None:
            self._cut_since = self.world.now
            self._cut_generation += 1
            self.server.contact_lost(self.session_id)
            # Past a session timeout without an answer the client gives the session up itself.
            skew = self.world.rng.randint(-self.session_timeout // 10, self.session_timeout // 10)
            self.world.after(self.session_timeout + skew, self._local_expiry, self._cut_generation)

    def _local_expiry(self, generation: int) -> None:
        if self.closed or not self.loop.alive or generation != self._cut_generation or self._cut_since is None:
            return
        if self.session_id is not None:
            self._expired("no server answered within the session timeout")
        self._try_connect()

    def _expired(self, reason: str) -> None:
        old = self.session_id
        assert old is not None
        self.session_id = None
        if self.server.alive(old):
            self._orphans.append(old)  # closed once a server is reached
        self._held_events = []
        self._watchers.clear()
        blocked, self._blocked = self._blocked, []
        for task, token in blocked:
            self.loop.resume_token(task, token, 0, error=SessionExpiredError(reason))
        self._tell("expired", old, False)

    def close(self) -> None:
        """A clean stop: the session ends at once, its ephemerals with it."""
        if self.session_id is not None and self.server.alive(self.session_id) and self.link_up():
            self.server.end_session(self.session_id, expired=False)
        self.closed = True

    def _tell(self, state: str, session: int, new_session: bool) -> None:
        for listener in list(self.listeners):
            listener(state, session, new_session)

    # watches ----------------------------------------------------------------------------------
    def _add_watcher(self, kind: int, path: str, watcher: Callable[[Event], None] | None) -> None:
        if watcher is not None and self.session_id is not None:
            callbacks = self._watchers.setdefault((self.session_id, kind, path), [])
            if watcher not in callbacks:
                callbacks.append(watcher)

    def notify(self, session: int, event: Event) -> None:
        if self.closed or not self.loop.alive:
            return
        if not self.link_up() or self._cut_since is not None:
            self._held_events.append((session, event))
            return
        self._deliver_later(session, event)

    def _deliver_later(self, session: int, event: Event) -> None:
        # In order: never before an event sent earlier.
        when = max(self.world.now + self.latency(), self._last_delivery)
        self._last_delivery = when
        self.world.at(when, self._deliver, session, event)

    def _deliver(self, session: int, event: Event) -> None:
        if self.closed or not self.loop.alive or session != self.session_id:
            return
        kinds = {EventType.NODE_CHILDREN_CHANGED: (WatchKind.CHILD,),
                 EventType.NODE_DELETED: (WatchKind.DATA, WatchKind.CHILD)}.get(event.type, (WatchKind.DATA,))
        for kind in kinds:
            for callback in self._watchers.pop((session, kind, event.path), []):
                callback(event)

    # calls ------------------------------------------------------------------------------------
    def dispatch(self, task: Task, request: ZkCall, token: int) -> None:
        """A task waits for the connection: now (after a latency) or once it is back."""
        if self.connected:
            self.loop.resume_token(task, token, self.latency())
        else:
            self._blocked.append((task, token))

    def _on_wire(self) -> Generator[Any, Any, int]:
        yield ZkCall(self)
        if not self.connected:  # the connection dropped while the request was out
            raise ConnectionLossError("connection lost with the request in flight")
        assert self.session_id is not None
        return self.session_id

    def get(self, path: str, watch: Callable[[Event], None] | None = None) -> Generator[Any, Any, tuple[bytes, Znode]]:
        session = yield from self._on_wire()
        data, node = self.server.get(session, path, watch is not None)
        self._add_watcher(WatchKind.DATA, path, watch)
        return data, node

    def exists(self, path: str, watch: Callable[[Event], None] | None = None) -> Generator[Any, Any, Znode | None]:
        session = yield from self._on_wire()
        node = self.server.exists(session, path, watch is not None)
        self._add_watcher(WatchKind.DATA, path, watch)
        return node

    def get_children(self, path: str, watch: Callable[[Event], None] | None = None) -> Generator[Any, Any, list[str]]:
        session = yield from self._on_wire()
        children = self.server.get_children(session, path, watch is not None)
        self._add_watcher(WatchKind.CHILD, path, watch)
        return children

    def write(self, ops: list[Op], multi: bool = True) -> Generator[Any, Any, None]:
        session = yield from self._on_wire()
        self.server.write(session, ops, multi)
        if self.lost_reply(ops):
            # Applied, but the connection dropped before the reply came back.
            raise ConnectionLossError(f"connection lost after the {'multi' if multi else 'write'} was applied")

    def create(self, path: str, data: bytes = b"", ephemeral: bool = False) -> Generator[Any, Any, Znode]:
        yield from self.write([Create(path, data, ephemeral=ephemeral)], multi=False)
        node = self.server.tree.get(path)
        assert node is not None
        return node

    def set(self, path: str, data: bytes, version: int = -1) -> Generator[Any, Any, None]:
        yield from self.write([SetData(path, data, version)], multi=False)

    def ensure_path(self, path: str) -> Generator[Any, Any, None]:
        parts = [p for p in path.split("/") if p]
        for depth in range(1, len(parts) + 1):
            prefix = "/" + "/".join(parts[:depth])
            if self.server.tree.get(prefix) is None:
                try:
                    yield from self.write([Create(prefix)], multi=False)
                except NodeExistsError:
                    pass  # created meanwhile by someone else
