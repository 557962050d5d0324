"""Helpers for the zkclient tests: run a scenario on uvloop with a bound, record session events
and watch events, and a proxy that can corrupt what a server sends."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import uvloop

from roost.zkclient import SessionEvent, SessionState, WatchedEvent, ZkClient

SCENARIO_TIMEOUT = 60.0  # against hangs only; no test passes or fails on a time


def run(scenario: Callable[[], Awaitable[Any]], timeout: float = SCENARIO_TIMEOUT) -> Any:
    """Run `scenario()` on a fresh uvloop loop (the broker's loop), bounded by `timeout`."""

    async def bounded() -> Any:
        async with asyncio.timeout(timeout):
            return await scenario()

    return uvloop.run(bounded())


def unique(prefix: str) -> str:
    return f"/{prefix}-{os.getpid()}-{time.monotonic_ns()}"


class Events:
    """Collects session events (as a listener) or watch events (as a watcher), and waits for them."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._changed = asyncio.Event()

    def __call__(self, item: SessionEvent | WatchedEvent) -> None:
        self.items.append(item)
        self._changed.set()

    async def wait_for(self, predicate: Callable[[Any], bool], timeout: float = 30.0, start: int = 0) -> Any:
        """The first item from index `start` that satisfies `predicate` (waits, bounded)."""
        async with asyncio.timeout(timeout):
            while True:
                for item in self.items[start:]:
                    if predicate(item):
                        return item
                self._changed.clear()
                await self._changed.wait()

    async def state(self, state: SessionState, timeout: float = 30.0, start: int = 0) -> SessionEvent:
        return await self.wait_for(lambda e: e.state is state, timeout, start)


async def connected(hosts: str, session_timeout: float = 10.0, **kwargs: Any) -> tuple[ZkClient, Events]:
    client = ZkClient(hosts, session_timeout=session_timeout, **kwargs)
    events = Events()
    client.add_listener(events)
    await client.start()
    return client, events


async def round_trip(client: ZkClient) -> None:
    """A read whose reply comes after every notification the server sent before it, and whose
    caller resumes after those notifications' callbacks ran."""
    await client.exists("/")


class CorruptingProxy:
    """Forwards one port to a server; `corrupt(data)` replaces the next chunk the server sends to
    the client with `data` (a garbage reply)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._garbage: bytes | None = None
        self.injected = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"{host}:{port}"

    def corrupt(self, garbage: bytes) -> None:
        self._garbage = garbage

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection(*self.target)
        self._writers |= {client_writer, server_writer}
        pumps = [asyncio.ensure_future(self._pump(client_reader, server_writer, False)),
                 asyncio.ensure_future(self._pump(server_reader, client_writer, True))]
        self._tasks.update(pumps)
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in pumps:
                task.cancel()
                self._tasks.discard(task)
            for writer in (client_writer, server_writer):
                writer.transport.abort()
                self._writers.discard(writer)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, to_client: bool) -> None:
        try:
            while data := await reader.read(65536):
                if to_client and self._garbage is not None:
                    data, self._garbage = self._garbage, None
                    self.injected += 1
                writer.write(data)
                await writer.drain()
        except (OSError, ConnectionError):
            return
