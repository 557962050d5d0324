"""`queued.max.request.bytes`: one budget, for the whole broker, of the requests being received.

Kafka reads a request's size and then takes that many bytes from a memory pool before reading
the rest; with the pool empty the connection is not read until memory comes back. Roost does the
same for the requests that span more than one read (a request that arrives whole in one read is
handed on at once and takes nothing). A request is admitted while any room is left, so one larger
than what is left still goes and the budget is exceeded by at most one request. Connections
waiting for room are served in the order they came, when a reservation is released (the request
is whole, or its connection closed).

Without this, what partial requests hold is only bounded by `max.connections` times what each
client sent before its `request.receive.timeout.ms` deadline (docs/hostile-input.md).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable


class RequestMemory:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._waiting: deque[Callable[[], None]] = deque()

    def try_reserve(self, size: int) -> bool:
        if self.used >= self.limit:
            return False
        self.used += size
        return True

    def release(self, size: int) -> None:
        self.used -= size
        # Each woken connection tries again at once (and may take what was freed).
        while self._waiting and self.used < self.limit:
            self._waiting.popleft()()

    def wait(self, wake: Callable[[], None]) -> None:
        self._waiting.append(wake)

    def forget(self, wake: Callable[[], None]) -> None:
        try:
            self._waiting.remove(wake)
        except ValueError:
            pass

    @property
    def waiting(self) -> int:
        return len(self._waiting)
