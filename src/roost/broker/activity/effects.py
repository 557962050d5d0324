"""What the replication cores ask their shells to do, and the asyncio shell that does it.

The follower's fetch loop (`roost.broker.replica.fetcher.LeaderFetcher.run`) and the ISR
manager's AlterPartition sender and shrink check (`roost.broker.replica.isr`) decide everything
themselves and do no I/O: each is a generator that yields an *effect* (sleep, wait for work, send
a request to a broker, make logs durable) and is resumed with its outcome, or has `Unreachable`
thrown in when a request found no answer. Time comes from one injected clock (milliseconds).

Two shells run the same generators: `AsyncioShell` here (the broker's sockets, its group committer
and its event loop), and the replication simulation's (tests/sim/replication: a simulated network,
committer and clock). Neither decides anything: a shell maps an effect to its I/O and nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Protocol

from roost.broker.net.peer import PeerError
from roost.wire.kafka import KafkaCodecError

log = logging.getLogger("roost.broker.replica")

@dataclass(slots=True)
class Sleep:
    """Resume after `ms` milliseconds (with None)."""

    ms: float


@dataclass(slots=True)
class WaitForWork:
    """Resume (with None) once the core's `wake` is called or `timeout_ms` passes."""

    timeout_ms: float


@dataclass(slots=True)
class Request:
    """Send one request to broker `broker`; resumed with the answer, or `Unreachable` thrown in."""

    broker: int
    api_key: int
    version: int
    body: dict[str, Any]
    timeout_ms: float


@dataclass(slots=True)
class Sync:
    """Make these partition logs durable (one fsync request each); resumed with one outcome per
    log, in order: None, or the exception its fsync failed with."""

    logs: tuple[Any, ...]


Effect = Sleep | WaitForWork | Request | Sync
# A core's activity: yields effects, receives their outcomes, returns when done.
Activity = Generator[Effect, Any, None]


class Unreachable(Exception):
    """A request found no answer: no address known for the broker (`no_address`), the connection
    failed or timed out, or the answer could not be decoded."""

    def __init__(self, broker: int, reason: str, no_address: bool = False) -> None:
        super().__init__(f"broker {broker}: {reason}")
        self.broker = broker
        self.no_address = no_address


class Committer(Protocol):
    def request(self, partition_log: Any) -> asyncio.Future[None]: ...


class PeerLookup(Protocol):
    def __call__(self, broker: int) -> Any: ...


class ShellTask(Protocol):
    """A running activity, as its core's owner sees it."""

    def wake(self) -> None: ...

    def done(self) -> bool: ...

    def cancel(self) -> None: ...

    async def close(self) -> None: ...


# How an owner starts an activity on its shell: (the activity, a name for logs) -> its task.
Spawn = Callable[[Activity, str], ShellTask]


class AsyncioShell:
    """Runs activities on the running asyncio loop, with the broker's peers and group committer.
    A subclass may perform more effects (the controller's ZooKeeper calls); the exceptions in
    `thrown_in` are thrown into the activity, any other one ends it."""

    thrown_in: tuple[type[BaseException], ...] = (Unreachable,)

    def __init__(self, peer_for: PeerLookup, committer: Committer | None = None) -> None:
        self._peer_for = peer_for
        self._committer = committer

    def spawn(self, activity: Activity, name: str) -> _AsyncioTask:
        return _AsyncioTask(self, activity, name)

    async def perform(self, effect: Effect, wakeup: asyncio.Event) -> Any:
        if isinstance(effect, Sleep):
            await asyncio.sleep(effect.ms / 1000)
            return None
        if isinstance(effect, WaitForWork):
            wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wakeup.wait(), effect.timeout_ms / 1000)
            return None
        if isinstance(effect, Request):
            peer = self._peer_for(effect.broker)
            if peer is None:
                raise Unreachable(effect.broker, "address not known", no_address=True)
            try:
                return await peer.request(effect.api_key, effect.version, effect.body, effect.timeout_ms / 1000)
            except (PeerError, KafkaCodecError) as error:
                raise Unreachable(effect.broker, str(error)) from error
        if isinstance(effect, Sync):
            assert self._committer is not None, "this shell has no committer"
            outcomes = await asyncio.gather(*(self._committer.request(plog) for plog in effect.logs),
                                            return_exceptions=True)
            return [outcome if isinstance(outcome, BaseException) else None for outcome in outcomes]
        raise AssertionError(f"unknown effect {effect!r}")


class _AsyncioTask:
    def __init__(self, shell: AsyncioShell, activity: Activity, name: str) -> None:
        self._shell = shell
        self._activity = activity
        self._name = name
        # Set by `wake` and cleared by a WaitForWork before it waits: a wake while the core was
        # deciding (no await in between) is not lost.
        self._wakeup = asyncio.Event()
        self._task = asyncio.ensure_future(self._run())

    def wake(self) -> None:
        self._wakeup.set()

    def done(self) -> bool:
        return self._task.done()

    def cancel(self) -> None:
        self._task.cancel()

    async def finished(self) -> None:
        """Wait until the activity has returned (its exception, if any, raised here)."""
        await self._task

    async def _run(self) -> None:
        activity = self._activity
        outcome: Any = None
        failure: BaseException | None = None
        try:
            while True:
                try:
                    effect = activity.throw(failure) if failure is not None else activity.send(outcome)
                except StopIteration:
                    return
                outcome, failure = None, None
                try:
                    outcome = await self._shell.perform(effect, self._wakeup)
                except self._shell.thrown_in as error:
                    failure = error
        finally:
            activity.close()

    async def close(self) -> None:
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        except Exception:  # a bug: said loudly, but the broker's shutdown goes on
            log.exception("%s ended with an error", self._name)
