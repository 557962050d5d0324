"""Run a consumer group of real client consumers in threads until a shared count is reached.

The same harness drives every client library: a test supplies how to make a consumer, how to
poll it (returning `Received` records), how to commit and how to close it.

Members commit what they consumed at the end of a round and, through the client's own
partition-revocation callback, whenever a rebalance takes partitions away: a member that joins
late (or leaves early) then hands its partitions over at the offsets really consumed, so the new
owner neither re-delivers nor skips, however the joins and the polls interleave.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support.workload import Received


@dataclass
class ClientOps:
    # A subscribed consumer whose revocation callback commits what it consumed (errors there must
    # reach the harness: raised from a later `poll`).
    make: Callable[[], Any]
    poll: Callable[[Any], list[Received]]
    commit: Callable[[Any], None]
    close: Callable[[Any], None]


@dataclass
class Counter:
    stop_at: int
    count: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, n: int) -> None:
        with self.lock:
            self.count += n

    def done(self) -> bool:
        with self.lock:
            return self.count >= self.stop_at


class Member(threading.Thread):
    def __init__(self, ops: ClientOps, counter: Counter, timeout: float, closing: threading.Barrier) -> None:
        super().__init__(daemon=True)
        self.ops, self.counter, self.timeout, self.closing = ops, counter, timeout, closing
        self.received: list[Received] = []
        self.errors: list[str] = []
        self.ready = threading.Event()

    def run(self) -> None:
        consumer = None
        try:
            consumer = self.ops.make()
            self.ready.set()
            deadline = time.monotonic() + self.timeout
            while time.monotonic() < deadline and not self.counter.done():
                batch = self.ops.poll(consumer)
                self.received.extend(batch)
                self.counter.add(len(batch))
            if self.received:
                self.ops.commit(consumer)
        except Exception as error:  # reported by the test thread
            self.errors.append(repr(error))
        finally:
            self.ready.set()
            # Everyone commits before anyone leaves: a departure starts a rebalance.
            try:
                self.closing.wait(self.timeout)
            except threading.BrokenBarrierError:
                self.errors.append("the group did not reach the closing barrier together")
            if consumer is not None:
                try:
                    self.ops.close(consumer)
                except Exception as error:
                    self.errors.append(f"close: {error!r}")


def stack_of(thread: threading.Thread) -> str:
    """Where a thread is now (to say where a stuck consumer waits: poll, commit or close)."""
    frame = sys._current_frames().get(thread.ident or -1)
    return "".join(traceback.format_stack(frame)) if frame is not None else "(gone)"


def run_group(ops: ClientOps, stop_at: int, members: int = 3, timeout: float = 120.0) -> list[Member]:
    """Start `members` consumers, wait until together they received `stop_at` records, stop them."""
    counter = Counter(stop_at)
    closing = threading.Barrier(members)
    threads = [Member(ops, counter, timeout, closing) for _ in range(members)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout + 60)
        assert not thread.is_alive(), f"a consumer did not stop; it is at:\n{stack_of(thread)}"
    for thread in threads:
        assert not thread.errors, thread.errors
    return threads


def last_offsets(members: list[Member]) -> dict[int, int]:
    """The highest offset each partition delivered across these members."""
    last: dict[int, int] = {}
    for member in members:
        for record in member.received:
            last[record.partition] = max(last.get(record.partition, -1), record.offset)
    return last
