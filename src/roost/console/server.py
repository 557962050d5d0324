"""Starting and stopping a console on the running event loop: `roost console` runs one until a
signal, `roost up` runs one beside the cluster it starts."""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from aiohttp import web

from roost.console.app import create_app
from roost.console.settings import ConsoleSettings, ServerTls

SHUTDOWN_TIMEOUT_S = 2.0


@dataclass
class RunningConsole:
    runner: web.AppRunner
    address: str  # HOST:PORT
    tls: bool = False

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.address}/"

    async def stop(self) -> None:
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
    # of `roost up` for aiohttp's default 60 s.
    runner = web.AppRunner(create_app(settings), access_log=None, handle_signals=False,
                           shutdown_timeout=SHUTDOWN_TIMEOUT_S)
    await runner.setup()
    site = web.TCPSite(runner, settings.host, settings.port, reuse_address=True, ssl_context=context)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    host, port = runner.addresses[0][:2]
    return RunningConsole(runner, f"[{host}]:{port}" if ":" in host else f"{host}:{port}", context is not None)
