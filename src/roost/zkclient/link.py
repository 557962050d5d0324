"""One TCP connection to one ZooKeeper server, as an asyncio protocol around the sans-IO codec.

The link frames bytes through `roost.wire.zk.ClientConnection`, matches each reply to the call
that asked for it (replies come in request order; pings are matched by their own xid), keeps the
heartbeat, and reports to its owner (the client): the handshake, each reply, each notification,
and the end of the connection with the reason. It never blocks: everything runs in protocol
callbacks and loop timers.

Heartbeat, as ZooKeeper's Java client: a ping after a third of the session timeout without
sending, and the connection declared dead after two thirds of it without receiving anything.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any, Protocol

from roost.wire.zk.connection import ClientConnection, ConnectedEvent, ReplyEvent, WatchEvent
from roost.wire.zk.constants import AUTH_XID, PING_XID, OpCode
from roost.wire.zk.errors import ZkCodecError
from roost.wire.zk.records import AuthRequest, ConnectRequest, ConnectResponse, EmptyRequest, Request
from roost.zkclient.errors import ConnectionLossError, ZkError

log = logging.getLogger("roost.zkclient")

_PING = EmptyRequest(OpCode.PING)


class Call:
    """One request on its way: what to send, the future its caller awaits (None for the
    client's own requests, SetWatches and closeSession, whose replies are only logged), and how
    to register a watch when the reply comes."""

    __slots__ = ("future", "no_node_ok", "request", "sent_at", "watch_kind", "watcher", "xid")

    def __init__(self, request: Request, future: asyncio.Future[Any] | None, watcher: Any = None,
                 watch_kind: Any = None, no_node_ok: bool = False) -> None:
        self.request = request
        self.future = future
        self.watcher = watcher
        self.watch_kind = watch_kind
        self.no_node_ok = no_node_ok
        self.sent_at = 0.0
        self.xid = 0


class LinkOwner(Protocol):
    def on_handshake(self, link: ServerLink, response: ConnectResponse) -> None: ...
    def on_reply(self, link: ServerLink, call: Call, event: ReplyEvent) -> None: ...
    def on_watch(self, link: ServerLink, event: WatchEvent) -> None: ...
    def on_lost(self, link: ServerLink, calls: list[Call], error: ZkError) -> None: ...
    def on_writable(self, link: ServerLink) -> None: ...
    def on_auth_reply(self, link: ServerLink, err: int) -> None: ...


class ServerLink(asyncio.Protocol):
    def __init__(self, owner: LinkOwner, host: tuple[str, int], max_frame: int, max_request: int) -> None:
        self.owner = owner
        self.host = host
        self.name = f"{host[0]}:{host[1]}"
        self.codec = ClientConnection(max_frame=max_frame, max_request=max_request)
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()
        self.calls: deque[Call] = deque()  # sent, awaiting replies, in order
        self._ping_sent: deque[float] = deque()
        self.requested_session = 0
        self.handshake: asyncio.Future[Any] = self.loop.create_future()
        self.closed: asyncio.Future[None] = self.loop.create_future()
        self.established = False
        self.paused = False
        now = time.monotonic()
        self.last_send = now
        self.last_recv = now
        # The send time of the newest request the server has answered: the server heard from this
        # session at or after it, so the session lives at least until then + the session timeout.
        self.last_acked_send = 0.0
        self._failure: ZkError | None = None
        self._heartbeat: asyncio.TimerHandle | None = None
        self._ping_every = 0.0
        self._read_timeout = 0.0

    # ---------------------------------------------------------------------- asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's are not asyncio.Transport

    def data_received(self, data: bytes) -> None:
        self.last_recv = time.monotonic()
        try:
            events = self.codec.receive_data(data)
        except ZkCodecError as exc:
            log.warning("zkclient: malformed data from %s (%s); dropping the connection", self.name, exc)
            self.fail(ConnectionLossError(f"malformed data from {self.name}: {exc}"))
            return
        owner = self.owner
        for event in events:
            if self.closed.done() or self._failure is not None:
                return
            if type(event) is ReplyEvent:
                self._on_reply(event)
            elif type(event) is WatchEvent:
                owner.on_watch(self, event)
            elif type(event) is ConnectedEvent:
                self.last_acked_send = self.last_send  # the ConnectRequest, answered
                owner.on_handshake(self, event.response)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        error = self._failure or ConnectionLossError(
            f"connection to {self.name} lost" + (f": {exc}" if exc else " (closed by the server)"))
        if not self.handshake.done():
            self.handshake.set_exception(error)
            self.handshake.exception()  # retrieved here: the waiter may have timed out already
        calls = list(self.calls)
        self.calls.clear()
        self.owner.on_lost(self, calls, error)
        if not self.closed.done():
            self.closed.set_result(None)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self.owner.on_writable(self)

    # -------------------------------------------------------------------------------- sending

    def send_connect(self, request: ConnectRequest) -> None:
        assert self.transport is not None
        self.requested_session = request.session_id
        self.last_send = time.monotonic()
        self.transport.write(self.codec.connect(request))

    def send(self, call: Call) -> None:
        """Send `call`'s request (raises ZkCodecError, unsent, if it exceeds the request limit)."""
        assert self.transport is not None
        call.xid, data = self.codec.send(call.request)
        now = time.monotonic()
        call.sent_at = now
        self.last_send = now
        self.calls.append(call)
        self.transport.write(data)

    def send_auth(self, request: AuthRequest) -> None:
        """An addAuth packet (xid -4: its reply comes out of turn, matched by `on_auth_reply`)."""
        assert self.transport is not None
        _xid, data = self.codec.send(request)
        self.last_send = time.monotonic()
        self.transport.write(data)

    def send_ping(self) -> None:
        assert self.transport is not None
        _xid, data = self.codec.send(_PING)
        now = time.monotonic()
        self._ping_sent.append(now)
        self.last_send = now
        self.transport.write(data)

    def fail(self, error: ZkError) -> None:
        """Drop the connection because of `error` (reported to the owner by connection_lost)."""
        if self._failure is None:
            self._failure = error
        if self.transport is not None:
            self.transport.abort()
        elif not self.closed.done():
            self.connection_lost(None)

    # ------------------------------------------------------------------------------ heartbeat

    def start_heartbeat(self, session_timeout: float) -> None:
        assert session_timeout > 0
        self.established = True
        self._ping_every = session_timeout / 3
        self._read_timeout = session_timeout * 2 / 3
        self._schedule_heartbeat()

    def _schedule_heartbeat(self) -> None:
        now = time.monotonic()
        due = min(self.last_send + self._ping_every, self.last_recv + self._read_timeout)
        self._heartbeat = self.loop.call_later(max(due - now, 0.005), self._on_heartbeat)

    def _on_heartbeat(self) -> None:
        self._heartbeat = None
        if self.closed.done() or self._failure is not None:
            return
        now = time.monotonic()
        silent = now - self.last_recv
        if silent >= self._read_timeout:
            log.info("zkclient: nothing from %s for %.2f s; dropping the connection", self.name, silent)
            self.fail(ConnectionLossError(f"no data from {self.name} for {silent:.2f} s"))
            return
        if now - self.last_send >= self._ping_every:
            self.send_ping()
        self._schedule_heartbeat()

    # ------------------------------------------------------------------------------- replies

    def _on_reply(self, event: ReplyEvent) -> None:
        if event.xid == AUTH_XID:
            self.owner.on_auth_reply(self, event.err)
            return
        if event.xid == PING_XID:
            if self._ping_sent:
                self.last_acked_send = max(self.last_acked_send, self._ping_sent.popleft())
            return
        call = self.calls.popleft()  # the codec has checked that the xids match
        assert call.xid == event.xid, (call.xid, event.xid)
        self.last_acked_send = max(self.last_acked_send, call.sent_at)
        self.owner.on_reply(self, call, event)
