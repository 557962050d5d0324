"""The keeper's asyncio shell: client sockets, the proposer, timers, and the replicator.

`KeeperServer(config)` listens on the client port with an asyncio Protocol per connection (no
StreamReader loops: the Protocol path is several times cheaper per request). Bytes go through the
sans-IO codec (`roost.wire.zk.ServerConnection`) into the sans-IO member core
(`roost.keeper.core.KeeperCore`); writes leave as batches through `Replicator.propose`, one batch
in flight at a time, and come back through the replicator's apply callback on every member.

Limits: frames above jute.maxbuffer, malformed frames and unknown opcodes close that connection
with a log line; at most `maxClientCnxns` connections per client address (refusals logged once a
minute per address); a connection that has not asked for a session within
`zookeeper.nio.sessionlessCnxnTimeout` (10 s) is closed, as ZooKeeper's NIO server does; at most
`maxOutstandingRequests` queued requests per connection (then the socket is not read until
replies drain); at most `maxWatchesPerSession` watches per connection; a client that does not read
its replies is cut off when its send buffer passes `MAX_SEND_BUFFER`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import Counter
from typing import TYPE_CHECKING, Any, cast

from roost.keeper.acl import SUPER_ID
from roost.keeper.config import KeeperConfig
from roost.keeper.core import Client, CoreSettings, KeeperCore, Slot
from roost.keeper.fourletter import ServerFacts, answer
from roost.keeper.tree import CONFIG_PATH
from roost.wire.zk.connection import FourLetterWord, ServerConnection
from roost.wire.zk.constants import Err
from roost.wire.zk.errors import ZkCodecError
from roost.wire.zk.records import Id

if TYPE_CHECKING:
    from roost.keeper.membership import MembershipKeeper
    from roost.raft.replicator import Replicator

log = logging.getLogger("roost.keeper")

MAX_SEND_BUFFER = 64 << 20  # bytes queued towards one client before it is cut off
REFUSAL_LOG_EVERY_S = 60.0  # a flood of refused connections makes a line a minute per address
PROPOSE_TIMEOUT = 10.0
SYNC_TIMEOUT = 10.0


def build_replicator(config: KeeperConfig, fsync_on_loop: bool = True) -> Replicator:
    """The replicator a config asks for: a durable single member, or an ensemble member.

    `fsync_on_loop=False` moves log fsyncs to an I/O thread, for a keeper that shares its process
    (and event loop) with a broker: a little slower per write, but it never stalls the broker.
    """
    config.data_dir.mkdir(parents=True, exist_ok=True)
    from roost.raft.node import RaftReplicator, ReplicatorConfig
    from roost.raft.transport import TransportConfig

    transport = TransportConfig()
    if config.quorum_tls is not None and config.is_ensemble:
        from roost.keeper.tls import peer_client_context, server_context

        transport = TransportConfig(server_ssl=server_context(config.quorum_tls),
                                    client_ssl=peer_client_context(config.quorum_tls),
                                    ssl_handshake_timeout=config.quorum_tls.handshake_timeout_ms / 1000)
    raft_config = ReplicatorConfig(fsync=config.force_sync, fsync_on_loop=fsync_on_loop,
                                   snapshot_entries=config.snap_count, transport=transport)
    if not config.is_ensemble:
        from roost.raft.local import LocalReplicator

        return LocalReplicator(config.data_dir / "raft", config=raft_config)
    from roost.keeper.reconfig import initial_membership

    peers = {sid: (peer.host, peer.port) for sid, peer in config.servers.items()}
    return RaftReplicator(config.myid, peers, config.data_dir / "raft", raft_config,
                          learners=config.observers,
                          context=initial_membership(config, int(time.time() * 1000)).context)


class _ClientProtocol(asyncio.Protocol):
    """One client connection: bytes to events to the core, and the core's `ClientLink`."""

    __slots__ = ("client", "codec", "out", "peer_host", "server", "transport")

    def __init__(self, server: KeeperServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.peer_host = "?"
        self.codec = ServerConnection(server.config.jute_max_buffer)
        self.client: Client | None = None
        # Replies and events produced in one event-loop turn leave in one write (one syscall
        # instead of one per reply: the largest cost of a pipelining client otherwise).
        self.out: list[bytes] = []

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports do not subclass asyncio.Transport, but they behave like one.)
        self.transport = writer = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer_host = peer[0] if peer else "?"
        server = self.server
        limit = server.config.max_client_cnxns
        server.connections_per_host[self.peer_host] += 1
        if limit and server.connections_per_host[self.peer_host] > limit:
            if server.should_log_refusal(self.peer_host):
                log.warning("closing connections from %s: too many connections from this address "
                            "(maxClientCnxns=%d; said once a minute per address)", self.peer_host, limit)
            writer.abort()
            return
        extra: tuple[Id, ...] = ()
        if server.tls_context is not None and transport.get_extra_info("ssl_object") is not None:
            from roost.keeper.tls import x509_id

            ident = x509_id(transport.get_extra_info("ssl_object"))
            extra = (ident,) if ident is not None else ()
            if ident is not None and ident.id == server.config.x509_super_user:
                extra = (SUPER_ID, ident)
        self.client = server.core.open_client(self, extra)
        asyncio.get_running_loop().call_later(server.config.sessionless_cnxn_timeout / 1000,
                                              self._close_if_sessionless)

    def _close_if_sessionless(self) -> None:
        client = self.client
        if client is None or client.closed or client.connect is not None:
            return
        self.server.core.close_client(client, "no session asked for within zookeeper.nio.sessionlessCnxnTimeout "
                                      f"({self.server.config.sessionless_cnxn_timeout} ms)")

    def data_received(self, data: bytes) -> None:
        client = self.client
        if client is None or client.closed:
            return
        try:
            events = self.codec.receive_data(data)
        except ZkCodecError as exc:
            log.warning("closing connection from %s (session 0x%x): bad input: %s",
                        self.peer_host, client.session_id, exc)
            self.server.core.close_client(client)
            return
        core = self.server.core
        try:
            for event in events:
                if isinstance(event, FourLetterWord):
                    self._four_letter_word(event.command)
                    return
                core.on_event(client, event)
                if client.closed:
                    return
        except Exception:
            # A bug in handling one connection's request must not take the server down: log it
            # loudly and drop that connection only.
            log.exception("closing connection from %s: internal error while handling its request",
                          self.peer_host)
            core.close_client(client)

    def connection_lost(self, exc: Exception | None) -> None:
        server = self.server
        server.connections_per_host[self.peer_host] -= 1
        if server.connections_per_host[self.peer_host] <= 0:
            del server.connections_per_host[self.peer_host]
        if self.client is not None:
            server.core.close_client(self.client)

    def _four_letter_word(self, command: str) -> None:
        assert self.transport is not None and self.client is not None
        server = self.server
        text = answer(command, server.facts(), server.config.four_letter_whitelist)
        self.send(text.encode("utf-8"))
        server.core.close_client(self.client)

    # -- ClientLink

    def send(self, data: bytes) -> None:
        if not self.out:
            self.server.flush_later(self)
        self.out.append(data)

    def flush(self) -> None:
        transport = self.transport
        out, self.out = self.out, []
        if transport is None or transport.is_closing() or not out:
            return
        transport.write(b"".join(out) if len(out) > 1 else out[0])
        if transport.get_write_buffer_size() > MAX_SEND_BUFFER:
            log.warning("closing connection from %s: it does not read its replies (%d bytes queued)",
                        self.peer_host, transport.get_write_buffer_size())
            transport.abort()

    def close(self) -> None:
        if self.transport is not None:
            self.flush()  # what was sent before closing (a last reply, an expiry answer) goes out
            self.transport.close()

    def pause_reading(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()


class KeeperServer:
    """A keeper member serving ZooKeeper clients; see the module docstring."""

    def should_log_refusal(self, host: str) -> bool:
        now = time.monotonic()
        last = self._refusals_logged.get(host)
        if last is not None and now - last < REFUSAL_LOG_EVERY_S:
            return False
        if len(self._refusals_logged) >= 100_000:
            self._refusals_logged.clear()  # forget rather than grow without end
        self._refusals_logged[host] = now
        return True

    def __init__(self, config: KeeperConfig, replicator: Replicator | None = None) -> None:
        self.config = config
        self.replicator: Replicator | None = replicator
        self.core: KeeperCore
        self.connections_per_host: Counter[str] = Counter()
        self._refusals_logged: dict[str, float] = {}  # address -> monotonic time of its last refusal line
        self._unflushed: list[_ClientProtocol] = []  # connections with replies not yet written
        self._server: asyncio.base_events.Server | None = None
        self._secure_server: asyncio.base_events.Server | None = None
        self.tls_context = None
        if config.tls is not None and config.secure_client_port >= 0:
            from roost.keeper.tls import server_context

            self.tls_context = server_context(config.tls)
        self.secure_address: tuple[str, int] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._sync_tasks: set[asyncio.Task[None]] = set()
        self._proposer_wake = asyncio.Event()
        self._leader_changed = asyncio.Event()
        self._last_leader: int | None = None
        self._abandoned: set[asyncio.Future[int]] = set()
        self._started_mono = time.monotonic()
        self._address: tuple[str, int] | None = None
        self.membership: MembershipKeeper | None = None  # ensembles only

    # -- lifecycle

    async def start(self) -> tuple[str, int]:
        """Recover the tree, join the replication, and listen; returns the bound (host, port)."""
        config = self.config
        if self.replicator is None:
            self.replicator = build_replicator(config)
        replicator = self.replicator
        settings = CoreSettings(
            node_id=replicator.node_id,
            tick_ms=config.tick_time,
            min_session_timeout_ms=config.min_session_timeout,
            max_session_timeout_ms=config.max_session_timeout,
            max_outstanding=config.max_outstanding_requests,
            max_watches_per_session=config.max_watches_per_session,
            extended_types_enabled=config.extended_types_enabled,
            super_digest=config.super_digest,
            skip_acl=config.skip_acl,
            sasl_password_of=config.sasl_users.get if config.sasl_users else None,
            super_user=config.super_user,
            providers=frozenset({"sasl"} if config.sasl_users else set())
            | frozenset({"x509"} if config.secure_client_port >= 0 and config.tls is not None else set()),
        )
        self.core = KeeperCore(settings, self)
        replicator.set_state_machine(self._apply, self.core.snapshot, self.core.restore, self.flush_replies)
        replicator.set_leader_message_handler(self.core.on_leader_message)
        replicator.set_leadership_handler(self._on_leadership)
        from roost.raft.node import RaftReplicator

        if isinstance(replicator, RaftReplicator) and config.is_ensemble:
            from roost.keeper.membership import MembershipKeeper

            self.membership = MembershipKeeper(config, self.core, replicator)
            replicator.set_membership_handler(self.membership.on_membership_applied)
            replicator.set_address_resolver(self.membership.addresses)
        await replicator.start()
        self._last_leader = replicator.leader_id
        loop = asyncio.get_running_loop()
        if config.client_port >= 0:  # -1: TLS clients only
            self._server = await loop.create_server(
                lambda: _ClientProtocol(self), config.client_port_address, config.client_port,
                reuse_address=True, backlog=1024,
            )
            sockname = self._server.sockets[0].getsockname()
            self._address = (sockname[0], sockname[1])
        if self.tls_context is not None:
            assert config.tls is not None
            self._secure_server = await loop.create_server(
                lambda: _ClientProtocol(self), config.secure_client_port_address or config.client_port_address,
                config.secure_client_port, reuse_address=True, backlog=1024, ssl=self.tls_context,
                ssl_handshake_timeout=config.tls.handshake_timeout_ms / 1000,
            )
            secure = self._secure_server.sockets[0].getsockname()
            self.secure_address = (secure[0], secure[1])
            log.info("keeper %d serving TLS clients on %s:%d (client certificates: %s)", replicator.node_id,
                     *self.secure_address, config.tls.client_auth)
            if self._address is None:
                self._address = self.secure_address
        self._tasks = [
            asyncio.create_task(self._proposer(), name="keeper-proposer"),
            asyncio.create_task(self._ticker(), name="keeper-ticker"),
        ]
        log.info("keeper %d serving clients on %s:%d (tree at zxid 0x%x)", replicator.node_id,
                 *self.address, self.core.tree.last_zxid)
        return self.address

    @property
    def address(self) -> tuple[str, int]:
        assert self._address is not None, "start() first"
        return self._address

    async def stop(self) -> None:
        """Stop listening, close every client connection, and stop the replicator."""
        if self._server is not None:
            self._server.close()
        if self._secure_server is not None:
            self._secure_server.close()
            self._secure_server = None
        for task in self._tasks:
            task.cancel()
        waiting: list[asyncio.Future[Any]] = [*self._sync_tasks, *self._abandoned]
        for pending in waiting:
            pending.cancel()
        await asyncio.gather(*self._tasks, *self._sync_tasks, *self._abandoned, return_exceptions=True)
        if self.membership is not None:
            await self.membership.stop()
        if hasattr(self, "core"):
            for client in list(self.core.clients):
                self.core.close_client(client)
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 5.0)
            self._server = None
        if self.replicator is not None:
            await self.replicator.stop()

    # -- replicator callbacks

    def _apply(self, index: int, entry: bytes) -> None:
        self.core.apply(index, entry)

    def flush_later(self, connection: _ClientProtocol) -> None:
        """`connection` has output: write it at the end of this loop turn (one write for all its
        replies of the turn), or sooner through `flush_replies`."""
        if not self._unflushed:
            asyncio.get_running_loop().call_soon(self.flush_replies)
        self._unflushed.append(connection)

    def flush_replies(self) -> None:
        unflushed, self._unflushed = self._unflushed, []
        for connection in unflushed:
            connection.flush()

    def _on_leadership(self, is_leader: bool, leader_id: int | None) -> None:
        log.info("keeper %d: leader is now %s", self.core.settings.node_id, leader_id)
        # Only losing a known leader puts an in-flight batch in doubt; learning the first leader
        # (at start-up, or after none was known) does not.
        if self._last_leader is not None and leader_id != self._last_leader:
            self._leader_changed.set()
        self._last_leader = leader_id
        self.core.leadership_changed(is_leader)
        if self.membership is not None:
            self.membership.on_leadership(is_leader)

    # -- tasks

    async def _proposer(self) -> None:
        """Propose the core's batches one at a time (so each connection's writes stay ordered).

        If the leader changes while a batch is in flight, the batch is given up on at once (its
        clients are closed, as ZooKeeper's followers drop their clients when the leader goes)
        instead of waiting out the proposal timeout; the proposal itself runs on in the
        background and, should it still commit after newer batches, is skipped by every member.
        """
        from roost.raft.replicator import NoQuorum

        core = self.core
        replicator = self.replicator
        assert replicator is not None
        while True:
            await self._proposer_wake.wait()
            self._proposer_wake.clear()
            while True:
                batch = core.take_batch()
                if batch is None:
                    break
                sequence, entry = batch
                self._leader_changed.clear()
                proposal = asyncio.ensure_future(replicator.propose(entry, PROPOSE_TIMEOUT))
                leader_changed = asyncio.ensure_future(self._leader_changed.wait())
                try:
                    await asyncio.wait({proposal, leader_changed}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    leader_changed.cancel()
                if not proposal.done():
                    log.warning("keeper: leader changed while batch %d was in flight; giving up on it",
                                sequence)
                    core.batch_failed(sequence, "the leader changed")
                    self._abandoned.add(proposal)
                    proposal.add_done_callback(self._abandoned_done)
                    continue
                try:
                    proposal.result()
                except NoQuorum as exc:
                    log.warning("keeper: batch %d not committed: %s", sequence, exc)
                    core.batch_failed(sequence, str(exc))
                except Exception as exc:
                    log.exception("keeper: proposing batch %d failed", sequence)
                    core.batch_failed(sequence, repr(exc))

    def _abandoned_done(self, proposal: asyncio.Future[int]) -> None:
        self._abandoned.discard(proposal)
        if not proposal.cancelled():
            proposal.exception()  # retrieve it: an abandoned proposal's failure is expected

    async def _ticker(self) -> None:
        interval = self.core.tracker.bucket_ms / 1000.0
        while True:
            await asyncio.sleep(interval)
            try:
                self.core.tick()
            except Exception:
                # Logged on every occurrence; stopping the ticks would stop session expiry.
                log.exception("keeper tick failed")

    async def _sync(self, client: Client, slot: Slot) -> None:
        from roost.raft.replicator import NoQuorum

        assert self.replicator is not None
        try:
            await self.replicator.read_barrier(SYNC_TIMEOUT)
        except NoQuorum as exc:
            self.core.sync_failed(client, str(exc))
            return
        self.core.sync_done(client, slot)

    # -- CoreEnv

    def mono_ms(self) -> int:
        return int(time.monotonic() * 1000)

    def wall_ms(self) -> int:
        return int(time.time() * 1000)

    def random_bits(self, bits: int) -> int:
        return secrets.randbits(bits)

    def secret(self, size: int) -> bytes:
        return secrets.token_bytes(size)

    def wake_proposer(self) -> None:
        self._proposer_wake.set()

    def start_sync(self, client: Client, slot: Slot) -> None:
        task = asyncio.get_running_loop().create_task(self._sync(client, slot))
        self._sync_tasks.add(task)
        task.add_done_callback(self._sync_tasks.discard)

    def start_reconfig(self, client: Client, slot: Slot) -> None:
        if self.membership is None:
            self.core.finish_reconfig(client, slot, Err.RECONFIG_DISABLED)
            return
        self.membership.start(client, slot)

    def send_to_leader(self, message: bytes) -> bool:
        assert self.replicator is not None
        return self.replicator.send_to_leader(message)

    def is_leader(self) -> bool:
        assert self.replicator is not None
        return self.replicator.is_leader

    def leader_id(self) -> int | None:
        assert self.replicator is not None
        return self.replicator.leader_id

    # -- four-letter words

    def mode(self) -> str:
        if not self.config.is_ensemble:
            return "standalone"
        if self.is_leader():
            return "leader"
        return "observer" if getattr(self.replicator, "is_observer", False) else "follower"

    def _config_lines(self) -> list[str]:
        """`conf`'s lines: the static settings, then (as ZooKeeper 3.5+) the dynamic membership
        once `/zookeeper/config` holds one."""
        lines = self.config.describe()
        node = self.core.tree.get(CONFIG_PATH)
        if node is None or not node.data:
            return lines
        static = [line for line in lines if not line.startswith("server.")]
        return [*static, "membership: ", *node.data.decode(errors="replace").splitlines()]

    def facts(self) -> ServerFacts:
        core = self.core
        stats = core.stats
        tree = core.tree
        client_lines = [
            f" /{c.link.peer_host}:0[1](queued={len(c.queue)},recved={c.received},sent={c.sent},"
            f"sid=0x{c.session_id:x})"
            for c in core.clients
        ]
        avg = stats.total_latency_ms / stats.latency_count if stats.latency_count else 0.0
        return ServerFacts(
            mode=self.mode(),
            zxid=tree.last_zxid,
            node_count=tree.node_count,
            connections=len(core.clients),
            outstanding=core.outstanding(),
            packets_received=stats.packets_received,
            packets_sent=stats.packets_sent + sum(c.sent for c in core.clients),
            min_latency_ms=stats.min_latency_ms,
            avg_latency_ms=avg,
            max_latency_ms=stats.max_latency_ms,
            watch_count=core.watches.total(),
            watched_paths=core.watches.paths_watched(),
            ephemerals_count=tree.ephemeral_count(),
            approximate_data_size=tree.approximate_data_size(),
            sessions=len(tree.sessions),
            uptime_ms=int((time.monotonic() - self._started_mono) * 1000),
            client_lines=client_lines,
            config_lines=self._config_lines(),
            serving=core.serving(),
        )
