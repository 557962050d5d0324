"""A long-running server's event loop and its collector's settings."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger("roost")


def settle_heap() -> None:
    """Once a server has started: what start-up made (modules, configuration, the loaded logs'
    indexes, the codecs) is moved out of the collector's generations with `gc.freeze`, so that a
    full collection, which otherwise walks every object the process holds, walks only what was
    made since. Full collections were seen stalling a broker's event loop for 18-28 ms; the
    objects made at start are never garbage, and freezing them is Python's documented way to
    keep collections from visiting them (measured in bench/broker_bench.py latency: p99.9 halved).
    Objects frozen are still freed when their last reference goes; only a cycle among them would
    stay, which start-up's long-lived objects do not form."""
    gc.collect()
    gc.freeze()
    log.debug("heap settled: %d objects frozen out of the collector's generations", gc.get_freeze_count())


def run_on_fast_loop(coro: Coroutine[Any, Any, int]) -> int:
    """Run `coro` on uvloop where it is installed (cheaper per request), else on asyncio's own loop."""
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    try:
        import uvloop

        loop_factory = uvloop.new_event_loop
    except ImportError:
        pass
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(coro)
