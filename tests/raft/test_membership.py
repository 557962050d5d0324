"""Deterministic simulation of the core with learners (observers) and membership changes.

Every member persists each Ready to an in-memory "disk" before it sends or applies it; a crash
drops everything not on that disk, and a restart builds a new core from it, as the shell does.
Message delivery is scripted, or shuffled by a seeded random generator.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from roost.raft.core import ProposalResult, RaftConfig, RaftCore, Role
from roost.raft.messages import Entry, EntryKind, HardState, Membership, Message, Snapshot

CONFIG = RaftConfig(election_ticks=10, heartbeat_ticks=1, max_append_entries=4)


@dataclass
class Disk:
    hard_state: HardState = field(default_factory=HardState)
    entries: list[Entry] = field(default_factory=list)
    snapshot: Snapshot | None = None

    def save(self, entries: list[Entry], hard_state: HardState | None, snapshot: Snapshot | None = None) -> None:
        if snapshot is not None:
            self.snapshot = snapshot
            self.entries = []
        if entries:
            first = entries[0].index
            self.entries = [e for e in self.entries if e.index < first] + list(entries)
        if hard_state is not None:
            self.hard_state = hard_state


class Sim:
    def __init__(self, voters: list[int], learners: list[int] = (), seed: int = 0) -> None:  # type: ignore[assignment]
        self.voters, self.learners = list(voters), list(learners)
        self.rng = random.Random(seed)
        self.disks: dict[int, Disk] = {}
        self.cores: dict[int, RaftCore] = {}
        self.applied: dict[int, list[Entry]] = {}
        self._results: dict[int, list[ProposalResult]] = {}
        self.pending: list[Message] = []
        self.down: set[int] = set()
        self.cut: set[int] = set()
        self.leaders_by_term: dict[int, set[int]] = {}
        for i in [*voters, *learners]:
            self.disks[i] = Disk()
            self.start(i)

    def start(self, i: int) -> None:
        disk = self.disks[i]
        self.cores[i] = RaftCore(i, self.voters, CONFIG, random.Random(self.rng.random()),
                                 hard_state=disk.hard_state, entries=list(disk.entries),
                                 learners=self.learners, snapshot=disk.snapshot)
        restored = unpack(disk.snapshot.data) if disk.snapshot is not None else []
        self.applied[i] = restored + [e for e in disk.entries if e.index <= disk.hard_state.commit]
        self.cores[i].log.applied_handed = len(self.applied[i])  # replayed on restart, like the shell
        self.down.discard(i)

    def results(self, i: int) -> list[ProposalResult]:
        return self._results.get(i, [])

    def compact(self, i: int) -> None:
        """Member i snapshots what it applied and forgets its log up to there."""
        core = self.cores[i]
        applied = self.applied[i]
        index = applied[-1].index
        snapshot = Snapshot(index, applied[-1].term, pack(applied), core.membership_at(index))
        core.compact(snapshot, index)
        self.disks[i].snapshot = snapshot
        self.disks[i].entries = [e for e in self.disks[i].entries if e.index > index]

    def crash(self, i: int) -> None:
        self.down.add(i)
        self.pending = [m for m in self.pending if m.dst != i]

    def add_member(self, i: int) -> None:
        """A new process, started knowing the ensemble as it was first configured."""
        self.disks[i] = Disk()
        self.start(i)

    def flush(self) -> None:
        for i, core in self.cores.items():
            if i in self.down:
                continue
            for _ in range(50):
                if not core.has_ready():
                    break
                rd = core.ready()
                self.disks[i].save(rd.entries, rd.hard_state, rd.snapshot)
                core.advance(rd)
                if rd.snapshot is not None:
                    self.applied[i] = unpack(rd.snapshot.data)
                for m in [*rd.early_messages, *rd.messages]:
                    if m.src not in self.cut and m.dst not in self.cut and m.dst in self.cores:
                        self.pending.append(m)
                self.applied[i].extend(rd.committed_entries)
                self._results.setdefault(i, []).extend(rd.proposal_results)
            if core.role is Role.LEADER:
                self.leaders_by_term.setdefault(core.term, set()).add(i)

    def deliver(self, keep: Callable[[Message], bool] = lambda m: True, rounds: int = 60,
                shuffle: bool = False) -> None:
        for _ in range(rounds):
            self.flush()
            if not self.pending:
                return
            batch, self.pending = self.pending, []
            if shuffle:
                self.rng.shuffle(batch)
                batch = [m for m in batch if self.rng.random() > 0.05]  # and lose a few
            for m in batch:
                if keep(m) and m.dst not in self.down:
                    self.cores[m.dst].step(m)

    def tick(self, times: int, shuffle: bool = False) -> None:
        for _ in range(times):
            for i, core in self.cores.items():
                if i not in self.down:
                    core.tick()
            self.deliver(shuffle=shuffle)

    def leader(self) -> RaftCore | None:
        leaders = [c for i, c in self.cores.items() if c.role is Role.LEADER and i not in self.down]
        return max(leaders, key=lambda c: c.term, default=None)

    def settle(self, ticks: int = 200) -> RaftCore:
        for _ in range(ticks):
            leader = self.leader()
            if leader is not None and leader.log.term(leader.commit) == leader.term:
                return leader
            self.tick(1)
        raise AssertionError("no leader settled")

    def check_safety(self) -> None:
        for term, leaders in self.leaders_by_term.items():
            assert len(leaders) == 1, f"two leaders in term {term}: {leaders}"
        logs = [[(e.index, e.term, e.data) for e in applied] for applied in self.applied.values()]
        for a in logs:
            for b in logs:
                n = min(len(a), len(b))
                assert a[:n] == b[:n], "two members applied different entries at one index"


def pack(entries: list[Entry]) -> bytes:
    return json.dumps([[e.term, e.index, e.data.hex(), e.kind.value] for e in entries]).encode()


def unpack(blob: bytes) -> list[Entry]:
    return [Entry(term, index, bytes.fromhex(data), EntryKind(kind)) for term, index, data, kind in json.loads(blob)]


def data_of(entries: list[Entry]) -> list[bytes]:
    return [e.data for e in entries if e.kind is EntryKind.NORMAL]


# --- observers (learners) ---------------------------------------------------------------------


def test_commit_needs_a_majority_of_voters_only() -> None:
    sim = Sim([1, 2, 3], [4, 5])
    sim.cores[1].campaign()
    sim.deliver()
    leader = sim.cores[1]
    assert leader.role is Role.LEADER and leader.quorum == 2
    # Both observers cut off: voters 1 and 2 commit alone.
    sim.cut = {4, 5, 3}
    leader.propose(b"a", 1)
    sim.deliver()
    assert leader.commit == 2 and data_of(sim.applied[1]) == [b"a"]
    # Observers alone cannot commit anything for the leader: only observers reachable.
    sim.cut = {2, 3}
    leader.propose(b"b", 2)
    sim.deliver()
    assert leader.commit == 2, "observers' acknowledgements counted toward a quorum"
    sim.cut = set()
    sim.tick(3)
    assert leader.commit == 3
    assert all(data_of(sim.applied[i]) == [b"a", b"b"] for i in (1, 2, 3, 4, 5))


def test_an_observer_never_campaigns_or_becomes_leader() -> None:
    sim = Sim([1, 2, 3], [4])
    sim.crash(1)
    sim.crash(2)
    sim.crash(3)
    sim.tick(CONFIG.election_ticks * 10)
    assert sim.cores[4].role is Role.FOLLOWER and sim.cores[4].term == 0
    sim.cores[4].campaign()  # even when asked
    assert sim.cores[4].role is Role.FOLLOWER and not sim.pending
    # A voter's vote requests go to voters only, and an observer's vote never counts.
    for i in (1, 2, 3):
        sim.start(i)
    sim.crash(3)
    sim.crash(2)
    sim.cores[1].campaign()
    sim.deliver()
    assert sim.cores[1].role is not Role.LEADER


def test_check_quorum_counts_voters_only() -> None:
    sim = Sim([1, 2, 3], [4, 5])
    sim.cores[1].campaign()
    sim.deliver()
    sim.crash(2)
    sim.crash(3)
    sim.tick(CONFIG.election_ticks * 2 + 1)
    assert sim.cores[1].role is not Role.LEADER, "a leader kept its lease on observers' answers"


def test_a_restarted_observer_catches_up() -> None:
    sim = Sim([1, 2, 3], [4])
    leader = sim.settle()
    leader.propose(b"a", 1)
    sim.deliver()
    sim.crash(4)
    for k in range(20):
        leader.propose(b"x%d" % k, 10 + k)
        sim.deliver()
    sim.start(4)
    sim.tick(5)
    assert data_of(sim.applied[4]) == data_of(sim.applied[leader.id])
    assert len(data_of(sim.applied[4])) == 21
    sim.check_safety()


def test_observers_forward_proposals_and_reads() -> None:
    sim = Sim([1, 2, 3], [4])
    sim.settle()
    observer = sim.cores[4]
    sim.tick(1)
    assert observer.propose(b"from-observer", 5)
    assert observer.read_index(6)
    sim.deliver()
    sim.tick(2)
    assert b"from-observer" in data_of(sim.applied[1])
    assert b"from-observer" in data_of(sim.applied[4])


# --- membership change ------------------------------------------------------------------------


def change(sim: Sim, membership: Membership, request_id: int = 99) -> int:
    leader = sim.settle()
    assert leader.propose_membership(membership, request_id) is None
    return leader.log.last_index


def test_add_a_member_as_observer_then_promote_it() -> None:
    sim = Sim([1, 2, 3])
    leader = sim.settle()
    for k in range(10):
        leader.propose(b"w%d" % k, k)
    sim.deliver()
    sim.add_member(4)
    change(sim, Membership(frozenset({1, 2, 3}), frozenset({4})))
    sim.tick(3)
    assert data_of(sim.applied[4]) == data_of(sim.applied[1])
    assert sim.cores[4].membership.learners == {4} and not sim.cores[4].is_voter
    change(sim, Membership(frozenset({1, 2, 3, 4})))
    sim.tick(3)
    assert all(c.voters == {1, 2, 3, 4} and c.quorum == 3 for c in sim.cores.values())
    # Now 4 counts: with 2 and 3 down, 1 and 4 are not a majority of four.
    leader = sim.settle()
    others = [i for i in (1, 2, 3, 4) if i != leader.id]
    sim.crash(others[0])
    sim.crash(others[1])
    before = leader.commit
    leader.propose(b"needs-three", 50)
    sim.deliver()
    assert leader.commit == before
    sim.check_safety()


def test_one_voter_at_a_time_and_one_change_at_a_time() -> None:
    sim = Sim([1, 2, 3])
    leader = sim.settle()
    assert leader.propose_membership(Membership(frozenset({1, 2, 3, 4, 5})), 1) == "too-many"
    assert leader.propose_membership(Membership(frozenset({1})), 1) == "too-many"
    assert leader.propose_membership(Membership(frozenset({1, 2, 3}), frozenset({4})), 1) is None
    assert leader.propose_membership(Membership(frozenset({1, 2, 3}), frozenset({4, 5})), 2) == "in-progress"
    # A follower forwards a change to the leader, which refuses it with its reason.
    follower = next(c for c in sim.cores.values() if c is not leader)
    assert follower.propose_membership(Membership(frozenset({1, 2, 3}), frozenset({4, 5})), 3) is None
    sim.deliver()
    answer = next(r for r in sim.results(follower.id) if r.request_id == 3)
    assert answer.refused and answer.reason == "in-progress"
    assert not leader.config_change_pending
    assert leader.propose_membership(Membership(frozenset({1, 2, 3}), frozenset({4, 5})), 2) is None


def test_a_learner_is_promoted_only_once_caught_up_and_forwarded_changes_land() -> None:
    sim = Sim([1, 2, 3])
    leader = sim.settle()
    for k in range(8):
        leader.propose(b"w%d" % k, k)
    sim.deliver()
    sim.add_member(4)
    sim.cut = {4}
    follower = next(c for c in sim.cores.values() if c is not leader and c.id != 4)
    assert follower.propose_membership(Membership(frozenset({1, 2, 3}), frozenset({4})), 20) is None
    sim.deliver()
    landed = next(r for r in sim.results(follower.id) if r.request_id == 20)
    assert not landed.refused and leader.membership.learners == {4}
    # 4 is unreachable, so its log is empty: promoting it would stall commits.
    assert leader.propose_membership(Membership(frozenset({1, 2, 3, 4})), 21) == "catching-up"
    sim.cut = set()
    sim.tick(3)
    assert leader.propose_membership(Membership(frozenset({1, 2, 3, 4})), 21) is None


def leader_with_an_unreplicated_change(sim: Sim) -> RaftCore:
    """Member 1 leads; it appends a CONFIG entry for {1, 2} that reaches nobody (2 and 3 are cut
    off), so the change is in force on the leader alone and not committed."""
    sim.cores[1].campaign()
    sim.deliver()
    leader = sim.settle()
    assert leader.id == 1
    sim.cut = {2, 3}
    assert leader.propose_membership(Membership(frozenset({1, 2})), 1) is None
    sim.deliver()
    return leader


def test_a_config_entry_takes_effect_when_appended_and_reverts_when_truncated() -> None:
    sim = Sim([1, 2, 3])
    leader = leader_with_an_unreplicated_change(sim)  # then the leader crashes before it commits
    assert leader.voters == {1, 2}, "a CONFIG entry takes effect when appended, not when committed"
    assert sim.cores[2].voters == sim.cores[3].voters == {1, 2, 3}
    assert leader.commit < leader.log.last_index
    sim.crash(1)
    sim.cut = set()
    new = sim.settle()
    assert new.id in (2, 3) and new.voters == {1, 2, 3}
    new.propose(b"after", 7)
    sim.deliver()
    # 1 comes back believing in {1, 2}; the new leader overwrites its uncommitted CONFIG entry,
    # which reverts it to the three voters.
    sim.start(1)
    assert sim.cores[1].voters == {1, 2}
    sim.tick(5)
    assert sim.cores[1].voters == {1, 2, 3}
    assert data_of(sim.applied[1]) == [b"after"]
    sim.check_safety()


def test_a_config_entry_overwritten_by_one_of_the_same_length_reverts() -> None:
    """The new leader's entry takes the CONFIG entry's place without changing the log's length."""
    sim = Sim([1, 2, 3])
    leader = leader_with_an_unreplicated_change(sim)
    config_index = leader.log.last_index
    sim.crash(1)
    sim.cut = set()
    new = sim.settle()
    assert new.log.last_index == config_index  # its no-op sits where 1's CONFIG entry is
    sim.cut = set()
    sim.start(1)
    assert sim.cores[1].voters == {1, 2}
    sim.tick(3)
    assert sim.cores[1].log.last_index == config_index
    assert sim.cores[1].log.entry(config_index).kind is EntryKind.NOOP
    assert sim.cores[1].voters == {1, 2, 3}
    sim.check_safety()


