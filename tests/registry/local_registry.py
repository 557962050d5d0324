"""A registry served over real HTTP on loopback from this test process, over an in-memory
`_schemas` log (roost.registry.memory_log): for the API's rules, through confluent-kafka's own
client, without a cluster. The cluster tests (test_registry_cluster.py) cover the Kafka side."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import web

from roost.registry.api import WRITE_TIMEOUT_S, AlwaysWriter, Leadership, RegistryApi, make_app
from roost.registry.memory_log import MemoryLog
from roost.registry.security import Security
from roost.registry.service import Registry
from roost.registry.store import RegistryState


@contextmanager
def local_registry(security: Security | None = None, leadership: Leadership | None = None, log: Any = None,
                   write_timeout_s: float = WRITE_TIMEOUT_S) -> Iterator[tuple[str, Registry]]:
    """`leadership` (default: always the writer) and `log` (default: a MemoryLog) stand in for
    the election and the topic, for the API's own rules about them."""
    loop = asyncio.new_event_loop()
    state = RegistryState()
    registry = Registry(state, log if log is not None else MemoryLog(state))
    api = RegistryApi(registry, leadership or AlwaysWriter(), security or Security(), write_timeout_s=write_timeout_s)
    runner = web.AppRunner(make_app(api))
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}", registry
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
