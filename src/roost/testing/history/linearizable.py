"""Linearizability of registers: a Wing-Gong / Lowe search with memoisation, one key at a time.

The search (Lowe, "Testing for linearizability", 2017, after Wing & Gong 1993) walks the history's
call and return events in time order, kept in a linked list. At a call it tries to linearize that
operation now: if the model accepts it from the current state and the pair (set of operations
linearized, state) has not been seen before, the operation's call and return leave the list and
the walk restarts from the front. At a return whose operation is not linearized yet, the last
choice was wrong: it is undone and the walk goes on after that operation's call. An empty stack
at such a return means no order fits: not linearizable. The memo of (linearized set, state) pairs
is what makes this practical: the same configuration is never explored twice.

P-compositionality (Horn & Kroening 2015): linearizability is local, so a history of independent
registers is linearizable if and only if each register's sub-history is. `check` splits by key.

Outcomes: a failed operation did not happen and is dropped. An unknown one may have happened at
any time after its invocation: its return is put at +infinity, so it never forces a backtrack,
and the search succeeds once every ok operation is linearized (unknown ones may remain outside).
An unknown read changes nothing and is dropped.

The search is exponential in the worst case, so it counts its steps: past `budget` it stops with
valid=None ("too hard"), never running for ever.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from roost.testing.history.model import OK, UNKNOWN, Op, Verdict, merge

State = Hashable


class _Impossible:
    """What `Model.step` returns when an operation cannot happen from a state (None is a state)."""

    def __repr__(self) -> str:
        return "IMPOSSIBLE"


IMPOSSIBLE = _Impossible()


@dataclass(frozen=True)
class Model:
    """A sequential specification: `step(state, op)` is the state after `op`, or IMPOSSIBLE if `op` (with
    the result it returned) is impossible from `state`."""

    name: str
    init: State
    step: Callable[[State, Op], State | _Impossible]
    changes: Callable[[Op], bool]  # whether an op may change the state (unknown ones kept only if so)


def _register_step(state: State, op: Op) -> State | _Impossible:
    if op.f == "read":
        return state if op.value == state else IMPOSSIBLE
    if op.f == "write":
        return op.value
    if op.f == "cas":
        expected, new = op.value
        return new if state == expected else IMPOSSIBLE
    raise ValueError(f"a register has no {op.f!r}: {op}")


def _versioned_step(state: State, op: Op) -> State | _Impossible:
    """ZooKeeper's znode data: state (data, version); read returns both, write bumps the version,
    cas is set_data(path, data, version=expected) and succeeds only at that version."""
    _data, version = state
    if op.f == "read":
        return state if tuple(op.value) == state else IMPOSSIBLE
    if op.result is not None and op.result != version + 1:
        return IMPOSSIBLE  # the write said which version it made: only from the one before
    if op.f == "write":
        return (op.value, version + 1)
    if op.f == "cas":
        expected_version, new = op.value
        return (new, version + 1) if version == expected_version else IMPOSSIBLE
    raise ValueError(f"a versioned register has no {op.f!r}: {op}")


def register(init: State = None) -> Model:
    """A read/write/compare-and-set register: read's value is what it saw, write's what it wrote,
    cas's (expected, new)."""
    return Model("register", init, _register_step, lambda op: op.f != "read")


def versioned_register(init_data: Any = None, init_version: int = 0) -> Model:
    """A znode's data with its version: read's value (data, version), write's data, cas's
    (expected version, new data); a write's or cas's result, when known, the version it made."""
    return Model("versioned-register", (init_data, init_version), _versioned_step, lambda op: op.f != "read")


