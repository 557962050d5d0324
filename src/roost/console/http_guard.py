"""The shell of roost.console.slow_clients: each connection's aiohttp protocol is wrapped in a
`GuardedConnection` that notes the bytes it receives and cuts it at its deadline, and a middleware
tells it when a request's head has arrived (the handler runs) and when its answer is done.

The console listens with `loop.create_server` itself (not aiohttp's TCPSite) so that the wrapper
stands between the loop and aiohttp, and so that a TLS handshake has the same bound (TCPSite
leaves asyncio's default of 60 s). The loop never tells a protocol of a TLS handshake that failed
or timed out, so the factory looks at each TLS connection once its handshake must be over.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from roost.console.slow_clients import (
    HANDSHAKE,
    IDLE,
    PARTIAL,
    CutSummary,
    HeadClock,
    answer_moving,
    cut_at,
    verdict,
)

log = logging.getLogger("roost.console.http")

HANDSHAKE_GRACE_S = 0.25  # after the loop's own handshake timer, so that it has fired

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class HeadGuard:
    """The header deadline of every connection of one console, and its summary line."""

    def __init__(self, timeout_s: float, tls: bool) -> None:
        self.timeout_s = timeout_s
        self.tls = tls
        self.summary = CutSummary()

    def factory(self, inner: Callable[[], asyncio.Protocol]) -> Callable[[], GuardedConnection]:
        def make() -> GuardedConnection:
            connection = GuardedConnection(self, inner())
            if self.tls and self.timeout_s > 0:
                loop = asyncio.get_running_loop()
                connection.handshake_timer = loop.call_at(loop.time() + self.timeout_s + HANDSHAKE_GRACE_S,
                                                          self._handshake_over, connection)
            return connection
        return make

    def _handshake_over(self, connection: GuardedConnection) -> None:
        if connection.transport is None:  # the loop gave the handshake up (and told no one)
            self.cut(HANDSHAKE)

    def cut(self, kind: str) -> None:
        loop = asyncio.get_running_loop()
        due = self.summary.cut(kind, loop.time())
        if due is not None:
            loop.call_at(due, self._flush)

    def _flush(self) -> None:
        line = self.summary.flush(self.timeout_s, asyncio.get_running_loop().time())
        if line is not None:
            log.warning(line)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        transport = request.transport
        connection = transport.get_protocol() if transport is not None else None
        if not isinstance(connection, GuardedConnection):
            return await handler(request)
        connection.request_started()
        try:
            return await handler(request)
        finally:
            connection.request_done()


class GuardedConnection(asyncio.Protocol):
    """aiohttp's protocol for one connection, with the header deadline around it."""

    def __init__(self, guard: HeadGuard, inner: asyncio.Protocol) -> None:
        self._guard = guard
        self._inner = inner
        self.transport: Any = None
        self._clock = HeadClock(waiting_since=0.0)
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        # On HTTPS, the guard's look once the handshake must be over: cancelled once it is done,
        # so that it holds nothing of the connection after.
        self.handshake_timer: asyncio.TimerHandle | None = None

    # asyncio.Protocol: aiohttp's, with the clock kept ---------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        if self.handshake_timer is not None:
            self.handshake_timer.cancel()
            self.handshake_timer = None
        self._clock.waiting_since = asyncio.get_running_loop().time()
        self._inner.connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if not self._clock.requests:
            self._clock.received += len(data)
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    # told by the middleware ------------------------------------------------------------------
    def request_started(self) -> None:
        self._clock.requests += 1

    def request_done(self) -> None:
        clock = self._clock
        clock.requests = max(0, clock.requests - 1)
        clock.answered += 1
        if not clock.requests:
            clock.waiting_since = asyncio.get_running_loop().time()
            clock.received = 0
            self._arm()

    # the deadline ----------------------------------------------------------------------------
    def _arm(self) -> None:
        if self._closed or self._timer is not None:
            return
        when = cut_at(self._guard.timeout_s, self._clock)
        if when is not None:
            self._timer = asyncio.get_running_loop().call_at(when, self._check)

    def _check(self) -> None:
        self._timer = None
        if self._closed or self.transport is None:
            return
        now = asyncio.get_running_loop().time()
        if answer_moving(self._clock, self.transport.get_write_buffer_size(), now):
            self._arm()
            return
        kind = verdict(self._guard.timeout_s, self._clock, now)
        if kind is None:
            self._arm()
            return
        self._closed = True
        self._guard.cut(kind)
        if kind == IDLE:
            self.transport.close()  # a browser's kept-alive connection: closed politely
        else:
            log.debug("closing a connection with no whole request within %g s (%s)", self._guard.timeout_s,
                      "part of a head" if kind == PARTIAL else "nothing sent")
            self.transport.abort()  # nothing owed to a client that sent no whole request
