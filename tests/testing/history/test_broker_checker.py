"""The broker checker on hand-made and generated histories: a clean run passes; a lost write, a
duplicate, a reorder, a consumer skipping or going back, a commit going back and an aborted
record under read_committed are each found, with the operations that show it."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from roost.testing.history.broker import check
from roost.testing.history.model import OK, UNKNOWN, History, Op


def send(process: str, t: float, value: str, partition: int | None, offset: int | None, outcome=OK) -> Op:
    return Op(process, "send", t, t + 0.5, outcome, "k", value,
              (partition, offset) if outcome == OK else None)


def poll(process: str, t: float, *records: tuple[int, int, str], isolation: str | None = None) -> Op:
    return Op(process, "poll", t, t + 0.1, OK, None, {"isolation": isolation} if isolation else None,
              tuple(records))


def clean() -> list[Op]:
    return [send("p", 0, "a", 0, 0), send("p", 1, "b", 0, 1), send("p", 2, "c", 0, 2),
            poll("c", 3, (0, 0, "a"), (0, 1, "b")), poll("c", 4, (0, 2, "c"))]


def kinds(ops: list[Op]) -> set[str]:
    return {problem.split(":")[0] for problem in check(History(ops).ops).problems}


def test_a_clean_history_passes() -> None:
    verdict = check(clean())
    assert verdict.valid is True, verdict.explain()
    assert verdict.stats["acked"] == 3 and verdict.stats["unread"] == 0


def test_an_acknowledged_write_never_read_below_what_was_read_is_lost() -> None:
    ops = [*clean()[:3], poll("c", 3, (0, 0, "a"), (0, 2, "c"))]
    verdict = check(ops)
    assert verdict.valid is False
    assert any("lost" in p and "'b'" in p for p in verdict.problems)
    assert verdict.witness[0].value == "b"


def test_an_acknowledged_offset_holding_another_value_is_lost() -> None:
    ops = [*clean()[:2], poll("c", 3, (0, 0, "a"), (0, 1, "x"))]
    assert "lost" in kinds(ops)


def test_unread_writes_past_the_end_read_are_counted_not_errors() -> None:
    verdict = check([*clean()[:3], poll("c", 3, (0, 0, "a"))])
    assert verdict.valid is True and verdict.stats["unread"] == 2


def test_a_value_at_two_offsets_is_a_duplicate() -> None:
    ops = [*clean(), poll("d", 5, (0, 3, "b"))]
    assert "duplicate" in kinds(ops)


def test_a_value_nobody_sent_is_a_phantom() -> None:
    assert kinds([*clean(), poll("d", 5, (0, 3, "z"))]) == {"phantom"}


def test_a_producer_s_values_out_of_order_is_a_reorder() -> None:
    ops = [send("p", 0, "a", 0, 1), send("p", 1, "b", 0, 0), poll("c", 3, (0, 0, "b"), (0, 1, "a"))]
    assert "reordered" in kinds(ops)


def test_a_reorder_of_unacknowledged_sends_seen_in_the_log() -> None:
    ops = [send("p", 0, "a", None, None, UNKNOWN), send("p", 1, "b", None, None, UNKNOWN),
           poll("c", 3, (0, 0, "b"), (0, 1, "a"))]
    assert kinds(ops) == {"reordered"}


def test_different_values_at_one_offset_diverge() -> None:
    ops = [poll("c", 1, (0, 0, "a")), poll("d", 1, (0, 0, "b"))]
    assert "divergent" in kinds(ops)


def test_a_consumer_going_back_or_skipping_without_a_reassignment() -> None:
    base = clean()[:3]
    assert "consumer went back" in kinds([*base, poll("c", 3, (0, 0, "a"), (0, 1, "b")), poll("c", 4, (0, 1, "b"))])
    assert "consumer skipped" in kinds([*base, poll("d", 2.9, (0, 0, "a"), (0, 1, "b"), (0, 2, "c")), poll("c", 3, (0, 0, "a")), poll("c", 4, (0, 2, "c"))])
    rebalance = Op("c", "rebalance", 3.5, 3.6, OK, None, (0,))
    assert check([*base, poll("c", 3, (0, 0, "a"), (0, 1, "b")), rebalance, poll("c", 4, (0, 1, "b"))]).valid


def test_a_committed_offset_going_back() -> None:
    commits = [Op("c", "commit", 0, 1, OK, "g", ((0, 5),)), Op("c", "commit", 2, 3, OK, "g", ((0, 3),))]
    assert kinds(commits) == {"commit went back"}
    overlapping = [Op("c", "commit", 0, 3, OK, "g", ((0, 5),)), Op("d", "commit", 2, 4, OK, "g", ((0, 3),))]
    assert check(overlapping).valid is True


def test_aborted_records_visible_to_read_committed() -> None:
    ops = [send("p", 0, "a", 0, 0), Op("p", "txn", 0, 1, OK, None, ("a",), "abort")]
    assert kinds([*ops, poll("c", 2, (0, 0, "a"), isolation="read_committed")]) == {"aborted visible"}
    assert check([*ops, poll("c", 2, (0, 0, "a"), isolation="read_uncommitted")]).valid is True


def simulate(seed: int) -> list[Op]:
    """Producers appending to partitions, consumers reading prefixes: valid by construction."""
    rng = random.Random(seed)
    logs: dict[int, list[str]] = {0: [], 1: [], 2: []}
    ops: list[Op] = []
    t = 0.0
    for n in range(rng.randrange(5, 60)):
        t += 1
        partition = rng.randrange(3)
        value = f"v{n}"
        outcome = rng.choice([OK, OK, OK, UNKNOWN])
        if outcome == OK or rng.random() < 0.5:  # an unknown send may or may not have been written
            logs[partition].append(value)
        ops.append(send(f"p{n % 2}", t, value, partition, len(logs[partition]) - 1, outcome))
    for consumer in range(2):
        positions = {p: 0 for p in logs}
        for _ in range(rng.randrange(1, 6)):
            t += 1
            records = []
            for p, log in logs.items():
                upto = rng.randrange(positions[p], len(log) + 1)
                records += [(p, o, log[o]) for o in range(positions[p], upto)]
                positions[p] = upto
            ops.append(poll(f"c{consumer}", t, *records))
            ops.append(Op(f"c{consumer}", "commit", t + 0.2, t + 0.3, OK, f"g{consumer}",
                          tuple(positions.items())))
    return ops


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**9))
def test_generated_valid_histories_pass(seed: int) -> None:
    verdict = check(simulate(seed))
    assert verdict.valid is True, verdict.explain()


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**9), st.sampled_from(["lose", "duplicate", "swap"]))
def test_a_generated_history_broken_on_purpose_is_rejected(seed: int, breakage: str) -> None:
    ops = simulate(seed)
    polls = [o for o in ops if o.f == "poll" and len(o.result) >= 2]
    if not polls:
        return
    target = polls[0]
    records = list(target.result)
    if breakage == "lose":  # one acknowledged record dropped from the log as read
        acked = {o.value for o in ops if o.f == "send" and o.outcome == OK}
        candidates = [r for r in records[:-1] if r[2] in acked and any(
            s[0] == r[0] and s[1] > r[1] for s in records)]
        if not candidates:
            return
        gone = candidates[0]
        ops = [o for o in ops if o.f != "poll"] + [poll("final", 1e6, *[r for r in records if r != gone])]
    elif breakage == "duplicate":
        p, o, v = records[0]
        ops.append(poll("other", 1e6, (p, 10_000 + o, v)))
    else:
        sent = {o.value: o for o in ops if o.f == "send"}
        # A swap shows only if something pins the order: an acknowledged offset, or one producer.
        same = [(a, b) for a in records for b in records if a[0] == b[0] and a[1] < b[1] and (
            OK in (sent[a[2]].outcome, sent[b[2]].outcome) or sent[a[2]].process == sent[b[2]].process)]
        if not same:
            return
        a, b = same[0]
        swapped = poll("final", 1e6, (a[0], a[1], b[2]), (b[0], b[1], a[2]))  # two records trade places
        ops = [o for o in ops if o.f != "poll"] + [swapped]
    assert check(ops).valid is False
