"""The linearizability checker on histories with known answers: hand-made, and generated from a
simulated register (valid by construction) or broken on purpose (a stale read, a lost write)."""

from __future__ import annotations

import random
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from roost.testing.history.linearizable import check, register, search, versioned_register
from roost.testing.history.model import FAIL, OK, UNKNOWN, History, Op


def op(process: str, f: str, invoke: float, complete: float, value=None, outcome=OK, key="x") -> Op:
    return Op(process, f, invoke, complete, outcome, key, value)


def test_sequential_reads_of_what_was_written_are_linearizable() -> None:
    h = [op("a", "write", 0, 1, 1), op("b", "read", 2, 3, 1), op("a", "cas", 4, 5, (1, 2)), op("b", "read", 6, 7, 2)]
    assert check(h).valid is True


def test_a_stale_read_after_the_write_completed_is_rejected_and_the_witness_is_small() -> None:
    h = [op("c", "read", 0, 0.5, None)] + [op("a", "write", 1 + i, 1.5 + i, i) for i in range(10)]
    h.append(op("b", "read", 20, 21, 3))  # 3 was overwritten long before
    verdict = check(History(h).ops)
    assert verdict.valid is False
    assert "smallest failing part found has" in verdict.problems[0]
    shown = {o.value for o in verdict.witness}
    assert len(verdict.witness) <= 3 and 3 in shown, verdict.explain()


def test_a_read_concurrent_with_a_write_may_see_either_value() -> None:
    for seen in (None, 1):
        assert check([op("a", "write", 0, 10, 1), op("b", "read", 1, 2, seen)]).valid is True


def test_a_lost_write_is_rejected() -> None:
    h = [op("a", "write", 0, 1, 1), op("a", "write", 2, 3, 2), op("b", "read", 4, 5, 1)]
    assert check(h).valid is False


def test_reads_going_back_in_time_between_two_readers_are_rejected() -> None:
    # The write spans both reads; once b has seen 1, c (starting later) may not see None.
    h = [op("a", "write", 0, 10, 1), op("b", "read", 1, 2, 1), op("c", "read", 3, 4, None)]
    assert check(h).valid is False


def test_an_unknown_write_may_or_may_not_have_happened() -> None:
    for seen in (None, 1):
        h = [op("a", "write", 0, 1, 1, outcome=UNKNOWN), op("b", "read", 5, 6, seen), op("b", "read", 7, 8, seen)]
        assert check(h).valid is True
    # ...but not both: once seen it stays.
    h = [op("a", "write", 0, 1, 1, outcome=UNKNOWN), op("b", "read", 5, 6, 1), op("b", "read", 7, 8, None)]
    assert check(h).valid is False


def test_an_unknown_write_takes_effect_no_earlier_than_its_invocation() -> None:
    h = [op("b", "read", 0, 1, 1), op("a", "write", 2, 3, 1, outcome=UNKNOWN)]
    assert check(h).valid is False


def test_a_failed_operation_did_not_happen() -> None:
    h = [op("a", "write", 0, 1, 1, outcome=FAIL), op("b", "read", 2, 3, 1)]
    assert check(h).valid is False
    assert check([op("a", "write", 0, 1, 1, outcome=FAIL), op("b", "read", 2, 3, None)]).valid is True


def test_cas_succeeds_only_from_its_expected_value() -> None:
    assert check([op("a", "write", 0, 1, 1), op("a", "cas", 2, 3, (0, 5))]).valid is False
    assert check([op("a", "write", 0, 1, 1), op("a", "cas", 2, 3, (1, 5)), op("b", "read", 4, 5, 5)]).valid


def test_keys_are_checked_apart() -> None:
    h = [op("a", "write", 0, 1, 1, key="x"), op("a", "write", 0, 1, 2, key="y"),
         op("b", "read", 2, 3, 1, key="x"), op("b", "read", 2, 3, 1, key="y")]
    verdict = check(h)
    assert verdict.valid is False
    assert verdict.stats["keys"] == 2
    assert all(o.key == "y" for o in verdict.witness)


def test_znode_versions_a_versioned_set_at_the_wrong_version_is_rejected() -> None:
    model = lambda key: versioned_register(b"", 0)  # noqa: E731
    ok = [op("a", "write", 0, 1, b"a"), op("b", "read", 2, 3, (b"a", 1)), op("b", "cas", 4, 5, (1, b"b")),
          op("a", "read", 6, 7, (b"b", 2))]
    assert check(ok, model).valid is True
    stale_cas = [op("a", "write", 0, 1, b"a"), op("a", "write", 2, 3, b"c"), op("b", "cas", 4, 5, (1, b"b"))]
    assert check(stale_cas, model).valid is False


