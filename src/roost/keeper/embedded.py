"""Host a standalone keeper inside another asyncio program (the `roost up` command does this)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roost.keeper.config import KeeperConfig
from roost.keeper.server import KeeperServer, build_replicator


class KeeperHandle:
    """A running embedded keeper: its client address and a way to stop it."""

    def __init__(self, server: KeeperServer) -> None:
        self.server = server

    @property
    def address(self) -> tuple[str, int]:
        return self.server.address

    async def close(self) -> None:
        await self.server.stop()


async def start_embedded_keeper(data_dir: Path, host: str, port: int,
                                settings: Mapping[str, Any] | None = None) -> KeeperHandle:
    """Start a standalone keeper storing its state under `data_dir`, listening on host:port.

    `settings` uses the keeper config's ZooKeeper names (tickTime, maxSessionTimeout, ...);
    `port` 0 picks a free port (read it from `handle.address`). Raises ConfigError for invalid
    settings.
    """
    values = dict(settings or {})
    values.update({"dataDir": str(data_dir), "clientPortAddress": host, "clientPort": port})
    config = KeeperConfig.from_mapping(values)
    # The broker shares this event loop: keep the keeper's fsyncs off it.
    server = KeeperServer(config, build_replicator(config, fsync_on_loop=False))
    await server.start()
    return KeeperHandle(server)