def test_the_leader_removes_itself_and_steps_down_after_the_commit() -> None:
    sim = Sim([1, 2, 3])
    leader = sim.settle()
    old = leader.id
    leader.propose(b"before", 1)
    sim.deliver()
    remaining = frozenset({1, 2, 3} - {old})
    assert leader.propose_membership(Membership(remaining), 2) is None
    # Until the change commits the old leader leads (without counting itself); the members that
    # have the change still answer it, so it commits the change itself and then hands over, at
    # once (not after losing its lease).
    assert leader.role is Role.LEADER and not leader.is_voter
    config_index = leader.log.last_index
    sim.deliver()
    assert sim.cores[old].commit >= config_index
    assert any(e.kind is EntryKind.CONFIG and e.index == config_index for e in sim.applied[old])
    assert sim.cores[old].role is not Role.LEADER
    sim.tick(5)
    new = sim.settle()
    assert new.id in remaining and new.voters == remaining
    new.propose(b"after", 3)
    sim.deliver()
    for i in remaining:
        assert data_of(sim.applied[i]) == [b"before", b"after"]
    # The removed member never campaigns again.
    sim.tick(CONFIG.election_ticks * 5)
    assert sim.leader() is new and sim.cores[old].role is Role.FOLLOWER
    sim.check_safety()


