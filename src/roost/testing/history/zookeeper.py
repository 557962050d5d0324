"""ZooKeeper's own guarantees, checked on a keeper history.

Operations (`process` is one session; it runs one operation at a time):

- read, read-seq: key = path, value = (data, version) observed (read: after a sync; read-seq: a
          plain read, sequentially consistent only — both count for the per-session checks);
- write:  key = path, value = data, result = the new version;
- cas:    key = path, value = (expected version, data), result = the new version;
- watch-set:   key = path, value = the version the watching read saw, result = a registration id;
- watch-event: key = path, value = that registration id (invoke = when the client got it);
- create-ephemeral: key = path (ok: the session owns it);
- expired:     the session learnt it had expired (invoke = when); closed: the client closed it;
- enqueue:     value = a unique value, result = the sequential node created;
- dequeue:     value = the node deleted (ok: this session deleted it), result = its data
               (unknown: the delete timed out, so the item may be gone);
- queue-drain: result = the values left in the queue at the end;
- exists-synced: key = path, result = whether it exists, read after a sync() (so not stale).

Guarantees (ZooKeeper Programmer's Guide, "Consistency Guarantees" and "ZooKeeper Watches"):

- sequential consistency per session: the versions one session sees of one znode never go back,
  and it reads its own writes (a read after its write sees that version or a later one);
- one value per version: every observation of (path, version) has the same data, from any session
  (two values at one version is a split brain or a lost write);
- a watch fires at most once per registration; once the znode changed after the version it was
  set at, it fires (by the end of the run, if its session lives); and a session never sees the
  new data before the event that announces the change;
- an ephemeral node is gone once its session expired: an exists after a sync, asked after the
  expiry was seen, finds nothing;
- a sequential-node queue loses nothing acknowledged and hands nothing out twice: every ok
  enqueue is dequeued once or left at the end, and a sequence number never goes back in real time.

Watch events reach kazoo's callbacks through its own thread, so a read's reply can overtake the
callback that records an event the server sent first: `event_slack_s` is how late an event may be
recorded after the read that saw its data (0 for histories whose events are recorded in order).
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from roost.testing.history.model import OK, Op, Verdict

Problem = tuple[str, str, list[Op]]


def _observed(op: Op) -> tuple[int, Any] | None:
    """(version, data) an ok op shows of its znode, if it shows one."""
    if op.outcome != OK:
        return None
    if op.f in ("read", "read-seq"):
        data, version = op.value
        return (version, data) if version >= 0 else None
    if op.f == "write" and op.result is not None:
        return (op.result, op.value)
    if op.f == "cas" and op.result is not None:
        return (op.result, op.value[1])
    return None


def check(ops: Iterable[Op], grace_s: float = 0.0, event_slack_s: float = 0.0) -> Verdict:
    """`grace_s`: how long before its session's end a change must have completed for its watch to be
    owed an event."""
    ops = sorted((op for op in ops if op.process != "nemesis"), key=lambda op: op.invoke)
    problems: list[Problem] = []

    # Sequential consistency per session, and one value per version.
    last_seen: dict[tuple[str, Any], tuple[int, Op]] = {}
    value_at: dict[tuple[Any, int], tuple[Any, Op]] = {}
    for op in ops:
        seen = _observed(op)
        if seen is None:
            continue
        version, data = seen
        mine = last_seen.get((op.process, op.key))
        if mine is not None and version < mine[0]:
            problems.append(("session went back", f"session {op.process} saw {op.key} at version {version} "
                             f"after version {mine[0]}", [mine[1], op]))
        if mine is None or version >= mine[0]:
            last_seen[(op.process, op.key)] = (version, op)
        other = value_at.get((op.key, version))
        if other is not None and other[0] != data:
            problems.append(("two values at one version", f"{op.key} version {version} is {other[0]!r} "
                             f"and {data!r}", [other[1], op]))
        value_at.setdefault((op.key, version), (data, op))

    problems += _watches(ops, grace_s, event_slack_s)
    problems += _ephemerals(ops)
    problems += _queue(ops)
    counts: dict[str, int] = defaultdict(int)
    for kind, _, _ in problems:
        counts[kind] += 1
    stats = {"ops": len(ops), "watches": sum(op.f == "watch-set" for op in ops),
             "events": sum(op.f == "watch-event" for op in ops), **counts}
    verdict = Verdict("zookeeper", not problems, [f"{kind}: {text}" for kind, text, _ in problems], stats=stats)
    if problems:
        verdict.witness = problems[0][2]
    return verdict


def _watches(ops: list[Op], grace_s: float, event_slack_s: float) -> list[Problem]:
    problems: list[Problem] = []
    events: dict[Any, list[Op]] = defaultdict(list)
    for op in ops:
        if op.f == "watch-event":
            events[op.value].append(op)
    expired_at = {op.process: op.invoke for op in ops if op.f == "expired"}
    closed_at = {op.process: op.invoke for op in ops if op.f == "closed"}
    end = max((op.complete for op in ops), default=0.0)
    # Per path: known writes by the version they made, with the earliest completion of any write at
    # or above each version (so "the first change past version v" is one bisect).
    changes: dict[Any, tuple[list[int], list[float], list[Op]]] = {}
    by_path: dict[Any, list[Op]] = defaultdict(list)
    for op in ops:
        if op.f in ("write", "cas") and op.outcome == OK and op.result is not None:
            by_path[op.key].append(op)
    for path, writes in by_path.items():
        writes.sort(key=lambda op: op.result)
        earliest: list[float] = [0.0] * len(writes)
        first: list[Op] = [writes[-1]] * len(writes)
        best = math.inf
        best_op = writes[-1]
        for i in range(len(writes) - 1, -1, -1):
            if writes[i].complete < best:
                best, best_op = writes[i].complete, writes[i]
            earliest[i], first[i] = best, best_op
        changes[path] = ([op.result for op in writes], earliest, first)
    # Per session and path: its reads in order (a session runs one operation at a time).
    reads: dict[tuple[str, Any], list[Op]] = defaultdict(list)
    for op in ops:
        if op.f in ("read", "read-seq") and op.outcome == OK:
            reads[(op.process, op.key)].append(op)
    read_starts: dict[tuple[str, Any], list[float]] = {}
    for session_key, session_reads in reads.items():
        session_reads.sort(key=lambda op: op.invoke)
        read_starts[session_key] = [op.invoke for op in session_reads]
    for registration in (op for op in ops if op.f == "watch-set" and op.outcome == OK):
        fired = sorted(events.get(registration.result, []), key=lambda e: e.invoke)
        if len(fired) > 1:
            problems.append(("watch fired twice", f"registration {registration.result} on {registration.key} "
                             f"fired {len(fired)} times", [registration, *fired[:2]]))
        alive_until = expired_at.get(registration.process, closed_at.get(registration.process, end))
        if registration.key in changes and not fired and registration.process not in expired_at:
            versions, earliest, first = changes[registration.key]
            i = bisect.bisect_right(versions, registration.value)
            if i < len(versions) and earliest[i] < alive_until - grace_s:
                change = first[i]
                problems.append(("watch never fired", f"{registration.key} changed to version {change.result} "
                                 f"after a watch was set at {registration.value}", [registration, change]))
        # The session must not read the newer data before the event: its first read past the
        # watched version (it reads in order, so later ones complete later still).
        first_event = fired[0].invoke if fired else math.inf
        session_key = (registration.process, registration.key)
        session_reads = reads.get(session_key, [])
        j = bisect.bisect_right(read_starts[session_key], registration.complete) if session_reads else 0
        newer = next((session_reads[k] for k in range(j, len(session_reads))
                      if session_reads[k].value[1] > registration.value), None)
        if newer is not None and newer.complete + event_slack_s < first_event:
            problems.append(("data before its watch event", f"session {newer.process} read {newer.key} version "
                             f"{newer.value[1]} before the event of its watch at version {registration.value}",
                             [registration, newer, *fired[:1]]))
    return problems


def _ephemerals(ops: list[Op]) -> list[Problem]:
    problems: list[Problem] = []
    owner = {op.key: op for op in ops if op.f == "create-ephemeral" and op.outcome == OK}
    expired = {op.process: op for op in ops if op.f == "expired"}
    for op in ops:
        if op.f != "exists-synced" or op.outcome != OK or not op.result:
            continue
        created = owner.get(op.key)
        if created is None:
            continue
        gone = expired.get(created.process)
        if gone is not None and op.invoke > gone.invoke and created.complete < gone.invoke:
            problems.append(("ephemeral outlived its session", f"{op.key} of session {created.process} still "
                             f"exists after the session expired", [created, gone, op]))
    return problems


def _queue(ops: list[Op]) -> list[Problem]:
    problems: list[Problem] = []
    enqueued = {op.value: op for op in ops if op.f == "enqueue" and op.outcome != "fail"}
    dequeued: dict[Any, Op] = {}
    for op in ops:
        if op.f == "dequeue" and op.outcome == OK:
            if op.result in dequeued:
                problems.append(("dequeued twice", f"{op.result!r}", [dequeued[op.result], op]))
            elif op.result not in enqueued:
                problems.append(("dequeued what was never enqueued", f"{op.result!r}", [op]))
            dequeued.setdefault(op.result, op)
    # A dequeue whose delete timed out may have taken its item: not a loss.
    maybe = {op.result for op in ops if op.f == "dequeue" and op.outcome == "unknown" and op.result is not None}
    drains = [op for op in ops if op.f == "queue-drain" and op.outcome == OK]
    if drains:
        left = set(drains[-1].result or ())
        for value, op in enqueued.items():
            if op.outcome == OK and value not in dequeued and value not in left and value not in maybe:
                problems.append(("queue lost an item", f"{value!r} enqueued as {op.result} is gone", [op, drains[-1]]))
    ok = sorted((op for op in enqueued.values() if op.outcome == OK and op.result), key=lambda op: op.complete)
    by_invoke = sorted(ok, key=lambda op: op.invoke)
    highest: Op | None = None
    i = 0
    for op in by_invoke:  # a sequence number below one handed out before this enqueue began
        while i < len(ok) and ok[i].complete < op.invoke:
            if highest is None or ok[i].result > highest.result:
                highest = ok[i]
            i += 1
        if highest is not None and op.result < highest.result:
            problems.append(("sequence went back", f"{op.result} created after {highest.result}", [highest, op]))
    return problems
