"""One keeper member's request pipeline, sans-IO: clients in, replicated batches out and back.

The asyncio shell (`roost.keeper.server`) feeds the core decoded client events, wakes a proposer
task when a batch is ready, and hands every committed log entry to `apply`. The core keeps, per
client connection, a FIFO of its requests so that replies leave in request order (clients such as
kazoo insist on it):

  * reads are answered from the local tree at once when nothing is ahead of them, otherwise when
    the writes ahead of them have been applied (so a client reads its own writes);
  * writes (and connects, closes) become `Command`s in the member's next batch; the member
    proposes one batch at a time, so a connection's writes commit in the order it sent them. A
    batch given up on (no quorum, or the leader changed under it) closes its clients, which
    then see ConnectionLoss as with ZooKeeper, and starts a new epoch: should the abandoned
    batch still commit after a newer one, every member skips it;
  * `apply` runs every committed batch through the data tree on every member. Watch events fire
    right there, before any later reply on any connection (ZooKeeper's ordering guarantee), and
    the member that proposed a command fills in its reply.

Sessions: the member that owns a client touches its session on every request. The leader's
`SessionTracker` decides expiries and proposes them as replicated commands; followers forward
touches to the leader. A member without a leader for a while closes its clients so they move on.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from roost.keeper import acl as acls
from roost.keeper.commands import Batch, Command, CommandKind, command_size
from roost.keeper.reads import Reader
from roost.keeper.sessions import SessionTracker, negotiate_timeout
from roost.keeper.tree import DataTree
from roost.keeper.watches import WatchLimitExceeded, WatchManager
from roost.wire.zk.connection import (
    ConnectReceived,
    FourLetterWord,
    RequestReceived,
    UnknownRequest,
    encode_connect_response,
    encode_reply,
    encode_watch_event,
)
from roost.wire.zk.constants import WRITE_OPS, Err, KeeperState, OpCode
from roost.wire.zk.digest_md5 import DigestMd5Server, SaslFailure
from roost.wire.zk.errors import ZkCodecError
from roost.wire.zk.jute import JuteReader, JuteWriter
from roost.wire.zk.records import (
    AuthRequest,
    ConnectRequest,
    ConnectResponse,
    Id,
    PathRequest,
    Request,
    SaslRequest,
    SetWatchesRequest,
)

log = logging.getLogger("roost.keeper")

TOUCH_MAGIC = 0x524B5431  # "RKT1": a follower's batch of session touches for the leader
EXPIRED_PASSWD = bytes(16)


@dataclass(slots=True)
class CoreSettings:
    node_id: int
    tick_ms: int = 2000
    min_session_timeout_ms: int = 4000
    max_session_timeout_ms: int = 40000
    max_outstanding: int = 1000  # per connection; past it the shell stops reading from it
    max_watches_per_session: int = 100_000
    max_batch_bytes: int = 4 << 20
    max_batch_commands: int = 20_000
    extended_types_enabled: bool = False
    # A member that knows no leader for this long closes its clients (they try another member).
    leaderless_close_ms: int = 0
    container_check_ms: int = 60_000
    # ZooKeeper's zookeeper.DigestAuthenticationProvider.superDigest ("super:<base64 sha1>"): a
    # client that adds this digest also gets the id `super`, which passes every ACL check.
    super_digest: str = ""
    # ZooKeeper's skipACL: every client passes every ACL check (given the id `super` at connect).
    skip_acl: bool = False
    # SASL DIGEST-MD5: a user's password, or None (unknown user); None here: SASL is refused.
    sasl_password_of: Callable[[str], str | None] | None = field(default=None, repr=False)
    super_user: str = ""  # ZooKeeper's zookeeper.superUser: this SASL user gets `super`
    # Authentication providers beyond ip and digest this member has ("sasl", "x509"): ids of
    # those schemes are valid in ACLs created through it (see acl.PROVIDERS_SCHEME).
    providers: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        assert 0 <= self.node_id < 128, "node ids must fit in a session id's top byte"
        assert self.tick_ms > 0
        assert 0 < self.min_session_timeout_ms <= self.max_session_timeout_ms
        if self.leaderless_close_ms <= 0:
            self.leaderless_close_ms = 2 * self.tick_ms


class ClientLink(Protocol):
    """The transport of one client connection, as the core sees it."""

    peer_host: str

    def send(self, data: bytes) -> None: ...
    def close(self) -> None: ...
    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...


class CoreEnv(Protocol):
    """What the core needs from its shell: clocks, randomness, and a few actions."""

    def mono_ms(self) -> int: ...
    def wall_ms(self) -> int: ...
    def random_bits(self, bits: int) -> int: ...
    def secret(self, size: int) -> bytes: ...
    def wake_proposer(self) -> None: ...
    def start_sync(self, client: Client, slot: Slot) -> None: ...
    def start_reconfig(self, client: Client, slot: Slot) -> None: ...
    def send_to_leader(self, message: bytes) -> bool: ...
    def is_leader(self) -> bool: ...
    def leader_id(self) -> int | None: ...


# Slot states: a read waiting for its turn, a write/sync waiting for the log, a finished reply.
READ, WAIT, DONE = 0, 1, 2


class Slot:
    """One request in a connection's FIFO."""

    __slots__ = ("close_after", "opcode", "reply", "request", "started_ms", "state", "xid")

    def __init__(self, xid: int, opcode: int, request: Request | None, state: int, started_ms: int = 0):
        self.xid = xid
        self.opcode = opcode
        self.request = request
        self.state = state
        self.reply = b""
        self.close_after = False
        self.started_ms = started_ms