def settle_versioned_unknowns(ops: Sequence[Op]) -> list[Op]:
    """Resolve what can be resolved of a versioned register's unknown writes, before the search
    (each one left unresolved stays concurrent with everything after it, which is what makes the
    search blow up on long runs). Sound when every write writes data no other write writes (the
    fault workloads' do):

    - an unknown write whose data some ok read returned took effect before that read completed,
      making the version that read saw: it becomes ok, completing then, with that version;
    - if every version up to the highest one observed is the result of a known write, the
      remaining unknown writes took no version anyone saw: any linearization places them after
      every observation, so dropping them changes no verdict.
    """
    ops = list(ops)
    seen_at: dict[Any, tuple[float, int]] = {}  # data -> (first completion of a read of it, its version)
    for op in ops:
        if op.f == "read" and op.outcome == OK:
            data, version = op.value
            if data not in seen_at or op.complete < seen_at[data][0]:
                seen_at[data] = (op.complete, version)
    settled = []
    for op in ops:
        if op.outcome == UNKNOWN and op.f in ("write", "cas"):
            data = op.value if op.f == "write" else op.value[1]
            if data in seen_at and seen_at[data][0] >= op.invoke:
                read_by, version = seen_at[data]
                op = replace(op, outcome=OK, complete=read_by, result=version)
        settled.append(op)
    observed = {op.value[1] for op in settled if op.f == "read" and op.outcome == OK}
    claimed = {op.result for op in settled if op.f in ("write", "cas") and op.outcome == OK and op.result is not None}
    top = max(observed | claimed, default=0)
    if all(v in claimed for v in range(1, top + 1)):
        settled = [op for op in settled if not (op.outcome == UNKNOWN and op.f in ("write", "cas"))]
    return settled


@dataclass
class _Search:
    valid: bool | None
    steps: int
    deepest: int  # most operations linearized at once


def search(ops: Sequence[Op], model: Model, budget: int = 500_000) -> _Search:
    """Whether `ops` (one register's operations) are linearizable under `model`."""
    ops = [op for op in ops if op.outcome == OK or (op.outcome == UNKNOWN and model.changes(op))]
    n = len(ops)
    if n == 0:
        return _Search(True, 0, 0)
    # Events: (time, 0 = call | 1 = return, op). A call at the same time as a return sorts first:
    # two operations that touch at an instant count as concurrent (the generous reading).
    events = []
    for i, op in enumerate(ops):
        events.append((op.invoke, 0, i))
        events.append((op.complete if op.outcome == OK else math.inf, 1, i))
    events.sort()
    size = len(events) + 2  # entries 1..len(events), 0 = head, size-1 = tail
    prev = list(range(-1, size - 1))
    nxt = list(range(1, size + 1))
    is_call = [False] * size
    op_of = [-1] * size
    call_at = [0] * n
    ret_at = [0] * n
    finite = [False] * size
    for position, (moment, kind, i) in enumerate(events, start=1):
        is_call[position] = kind == 0
        op_of[position] = i
        finite[position] = moment != math.inf
        (call_at if kind == 0 else ret_at)[i] = position
    tail = size - 1

    def lift(i: int) -> None:
        for entry in (call_at[i], ret_at[i]):
            nxt[prev[entry]] = nxt[entry]
            prev[nxt[entry]] = prev[entry]

    def unlift(i: int) -> None:
        for entry in (ret_at[i], call_at[i]):
            nxt[prev[entry]] = entry
            prev[nxt[entry]] = entry

    state = model.init
    linearized = 0
    depth = deepest = 0
    seen: set[tuple[int, State]] = set()
    stack: list[tuple[int, State]] = []
    entry = nxt[0]
    steps = 0
    while True:
        steps += 1
        if steps > budget:
            return _Search(None, steps, deepest)
        if entry == tail or (not is_call[entry] and not finite[entry]):
            return _Search(True, steps, max(deepest, depth))  # every ok operation is linearized
        i = op_of[entry]
        if is_call[entry]:
            new = model.step(state, ops[i])
            if new is not IMPOSSIBLE:
                config = (linearized | (1 << i), new)
                if config not in seen:
                    seen.add(config)
                    stack.append((i, state))
                    state, linearized = new, config[0]
                    depth += 1
                    deepest = max(deepest, depth)
                    lift(i)
                    entry = nxt[0]
                    continue
            entry = nxt[entry]
        else:
            if not stack:
                return _Search(False, steps, deepest)
            i, state = stack.pop()
            linearized &= ~(1 << i)
            depth -= 1
            unlift(i)
            entry = nxt[call_at[i]]