def test_the_search_gives_up_with_a_too_hard_verdict_instead_of_running_on() -> None:
    # Many concurrent writes of distinct values and reads that fit no order: exponential.
    h = [op(f"w{i}", "write", 0, 100, i) for i in range(16)]
    h += [op("r", "read", 101, 102, 99)]
    started = time.monotonic()
    verdict = check(h, budget=2_000)
    assert verdict.valid is None
    assert "too hard" in verdict.problems[0]
    assert time.monotonic() - started < 5


# --- generated histories -------------------------------------------------------------------------


def simulate(seed: int, processes: int = 4, ops: int = 30, unknown: float = 0.1) -> list[Op]:
    """A register run with concurrency: each op takes effect at a random point inside its
    interval, in that order (so the history is linearizable by construction)."""
    rng = random.Random(seed)
    free_at = [0.0] * processes
    planned = []
    for n in range(ops):
        p = rng.randrange(processes)
        invoke = free_at[p] + rng.random()
        complete = invoke + rng.random() * 3
        free_at[p] = complete
        point = rng.uniform(invoke, complete)
        planned.append((point, p, invoke, complete, rng.choice(["read", "write", "write", "cas"]), n))
    planned.sort()
    state = None
    out = []
    for _, p, invoke, complete, f, n in planned:
        if f == "read":
            out.append(op(f"p{p}", "read", invoke, complete, state))
        elif f == "write":
            state = n
            outcome = UNKNOWN if rng.random() < unknown else OK
            out.append(op(f"p{p}", "write", invoke, complete if outcome == OK else complete + 50, n, outcome))
        else:
            expected = state if rng.random() < 0.7 else -1
            if expected == state:
                state = n
                out.append(op(f"p{p}", "cas", invoke, complete, (expected, n)))
            else:
                out.append(op(f"p{p}", "cas", invoke, complete, (expected, n), FAIL))
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**9))
def test_generated_valid_histories_are_accepted(seed: int) -> None:
    assert check(simulate(seed)).valid is True


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**9))
def test_a_read_made_stale_in_a_generated_history_is_rejected(seed: int) -> None:
    """Append, after everything, two sequential reads: the first right, the second of a value
    written earlier and certainly overwritten (a stale read)."""
    h = [o for o in simulate(seed, unknown=0.0) if o.outcome == OK]
    writes = [o for o in h if o.f in ("write", "cas")]
    if len(writes) < 2:
        return
    end = max(o.complete for o in h)
    # The register's final value: the one a read after everything may return.
    current = next(v for v in (o.value if o.f == "write" else o.value[1] for o in writes)
                   if search([*h, op("z", "read", end + 1, end + 2, v)], register()).valid)
    stale = next((o.value if o.f == "write" else o.value[1] for o in writes
                  if (o.value if o.f == "write" else o.value[1]) != current), None)
    assert stale is not None
    broken = [*h, op("z", "read", end + 1, end + 2, current), op("z", "read", end + 3, end + 4, stale)]
    assert check(broken).valid is False


def test_a_znode_write_made_the_version_it_returned() -> None:
    model = lambda key: versioned_register("", 0)  # noqa: E731
    concurrent = [Op("a", "write", 0, 5, OK, "x", "a", 1), Op("b", "write", 0, 5, OK, "x", "b", 2),
                  Op("c", "read", 6, 7, OK, "x", ("b", 2))]
    assert check(concurrent, model).valid is True
    # The same writes, but "b" returned version 1: then "a" came second and "b" cannot be last.
    swapped = [Op("a", "write", 0, 5, OK, "x", "a", 2), Op("b", "write", 0, 5, OK, "x", "b", 1),
               Op("c", "read", 6, 7, OK, "x", ("b", 2))]
    assert check(swapped, model).valid is False


def test_unknown_znode_writes_are_settled_by_what_was_read_and_by_the_versions() -> None:
    model = lambda key: versioned_register("", 0)  # noqa: E731
    seen = [Op("a", "write", 0, 1, UNKNOWN, "x", "a"), Op("b", "read", 2, 3, OK, "x", ("a", 1)),
            Op("b", "read", 4, 5, OK, "x", ("a", 1))]
    assert check(seen, model, settle_unknowns=True).valid is True
    # An unknown write seen only after it had been read as something else: still invalid.
    late = [Op("a", "write", 0, 1, UNKNOWN, "x", "a"), Op("b", "read", 2, 3, OK, "x", ("a", 1)),
            Op("b", "read", 4, 5, OK, "x", ("", 0))]
    assert check(late, model, settle_unknowns=True).valid is False
    # Unknown writes never seen while every version is accounted for: dropped, verdict unchanged.
    unseen = [Op("a", "write", 0, 1, UNKNOWN, "x", "lost"), Op("b", "write", 2, 3, OK, "x", "b", 1),
              Op("b", "read", 4, 5, OK, "x", ("b", 1))]
    assert check(unseen, model, settle_unknowns=True).valid is True
    assert check(unseen, model).valid is True


# --- long histories: why the keeper workload moves to fresh registers ------------------------------


