"""The history format: one `Op` per client operation, plus fault events, as JSON lines.

The meaning of `key`, `value` and `result` per function is the checkers' (see linearizable.py,
zookeeper.py, broker.py); the history itself is schema-free.

An operation has a process (one client thread or session: it runs one operation at a time), a
function `f` ("read", "write", "cas", "send", "poll", ...), its invocation and completion times (a
monotonic clock shared by the whole run, seconds), an outcome and its values:

- ok:      it happened, and `value` holds what it returned (a read's value, a send's offset);
- fail:    it certainly did not happen (the server refused it before doing anything);
- unknown: it may or may not have happened (a timeout, a lost connection): `complete` is the time
           the client gave up, and a checker must accept both possibilities.

Faults are `Op`s of process "nemesis" (f = "kill", "heal", "partition", ...): they are on the
timeline for the report and ignored by the checkers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

Outcome = Literal["ok", "fail", "unknown"]
OK: Outcome = "ok"
FAIL: Outcome = "fail"
UNKNOWN: Outcome = "unknown"
NEMESIS = "nemesis"


@dataclass(frozen=True)
class Op:
    process: str
    f: str
    invoke: float
    complete: float
    outcome: Outcome = OK
    key: Any = None
    value: Any = None  # what was asked (a write's data) or, for reads, what was observed
    result: Any = None  # what a write returned (a version, a (partition, offset)), when it matters
    index: int = -1  # position in its History (set by History)

    def __post_init__(self) -> None:
        assert self.outcome in (OK, FAIL, UNKNOWN), self.outcome
        assert self.complete >= self.invoke, f"completes before it starts: {self}"

    def show(self) -> str:
        key = "" if self.key is None else f" {self.key!r}"
        result = "" if self.result is None else f" = {self.result!r}"
        return (f"#{self.index:<5} {self.invoke:10.4f}..{self.complete:10.4f} {self.process:>10} "
                f"{self.f}{key} {self.value!r} -> {self.outcome}{result}")

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("index")
        return data


@dataclass
class History:
    ops: list[Op] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.ops = [_with_index(op, i) for i, op in enumerate(self.ops)]

    def add(self, op: Op) -> Op:
        op = _with_index(op, len(self.ops))
        self.ops.append(op)
        return op

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops)

    def __len__(self) -> int:
        return len(self.ops)

    def client_ops(self) -> list[Op]:
        return [op for op in self.ops if op.process != NEMESIS]

    def faults(self) -> list[Op]:
        return [op for op in self.ops if op.process == NEMESIS]

    def dump(self, path: Path) -> None:
        with path.open("w") as handle:
            for op in self.ops:
                handle.write(json.dumps(op.to_json(), default=_jsonable) + "\n")

    @classmethod
    def load(cls, path: Path) -> History:
        with path.open() as handle:
            return cls([Op(**_untuple(json.loads(line))) for line in handle if line.strip()])


def _with_index(op: Op, index: int) -> Op:
    return op if op.index == index else Op(op.process, op.f, op.invoke, op.complete, op.outcome, op.key,
                                           op.value, op.result, index)


def _jsonable(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    raise TypeError(f"not JSON: {value!r}")


def _untuple(data: dict[str, Any]) -> dict[str, Any]:
    """JSON has no tuples; values that were tuples come back as lists, hashable again as tuples."""
    for name in ("key", "value", "result"):
        data[name] = _freeze(data.get(name))
    return data


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return {k: _freeze(v) for k, v in value.items()}
    return value


@dataclass
class Verdict:
    """One checker's answer: valid (True), invalid (False) or unknown (None: the search gave up)."""

    checker: str
    valid: bool | None
    problems: list[str] = field(default_factory=list)  # one line each, the worst first
    witness: list[Op] = field(default_factory=list)  # the smallest part of the history that shows it
    stats: dict[str, Any] = field(default_factory=dict)

    def explain(self, limit: int = 12) -> str:
        state = {True: "valid", False: "INVALID", None: "UNKNOWN (too hard)"}[self.valid]
        lines = [f"{self.checker}: {state} {self.stats if self.stats else ''}".rstrip()]
        lines += [f"  {p}" for p in self.problems[:limit]]
        if len(self.problems) > limit:
            lines.append(f"  ... and {len(self.problems) - limit} more")
        if self.witness:
            lines.append("  witness:")
            lines += [f"    {op.show()}" for op in sorted(self.witness, key=lambda o: o.invoke)]
        return "\n".join(lines)


def merge(checker: str, verdicts: Iterable[Verdict]) -> Verdict:
    """One verdict from several (e.g. one per key): invalid beats unknown beats valid."""
    verdicts = list(verdicts)
    valids = [v.valid for v in verdicts]
    valid: bool | None = False if False in valids else (None if None in valids else True)
    out = Verdict(checker, valid)
    for v in verdicts:
        out.problems += v.problems
        if not out.witness and v.valid is False:
            out.witness = v.witness
        for name, number in v.stats.items():
            if isinstance(number, int):
                out.stats[name] = out.stats.get(name, 0) + number
    return out
