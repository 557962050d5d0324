"""The simulation's clock and scheduler: one thread, one seed, events in time order.

Callbacks are scheduled at a time (ms) and run in (time, sequence) order, so a run is a function
of its seed. Long-running activities of a simulated broker (the controller's event worker, its
request channels, the replica fetchers, the ISR sender, registration) are generator "tasks"
written like the real asyncio code they mirror: each `yield` is an await. A task yields one of
the request objects below and is resumed with the result (or has the error thrown into it).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from roost.wire.kafka import ApiKey

TaskGen = Generator[Any, Any, Any]


class SimCancelled(Exception):
    """What a cancelled task's `done` future holds (the task itself is closed: GeneratorExit
    runs its finally blocks)."""


_ids = itertools.count()


def _next_id() -> int:
    return next(_ids)


class World:
    """The clock and the event queue."""

    def __init__(self, seed: int) -> None:
        # Objects the real code keeps in sets (waiters, watchers) hash by these numbers, not by
        # their addresses, so that a set's order, and with it the run, is the seed's.
        global _ids
        _ids = itertools.count()
        self.rng = random.Random(seed)
        self.now = 0
        self.steps = 0
        self._queue: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0

    def at(self, time: int, fn: Callable[..., None], *args: Any) -> None:
        assert time >= self.now, (time, self.now)
        self._seq += 1
        heapq.heappush(self._queue, (time, self._seq, fn, args))

    def after(self, delay: int, fn: Callable[..., None], *args: Any) -> None:
        self.at(self.now + max(0, int(delay)), fn, *args)

    def step(self) -> bool:
        """Run the next event; False when there is none."""
        if not self._queue:
            return False
        time, _, fn, args = heapq.heappop(self._queue)
        self.now = time
        self.steps += 1
        fn(*args)
        return True

    @property
    def pending(self) -> int:
        return len(self._queue)


# ---------------------------------------------------------------------------- what tasks yield
class PeerError(Exception):
    """No answer (the peer is down, unreachable, or too slow)."""


class Rpc:
    """What a task yields to send a request and wait for its answer (PeerError on failure)."""

    __slots__ = ("api_key", "body", "destination", "timeout_ms", "version")

    def __init__(self, destination: int, api_key: ApiKey, version: int, body: dict[str, Any], timeout_ms: int) -> None:
        self.destination = destination
        self.api_key = api_key
        self.version = version
        self.body = body
        self.timeout_ms = timeout_ms


@dataclass
class Sleep:
    ms: int


@dataclass
class Wait:
    """Wait for a SimFuture: resumed with its result, or its exception is thrown in; with a
    timeout, resumed with None once it passes (the future is left alone)."""

    future: SimFuture
    timeout: int | None = None


class SimFuture:
    def __init__(self) -> None:
        self._hash = _next_id()
        self._done = False
        self._result: Any = None
        self._error: BaseException | None = None
        self._cancelled = False
        self._callbacks: list[Callable[[SimFuture], None]] = []

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other

    def done(self) -> bool:
        return self._done

    def set_result(self, value: Any) -> None:
        if self._done:
            return
        self._done, self._result = True, value
        self._fire()

    def set_exception(self, error: BaseException) -> None:
        if self._done:
            return
        self._done, self._error = True, error
        self._fire()

    def cancel(self) -> bool:
        """As asyncio's: done at once, with no result (a parked fetch whose answer nobody wants)."""
        if self._done:
            return False
        self._done = self._cancelled = True
        self._fire()
        return True

    def cancelled(self) -> bool:
        return self._cancelled

    def result(self) -> Any:
        assert self._done
        if self._cancelled:
            raise asyncio.CancelledError
        if self._error is not None:
            raise self._error
        return self._result

    def exception(self) -> BaseException | None:
        return self._error

    def add_done_callback(self, callback: Callable[[SimFuture], None]) -> None:
        if self._done:
            callback(self)
        else:
            self._callbacks.append(callback)

    def _fire(self) -> None:
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)


class SimQueue:
    """asyncio.Queue for tasks: `item = yield from queue.get()`."""

    def __init__(self) -> None:
        self.items: deque[Any] = deque()
        self._getters: deque[SimFuture] = deque()

    def put_nowait(self, item: Any) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(item)
                return
        self.items.append(item)

    def get(self) -> Generator[Any, Any, Any]:
        if self.items:
            return self.items.popleft()
        getter = SimFuture()
        self._getters.append(getter)
        return (yield Wait(getter))

    def __len__(self) -> int:
        return len(self.items)


@dataclass(eq=False)
class Task:
    """A running generator, owned by one broker process incarnation."""

    gen: TaskGen
    name: str
    loop: TaskLoop
    done: SimFuture = field(default_factory=SimFuture)
    cancelled: bool = False
    _resume_token: int = 0  # a resumption with an older token is stale (the task moved on)

    def cancel(self) -> None:
        if self.cancelled or self.done.done():
            return
        self.cancelled = True
        self._resume_token += 1
        self.loop.tasks.discard(self)
        try:
            if self.loop.current is not self:  # a running generator cannot be closed; it stops here
                self.gen.close()  # GeneratorExit at the current yield: finally blocks run
        finally:
            self.done.set_exception(SimCancelled(self.name))


