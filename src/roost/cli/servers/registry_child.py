"""The schema registry (and REST proxy) a broker serves beside itself when
`schema.registry.listeners` is set: `roost schema-registry` in a child process that ends with the
broker (even on kill -9: roost.cli.servers.launch), not on the broker's event loop, for the reason
the console runs apart (up_console.py: page rendering and JSON would hold the broker's loop).

The child gets the registry settings the broker was given through its environment (a JSON
object in ROOST_REGISTRY_SETTINGS), not its command line, where `ps` would show secrets; it
reaches the cluster through this broker's own listener. When it cannot start (its port taken)
the broker carries on and one line says why.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from roost.cli.servers.launch import Refused, start_listening_child
from roost.cli.servers.up_console import ConsoleProcess

LISTENING = "roost: schema registry listening on "
SETTINGS_VARIABLE = "ROOST_REGISTRY_SETTINGS"
START_TIMEOUT_S = 300.0  # a loaded machine: it replays _schemas before it listens


def registry_values(config: Any) -> dict[str, Any]:
    from roost.config import REGISTRY_SETTINGS

    return {s.name: config[s.name] for s in REGISTRY_SETTINGS if s.name in config.given}


async def start_registry_child(config: Any, bootstrap: str, label: str = "") -> ConsoleProcess | None:
    """Start the child; returns once it listens (its listening line passed on), or None."""
    if not config["schema.registry.listeners"]:
        return None
    env = dict(os.environ)
    env[SETTINGS_VARIABLE] = json.dumps(registry_values(config))
    started = await start_listening_child(["schema-registry", "-b", bootstrap], listening=LISTENING,
                                          error_prefix="roost schema-registry: ", timeout_s=START_TIMEOUT_S, env=env)
    if isinstance(started, Refused):
        print(f"roost: schema registry: {started.reason}; running without it", flush=True)
        return None
    process, line = started
    print(line.replace("roost: ", f"roost: {label}", 1) if label else line, flush=True)
    return RegistryProcess(process, label)


class RegistryProcess(ConsoleProcess):
    """The child, whose end the broker reports when it was not asked for: a registry that is gone
    otherwise shows only as refused connections."""

    def __init__(self, process: asyncio.subprocess.Process, label: str) -> None:
        super().__init__(process)
        self.label = label
        self._stopping = False
        self._watch = asyncio.ensure_future(self._report_exit())

    async def _report_exit(self) -> None:
        code = await self.process.wait()
        if not self._stopping:
            how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
            print(f"roost: {self.label}schema registry ended unasked ({how}); running without it", flush=True)

    async def stop(self) -> None:
        self._stopping = True
        await super().stop()
        await asyncio.gather(self._watch, return_exceptions=True)
