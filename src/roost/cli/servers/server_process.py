"""The event loop a long-running server process runs on."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


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