def test_a_member_added_after_compaction_learns_the_configuration_from_the_snapshot() -> None:
    sim = Sim([1, 2, 3])
    leader = sim.settle()
    change(sim, Membership(frozenset({1, 2, 3}), frozenset({5}), b"with-5"))  # 5 never started
    for k in range(6):
        leader.propose(b"w%d" % k, k)
    sim.deliver()
    change(sim, Membership(frozenset({1, 2, 3}), frozenset(), b"without-5"))
    sim.deliver()
    sim.compact(leader.id)
    assert leader.log.offset == leader.commit and leader.snapshot is not None
    assert leader.snapshot.membership == leader.membership
    # 4 starts knowing only the initial configuration (voters 1-3, itself not among them); the
    # leader's snapshot, then its log, tell it the truth.
    sim.add_member(4)
    assert sim.cores[4].voters == {1, 2, 3}
    change(sim, Membership(frozenset({1, 2, 3}), frozenset({4}), b"with-4"))
    sim.tick(5)
    learner = sim.cores[4]
    assert learner.membership == leader.membership and not learner.is_voter
    assert data_of(sim.applied[4]) == data_of(sim.applied[leader.id])
    # And restarted from its own disk (the snapshot, then the log), it still knows it.
    sim.crash(4)
    sim.start(4)
    assert sim.cores[4].membership.learners == {4}
    sim.check_safety()


