"""Checks of a share-group history (KIP-932 queues): nothing answered comes back, nothing is lost.

Operations (`process` is one producer or share consumer; partitions any hashable, e.g. 0):

- send:        as in broker.py: value unique in the run, result = (partition, offset) when ok;
- share-poll:  result = ((partition, offset, value, delivery_count), ...): the records one poll
               of a share consumer returned (delivery_count as the client saw it; None if unknown);
- share-ack:   key = group, value = ((partition, offset, type, delivery_count), ...) with type
               "accept", "release" or "reject": the acknowledgements one commit carried. The
               outcome is the commit's answer for them: ok (the broker answered NONE for their
               partition), fail (certainly not applied: never sent), unknown (an error or a
               timeout: a share-partition leader may have made it durable before it failed);
- share-state: result = ((partition, start_offset), ...): the share-partitions' start offsets as
               the share coordinator holds them at the end of the run, after a quiescence period
               in which the consumers kept working (optional: without it "unfinished" is not checked).

What is an error (each a `Verdict` problem with the operations that show it):

- redelivered after acknowledged: a record delivered by a poll invoked after an acknowledgement
               that ends it (accept or reject) was answered ok — the claim of KIP-932's
               durable acknowledgements through any failover;
- acquired twice: two deliveries of a record with one delivery count and no failover of the data
               partition's leader between them (none that began before the later answer and
               ended after the first request: a poll invoked at the old leader may be answered
               by the new one): each acquisition raises the count, so two consumers held it at
               once (or a count was not raised); only a new leader, resuming from the persisted
               count, may hand out a count again;
- lost:        an acknowledged send that never ended: no accept or reject of it answered ok or
               unknown, and no delivery at the delivery limit (which archives it on its release
               or its lock's expiry); "never delivered" when no poll returned it;
- unfinished:  the final share-state has a start offset at or below an acknowledged send's
               offset: a record still in flight after the quiescence period;
- delivery count went down: a delivery of a record with a lower count than a delivery of it
               that completed before it was invoked, with no failover of the data partition's
               leader between them (a nemesis "kill" or "leader-move"); or a count outside
               1..delivery_limit ("over the delivery limit" above it). Across a failover a count
               may go back, as in Kafka: acquisitions are not persisted, nor a return (release,
               lock expiry) whose background write the old leader had not made durable, so the
               new leader resumes from the last persisted count (share_sim found this);
- divergent:   a delivered value that is not what was sent at that partition and offset.

Counted, not errors: redeliveries (deliveries after a record's first), acknowledgements by
outcome, records accepted and archived.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from roost.testing.history.model import FAIL, OK, UNKNOWN, Op, Verdict

ENDING = frozenset({"accept", "reject"})
ACK_TYPES = frozenset({"accept", "release", "reject"})
DEFAULT_DELIVERY_LIMIT = 5  # group.share.delivery.count.limit
# Operations after which the data partition may have a new leader: a nemesis's kill or power cut,
# or a leader-move an observer saw (from when it last saw the old leader to when it saw the new).
FAILOVERS = frozenset({"kill", "leader-move", "powercut"})

Problem = tuple[str, str, list[Op]]  # kind, text, witness
Record = tuple[Any, int]  # (partition, offset)


@dataclass(frozen=True)
class Delivery:
    op: Op
    value: Any
    count: int | None


@dataclass(frozen=True)
class Ack:
    op: Op
    kind: str
    count: int | None


def check(ops: Iterable[Op], delivery_limit: int = DEFAULT_DELIVERY_LIMIT) -> Verdict:
    ops = list(ops)
    failovers = sorted((op.invoke, op.complete) for op in ops if op.f in FAILOVERS)
    ops = [op for op in ops if op.process != "nemesis" and op.f not in FAILOVERS]
    sends = {op.result: op for op in ops
             if op.f == "send" and op.outcome == OK and op.result is not None and op.result[1] is not None
             and op.result[1] >= 0}
    deliveries: dict[Record, list[Delivery]] = defaultdict(list)
    for op in ops:
        if op.f == "share-poll" and op.outcome == OK:
            for partition, offset, value, count in op.result or ():
                deliveries[(partition, offset)].append(Delivery(op, value, count))
    acks: dict[Record, list[Ack]] = defaultdict(list)
    outcomes: dict[str, int] = defaultdict(int)
    for op in ops:
        if op.f == "share-ack":
            outcomes[op.outcome] += 1
            for partition, offset, kind, count in op.value or ():
                assert kind in ACK_TYPES, f"unknown acknowledgement type {kind!r} in {op}"
                acks[(partition, offset)].append(Ack(op, kind, count))
    final: dict[Any, tuple[int, Op]] = {}
    for op in ops:
        if op.f == "share-state" and op.outcome == OK:
            for partition, start in op.result or ():
                final[partition] = (start, op)

    problems: list[Problem] = []
    for record, found in deliveries.items():
        problems += _after_ended(record, found, acks.get(record, []))
        problems += _counts(record, found, delivery_limit, failovers)
        problems += _twice(record, found, failovers)
        sent = sends.get(record)
        if sent is not None:
            for d in found:
                if d.value != sent.value:
                    problems.append(("divergent", f"{_name(record)} delivered as {d.value!r}, sent as {sent.value!r}",
                                     [sent, d.op]))
                    break
    accepted = archived = 0
    for record, sent in sorted(sends.items(), key=lambda item: repr(item[0])):
        found = deliveries.get(record, [])
        ends = [a for a in acks.get(record, []) if a.kind in ENDING and a.op.outcome in (OK, UNKNOWN)]
        at_limit = [d for d in found if d.count is not None and d.count >= delivery_limit]
        if any(a.kind == "accept" for a in ends):
            accepted += 1
        elif ends or at_limit:
            archived += 1
        else:
            if not found:
                problems.append(("lost", f"{sent.value!r} acknowledged at {_name(record)}, never delivered", [sent]))
            else:
                counts = [d.count for d in found]
                done = [f"{a.kind} {a.op.outcome}" for a in acks.get(record, [])]
                problems.append(("lost", f"{sent.value!r} at {_name(record)} never ended: delivered {len(found)} "
                                 f"times (counts {counts}), acknowledgements {done or 'none'}",
                                 [sent, *(d.op for d in found[-2:])]))
    for partition, (start, op) in final.items():
        behind = sorted(o for (p, o) in sends if p == partition and o >= start)
        if behind:
            problems.append(("unfinished", f"partition {partition!r} still starts at {start} after the quiescence "
                             f"period: {len(behind)} acknowledged sends at or past it (first {behind[0]})",
                             [op, sends[(partition, behind[0])]]))

    redeliveries = sum(len(found) - 1 for found in deliveries.values())
    counts_by_kind: dict[str, int] = defaultdict(int)
    for kind, _, _ in problems:
        counts_by_kind[kind] += 1
    stats = {"records": len(sends), "deliveries": sum(len(v) for v in deliveries.values()),
             "redeliveries": redeliveries, "accepted": accepted, "archived": archived,
             "acks ok": outcomes[OK], "acks unknown": outcomes[UNKNOWN], "acks failed": outcomes[FAIL],
             **counts_by_kind}
    verdict = Verdict("share", not problems, [f"{kind}: {text}" for kind, text, _ in problems], stats=stats)
    if problems:
        verdict.witness = problems[0][2]
    return verdict


def _name(record: Record) -> str:
    return f"{record[0]}@{record[1]}"


def _after_ended(record: Record, found: list[Delivery], record_acks: list[Ack]) -> list[Problem]:
    ended = [a for a in record_acks if a.op.outcome == OK and a.kind in ENDING]
    if not ended:
        return []
    first = min(ended, key=lambda a: a.op.complete)
    later = [d for d in found if d.op.invoke > first.op.complete]
    if not later:
        return []
    d = later[0]
    return [("redelivered after acknowledged", f"{_name(record)} {first.kind}ed by {first.op.process} (answered ok at "
             f"{first.op.complete:.3f}), delivered again to {d.op.process} at {d.op.invoke:.3f} with delivery count "
             f"{d.count}", [first.op, d.op])]


def _counts(record: Record, found: list[Delivery], limit: int, failovers: list[tuple[float, float]]) -> list[Problem]:
    problems: list[Problem] = []
    known = sorted((d for d in found if d.count is not None), key=lambda d: d.op.invoke)
    for d in known:
        assert d.count is not None
        if not 1 <= d.count <= limit:
            problems.append(("delivery count went down" if d.count < 1 else "over the delivery limit",
                             f"{_name(record)} delivered to {d.op.process} with count {d.count} "
                             f"(limit {limit})", [d.op]))
            return problems
    for d in known:  # a record has a few deliveries: quadratic is fine
        since = _last_failover(failovers, d.op.complete)  # d may come from a leader newer than its invoke's
        before = [e for e in known if e.op.complete < d.op.invoke and e.op.invoke > since]
        highest = max(before, key=lambda e: e.count or 0, default=None)
        if highest is not None and d.count is not None and highest.count is not None and d.count < highest.count:
            problems.append(("delivery count went down", f"{_name(record)} delivered to {d.op.process} with count "
                             f"{d.count} after {highest.op.process} got it with count {highest.count}, "
                             "no failover between", [highest.op, d.op]))
            break
    return problems


def _twice(record: Record, found: list[Delivery], failovers: list[tuple[float, float]]) -> list[Problem]:
    by_count: dict[int, list[Delivery]] = defaultdict(list)
    for d in found:
        if d.count is not None:
            by_count[d.count].append(d)
    for count, same in sorted(by_count.items()):
        same.sort(key=lambda d: d.op.invoke)
        for a, b in itertools.pairwise(same):
            # One may come from the old leader and one from the new if a failover began before
            # the later of them answered (a poll spans the failover: invoked at the old leader,
            # retried at the new) and ended after the first was asked for.
            if _last_failover(failovers, max(a.op.complete, b.op.complete)) < a.op.invoke:
                return [("acquired twice", f"{_name(record)} delivered to {a.op.process} and to {b.op.process} "
                         f"with delivery count {count}, no failover between", [a.op, b.op])]
    return []


def _last_failover(failovers: list[tuple[float, float]], before: float) -> float:
    """The latest end of a failover that began before `before` (-inf: none): a delivery invoked
    after that end came from the new leader; one invoked before it may have come from the old one."""
    i = bisect.bisect_left(failovers, (before, float("-inf")))
    return max((end for _start, end in failovers[:i]), default=float("-inf"))
