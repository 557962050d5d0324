"""Starting and stopping a console on the running event loop: `roost console` runs one until a
signal, `roost up` runs one beside the cluster it starts."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from roost.console.app import create_app
from roost.console.settings import ConsoleSettings

SHUTDOWN_TIMEOUT_S = 2.0


@dataclass
class RunningConsole:
    runner: web.AppRunner
    address: str  # HOST:PORT

    @property
    def url(self) -> str:
        return f"http://{self.address}/"

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start_console(settings: ConsoleSettings) -> RunningConsole:
    """Listen on settings.host:settings.port (0: a free port); raises OSError if it cannot."""
    # A short shutdown: an open watch stream (server-sent events) would otherwise hold the stop
    # of `roost up` for aiohttp's default 60 s.
    runner = web.AppRunner(create_app(settings), access_log=None, handle_signals=False,
                           shutdown_timeout=SHUTDOWN_TIMEOUT_S)
    await runner.setup()
    site = web.TCPSite(runner, settings.host, settings.port, reuse_address=True)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    host, port = runner.addresses[0][:2]
    return RunningConsole(runner, f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