class TaskLoop:
    """The tasks of one broker process. When the process dies, `kill()` drops them all without
    running anything more of them (kill -9: no finally block runs)."""

    def __init__(self, world: World, name: str, dispatch: Callable[[Task, Any, int], bool] | None = None) -> None:
        self.world = world
        self.name = name
        self.alive = True
        self.tasks: set[Task] = set()
        self.current: Task | None = None
        # Handles yielded objects other than Sleep and Wait (ZooKeeper calls, RPCs); returns
        # False for an unknown object.
        self.dispatch = dispatch

    def spawn(self, gen: TaskGen, name: str) -> Task:
        task = Task(gen, name, self)
        self.tasks.add(task)
        self.world.after(0, self._resume, task, task._resume_token, None, None)
        return task

    def kill(self) -> None:
        self.alive = False
        self.tasks.clear()

    def _resume(self, task: Task, token: int, value: Any, error: BaseException | None) -> None:
        if not self.alive or task.cancelled or token != task._resume_token or task.done.done():
            return
        task._resume_token += 1
        token = task._resume_token
        self.current = task
        try:
            request = task.gen.throw(error) if error is not None else task.gen.send(value)
        except StopIteration as stop:
            self.tasks.discard(task)
            task.done.set_result(stop.value)
            return
        except Exception as failure:
            self.tasks.discard(task)
            task.done.set_exception(failure)
            raise
        finally:
            self.current = None
        if task.cancelled:
            return
        self._park(task, token, request)

    def _park(self, task: Task, token: int, request: Any) -> None:
        if isinstance(request, Sleep):
            self.world.after(request.ms, self._resume, task, token, None, None)
        elif isinstance(request, Wait):
            def woken(future: SimFuture) -> None:
                error = future.exception()
                value = None if error is not None else future.result()
                # A callback fires inside whoever completed the future: resume as its own event.
                self.world.after(0, self._resume, task, token, value, error)
            request.future.add_done_callback(woken)
            if request.timeout is not None:
                self.world.after(request.timeout, self._resume, task, token, None, None)
        elif self.dispatch is None or not self.dispatch(task, request, token):
            raise AssertionError(f"task {task.name} yielded {request!r}")

    def resume_token(self, task: Task, token: int, delay: int, value: Any = None,
                     error: BaseException | None = None) -> None:
        """For dispatchers: resume `task` (if still at the yield `token` names) after `delay`."""
        self.world.after(delay, self._resume, task, token, value, error)


def gather(futures: list[SimFuture]) -> SimFuture:
    """One future done when all are (results ignored, like gather(return_exceptions=True))."""
    combined = SimFuture()
    remaining = [len(futures)]
    if not futures:
        combined.set_result(None)
        return combined

    def one_done(_: SimFuture) -> None:
        remaining[0] -= 1
        if remaining[0] == 0:
            combined.set_result(None)

    for future in futures:
        future.add_done_callback(one_done)
    return combined


class _SimTimer:
    def __init__(self, callback: Callable[[], None]) -> None:
        self._callback: Callable[[], None] | None = callback

    def cancel(self) -> None:
        self._callback = None

    def fire(self) -> None:
        if self._callback is not None:
            callback, self._callback = self._callback, None
            callback()


class SimWaits:
    """roost.broker.replica.waits.Waits on the simulated clock: what the real append door,
    purgatory and parked fetches wait with in the simulation (SimFutures, timers as scheduled
    events). A timer of a process that died meanwhile never fires (kill -9)."""

    def __init__(self, world: World, alive: Callable[[], bool] = lambda: True) -> None:
        self._world = world
        self._alive = alive

    def future(self) -> SimFuture:
        return SimFuture()

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> _SimTimer:
        timer = _SimTimer(callback)
        self._world.after(round(delay_s * 1000), self._fire, timer)
        return timer

    def call_soon(self, callback: Callable[[], None]) -> None:
        self._world.after(0, self._call, callback)

    def _fire(self, timer: _SimTimer) -> None:
        if self._alive():
            timer.fire()

    def _call(self, callback: Callable[[], None]) -> None:
        if self._alive():
            callback()

    def time(self) -> float:
        return self._world.now / 1000

    def when_all(self, futures: list[SimFuture]) -> SimFuture:
        combined = SimFuture()
        remaining = [len(futures)]
        if not futures:
            combined.set_result([])
            return combined

        def one_done(_: SimFuture) -> None:
            remaining[0] -= 1
            if remaining[0] == 0:
                combined.set_result([future.exception() for future in futures])

        for future in futures:
            future.add_done_callback(one_done)
        return combined