def _writes_read(ops: Sequence[Op]) -> set[Any]:
    """Values some ok read returned (a write of one of them is part of any explanation)."""
    seen = set()
    for op in ops:
        if op.f == "read" and op.outcome == OK:
            seen.add(op.value[0] if isinstance(op.value, tuple) else op.value)
    return seen


def _written(op: Op) -> Any:
    return op.value[1] if op.f == "cas" else op.value


def shrink(ops: Sequence[Op], model: Model, budget: int, greedy_limit: int = 80) -> tuple[list[Op], bool]:
    """A small non-linearizable part of `ops` (known non-linearizable): the shortest prefix by
    invocation that fails, then, if that is small enough, operations dropped one at a time while
    it still fails — never a write whose value a kept read returned (dropping it would make a
    different, fake violation: a read of a value nobody wrote). Returns the ops and whether they
    are that minimised part (True) or, for a prefix too long to minimise, its last `greedy_limit`."""
    ordered = sorted(ops, key=lambda op: op.invoke)
    lo, hi = 0, len(ordered)  # prefix lo is linearizable (or empty), prefix hi is not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if search(ordered[:mid], model, budget).valid is False:
            hi = mid
        else:
            lo = mid
    kept = ordered[:hi]
    if len(kept) > greedy_limit:
        return kept[-greedy_limit:], False
    for op in reversed(list(kept)):
        if op not in kept:
            continue
        trial = [o for o in kept if o is not op]
        if op.f != "read" and _written(op) in _writes_read(trial):
            continue
        if search(trial, model, budget).valid is False:
            kept = trial
    return kept, True


def check(ops: Sequence[Op], model_for: Callable[[Any], Model] = lambda key: register(),
          budget: int = 500_000, fs: frozenset[str] = frozenset({"read", "write", "cas"}),
          settle_unknowns: bool = False) -> Verdict:
    """Linearizability of every key's register in `ops` (those whose f is in `fs`), each key
    checked alone with `model_for(key)`; a failure's witness is the smallest failing part found.
    `settle_unknowns`: for versioned registers whose writes write unique data,
    `settle_versioned_unknowns` first."""
    by_key: dict[Any, list[Op]] = defaultdict(list)
    for op in ops:
        if op.f in fs:
            by_key[op.key].append(op)
    verdicts = []
    for key, key_ops in sorted(by_key.items(), key=lambda item: repr(item[0])):
        model = model_for(key)
        if model.name == "versioned-register" and settle_unknowns:
            key_ops = settle_versioned_unknowns(key_ops)
        result = search(key_ops, model, budget)
        verdict = Verdict("linearizable", result.valid,
                          stats={"keys": 1, "ops": len(key_ops), "steps": result.steps})
        if result.valid is False:
            verdict.witness, minimal = shrink(key_ops, model, budget)
            shown = (f"the smallest failing part found has {len(verdict.witness)}" if minimal else
                     f"the shortest failing prefix ends at #{verdict.witness[-1].index}; its last "
                     f"{len(verdict.witness)} are shown")
            verdict.problems.append(f"key {key!r}: no linearization of its {len(key_ops)} operations "
                                    f"(at most {result.deepest} could be ordered); {shown}")
        elif result.valid is None:
            verdict.problems.append(f"key {key!r}: search gave up after {result.steps} steps "
                                    f"({len(key_ops)} operations): too hard, not proven either way")
        verdicts.append(verdict)
    return merge("linearizable", verdicts) if verdicts else Verdict("linearizable", True, stats={"keys": 0})