@pytest.mark.parametrize("seed", range(12))
def test_crashes_in_the_middle_of_changes_keep_the_log_safe(seed: int) -> None:
    """Grow 3 voters to 5 (each new one as an observer first) and remove two, while members crash
    and restart and messages are shuffled and lost; check one leader per term, identical applied
    prefixes, and that every acknowledged write survives."""
    sim = Sim([1, 2, 3], seed=seed)
    rng = random.Random(seed)
    acknowledged: set[bytes] = set()
    proposed: dict[int, bytes] = {}
    plan = [
        Membership(frozenset({1, 2, 3}), frozenset({4})),
        Membership(frozenset({1, 2, 3, 4})),
        Membership(frozenset({1, 2, 3, 4}), frozenset({5})),
        Membership(frozenset({1, 2, 3, 4, 5})),
        Membership(frozenset({2, 3, 4, 5})),
        Membership(frozenset({3, 4, 5})),
    ]
    step = 0
    for rid in range(400):
        leader = sim.leader()
        if leader is not None and rid % 3 == 0:
            value = b"v%d" % rid
            if leader.propose(value, rid):
                proposed[rid] = value
        if leader is not None and step < len(plan) and rid % 11 == 5:
            target = plan[step]
            if leader.membership == target:
                step += 1
            else:
                for new in target.members - set(sim.cores):
                    sim.add_member(new)
                if leader.propose_membership(target, 10_000 + step) is None:
                    pass  # it may still be lost; we retry until the leader's config shows it
        if rid % 37 == 17:
            victim = rng.choice(sorted(set(sim.cores) - sim.down))
            if len(sim.down) < 1:
                sim.crash(victim)
        elif sim.down and rid % 37 == 30:
            sim.start(sim.down.pop())
        sim.tick(1, shuffle=True)
        for applied in sim.applied.values():
            for entry in applied:
                if entry.kind is EntryKind.NORMAL and entry.data in proposed.values():
                    acknowledged.add(entry.data)
    while sim.down:
        sim.start(sim.down.pop())
    leader = sim.settle(400)
    assert step >= 3, f"only {step} of the {len(plan)} changes went through"
    sim.tick(30)
    sim.check_safety()
    final = data_of(sim.applied[leader.id])
    assert acknowledged <= set(final), "an applied (acknowledged) write was lost"
    for i in leader.membership.members:
        assert data_of(sim.applied[i]) == final
