"""Every broker's watch on /config/changes (Kafka's ZkNodeChangeNotificationListener for configs):
an AlterConfigs, served by any broker, writes /config/topics/<topic> (or /config/brokers/<id>) and
then a sequential `config_change_<seq>` naming that entity; each broker is told the entities named
by notifications newer than the last it handled, re-reads their configs and applies them.

Notifications already there when the broker starts are not replayed: partitions opened later read
their topic's configs from ZooKeeper anyway. Old notifications are deleted after `expiry_ms` by
whichever broker sees them first (Kafka: 15 minutes), so the directory does not grow forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from roost.broker.zk import layout
from roost.zkclient import NoNodeError, ZkClient, ZkError
from roost.zkclient.watches import WatchedEvent

log = logging.getLogger("roost.broker.zk")

EXPIRY_MS = 15 * 60 * 1000
RETRY_S = 1.0


def sequence_of(child: str) -> int:
    """The sequence number of `config_change_0000000042` (-1 for a name not of that form)."""
    digits = child.removeprefix(layout.CONFIG_CHANGE_PREFIX)
    return int(digits) if child.startswith(layout.CONFIG_CHANGE_PREFIX) and digits.isdigit() else -1


class ConfigChangeListener:
    def __init__(self, zk: ZkClient, on_change: Callable[[str], Awaitable[None]],
                 expiry_ms: int = EXPIRY_MS) -> None:
        self.zk = zk
        self.on_change = on_change
        self.expiry_ms = expiry_ms
        self.last_seen = -1  # the newest notification handled
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._processing = asyncio.Lock()  # one pass at a time: each notification is told once

    async def start(self) -> None:
        children = await self.zk.get_children(layout.CONFIG_CHANGES, watch=self._watch)
        self.last_seen = max((sequence_of(c) for c in children), default=-1)
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _watch(self, _event: WatchedEvent) -> None:
        # Also fires (with no path event) when the session expires: re-reading then re-arms it.
        self._wake.set()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.process()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # ZooKeeper unreachable for now: try again shortly
                log.warning("reading config change notifications failed (%r); retrying", error)
                await asyncio.sleep(RETRY_S)
                self._wake.set()

    async def process(self) -> None:
        """Handle the notifications newer than the last one handled, oldest first."""
        async with self._processing:
            await self._process()

    async def _process(self) -> None:
        children = await self.zk.get_children(layout.CONFIG_CHANGES, watch=self._watch)
        now = int(time.time() * 1000)
        for child in sorted((c for c in children if sequence_of(c) >= 0), key=sequence_of):
            path = f"{layout.CONFIG_CHANGES}/{child}"
            sequence = sequence_of(child)
            try:
                data, stat = await self.zk.get(path)
            except NoNodeError:
                continue
            if sequence > self.last_seen:
                try:
                    entity = layout.decode_entity_change(data)
                except layout.LayoutError as error:
                    log.warning("ignoring config change %s: %s", child, error)
                    entity = None
                if entity is not None:
                    try:
                        await self.on_change(entity)
                    except ZkError:
                        raise  # ZooKeeper unreachable: this notification is handled again later
                    except Exception:  # what the entity holds is unusable: not retried forever
                        log.exception("applying the config change %s (%s) failed", child, entity)
                self.last_seen = sequence
            if now - stat.ctime > self.expiry_ms:
                with contextlib.suppress(NoNodeError):
                    await self.zk.delete(path)
