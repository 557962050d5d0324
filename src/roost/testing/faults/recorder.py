"""Collects operations from many threads without a lock (list.append is one step under the GIL,
and client callbacks must never take a lock a timeout could leave held), into a History at the end."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from roost.testing.history.model import NEMESIS, OK, History, Op, Outcome


def now() -> float:
    return time.monotonic()


@dataclass
class Recorder:
    started: float = field(default_factory=now)
    ops: list[Op] = field(default_factory=list)

    def t(self) -> float:
        """Seconds since the run began: the history's clock."""
        return now() - self.started

    def record(self, process: str, f: str, invoke: float, complete: float, outcome: Outcome = OK,
               key: Any = None, value: Any = None, result: Any = None) -> None:
        self.ops.append(Op(process, f, invoke, max(invoke, complete), outcome, key, value, result))

    def fault(self, f: str, invoke: float, value: Any = None) -> None:
        self.record(NEMESIS, f, invoke, self.t(), OK, None, value)

    def history(self) -> History:
        return History(sorted(self.ops, key=lambda op: (op.invoke, op.complete)))