class Client:
    """The core's state for one client connection."""

    __slots__ = ("auth_ids", "closed", "connect", "early", "established", "link", "paused",
                 "queue", "received", "sasl", "sent", "session_id", "session_timeout")

    def __init__(self, link: ClientLink) -> None:
        self.link = link
        self.session_id = 0
        self.session_timeout = 0
        self.established = False
        self.connect: ConnectRequest | None = None
        # ZooKeeper gives every connection the id of its address (scheme "ip").
        self.auth_ids: tuple[Id, ...] = (Id("ip", link.peer_host),)
        self.queue: deque[Slot] = deque()
        self.early: list[RequestReceived] = []  # requests sent before the session was set up
        self.closed = False
        self.paused = False
        self.sasl: DigestMd5Server | None = None  # a SASL exchange under way or done
        self.received = 0
        self.sent = 0

    def send(self, data: bytes) -> None:
        if not self.closed:
            self.sent += 1
            self.link.send(data)

    def __repr__(self) -> str:
        return f"<client {self.link.peer_host} session 0x{self.session_id:x}>"


@dataclass(slots=True)
class _Waiter:
    """Who is waiting for a command of an in-flight batch proposed by this member."""

    client: Client | None
    slot: Slot | None


@dataclass(slots=True)
class CoreStats:
    packets_received: int = 0
    packets_sent: int = 0  # by connections already closed (add the open ones' counts)
    min_latency_ms: int = 0
    max_latency_ms: int = 0
    total_latency_ms: int = 0
    latency_count: int = 0
    batches_proposed: int = 0
    commands_proposed: int = 0

    def record_latency(self, ms: int) -> None:
        if self.latency_count == 0 or ms < self.min_latency_ms:
            self.min_latency_ms = ms
        self.max_latency_ms = max(self.max_latency_ms, ms)
        self.total_latency_ms += ms
        self.latency_count += 1


def encode_touches(session_ids: list[int]) -> bytes:
    w = JuteWriter().int(TOUCH_MAGIC).int(len(session_ids))
    for session_id in session_ids:
        w.long(session_id)
    return w.getvalue()


def decode_touches(message: bytes) -> list[int]:
    r = JuteReader(message)
    if r.int() != TOUCH_MAGIC:
        raise ZkCodecError("not a touch message")
    ids = [r.long() for _ in range(r.vector_length(8, null_allowed=False))]
    r.expect_end("touch message")
    return ids


