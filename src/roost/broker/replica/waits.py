"""What delayed operations wait with: futures, one-shot timers, and "all of these are done".

The append door (`ReplicaManager.append`), the fetch door (`ReplicaManager.fetch`) and their
purgatory (`purgatory.DelayedProduce`, `purgatory.DelayedFetch`) decide when an answer may go; *how* they wait is
injected (`ReplicaManager.waits`), as the replication cores' clock is: a broker passes
`AsyncioWaits` (futures and timers of the running event loop), the replication simulation passes
its own (tests/sim/replication: futures resolved and timers fired on the simulated clock), so
that the simulation runs the real door, purgatory and long-poll.

A future here is anything with asyncio's callback interface (`done`, `set_result`, `result`,
`exception`, `add_done_callback`, `cancel`, `cancelled`); nothing awaits it inside the door, so no task is made.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol


class Timer(Protocol):
    def cancel(self) -> Any: ...


class Waits(Protocol):
    def future(self) -> Any:
        """A new, pending future."""

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> Timer:
        """Call `callback()` once `delay_s` seconds have passed, unless cancelled first."""

    def call_soon(self, callback: Callable[[], None]) -> None:
        """Call `callback()` on the next turn (after what the current one does)."""

    def time(self) -> float:
        """Seconds on a monotonic clock (only differences are used)."""

    def when_all(self, futures: list[Any]) -> Any:
        """A future done once every one of `futures` is, with each one's exception (or None)."""


class AsyncioWaits:
    """The running asyncio loop's futures and timers (a broker)."""

    def future(self) -> asyncio.Future[Any]:
        return asyncio.get_running_loop().create_future()

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(delay_s, callback)

    def call_soon(self, callback: Callable[[], None]) -> None:
        asyncio.get_running_loop().call_soon(callback)

    def time(self) -> float:
        return asyncio.get_running_loop().time()

    def when_all(self, futures: list[Any]) -> asyncio.Future[list[BaseException | None]]:
        done: asyncio.Future[list[BaseException | None]] = asyncio.get_running_loop().create_future()
        remaining = [len(futures)]

        def one_done(_: asyncio.Future[Any]) -> None:
            remaining[0] -= 1
            if remaining[0] == 0 and not done.done():
                done.set_result([None if f.cancelled() else f.exception() for f in futures])

        if not futures:
            done.set_result([])
        for future in futures:
            future.add_done_callback(one_done)
        return done
