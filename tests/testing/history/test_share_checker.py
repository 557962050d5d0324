"""The share-group checker on hand-written histories: clean ones (redeliveries after a lock expiry,
a failover that redelivers an unanswered acknowledgement with the same count, an unknown accept,
archiving at the delivery limit, a rejection) pass; each rule has a history that breaks it and
is found, with the operations that show it."""

from __future__ import annotations

from pathlib import Path

from roost.testing.history.model import FAIL, OK, UNKNOWN, History, Op
from roost.testing.history.share import check


def send(t: float, value: str, offset: int, partition: int = 0) -> Op:
    return Op("p", "send", t, t + 0.1, OK, "k", value, (partition, offset))


def poll(process: str, t: float, *records: tuple[int, str, int], partition: int = 0) -> Op:
    """records: (offset, value, delivery count)."""
    return Op(process, "share-poll", t, t + 0.1, OK, None, None,
              tuple((partition, offset, value, count) for offset, value, count in records))


def ack(process: str, t: float, *entries: tuple[int, str, int], outcome=OK, partition: int = 0) -> Op:
    """entries: (offset, type, delivery count)."""
    return Op(process, "share-ack", t, t + 0.2, outcome, "g",
              tuple((partition, offset, kind, count) for offset, kind, count in entries))


def state(t: float, start: int, partition: int = 0) -> Op:
    return Op("final", "share-state", t, t + 0.1, OK, "g", None, ((partition, start),))


def kinds(ops: list[Op]) -> set[str]:
    return {problem.split(":")[0] for problem in check(History(ops).ops).problems}


def produced() -> list[Op]:
    return [send(0, "a", 0), send(0.2, "b", 1), send(0.4, "c", 2)]


def test_a_clean_history_with_redeliveries_passes() -> None:
    ops = [*produced(),
           poll("c1", 1, (0, "a", 1), (1, "b", 1)),
           ack("c1", 1.2, (0, "accept", 1), (1, "release", 1)),
           # b released; it and c come to c2; c2's accept of c is unknown (its leader died)
           poll("c2", 2, (1, "b", 2), (2, "c", 1)),
           ack("c2", 2.2, (1, "accept", 2), (2, "accept", 1), outcome=UNKNOWN),
           # the leader died before c's accept was durable: c comes back with the persisted count
           Op("nemesis", "kill", 3, 3.1, OK, None, {"node": 2, "role": "data leader"}),
           poll("c1", 4, (2, "c", 1)),
           ack("c1", 4.2, (2, "accept", 1)),
           state(10, 3)]
    verdict = check(ops)
    assert verdict.valid is True, verdict.explain()
    assert verdict.stats["records"] == 3 and verdict.stats["redeliveries"] == 2
    assert verdict.stats["accepted"] == 3 and verdict.stats["acks unknown"] == 1


def test_archiving_by_reject_and_at_the_delivery_limit_ends_a_record() -> None:
    ops = [*produced()[:2], poll("c1", 1, (0, "a", 1)), ack("c1", 1.2, (0, "reject", 1))]
    t = 2.0
    for count in range(1, 4):  # b: released three times, then expires at the limit of 3
        ops += [poll("c2", t, (1, "b", count))]
        if count < 3:
            ops += [ack("c2", t + 0.2, (1, "release", count))]
        t += 1
    verdict = check(History(ops).ops, delivery_limit=3)
    assert verdict.valid is True, verdict.explain()
    assert verdict.stats["archived"] == 2


def test_a_record_delivered_after_its_accept_was_answered_is_found() -> None:
    ops = [*produced()[:1], poll("c1", 1, (0, "a", 1)), ack("c1", 1.2, (0, "accept", 1)),
           poll("c2", 3, (0, "a", 1))]
    verdict = check(History(ops).ops)
    assert verdict.valid is False
    assert verdict.problems[0].startswith("redelivered after acknowledged: 0@0 accepted by c1")
    assert [op.f for op in verdict.witness] == ["share-ack", "share-poll"]


def test_a_rejected_record_that_comes_back_is_found() -> None:
    ops = [*produced()[:1], poll("c1", 1, (0, "a", 1)), ack("c1", 1.2, (0, "reject", 1)),
           poll("c1", 3, (0, "a", 2))]
    assert "redelivered after acknowledged" in kinds(ops)


def test_a_delivery_while_the_accept_was_in_flight_is_not_after_it() -> None:
    """The poll was invoked before the accept was answered (its lock had expired: the count is
    higher): not a redelivery after the answer."""
    ops = [*produced()[:1], poll("c1", 1, (0, "a", 1)), ack("c1", 1.2, (0, "accept", 1)),
           poll("c2", 1.3, (0, "a", 2)), ack("c2", 1.5, (0, "accept", 2), outcome=UNKNOWN)]
    assert check(History(ops).ops).valid is True


def test_two_consumers_holding_one_acquisition_are_found() -> None:
    ops = [*produced()[:1], poll("c1", 1, (0, "a", 1)), poll("c2", 1.05, (0, "a", 1)),
           ack("c1", 1.2, (0, "accept", 1)), ack("c2", 1.25, (0, "accept", 1), outcome=UNKNOWN)]
    verdict = check(History(ops).ops)
    assert {p.split(":")[0] for p in verdict.problems} == {"acquired twice"}, verdict.explain()
    # a new leader may hand the count out again (it resumes from the persisted one)
    ops.insert(2, Op("nemesis", "kill", 1.02, 1.03, OK, None, {"role": "data leader"}))
    assert check(History(ops).ops).valid is True


