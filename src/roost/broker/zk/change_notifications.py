"""Kafka's ZkNodeChangeNotificationListener: a directory of sequential `<prefix><seq>` znodes, each
announcing that something changed (a topic's configs, an ACL pattern, a user's credentials). Every
broker watches the directory and is told, oldest first, each notification newer than the last it
handled; notifications older than `expiry_ms` are deleted by whichever broker sees them first
(Kafka: 15 minutes), so the directory does not grow forever.

Notifications already there when the listener is armed are not replayed: the caller reads the
current state itself after `arm()` (watch first, then the full read: a change made in between is
told twice, never missed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from roost.zkclient import NoNodeError, ZkClient
from roost.zkclient.watches import WatchedEvent

log = logging.getLogger("roost.broker.zk")

EXPIRY_MS = 15 * 60 * 1000
RETRY_S = 1.0

# Told each new notification's name and data; raising ZkError means "ZooKeeper is unreachable:
# tell me again later", so a handler catches what it cannot use itself and logs it.
NotificationHandler = Callable[[str, bytes], Awaitable[None]]


def sequence_of(child: str, prefix: str) -> int:
    """The sequence number of `<prefix>0000000042` (-1 for a name not of that form)."""
    digits = child.removeprefix(prefix)
    return int(digits) if child.startswith(prefix) and digits.isdigit() else -1


class ChangeNotificationListener:
    def __init__(self, zk: ZkClient, directory: str, prefix: str, on_notification: NotificationHandler,
                 what: str, expiry_ms: int = EXPIRY_MS) -> None:
        self.zk = zk
        self.directory = directory
        self.prefix = prefix
        self.on_notification = on_notification
        self.what = what  # for the log: "config change", "ACL change"
        self.expiry_ms = expiry_ms
        self.last_seen = -1  # the newest notification handled
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._processing = asyncio.Lock()  # one pass at a time: each notification is told once

    async def arm(self) -> None:
        """Watch the directory; what is in it now counts as handled."""
        children = await self.zk.get_children(self.directory, watch=self._watch)
        self.last_seen = max((sequence_of(c, self.prefix) for c in children), default=-1)

    def listen(self) -> None:
        """Handle new notifications as they come (after `arm`), until `stop`."""
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
                log.warning("reading %s notifications in %s failed (%r); retrying", self.what, self.directory, error)
                await asyncio.sleep(RETRY_S)
                self._wake.set()

    async def process(self) -> None:
        """Handle the notifications newer than the last one handled, oldest first."""
        async with self._processing:
            await self._process()

    async def _process(self) -> None:
        children = await self.zk.get_children(self.directory, watch=self._watch)
        now = int(time.time() * 1000)
        numbered = sorted((sequence_of(c, self.prefix), c) for c in children if sequence_of(c, self.prefix) >= 0)
        for sequence, child in numbered:
            path = f"{self.directory}/{child}"
            try:
                data, stat = await self.zk.get(path)
            except NoNodeError:
                continue
            if sequence > self.last_seen:
                await self.on_notification(child, data)
                self.last_seen = sequence
            if now - stat.ctime > self.expiry_ms:
                with contextlib.suppress(NoNodeError):
                    await self.zk.delete(path)
