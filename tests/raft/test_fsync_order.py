"""Durable before acknowledged, in the raft log of three real member processes, observed with
strace (tests/support/syscall_trace.py).

For each proposal (through the leader and through a follower):
- the proposer acknowledges it (its `{"ok": index}` line) only after its own log write of the
  entry was fsynced, and after a majority of members fsynced theirs;
- a follower tells the leader it holds the entry (an APPEND_RESP matching its index) only after
  its log write of the entry was fsynced: the promise the leader counts towards the majority.

The kill -9 test (test_durability.py) cannot see this: the page cache survives a killed process.
With `--no-fsync` the same checks must find every acknowledgement unbacked.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from roost.raft.codec import HELLO_SIZE, MAGIC, FrameDecoder
from roost.raft.messages import Message, MessageType
from tests.raft.member_proc import Member, wait_for_leader
from tests.support.procs import free_ports
from tests.support.syscall_trace import (
    SOCKET_WRITES,
    SYNCS,
    Durability,
    Exchange,
    Syscall,
    SyscallTrace,
    durable_before_answer,
)

STDIN, STDOUT = 0, 1


def is_raft_log(path: str) -> bool:
    return path.endswith("/raft.log")


@contextmanager
def ensemble(tmp_path: Path, *flags: str) -> Iterator[list[Member]]:
    ports = free_ports(3)
    peers = ",".join(f"{i}=127.0.0.1:{p}" for i, p in zip((1, 2, 3), ports, strict=True))
    members: list[Member] = []
    try:
        for i in (1, 2, 3):
            members.append(Member(i, peers, tmp_path / f"m{i}", *flags))
        yield members
    finally:
        for member in members:
            member.stop()


def propose_traced(members: list[Member], tmp_path: Path) -> tuple[SyscallTrace, dict[bytes, int]]:
    """Four proposals through the leader and four through a follower, under strace; returns the
    trace and each proposal's acknowledged index."""
    leader = wait_for_leader(members)
    follower = next(m for m in members if m is not leader)
    tag = uuid.uuid4().hex[:8]
    acked: dict[bytes, int] = {}
    with SyscallTrace([m.proc.pid for m in members], tmp_path / "strace.txt") as trace:
        # A member blocked in read(stdin) when strace attached finishes that read as
        # restart_syscall, without its data: one command each first, so that every probe below
        # is read by a read strace saw from its start.
        for member in members:
            member.ask("status")
        for k in range(8):
            data = f"probe-{tag}-{k}"
            answer = (leader if k < 4 else follower).ask(f"propose {data}")
            assert "ok" in answer, answer
            acked[data.encode()] = answer["ok"]
    return trace, acked


def acknowledgements(calls: list[Syscall], acked: dict[bytes, int]) -> list[Durability]:
    """For each proposal: the proposer's read of the command and its first answer after it."""
    found = []
    for probe in acked:
        command = next((c for c in calls if c.name == "read" and c.fd == STDIN and b"propose " + probe in c.data),
                       None)
        assert command is not None, (f"no traced read of the command proposing {probe!r}; stdin reads seen: "
                                     f"{[c for c in calls if c.fd == STDIN]}")
        reply = next(c for c in calls if c.pid == command.pid and c.name in SOCKET_WRITES and c.fd == STDOUT
                     and c.entry > command.exit)
        assert json.loads(reply.data) == {"ok": acked[probe]}
        exchange = Exchange(command.pid, "stdio", command.data, command.exit, reply.entry)
        found.append(durable_before_answer(calls, exchange, probe, is_raft_log))
    return found


@dataclass
class Sent:
    message: Message
    call: Syscall  # the write that completed the message's frame


def peer_messages(calls: list[Syscall]) -> list[Sent]:
    """Every raft message the members wrote to their peer links (all their TCP sockets)."""
    decoders: dict[tuple[int, str], FrameDecoder] = {}
    sent = []
    for call in calls:
        if call.name not in SOCKET_WRITES or not call.target.startswith("TCP:[") or not call.ok:
            continue
        data = call.data
        key = (call.pid, call.target)
        if key not in decoders:
            decoders[key] = FrameDecoder()
            if data.startswith(MAGIC):
                data = data[HELLO_SIZE:]  # a link dialled while we watched
        sent.extend(Sent(message, call) for message in decoders[key].feed(data))
    return sent


def follower_acks(calls: list[Syscall], members: list[Member],
                  acked: dict[bytes, int]) -> dict[bytes, dict[int, str | None]]:
    """For each proposal, each follower's first APPEND_RESP that promised it: None when its log
    write of the entry was fsynced before, else what was wrong. Every acknowledged proposal has
    at least one (the leader needs one follower's promise to commit it)."""
    pid_of = {m.id: m.proc.pid for m in members}
    verdicts: dict[bytes, dict[int, str | None]] = {probe: {} for probe in acked}
    acks = [s for s in peer_messages(calls) if s.message.type is MessageType.APPEND_RESP and not s.message.reject]
    for probe, index in acked.items():
        for member_id, pid in pid_of.items():
            first_ack = next((s for s in acks if s.message.src == member_id and s.message.index >= index), None)
            if first_ack is None:
                continue  # the leader, or a follower that had not answered yet
            at = first_ack.call.entry
            write = next((c for c in calls if c.pid == pid and c.name in ("write", "writev")
                          and is_raft_log(c.target) and probe in c.data), None)
            verdict = None
            if write is None or write.exit > at:
                verdict = f"member {member_id} acknowledged {probe!r} (index {index}) before writing it"
            elif not any(c.pid == pid and c.name in SYNCS and c.target == write.target and c.ok
                         and write.exit < c.entry and c.exit < at for c in calls):
                verdict = f"member {member_id} acknowledged {probe!r} (index {index}) before fsyncing it"
            verdicts[probe][member_id] = verdict
    assert all(verdicts.values()), f"a committed proposal without a follower's promise: {verdicts}"
    return verdicts


def test_acknowledged_only_after_durable_on_the_proposer_a_majority_and_each_acking_follower(
        tmp_path: Path) -> None:
    with ensemble(tmp_path) as members:
        trace, acked = propose_traced(members, tmp_path)
    acks = acknowledgements(trace.calls, acked)
    assert len({a.exchange.pid for a in acks}) == 2, "proposals went through the leader and a follower"
    for ack in acks:
        assert ack.exchange.pid in ack.synced, "acknowledged before its own fsync: " + ack.describe()
        assert len(ack.synced) >= 2, "acknowledged before a majority fsynced: " + ack.describe()
    verdicts = follower_acks(trace.calls, members, acked)
    assert [v for per_member in verdicts.values() for v in per_member.values() if v is not None] == []


def test_without_fsync_the_checks_find_every_acknowledgement_unbacked(tmp_path: Path) -> None:
    with ensemble(tmp_path, "--no-fsync") as members:
        trace, acked = propose_traced(members, tmp_path)
    for ack in acknowledgements(trace.calls, acked):
        assert ack.exchange.pid in ack.written and ack.synced == set(), ack.describe()
    for probe, per_member in follower_acks(trace.calls, members, acked).items():
        assert all(v is not None and "before fsyncing it" in v for v in per_member.values()), (probe, per_member)
