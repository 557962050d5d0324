"""Checks of a Kafka-protocol history (the shape of Jepsen's Kafka workload).

Operations (`process` is one producer or consumer; partitions are any hashable, e.g. "topic/0"):

- send:      key = the record's key, value = a value unique in the whole run,
             result = (partition, offset) when ok (offset None or negative: the client was not
             told, e.g. an idempotent retry answered as a duplicate; counted, not checked by offset);
- poll:      value = {"isolation": "read_committed"} or None,
             result = ((partition, offset, value), ...) in the order the consumer got them;
- assign / rebalance: the consumer's positions start again (value: its partitions);
- commit:    key = group, value = ((partition, offset), ...) — the next offset to read;
- txn:       value = (values...), result = "commit" or "abort" (ready for transactions).

What is an error (each a `Verdict` problem with the operations that show it):

- lost:        an acknowledged send whose offset is below what some consumer read in that
               partition, but whose value nobody read — or its offset holds another value;
- divergent:   two consumers read different values at the same partition and offset;
- duplicate:   one value at two places;
- phantom:     a value read that no send wrote;
- reordered:   one producer's values to one partition not in the order it sent them
               (idempotent producers keep order), in its acknowledged offsets or in the log read;
- consumer skipped / went back: between two polls of one consumer (no assign or rebalance in
               between) the next offset read in a partition is not the next one the log holds;
- commit went back: a committed offset below one committed (and completed) before it was asked;
- aborted visible: a read_committed poll returned a value of an aborted transaction.

Values never read because the run ended first are counted ("unread"), not errors: the workload
drains every partition at the end so that this count is meaningful.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from roost.testing.history.model import OK, UNKNOWN, Op, Verdict

Problem = tuple[str, str, list[Op]]  # kind, text, witness


def check(ops: Iterable[Op]) -> Verdict:
    ops = [op for op in ops if op.process != "nemesis"]
    sends = [op for op in ops if op.f == "send"]
    no_offset = [op for op in sends if op.outcome == OK and not _offset_known(op)]
    sends = [op for op in sends if op.outcome != OK or _offset_known(op)]
    polls = [op for op in ops if op.f == "poll" and op.outcome == OK]
    send_of = {op.value: op for op in sends}
    problems: list[Problem] = []

    # The log as read: partition -> offset -> value, and where each read came from.
    log: dict[Any, dict[int, Any]] = defaultdict(dict)
    read_at: dict[tuple[Any, int], Op] = {}
    places: dict[Any, set[tuple[Any, int]]] = defaultdict(set)
    place_op: dict[Any, Op] = {}
    for poll in polls:
        for partition, offset, value in poll.result or ():
            known = log[partition].get(offset)
            if known is not None and known != value:
                problems.append(("divergent", f"{partition}@{offset} read as {known!r} and as {value!r}",
                                 [read_at[(partition, offset)], poll]))
            log[partition].setdefault(offset, value)
            read_at.setdefault((partition, offset), poll)
            places[value].add((partition, offset))
            place_op.setdefault(value, poll)
    max_read = {partition: max(offsets) for partition, offsets in log.items()}

    unread = 0
    for op in sends:
        if op.outcome != OK:
            continue
        partition, offset = op.result
        there = log.get(partition, {}).get(offset)
        if there is not None and there != op.value:
            problems.append(("lost", f"{op.value!r} acknowledged at {partition}@{offset}, which holds {there!r}",
                             [op, read_at[(partition, offset)]]))
        elif op.value not in places:
            if offset <= max_read.get(partition, -1):
                problems.append(("lost", f"{op.value!r} acknowledged at {partition}@{offset}, never read though "
                                 f"{partition} was read up to {max_read[partition]}", [op]))
            else:
                unread += 1

    for value, where in places.items():
        if len(where) > 1:
            witness = [op for op in (send_of.get(value), place_op[value]) if op is not None]
            problems.append(("duplicate", f"{value!r} at {sorted(where, key=repr)}", witness))

    every_send = {op.value for op in ops if op.f == "send"}
    for value, where in places.items():
        if value not in every_send:
            partition, offset = min(where, key=repr)
            problems.append(("phantom", f"{value!r} read at {partition}@{offset} was never sent",
                             [read_at[(partition, offset)]]))
    problems += _reordered(sends, log, send_of)
    problems += _consumer_positions(ops, log)
    problems += _commits(ops)
    problems += _aborted(ops, polls)

    counts: dict[str, int] = defaultdict(int)
    for kind, _, _ in problems:
        counts[kind] += 1
    stats = {"sends": len(sends), "acked": sum(op.outcome == OK for op in sends),
             "unknown": sum(op.outcome == UNKNOWN for op in sends), "acked without offset": len(no_offset),
             "polls": len(polls),
             "read": sum(len(v) for v in log.values()), "unread": unread, **counts}
    verdict = Verdict("broker", not problems, [f"{kind}: {text}" for kind, text, _ in problems], stats=stats)
    if problems:
        verdict.witness = problems[0][2]
    return verdict


def _offset_known(op: Op) -> bool:
    return op.result is not None and op.result[1] is not None and op.result[1] >= 0


def _reordered(sends: Sequence[Op], log: dict[Any, dict[int, Any]], send_of: dict[Any, Op]) -> list[Problem]:
    problems: list[Problem] = []
    # Acknowledged offsets, per producer and partition, in the order the producer sent.
    acked: dict[tuple[str, Any], list[Op]] = defaultdict(list)
    for op in sends:
        if op.outcome == OK:
            acked[(op.process, op.result[0])].append(op)
    for (_, partition), ops in acked.items():
        ops.sort(key=lambda op: op.invoke)
        for a, b in itertools.pairwise(ops):
            if b.result[1] <= a.result[1]:
                problems.append(("reordered", f"{a.value!r} sent before {b.value!r} but acknowledged at "
                                 f"{partition}@{a.result[1]} and @{b.result[1]}", [a, b]))
    # The log as read, per producer.
    for partition, by_offset in log.items():
        last: dict[str, Op] = {}
        for offset in sorted(by_offset):
            op = send_of.get(by_offset[offset])
            if op is None:
                continue
            before = last.get(op.process)
            if before is not None and before.invoke > op.invoke:
                problems.append(("reordered", f"{partition}: {before.value!r} before {op.value!r} in the log "
                                 f"(offset {offset}) though {op.process} sent them the other way", [op, before]))
            last[op.process] = op
    return problems


def _consumer_positions(ops: Sequence[Op], log: dict[Any, dict[int, Any]]) -> list[Problem]:
    problems: list[Problem] = []
    offsets = {partition: sorted(by_offset) for partition, by_offset in log.items()}
    by_process: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        if op.f in ("poll", "assign", "rebalance") and op.outcome == OK:
            by_process[op.process].append(op)
    for process_ops in by_process.values():
        process_ops.sort(key=lambda op: op.complete)
        position: dict[Any, tuple[int, Op]] = {}
        for op in process_ops:
            if op.f != "poll":
                position.clear()
                continue
            for partition, offset, _ in op.result or ():
                if partition in position:
                    previous, previous_op = position[partition]
                    if offset <= previous:
                        problems.append(("consumer went back", f"{op.process} read {partition}@{offset} after "
                                         f"@{previous}", [previous_op, op]))
                    else:
                        known = offsets[partition]
                        following = known[bisect.bisect_right(known, previous)]
                        if following < offset:
                            problems.append(("consumer skipped", f"{op.process} read {partition}@{offset} "
                                             f"after @{previous}, skipping @{following}", [previous_op, op]))
                position[partition] = (offset, op)
    return problems


def _commits(ops: Sequence[Op]) -> list[Problem]:
    problems: list[Problem] = []
    commits: dict[tuple[Any, Any], list[tuple[Op, int]]] = defaultdict(list)
    for op in ops:
        if op.f == "commit" and op.outcome == OK:
            for partition, offset in op.value:
                commits[(op.key, partition)].append((op, offset))
    for (group, partition), entries in commits.items():
        done = sorted(entries, key=lambda e: e[0].complete)
        highest: tuple[int, Op] | None = None
        i = 0
        for op, offset in sorted(entries, key=lambda e: e[0].invoke):
            while i < len(done) and done[i][0].complete < op.invoke:
                if highest is None or done[i][1] > highest[0]:
                    highest = (done[i][1], done[i][0])
                i += 1
            if highest is not None and offset < highest[0]:
                problems.append(("commit went back", f"group {group!r} {partition}: committed {offset} after "
                                 f"{highest[0]} was", [highest[1], op]))
    return problems


def _aborted(ops: Sequence[Op], polls: Sequence[Op]) -> list[Problem]:
    aborted: dict[Any, Op] = {}
    for op in ops:
        if op.f == "txn" and op.outcome == OK and op.result == "abort":
            for value in op.value:
                aborted[value] = op
    problems: list[Problem] = []
    for poll in polls:
        if (poll.value or {}).get("isolation") != "read_committed":
            continue
        for partition, offset, value in poll.result or ():
            if value in aborted:
                problems.append(("aborted visible", f"{value!r} of an aborted transaction read at "
                                 f"{partition}@{offset} under read_committed", [aborted[value], poll]))
    return problems