def test_an_acknowledged_send_never_delivered_is_lost() -> None:
    ops = [*produced()[:2], poll("c1", 1, (0, "a", 1)), ack("c1", 1.2, (0, "accept", 1))]
    verdict = check(History(ops).ops)
    assert verdict.problems == ["lost: 'b' acknowledged at 0@1, never delivered"]


def test_a_record_whose_only_accept_failed_or_that_was_only_released_is_lost() -> None:
    failed = [*produced()[:1], poll("c1", 1, (0, "a", 1)), ack("c1", 1.2, (0, "accept", 1), outcome=FAIL)]
    assert kinds(failed) == {"lost"}
    released = [*produced()[:1], poll("c1", 1, (0, "a", 1)), ack("c1", 1.2, (0, "release", 1))]
    assert kinds(released) == {"lost"}


def test_a_start_offset_not_past_the_records_after_quiescence_is_unfinished() -> None:
    ops = [*produced(), poll("c1", 1, (0, "a", 1), (1, "b", 1), (2, "c", 1)),
           ack("c1", 1.2, (0, "accept", 1), (1, "accept", 1), (2, "accept", 1), outcome=UNKNOWN),
           state(10, 1)]
    verdict = check(History(ops).ops)
    assert [p.split(":")[0] for p in verdict.problems] == ["unfinished"]
    assert "2 acknowledged sends at or past it (first 1)" in verdict.problems[0]


def test_a_delivery_count_that_goes_down_is_found() -> None:
    ops = [*produced()[:1], poll("c1", 1, (0, "a", 2)), poll("c1", 2, (0, "a", 3)),
           poll("c2", 3, (0, "a", 1)), ack("c2", 3.2, (0, "accept", 1))]
    verdict = check(History(ops).ops)
    assert [p.split(":")[0] for p in verdict.problems] == ["delivery count went down"]
    assert verdict.problems[0].endswith("after c1 got it with count 3, no failover between")


def test_a_count_past_the_limit_is_found() -> None:
    ops = [*produced()[:1], poll("c1", 1, (0, "a", 6)), ack("c1", 1.2, (0, "accept", 6))]
    assert kinds(ops) == {"over the delivery limit"}


def test_a_delivered_value_other_than_the_sent_one_is_divergent() -> None:
    ops = [*produced()[:1], poll("c1", 1, (0, "z", 1)), ack("c1", 1.2, (0, "accept", 1))]
    assert kinds(ops) == {"divergent"}


def test_a_history_file_round_trips(tmp_path: Path) -> None:
    ops = [*produced(), poll("c1", 1, (0, "a", 1), (1, "b", 1), (2, "c", 1)),
           ack("c1", 1.2, (0, "accept", 1), (1, "accept", 1), (2, "reject", 1)), state(3, 3)]
    path = tmp_path / "h.jsonl"
    History(ops).dump(path)
    verdict = check(History.load(path).ops)
    assert verdict.valid is True, verdict.explain()
    assert (verdict.stats["accepted"], verdict.stats["archived"]) == (2, 1)


def test_a_count_may_go_back_across_a_failover_of_the_data_leader() -> None:
    """As in Kafka: the new leader resumes from the last persisted count (acquisitions and
    returns not yet written are not persisted)."""
    ops = [*produced()[:1], poll("c1", 1, (0, "a", 1)), poll("c1", 2, (0, "a", 2)),
           Op("nemesis", "kill", 2.5, 2.6, OK, None, {"node": 2, "role": "data leader"}),
           poll("c2", 3, (0, "a", 1)), ack("c2", 3.2, (0, "accept", 1))]
    assert check(History(ops).ops).valid is True
    # without the kill it goes down; a kill after both deliveries changes nothing
    ops[3] = Op("nemesis", "kill", 3.5, 3.6, OK, None, {"node": 2, "role": "data leader"})
    assert kinds(ops) == {"delivery count went down", "acquired twice"}


def test_a_poll_that_spans_a_failover_may_be_answered_by_the_new_leader() -> None:
    """Two polls asked for at once; the data leader is killed after both were asked and before
    the second is answered: the first got the records from the old leader, the second (retried
    at the new leader, which resumes from the persisted count) may get them with the same count
    (seen in the CI fault run). A kill after both answers still excuses nothing."""
    first = Op("c0", "share-poll", 1.0, 1.1, OK, None, None, ((0, 0, "a", 1),))
    second = Op("c2", "share-poll", 1.001, 1.4, OK, None, None, ((0, 0, "a", 1),))
    kill = Op("nemesis", "kill", 1.05, 1.06, OK, None, {"node": 2, "role": "data leader"})
    ops = [*produced()[:1], first, second, kill, ack("c2", 1.5, (0, "accept", 1))]
    assert check(History(ops).ops).valid is True
    ops[3] = Op("nemesis", "kill", 1.45, 1.46, OK, None, {"node": 2, "role": "data leader"})
    assert kinds(ops) == {"acquired twice"}