def simulate_znodes(seed: int, ops: int, lifetime: float | None, processes: int = 4,
                    unknown: float = 0.02) -> list[Op]:
    """A znode workload like the fault runs' (reads, writes, versioned sets, a few writes with an
    unknown outcome, half of which took effect), linearizable by construction: each op takes effect
    at a random point inside its interval. `lifetime`: registers are replaced by fresh ones (key
    `g<n>`) every `lifetime` seconds, as the keeper workload does; None: one register for ever."""
    rng = random.Random(seed)
    free_at = [0.0] * processes
    planned = []
    for n in range(ops):
        p = rng.randrange(processes)
        invoke = free_at[p] + rng.random() * 0.1
        complete = invoke + rng.random() * 0.3
        free_at[p] = complete
        f = rng.choice(["read", "read", "write", "cas"])
        fate = rng.choice(["applied", "lost"]) if f != "read" and rng.random() < unknown else OK
        planned.append((rng.uniform(invoke, complete), p, invoke, complete, f, n, fate))
    planned.sort()
    state: dict[str, tuple[str, int]] = {}
    last_seen: dict[tuple[str, str], int] = {}
    out = []
    for _, p, invoke, complete, f, n, fate in planned:
        key = "x" if lifetime is None else f"g{int(invoke // lifetime)}"
        data, version = state.get(key, ("init", 0))
        process = f"p{p}"
        if f == "read":
            out.append(Op(process, "read", invoke, complete, OK, key, (data, version)))
            last_seen[(process, key)] = version
            continue
        written = f"{process}-{n}"
        expected = last_seen.get((process, key), 0)
        value = written if f == "write" else (expected, written)
        applies = f == "write" or expected == version
        if fate == "lost" or (not applies and fate != OK):
            out.append(Op(process, f, invoke, complete, UNKNOWN, key, value))
        elif not applies:
            out.append(Op(process, f, invoke, complete, FAIL, key, value))
        else:
            state[key] = (written, version + 1)
            out.append(Op(process, f, invoke, complete, UNKNOWN, key, value) if fate == "applied" else
                       Op(process, f, invoke, complete, OK, key, value, version + 1))
    return out


ZNODE = lambda key: versioned_register("init", 0)  # noqa: E731


def test_a_long_register_history_is_too_hard_but_the_same_workload_on_fresh_registers_is_decided() -> None:
    """Unknown writes nobody read stay open for the rest of their register's history: on one
    register used for ever (the 20-minute run's shape) the search does not finish; moved to fresh
    registers every few seconds, the same kind and number of operations are decided at once."""
    one_register = simulate_znodes(1, 6000, lifetime=None)
    assert sum(op.outcome == UNKNOWN for op in one_register) > 30
    assert check(one_register, ZNODE, budget=300_000, settle_unknowns=True).valid is None
    fresh = simulate_znodes(1, 6000, lifetime=5.0)
    verdict = check(fresh, ZNODE, budget=300_000, settle_unknowns=True)
    assert verdict.valid is True, verdict.explain()
    assert verdict.stats["keys"] > 50 and verdict.stats["steps"] < 50_000


def _versions(ops: list[Op], key: str) -> dict[int, str]:
    """Data of each version of `key` some ok op shows."""
    shown = {}
    for op in ops:
        if op.key == key and op.outcome == OK:
            if op.f == "read":
                shown[op.value[1]] = op.value[0]
            elif op.result is not None:
                shown[op.result] = op.value if op.f == "write" else op.value[1]
    return shown


def test_a_stale_read_in_the_middle_of_a_long_history_of_fresh_registers_is_rejected() -> None:
    h = simulate_znodes(2, 6000, lifetime=5.0)
    write = next(op for op in h[len(h) // 2:] if op.f == "write" and op.outcome == OK and op.result >= 2)
    before = _versions(h, write.key)[write.result - 1]
    stale = Op("z", "read", write.complete + 0.001, write.complete + 0.002, OK, write.key,
               (before, write.result - 1))
    verdict = check([*h, stale], ZNODE, budget=300_000, settle_unknowns=True)
    assert verdict.valid is False
    assert write.key in verdict.problems[0]
    assert stale in verdict.witness and len(verdict.witness) < 20


def test_a_write_lost_after_its_register_went_out_of_use_is_seen_by_the_final_read() -> None:
    """The keeper workload's drain reads every register ever made: a register that lost its last
    acknowledged write after the workload moved on shows the older version there."""
    h = simulate_znodes(3, 6000, lifetime=5.0)
    key = "g3"
    versions = _versions(h, key)
    top = max(versions)
    end = max(op.complete for op in h)
    assert check([*h, Op("final", "read", end + 1, end + 2, OK, key, (versions[top], top))], ZNODE,
                 budget=300_000, settle_unknowns=True).valid is True
    lost = Op("final", "read", end + 1, end + 2, OK, key, (versions[top - 1], top - 1))
    assert check([*h, lost], ZNODE, budget=300_000, settle_unknowns=True).valid is False
