"""Starting and stopping a console on the running event loop: `roost console` runs one until a
signal, `roost up` runs one beside the cluster it starts."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from roost.console.app import create_app
from roost.console.settings import ConsoleSettings


@dataclass
class RunningConsole:
    runner: web.AppRunner
    url: str

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start_console(settings: ConsoleSettings) -> RunningConsole:
    """Listen on settings.host:settings.port (0: a free port); raises OSError if it cannot."""
    runner = web.AppRunner(create_app(settings), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, settings.host, settings.port, reuse_address=True)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    sockets = [s for s in runner.addresses]
    host, port = sockets[0][:2]
    shown = f"[{host}]" if ":" in host else host
    return RunningConsole(runner, f"http://{shown}:{port}/")
