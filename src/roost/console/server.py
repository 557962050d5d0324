"""Starting and stopping a console on the running event loop: `roost console` runs one until a
signal, `roost up` runs one beside the cluster it starts. It listens through
roost.console.http_guard (a connection sending no whole request head within the header timeout
is closed; the same bound for a TLS handshake), with aiohttp's bounds on a head's size."""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass

from aiohttp import web

from roost.console.app import create_app
from roost.console.http_guard import HeadGuard
from roost.console.settings import ConsoleSettings, ServerTls

SHUTDOWN_TIMEOUT_S = 2.0
# A request head's bounds (aiohttp's defaults, said here so they are Roost's decision): a request
# line or header field over 8190 bytes, or more than 128 fields, is answered 400 at once. What a
# slow client's partial head holds is at most these, for at most the header timeout.
MAX_LINE_BYTES, MAX_FIELD_BYTES, MAX_HEADERS = 8190, 8190, 128


@dataclass
class RunningConsole:
    runner: web.AppRunner
    address: str  # HOST:PORT
    tls: bool = False
    server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.address}/"

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()  # no new connections; the runner's cleanup ends the open ones
        await self.runner.cleanup()


def server_context(tls: ServerTls) -> ssl.SSLContext:
    """TLS 1.2 and 1.3 only, with the console's certificate chain and key (ssl.SSLError, an
    OSError, when they cannot be read)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(tls.certificate, tls.key, password=tls.key_password)
    return context


async def start_console(settings: ConsoleSettings) -> RunningConsole:
    """Listen on settings.host:settings.port (0: a free port), over HTTPS when settings.tls says
    so; raises OSError if it cannot (a certificate that cannot be loaded included)."""
    context = server_context(settings.tls) if settings.tls is not None else None
    # A short shutdown: an open watch stream (server-sent events) would otherwise hold the stop
    # of `roost up` for aiohttp's default 60 s. aiohttp's own keep-alive timer stays at its
    # default (an hour): the guard's header timeout, which also sees partial heads, comes first.
    guard = HeadGuard(settings.header_timeout_s, context is not None)
    app = create_app(settings)
    app.middlewares.insert(0, guard.middleware)
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=SHUTDOWN_TIMEOUT_S,
                           max_line_size=MAX_LINE_BYTES, max_field_size=MAX_FIELD_BYTES, max_headers=MAX_HEADERS)
    await runner.setup()
    assert runner.server is not None
    # The header timeout bounds a TLS handshake too (else asyncio's 60 s).
    handshake_s = settings.header_timeout_s if settings.header_timeout_s > 0 else None
    try:
        server = await asyncio.get_running_loop().create_server(
            guard.factory(runner.server), settings.host, settings.port, reuse_address=True, backlog=1024, ssl=context,
            ssl_handshake_timeout=handshake_s if context is not None else None)
    except BaseException:
        await runner.cleanup()
        raise
    host, port = server.sockets[0].getsockname()[:2]
    return RunningConsole(runner, f"[{host}]:{port}" if ":" in host else f"{host}:{port}", context is not None,
                          server)