class KeeperCore:
    def __init__(self, settings: CoreSettings, env: CoreEnv) -> None:
        self.settings = settings
        self.env = env
        self.tree = DataTree(settings.extended_types_enabled)
        self.watches: WatchManager[Client] = WatchManager(settings.max_watches_per_session)
        self.reader = Reader(self.tree, self.watches)
        # Buckets narrower than a tick let an expired session go soon after its timeout.
        self.tracker = SessionTracker(min(settings.tick_ms, 100))
        self.stats = CoreStats()
        # Tells this process's own batches apart from those of an earlier run of this member.
        self.incarnation = env.random_bits(62) + 1
        self.epoch = 0
        self.clients: set[Client] = set()
        self._by_session: dict[int, Client] = {}
        self._batch: list[Command] = []
        self._batch_waiters: list[_Waiter | None] = []
        self._batch_sizes: list[int] = []
        # sequence -> (commands, waiters) of this process's proposed, not yet applied batches
        self._in_flight: dict[int, tuple[list[Command], list[_Waiter | None]]] = {}
        self._next_sequence = 1
        self._pending_sessions: set[int] = set()
        self._expiring: set[int] = set()
        self._touched: set[int] = set()
        self._last_touch_forward = 0
        self._was_leader = False
        self._leaderless_since: int | None = None
        self._last_container_check = 0

    # ------------------------------------------------------------------------------ clients

    def open_client(self, link: ClientLink, extra_ids: tuple[Id, ...] = ()) -> Client:
        """A new connection; `extra_ids` are ids its transport proved (x509 from a TLS client
        certificate)."""
        client = Client(link)
        client.auth_ids = (*client.auth_ids, *extra_ids)
        if self.settings.providers:
            client.auth_ids = (*client.auth_ids, acls.providers_id(self.settings.providers))
        if self.settings.skip_acl:
            client.auth_ids = (*client.auth_ids, acls.SUPER_ID)
        self.clients.add(client)
        return client

    def close_client(self, client: Client, reason: str = "") -> None:
        """Close a connection (from either side) and forget its watches; the session lives on."""
        if client.closed:
            return
        client.closed = True
        self.stats.packets_sent += client.sent
        if reason:
            log.info("closing connection from %s (session 0x%x): %s", client.link.peer_host,
                     client.session_id, reason)
        self.watches.remove_watcher(client)
        if self._by_session.get(client.session_id) is client:
            del self._by_session[client.session_id]
        self.clients.discard(client)
        client.queue.clear()
        client.early.clear()
        client.link.close()

    def serving(self) -> bool:
        """Whether this member accepts clients: it knows a leader (a quorum is reachable)."""
        return self.env.leader_id() is not None

    def on_event(self, client: Client, event: object) -> None:
        """Handle one decoded event from a client's connection."""
        if client.closed:
            return
        self.stats.packets_received += 1
        client.received += 1
        if isinstance(event, RequestReceived):
            if not client.established:
                if len(client.early) >= self.settings.max_outstanding:
                    self.close_client(client, "too many requests before the session was set up")
                else:
                    client.early.append(event)
                return
            self._on_request(client, event)
        elif isinstance(event, ConnectReceived):
            self._on_connect(client, event.request)
        elif isinstance(event, UnknownRequest):
            # ZooKeeper's UnimplementedRequestProcessor: answer Unimplemented, then hang up.
            client.send(encode_reply(event.xid, self.tree.last_zxid, Err.UNIMPLEMENTED))
            self.close_client(client, f"unknown opcode {event.opcode}")
        elif isinstance(event, FourLetterWord):
            raise AssertionError("four-letter words are answered by the shell")

    # ------------------------------------------------------------------------------ connect

    def _on_connect(self, client: Client, request: ConnectRequest) -> None:
        client.connect = request
        if not self.serving():
            self.close_client(client, "no leader: refusing new sessions until a quorum is back")
            return
        tree = self.tree
        if request.last_zxid_seen > tree.last_zxid:
            self.close_client(
                client,
                f"client has seen zxid 0x{request.last_zxid_seen:x}, our last zxid is "
                f"0x{tree.last_zxid:x}; client must try another server",
            )
            return
        settings = self.settings
        timeout = negotiate_timeout(request.timeout, settings.min_session_timeout_ms,
                                    settings.max_session_timeout_ms)
        if request.session_id == 0:
            session_id = self._new_session_id()
            self._pending_sessions.add(session_id)
            client.session_timeout = timeout
            command = Command(CommandKind.CREATE_SESSION, session_id, timeout=timeout,
                              passwd=self.env.secret(16))
            self._enqueue(command, _Waiter(client, None))
            return
        info = tree.sessions.get(request.session_id)
        if info is None or info.passwd != request.passwd or request.session_id in self._expiring:
            # ZooKeeper's answer to an expired session or a wrong password: timeout 0, then close.
            client.send(encode_connect_response(
                ConnectResponse(0, 0, 0, EXPIRED_PASSWD, False, request.has_read_only)))
            self.close_client(client, f"session 0x{request.session_id:x} expired or bad password")
            return
        previous = self._by_session.get(request.session_id)
        if previous is not None and previous is not client:
            self.close_client(previous, "session moved to a new connection")
        self._touch(request.session_id)
        client.session_timeout = info.timeout
        self._establish(client, request.session_id, info.passwd)

    def _new_session_id(self) -> int:
        prefix = self.settings.node_id << 56
        for _ in range(1000):
            session_id = prefix | self.env.random_bits(56)
            if session_id > 0 and session_id not in self.tree.sessions and session_id not in self._pending_sessions:
                return session_id
        raise AssertionError("could not find a free session id")

    def _establish(self, client: Client, session_id: int, passwd: bytes) -> None:
        assert client.connect is not None
        client.session_id = session_id
        client.established = True
        self._by_session[session_id] = client
        client.send(encode_connect_response(ConnectResponse(
            0, client.session_timeout, session_id, passwd, False, client.connect.has_read_only)))
        early, client.early = client.early, []
        for event in early:
            if client.closed:
                return
            self._on_request(client, event)

    # ----------------------------------------------------------------------------- requests

    def _touch(self, session_id: int) -> None:
        if self._was_leader:
            self.tracker.touch(session_id, self.env.mono_ms())
        else:
            self._touched.add(session_id)

    def _on_request(self, client: Client, event: RequestReceived) -> None:
        self._touch(client.session_id)
        opcode = event.opcode
        if opcode == OpCode.PING:
            client.send(encode_reply(event.xid, self.tree.last_zxid, Err.OK))
            return
        if opcode == OpCode.AUTH:
            self._on_auth(client, event)
            return
        if opcode == OpCode.RECONFIG:
            slot = self.start_reconfig(client, event.xid, event.request)
            self.env.start_reconfig(client, slot)
        elif opcode in WRITE_OPS:
            slot = Slot(event.xid, opcode, event.request, WAIT, self.env.mono_ms())
            client.queue.append(slot)
            kind = CommandKind.CLOSE_SESSION if opcode == OpCode.CLOSE_SESSION else CommandKind.REQUEST
            command = Command(kind, client.session_id, xid=event.xid, opcode=opcode,
                              auth_ids=client.auth_ids, body=event.body, request=event.request)
            self._enqueue(command, _Waiter(client, slot))
        elif opcode == OpCode.SYNC:
            slot = Slot(event.xid, opcode, event.request, WAIT, self.env.mono_ms())
            client.queue.append(slot)
            self.env.start_sync(client, slot)
        elif opcode == OpCode.SASL:
            self._on_sasl(client, event)
            return
        elif not client.queue:
            self._execute_read(client, event.xid, event.request)
            return
        else:
            client.queue.append(Slot(event.xid, opcode, event.request, READ))
        if len(client.queue) >= self.settings.max_outstanding and not client.paused:
            client.paused = True
            client.link.pause_reading()

    def _on_auth(self, client: Client, event: RequestReceived) -> None:
        request = event.request
        assert isinstance(request, AuthRequest)
        ident = acls.authenticate(request.scheme, request.auth)
        if ident is None:
            client.send(encode_reply(event.xid, 0, Err.AUTH_FAILED))
            # The credential itself is never logged.
            self.close_client(client, f"authentication failed for scheme {request.scheme[:32]!r}")
            return
        # As ZooKeeper's DigestAuthenticationProvider: the super digest adds `super` first.
        if self.settings.super_digest and ident.scheme == "digest" and ident.id == self.settings.super_digest:
            self._add_id(client, acls.SUPER_ID)
        self._add_id(client, ident)
        client.send(encode_reply(event.xid, 0, Err.OK))

    def _on_sasl(self, client: Client, event: RequestReceived) -> None:
        """One step of a SASL DIGEST-MD5 exchange (ZooKeeper's SaslServerCallbackHandler):
        success adds `sasl:<user>` (and `super` for zookeeper.superUser); failure answers
        AuthFailed and closes the connection, as ZooKeeper does."""
        request = event.request
        assert isinstance(request, SaslRequest)
        password_of = self.settings.sasl_password_of
        if password_of is None:
            self._answer_now_or_in_order(client, encode_reply(event.xid, self.tree.last_zxid, Err.AUTH_FAILED),
                                         "SASL authentication refused: no SASL users are configured")
            return
        if client.sasl is None:
            client.sasl = DigestMd5Server(password_of, self.env.secret(16))
        try:
            token = client.sasl.step(request.token)
        except SaslFailure as exc:
            self._answer_now_or_in_order(client, encode_reply(event.xid, self.tree.last_zxid, Err.AUTH_FAILED),
                                         f"SASL authentication failed: {exc}")
            return
        username = client.sasl.username
        if client.sasl.complete and username is not None:
            if self.settings.super_user and username == self.settings.super_user:
                self._add_id(client, acls.SUPER_ID)
            self._add_id(client, Id("sasl", username))
            log.info("session 0x%x from %s authenticated with SASL DIGEST-MD5 as %r", client.session_id,
                     client.link.peer_host, username)
        reply = encode_reply(event.xid, self.tree.last_zxid, Err.OK, JuteWriter().buffer(token).getvalue())
        self._answer_now_or_in_order(client, reply)

    def _answer_now_or_in_order(self, client: Client, reply: bytes, close_reason: str = "") -> None:
        """Send a reply computed at once, after the replies still queued ahead of it; with a
        `close_reason`, then close the connection."""
        if not client.queue:
            client.send(reply)
            if close_reason:
                self.close_client(client, close_reason)
            return
        slot = Slot(0, OpCode.SASL, None, DONE)
        slot.reply = reply
        slot.close_after = bool(close_reason)
        if close_reason:
            log.info("closing connection from %s (session 0x%x): %s", client.link.peer_host,
                     client.session_id, close_reason)
        client.queue.append(slot)

    @staticmethod
    def _add_id(client: Client, ident: Id) -> None:
        if ident not in client.auth_ids:
            client.auth_ids = (*client.auth_ids, ident)

    def _execute_read(self, client: Client, xid: int, request: Request) -> None:
        err: int
        try:
            if request.opcode in (OpCode.SET_WATCHES, OpCode.SET_WATCHES2):
                assert isinstance(request, SetWatchesRequest)
                for event_type, path in self.reader.set_watches(request, client):
                    client.send(encode_watch_event(event_type, KeeperState.SYNC_CONNECTED, path))
                err, body = Err.OK, b""
            else:
                err, body = self.reader.execute(request, client, client.auth_ids, client.session_id)
        except WatchLimitExceeded as exc:
            self.close_client(client, f"watch limit: {exc}")
            return
        client.send(encode_reply(xid, self.tree.last_zxid, err, body))

    def _flush(self, client: Client) -> None:
        """Send the replies at the head of a client's FIFO that are ready, in order."""
        queue = client.queue
        while queue and not client.closed:
            slot = queue[0]
            if slot.state == WAIT:
                break
            queue.popleft()
            if slot.state == READ:
                assert slot.request is not None
                self._execute_read(client, slot.xid, slot.request)
                continue
            client.send(slot.reply)
            if slot.close_after:
                self.close_client(client)
                return
        if client.paused and len(queue) <= self.settings.max_outstanding // 2 and not client.closed:
            client.paused = False
            client.link.resume_reading()

    def sync_done(self, client: Client, slot: Slot) -> None:
        """The read barrier of a `sync` passed: this member has caught up with the leader."""
        if client.closed:
            return
        path = slot.request.path if isinstance(slot.request, PathRequest) else "/"
        slot.reply = encode_reply(slot.xid, self.tree.last_zxid, Err.OK, JuteWriter().ustring(path).getvalue())
        slot.state = DONE
        self._flush(client)

    def sync_failed(self, client: Client, reason: str) -> None:
        self.close_client(client, f"sync failed: {reason}")

    # ------------------------------------------------------------------------------ batching

    def _enqueue(self, command: Command, waiter: _Waiter | None) -> None:
        self._batch.append(command)
        self._batch_waiters.append(waiter)
        self._batch_sizes.append(command_size(command))
        self.env.wake_proposer()

    def take_batch(self) -> tuple[int, bytes] | None:
        """The next batch to propose as (sequence, entry), or None if nothing is waiting."""
        if not self._batch:
            return None
        settings = self.settings
        count = 0
        size = 0
        for command_bytes in self._batch_sizes:
            if count and (count >= settings.max_batch_commands or size + command_bytes > settings.max_batch_bytes):
                break
            size += command_bytes
            count += 1
        if count == len(self._batch):
            commands, self._batch = self._batch, []
            waiters, self._batch_waiters = self._batch_waiters, []
            self._batch_sizes = []
        else:
            commands, self._batch = self._batch[:count], self._batch[count:]
            waiters, self._batch_waiters = self._batch_waiters[:count], self._batch_waiters[count:]
            del self._batch_sizes[:count]
        sequence = self._next_sequence
        self._next_sequence += 1
        entry = Batch(settings.node_id, self.incarnation, self.epoch, sequence, self.env.wall_ms(),
                      commands).encode()
        self._in_flight[sequence] = (commands, waiters)
        self.stats.batches_proposed += 1
        self.stats.commands_proposed += count
        return sequence, entry

    def batch_failed(self, sequence: int, reason: str) -> None:
        """The proposal of a batch failed or was given up on: its clients must go elsewhere.

        The batch may still commit later (an unknown outcome, as ZooKeeper's ConnectionLoss);
        the new epoch makes every member skip it if it lands after a newer batch.
        """
        flight = self._in_flight.pop(sequence, None)
        if flight is None:
            return
        waiters = flight[1]
        self.epoch += 1
        now = self.env.mono_ms()
        for waiter in waiters:
            if waiter is not None and waiter.client is not None:
                self.close_client(waiter.client, f"write not committed: {reason}")
        # Expiries proposed in the failed batch are retried after another timeout.
        for session_id in list(self._expiring):
            info = self.tree.sessions.get(session_id)
            if info is not None and session_id not in self.tracker:
                self._expiring.discard(session_id)
                self.tracker.add(session_id, info.timeout, now)

    # --------------------------------------------------------------------------------- apply

    def apply(self, index: int, entry: bytes) -> None:
        """Apply one committed log entry (called by the replicator on every member, in order)."""
        if not entry:
            return
        batch, reader = Batch.decode_header(entry)
        tree = self.tree
        waiters = None
        flight = None
        if batch.origin_node == self.settings.node_id and batch.origin_incarnation == self.incarnation:
            flight = self._in_flight.pop(batch.sequence, None)
        if flight is not None:
            # Our own batch: we still hold its commands (with decoded requests); no need to
            # decode them again. The bytes in the log are exactly their encoding.
            batch.commands, waiters = flight
        else:
            batch.read_commands(reader)
        if not tree.admit(batch.origin_node, batch.origin_incarnation, batch.origin_epoch):
            log.info("skipping batch %d of member %d: abandoned by its proposer", batch.sequence,
                     batch.origin_node)
            assert waiters is None, "a skipped batch cannot still have waiting clients"
            return
        now = self.env.mono_ms()
        for position, command in enumerate(batch.commands):
            waiter = waiters[position] if waiters is not None else None
            result = tree.apply(command, batch.time_ms)
            if result.triggers:
                self._deliver(result.triggers)
            kind = command.kind
            if kind == CommandKind.CREATE_SESSION:
                self._pending_sessions.discard(command.session_id)
                if result.created_session is not None:
                    self.tracker.add(command.session_id, command.timeout, now)
                if waiter is not None and waiter.client is not None and not waiter.client.closed:
                    if result.err != Err.OK:
                        self.close_client(waiter.client, "session could not be created")
                    else:
                        self._establish(waiter.client, command.session_id, command.passwd)
                continue
            if result.closed_session is not None:
                self._session_closed(result.closed_session, waiter, result.zxid)
                continue
            if waiter is not None and waiter.slot is not None and waiter.client is not None:
                slot = waiter.slot
                slot.reply = encode_reply(slot.xid, result.zxid, result.err, result.body)
                slot.state = DONE
                self.stats.record_latency(now - slot.started_ms)
                self._flush(waiter.client)

    def apply_config(self, data_for_zxid: Callable[[int], bytes], mtime_ms: int) -> None:
        """A membership change was applied (on every member, in log order): render it into
        `/zookeeper/config` (`data_for_zxid` gets the zxid it takes, its version) and fire the
        watches on it."""
        tree = self.tree
        self._deliver(tree.set_config(data_for_zxid(tree.last_zxid + 1), mtime_ms))

    def start_reconfig(self, client: Client, xid: int, request: Request) -> Slot:
        """A `reconfig` request: it waits in the client's queue while the server carries it out."""
        slot = Slot(xid, OpCode.RECONFIG, request, WAIT, self.env.mono_ms())
        client.queue.append(slot)
        return slot

    def finish_reconfig(self, client: Client, slot: Slot, err: int, body: bytes = b"") -> None:
        if client.closed or slot.state == DONE:
            return
        slot.reply = encode_reply(slot.xid, self.tree.last_zxid, err, body)
        slot.state = DONE
        self._flush(client)

    def _deliver(self, triggers: list[tuple[int, str]]) -> None:
        watches = self.watches
        for event_type, path in triggers:
            watchers = watches.trigger(event_type, path)
            if watchers:
                frame = encode_watch_event(event_type, KeeperState.SYNC_CONNECTED, path)
                for client in watchers:
                    client.send(frame)

    def _session_closed(self, session_id: int, waiter: _Waiter | None, zxid: int) -> None:
        self.tracker.remove(session_id)
        self._expiring.discard(session_id)
        self._touched.discard(session_id)
        if waiter is not None and waiter.client is not None and waiter.slot is not None:
            # The client's own closeSession: reply in order, then hang up.
            slot = waiter.slot
            slot.reply = encode_reply(slot.xid, zxid, Err.OK)
            slot.state = DONE
            slot.close_after = True
            self._flush(waiter.client)
        client = self._by_session.get(session_id)
        if client is not None:
            self.close_client(client, "session closed" if waiter else "session expired")

    # ------------------------------------------------------------------------ time, sessions

    def tick(self) -> None:
        """Periodic work (the shell calls this every bucket, about 100 ms)."""
        env = self.env
        now = env.mono_ms()
        leader = env.is_leader()
        if leader and not self._was_leader:
            self.became_leader()
        self._was_leader = leader
        if leader:
            for session_id in self.tracker.expired(now):
                if session_id in self.tree.sessions and session_id not in self._expiring:
                    log.info("session 0x%x expired", session_id)
                    self._expiring.add(session_id)
                    self._enqueue(Command(CommandKind.EXPIRE_SESSION, session_id), None)
            if now - self._last_container_check >= self.settings.container_check_ms:
                self._last_container_check = now
                for path in self.tree.reapable(env.wall_ms(), 100):
                    self._enqueue(Command(CommandKind.DELETE_CONTAINER, 0, path=path), None)
        elif (self._touched and now - self._last_touch_forward >= self.settings.tick_ms // 2
              and env.send_to_leader(encode_touches(sorted(self._touched)))):
            self._touched.clear()
            self._last_touch_forward = now
        if env.leader_id() is None:
            if self._leaderless_since is None:
                self._leaderless_since = now
            elif now - self._leaderless_since >= self.settings.leaderless_close_ms and self.clients:
                for client in list(self.clients):
                    self.close_client(client, "no leader: lost quorum")
        else:
            self._leaderless_since = None

    def leadership_changed(self, is_leader: bool) -> None:
        """The replicator's leadership callback."""
        if is_leader and not self._was_leader:
            self.became_leader()
        elif not is_leader:
            self._was_leader = False

    def became_leader(self) -> None:
        """A new leader cannot know when sessions were last heard from: restart every clock."""
        self._was_leader = True
        self._expiring.clear()
        now = self.env.mono_ms()
        self.tracker.reset({sid: info.timeout for sid, info in self.tree.sessions.items()}, now)
        for session_id in self._touched:
            self.tracker.touch(session_id, now)
        self._touched.clear()

    def on_leader_message(self, from_node: int, message: bytes) -> None:
        """Touches forwarded by a follower for its clients' sessions."""
        try:
            session_ids = decode_touches(message)
        except ZkCodecError as exc:
            log.warning("bad touch message from member %d: %s", from_node, exc)
            return
        now = self.env.mono_ms()
        for session_id in session_ids:
            self.tracker.touch(session_id, now)

    # ------------------------------------------------------------------------------ snapshot

    def snapshot(self) -> bytes:
        return self.tree.snapshot()

    def restore(self, index: int, blob: bytes) -> None:
        """Replace the tree with a snapshot (start-up, or a leader catching this member up)."""
        self.tree = DataTree.from_snapshot(blob, self.settings.extended_types_enabled)
        self.reader.tree = self.tree
        # Watches and replies in flight refer to the old tree: make the clients start afresh.
        for client in list(self.clients):
            self.close_client(client, "state replaced from a snapshot")
        if self._was_leader:
            self.became_leader()

    # ----------------------------------------------------------------------------- numbers

    def outstanding(self) -> int:
        return sum(len(client.queue) for client in self.clients)
