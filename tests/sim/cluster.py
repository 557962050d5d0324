"""Deterministic simulation of a raft ensemble: every core in one thread, driven by one seed.

A discrete-event loop delivers ticks, messages and faults in time order. The network drops,
duplicates, delays (hence reorders) and partitions messages (also one way); members crash and
restart with only what they had persisted (a write not yet fsynced may be lost); most members learn
of a crash at once, as a transport's refused connection tells them, and some are told falsely that
a live leader is gone (`RaftCore.leader_unreachable`). After every event
the checker verifies the safety properties; `run_liveness` then heals everything and checks that a
leader is elected and new proposals commit everywhere within a bound.

Durable before acknowledged is checked where a promise is made, against what would survive a
crash at that moment: a member's "I hold index i" (APPEND_RESP) and its vote (VOTE_RESP) when it
sends them, and a proposal's acknowledgement (applied by its proposer) against the storage of a
majority. A core that sent such a message with its early (pre-fsync) messages, or wrote entries
without asking for an fsync, fails here even when no crash happens to expose it.

Replay a failing seed with `python scripts/raft_soak.py --seeds SEED..SEED --steps N --members M`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from roost.raft.core import RaftConfig, RaftCore, Ready, Role
from roost.raft.messages import Entry, HardState, Message, MessageType, Snapshot

TICK = 10  # time units between two ticks of one member
COVERED = -1  # durable_term: the index is inside the durable snapshot
SIM_CONFIG = RaftConfig(election_ticks=10, heartbeat_ticks=2, max_append_entries=8, max_inflight_appends=4,
                        snapshot_retry_ticks=20)


def random_faults(rng: random.Random) -> Faults:
    """Fault intensities drawn per seed, from gentle to brutal, so that seeds explore differently."""
    return Faults(
        drop=rng.choice([0.0, 0.02, 0.05, 0.15]),
        duplicate=rng.choice([0.0, 0.03, 0.1]),
        max_delay=rng.choice([3, 15, 30, 60]),
        crash_before_persist=rng.choice([0.0, 0.005, 0.02]),
        crash_between_persist_and_send=rng.choice([0.0, 0.005, 0.02]),
        lose_unsynced_on_crash=rng.choice([0.0, 0.5, 1.0]),
        nemesis_interval=rng.choice([60, 150, 300, 600]),
        propose_interval=rng.choice([5, 15, 40]),
        read_interval=rng.choice([20, 80]),
        compact_every=rng.choice([10, 40, 200]),
        keep_entries=rng.choice([0, 5, 50]),
    )


class SafetyViolation(AssertionError):
    pass


@dataclass
class Faults:
    drop: float = 0.05
    duplicate: float = 0.03
    max_delay: int = 30  # > TICK, so messages overtake each other
    crash_before_persist: float = 0.01  # after a leader's early messages went out
    crash_between_persist_and_send: float = 0.01
    lose_unsynced_on_crash: float = 0.5
    nemesis_interval: int = 300  # mean time between two nemesis actions
    propose_interval: int = 15
    read_interval: int = 80
    compact_every: int = 40  # applied entries between two snapshots on a member
    keep_entries: int = 5


@dataclass
class SimStorage:
    """What survives a crash: the synced state plus possibly the unsynced tail of writes."""

    hard_state: HardState = field(default_factory=HardState)
    snapshot: Snapshot | None = None
    entries: list[Entry] = field(default_factory=list)
    unsynced_commit: HardState | None = None  # a commit-only hard state written without fsync
    unsynced_from: int | None = None  # entries from this index on were written without an fsync

    def save(self, rd: Ready) -> None:
        if rd.snapshot is not None:
            self.snapshot = rd.snapshot
            self.entries = []
            self.unsynced_from = None
        if rd.entries:
            first = rd.entries[0].index
            self.entries = [e for e in self.entries if e.index < first]
            if self.entries:
                assert self.entries[-1].index == first - 1, "storage gap"
            self.entries.extend(rd.entries)
            if not rd.must_sync:
                self.unsynced_from = first if self.unsynced_from is None else min(first, self.unsynced_from)
        if rd.must_sync:
            self.unsynced_from = None
        if rd.hard_state is not None:
            if rd.must_sync:
                self.hard_state = rd.hard_state
                self.unsynced_commit = None
            else:
                self.unsynced_commit = rd.hard_state
        elif rd.must_sync and self.unsynced_commit is not None:
            self.hard_state, self.unsynced_commit = self.unsynced_commit, None

    def crash(self, rng: random.Random, lose: float) -> None:
        if self.unsynced_commit is not None and rng.random() >= lose:
            self.hard_state = self.unsynced_commit
        self.unsynced_commit = None
        if self.unsynced_from is not None and rng.random() < lose:
            cut = self.unsynced_from
            self.entries = [e for e in self.entries if e.index < cut]
        self.unsynced_from = None

    def durable_term(self, index: int) -> int | None:
        """The term of the entry at `index` that would survive a crash now (COVERED if the
        durable snapshot covers it), or None if no entry there would."""
        if index == 0 or (self.snapshot is not None and index <= self.snapshot.index):
            return COVERED
        if self.unsynced_from is not None and index >= self.unsynced_from:
            return None
        if not self.entries or not self.entries[0].index <= index <= self.entries[-1].index:
            return None
        entry = self.entries[index - self.entries[0].index]
        assert entry.index == index
        return entry.term

    def compact(self, snapshot: Snapshot, compact_to: int) -> None:
        self.snapshot = snapshot
        self.entries = [e for e in self.entries if e.index > compact_to]


def chain(previous: bytes, entry: Entry) -> bytes:
    return hashlib.sha256(previous + b"%d:%d:" % (entry.index, entry.term) + entry.data).digest()


@dataclass
class SimStateMachine:
    """A hash chain over every applied entry: equal hashes at an index mean equal prefixes."""

    index: int = 0
    digest: bytes = b""

    def apply(self, entry: Entry) -> None:
        assert entry.index == self.index + 1, f"applied {entry.index} after {self.index}"
        self.index = entry.index
        self.digest = chain(self.digest, entry)

    def snapshot(self) -> bytes:
        return b"%d:" % self.index + self.digest

    def restore(self, index: int, blob: bytes) -> None:
        head, _, digest = blob.partition(b":")
        assert int(head) == index
        self.index, self.digest = index, digest


@dataclass
class SimNode:
    id: int
    storage: SimStorage
    core: RaftCore | None = None
    sm: SimStateMachine = field(default_factory=SimStateMachine)
    awaiting: dict[int, tuple[int, int]] = field(default_factory=dict)  # index -> (term, proposal seq)
    pending_proposals: dict[int, int] = field(default_factory=dict)  # request id -> proposal seq
    pending_reads: dict[int, int] = field(default_factory=dict)  # request id -> commit floor
    read_floor_waits: list[tuple[int, int]] = field(default_factory=list)  # (read index, floor)
    incarnation: int = 0

    @property
    def up(self) -> bool:
        return self.core is not None


class Cluster:
    def __init__(self, seed: int, members: int = 3, faults: Faults | None = None,
                 config: RaftConfig | None = None) -> None:
        assert members in (1, 3, 5)
        self.seed = seed
        self.rng = random.Random(seed)
        self.faults = faults or random_faults(self.rng)
        self.config = config or dataclasses.replace(
            SIM_CONFIG, max_append_entries=self.rng.choice([1, 2, 8]),
            max_inflight_appends=self.rng.choice([1, 4, 16]))
        self.ids = list(range(1, members + 1))
        self.nodes = {i: SimNode(i, SimStorage()) for i in self.ids}
        self.now = 0
        self.steps = 0
        self._queue: list[tuple[int, int, str, object]] = []
        self._seq = 0
        self.blocked: set[tuple[int, int]] = set()  # directed links (src, dst) that lose everything
        self.chaos = True
        # What the checker knows to be true:
        self.leaders: dict[int, int] = {}  # term -> the one leader of that term
        self.committed: dict[int, tuple[int, bytes]] = {}  # index -> (term, data) of committed entries
        self.chain_at: dict[int, bytes] = {}  # index -> state machine digest after applying it
        self.max_commit = 0
        self.acknowledged: dict[int, int] = {}  # proposal seq -> index, once applied by its proposer
        self.proposal_data: dict[int, bytes] = {}
        self.reads_done = 0
        self._next_proposal = 0
        self._next_request = 0
        self._checked_commit: dict[int, int] = {}
        self._leader_checked: set[tuple[int, int]] = set()
        self.gone_signals = 0  # "member i refuses connections" signals delivered, true or false
        for i in self.ids:
            self._start(i)
            self._schedule(self.rng.randrange(TICK), "tick", (i, self.nodes[i].incarnation))
        self._schedule(self._exp(self.faults.nemesis_interval), "nemesis", None)
        self._schedule(self._exp(self.faults.propose_interval), "propose", None)
        self._schedule(self._exp(self.faults.read_interval), "read", None)

    # --- event loop --------------------------------------------------------------------------

    def _exp(self, mean: int) -> int:
        return 1 + int(self.rng.expovariate(1.0 / mean))

    def _schedule(self, delay: int, kind: str, payload: object) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (self.now + delay, self._seq, kind, payload))

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step()

    def step(self) -> None:
        when, _, kind, payload = heapq.heappop(self._queue)
        assert when >= self.now
        self.now = when
        self.steps += 1
        handler: Callable[[object], None] = getattr(self, f"_on_{kind}")
        handler(payload)
        self.check()

    def run_until(self, predicate: Callable[[], bool], max_time: int) -> bool:
        deadline = self.now + max_time
        while self.now <= deadline:
            if predicate():
                return True
            self.step()
        return predicate()

    # --- members -----------------------------------------------------------------------------

    def _start(self, i: int) -> None:
        node = self.nodes[i]
        st = node.storage
        node.incarnation += 1
        node.core = RaftCore(i, self.ids, self.config, random.Random(self.rng.getrandbits(64)),
                             hard_state=st.hard_state, snapshot=st.snapshot, entries=list(st.entries))
        node.sm = SimStateMachine()
        if st.snapshot is not None:
            self._restore(node, st.snapshot)
        node.awaiting.clear()
        node.pending_proposals.clear()
        node.pending_reads.clear()
        node.read_floor_waits.clear()
        self._checked_commit[i] = node.core.log.offset
        self._drain(node)

    def _crash(self, i: int) -> None:
        node = self.nodes[i]
        node.core = None
        node.storage.crash(self.rng, self.faults.lose_unsynced_on_crash)
        # Most members soon learn from their transport that the crashed one refuses connections
        # (`RaftCore.leader_unreachable`); some never do, as when the machine itself is gone.
        for j in self.ids:
            if j != i and self.rng.random() < 0.8:
                self._schedule(self.rng.randrange(2 * TICK), "gone", (j, i))

    def _on_gone(self, payload: object) -> None:
        """Member j's transport reports that member i refused a connection (true or not)."""
        j, i = payload  # type: ignore[misc]
        node = self.nodes[j]
        if node.core is None:
            return
        self.gone_signals += 1
        node.core.leader_unreachable(i)
        self._drain(node)

    def _drain(self, node: SimNode) -> None:
        """The member's Ready loop: send early, persist, advance, send, apply."""
        for _ in range(100):
            core = node.core
            if core is None or not core.has_ready():
                return
            rd = core.ready()
            for m in rd.early_messages:
                self._send(m)
            if self.chaos and self.rng.random() < self.faults.crash_before_persist:
                self._crash(node.id)
                return
            node.storage.save(rd)
            core.advance(rd)
            if self.chaos and self.rng.random() < self.faults.crash_between_persist_and_send:
                self._crash(node.id)
                return
            for m in rd.messages:
                self._send(m)
            if rd.snapshot is not None:
                self._restore(node, rd.snapshot)
            for entry in rd.committed_entries:
                self._apply(node, entry)
            for result in rd.proposal_results:
                seq = node.pending_proposals.pop(result.request_id, None)
                if seq is not None and not result.refused:
                    node.awaiting[result.index] = (result.term, seq)
            for read in rd.read_states:
                floor = node.pending_reads.pop(read.request_id, None)
                if floor is not None and not read.refused:
                    if read.index < floor:
                        self.fail(f"read index {read.index} below commit {floor} known at request time")
                    node.read_floor_waits.append((read.index, floor))
            self._maybe_compact(node)
        raise AssertionError("Ready loop did not settle in 100 rounds")

    def _restore(self, node: SimNode, snap: Snapshot) -> None:
        node.sm.restore(snap.index, snap.data)
        known = self.chain_at.get(snap.index)
        if known is not None and known != node.sm.digest:
            self.fail(f"member {node.id} restored a snapshot at {snap.index} that differs from the applied chain")
        for index in [i for i in node.awaiting if i <= snap.index]:
            del node.awaiting[index]  # covered by a snapshot: outcome unknown to this member

    def _apply(self, node: SimNode, entry: Entry) -> None:
        node.sm.apply(entry)
        committed = self.committed.setdefault(entry.index, (entry.term, entry.data))
        if committed != (entry.term, entry.data):
            self.fail(f"member {node.id} applied {entry} but {committed} was committed there")
        known = self.chain_at.setdefault(entry.index, node.sm.digest)
        if known != node.sm.digest:
            self.fail(f"member {node.id} applied a different sequence at index {entry.index}")
        waiting = node.awaiting.pop(entry.index, None)
        if waiting is not None and waiting[0] == entry.term:
            seq = waiting[1]
            if entry.data != self.proposal_data[seq]:
                self.fail(f"proposal {seq} acknowledged at {entry.index} holds other data")
            durable_on = [n.id for n in self.nodes.values()
                          if n.storage.durable_term(entry.index) in (entry.term, COVERED)]
            if len(durable_on) <= len(self.ids) // 2:
                self.fail(f"proposal {seq} acknowledged at {entry.index} while durable only on {durable_on}")
            self.acknowledged[seq] = entry.index
        node.read_floor_waits = [(i, f) for i, f in node.read_floor_waits if i > entry.index]

    def _maybe_compact(self, node: SimNode) -> None:
        core = node.core
        assert core is not None
        applied = node.sm.index
        last_snap = core.snapshot.index if core.snapshot else 0
        if applied - last_snap < self.faults.compact_every or applied > core.log.persisted:
            return
        term = core.log.term(applied)
        assert term is not None
        snap = Snapshot(applied, term, node.sm.snapshot())
        compact_to = core.compaction_point(applied, self.faults.keep_entries)
        node.storage.compact(snap, compact_to)
        core.compact(snap, compact_to)

    # --- network -----------------------------------------------------------------------------

    def _send(self, m: Message) -> None:
        self._check_promise(m)
        if (m.src, m.dst) in self.blocked:
            return
        if self.chaos and self.rng.random() < self.faults.drop:
            return
        copies = 2 if self.chaos and self.rng.random() < self.faults.duplicate else 1
        for _ in range(copies):
            delay = 1 + self.rng.randrange(self.faults.max_delay if self.chaos else 5)
            self._schedule(delay, "deliver", m)

    def _check_promise(self, m: Message) -> None:
        """A message that promises durable state is sent only once that state would survive a
        crash (the Ready contract: such messages go after the fsync, never early)."""
        node = self.nodes[m.src]
        if m.type is MessageType.APPEND_RESP and not m.reject:
            durable = node.storage.durable_term(m.index)
            in_log = node.core.log.term(m.index) if node.core is not None else None
            if durable is None or (durable != COVERED and in_log is not None and durable != in_log):
                self.fail(f"member {m.src} told {m.dst} it holds index {m.index} (term {in_log}) before "
                          f"that was durable (durable term: {durable})")
        elif m.type is MessageType.VOTE_RESP and not m.reject:
            stored = node.storage.hard_state
            if (stored.term, stored.vote) != (m.term, m.dst):
                self.fail(f"member {m.src} granted its vote in term {m.term} to {m.dst} before recording "
                          f"it durably (durable: term {stored.term}, vote {stored.vote})")

    def _on_deliver(self, m: object) -> None:
        assert isinstance(m, Message)
        node = self.nodes[m.dst]
        if node.core is None or (m.src, m.dst) in self.blocked:
            return
        node.core.step(m)
        self._drain(node)

    def _on_tick(self, payload: object) -> None:
        i, incarnation = payload  # type: ignore[misc]
        node = self.nodes[i]
        if node.incarnation != incarnation:
            return  # a tick chain of an earlier life
        self._schedule(TICK + self.rng.randrange(3) - 1, "tick", payload)
        if node.core is None:
            return
        node.core.tick()
        self._drain(node)

    # --- workload and nemesis ----------------------------------------------------------------

    def propose(self, i: int) -> int | None:
        node = self.nodes[i]
        if node.core is None:
            return None
        self._next_proposal += 1
        self._next_request += 1
        seq = self._next_proposal
        data = b"s%d-p%d" % (self.seed, seq)
        self.proposal_data[seq] = data
        if node.core.propose(data, self._next_request):
            node.pending_proposals[self._next_request] = seq
            self._drain(node)
            return seq
        return None

    def _on_propose(self, _: object) -> None:
        self._schedule(self._exp(self.faults.propose_interval), "propose", None)
        if self.chaos:
            self.propose(self.rng.choice(self.ids))

    def _on_read(self, _: object) -> None:
        self._schedule(self._exp(self.faults.read_interval), "read", None)
        node = self.nodes[self.rng.choice(self.ids)]
        if node.core is None:
            return
        self._next_request += 1
        if node.core.read_index(self._next_request):
            node.pending_reads[self._next_request] = self.max_commit
            self._drain(node)

    def _on_nemesis(self, _: object) -> None:
        self._schedule(self._exp(self.faults.nemesis_interval), "nemesis", None)
        if not self.chaos:
            return
        rng = self.rng
        action = rng.choice(["crash", "restart", "restart", "partition", "one_way", "isolate", "heal", "heal",
                             "transfer", "false_gone"])
        down = [i for i in self.ids if not self.nodes[i].up]
        up = [i for i in self.ids if self.nodes[i].up]
        if action == "crash" and up:
            self._crash(rng.choice(up))
        elif action == "restart" and down:
            i = rng.choice(down)
            self._start(i)
            self._schedule(rng.randrange(TICK), "tick", (i, self.nodes[i].incarnation))
        elif action == "partition":
            side = set(rng.sample(self.ids, rng.randrange(1, len(self.ids))))
            self.blocked = {(a, b) for a in self.ids for b in self.ids if (a in side) != (b in side)}
        elif action == "one_way":
            a, b = rng.sample(self.ids, 2) if len(self.ids) > 1 else (1, 1)
            self.blocked.add((a, b))
        elif action == "isolate":
            i = rng.choice(self.ids)
            if rng.random() < 0.5:
                self.blocked |= {(i, j) for j in self.ids if j != i}  # it can hear but not speak
            else:
                self.blocked |= {(j, i) for j in self.ids if j != i}  # it can speak but not hear
        elif action == "heal":
            self.blocked = set()
        elif action == "false_gone" and len(self.ids) > 1:
            # A member is told that another (most often the live leader) refuses connections.
            leader = self.leader()
            j = rng.choice([i for i in self.ids if i != leader] or self.ids)
            i = leader if leader is not None and leader != j else rng.choice([k for k in self.ids if k != j])
            self._on_gone((j, i))
        elif action == "transfer":
            leader = self.leader()
            if leader is not None and len(self.ids) > 1:
                node = self.nodes[leader]
                assert node.core is not None
                node.core.transfer_leadership(rng.choice([i for i in self.ids if i != leader]))
                self._drain(node)

    # --- checks ------------------------------------------------------------------------------

    def fail(self, what: str) -> None:
        raise SafetyViolation(
            f"{what}\n  seed={self.seed} members={len(self.ids)} step={self.steps} time={self.now}\n"
            f"  replay: python scripts/raft_soak.py --seeds {self.seed}..{self.seed} "
            f"--members {len(self.ids)} --steps {self.steps}"
        )

    def check(self) -> None:
        for node in self.nodes.values():
            core = node.core
            if core is None:
                continue
            if core.role is Role.LEADER:
                other = self.leaders.setdefault(core.term, node.id)
                if other != node.id:
                    self.fail(f"two leaders in term {core.term}: {other} and {node.id}")
                if (core.term, node.id) not in self._leader_checked:
                    self._leader_checked.add((core.term, node.id))
                    self._check_leader_completeness(core)
            log = core.log
            start = max(self._checked_commit.get(node.id, 0), log.offset)
            for index in range(start + 1, log.commit + 1):
                entry = log.entry(index)
                known = self.committed.setdefault(index, (entry.term, entry.data))
                if known != (entry.term, entry.data):
                    self.fail(f"committed entry {index} changed on member {node.id}: {known} vs {entry}")
            self._checked_commit[node.id] = max(start, log.commit)
            self.max_commit = max(self.max_commit, log.commit)

    def _check_leader_completeness(self, core: RaftCore) -> None:
        log = core.log
        for index in range(log.offset + 1, self.max_commit + 1):
            known = self.committed.get(index)
            if known is None:
                continue
            if log.term(index) != known[0] or log.entry(index).data != known[1]:
                self.fail(f"leader {core.id} of term {core.term} lacks committed entry {index}")

    # --- liveness ----------------------------------------------------------------------------

    def heal(self) -> None:
        """End the chaos: heal the network and restart every crashed member."""
        self.chaos = False
        self.blocked = set()
        for i in self.ids:
            if not self.nodes[i].up:
                self._start(i)
                self._schedule(self.rng.randrange(TICK), "tick", (i, self.nodes[i].incarnation))

    def leader(self) -> int | None:
        leaders = [n.id for n in self.nodes.values() if n.core is not None and n.core.role is Role.LEADER]
        return leaders[0] if len(leaders) == 1 else None

    def run_liveness(self, max_time: int = 60 * TICK * SIM_CONFIG.election_ticks) -> None:
        self.heal()
        if not self.run_until(lambda: self.leader() is not None, max_time):
            self.fail("no leader elected after the network healed")
        # Keep proposing (as a client would retry) until one proposal is acknowledged by its
        # proposer and applied by every member. A proposal may be refused or overtaken by an
        # election that the restarted members cause, so a retry every few election timeouts.
        deadline = self.now + max_time
        tried: list[int] = []
        retry_every = 3 * TICK * self.config.election_ticks

        def everywhere() -> bool:
            for seq in tried:
                index = self.acknowledged.get(seq)
                if index is not None and all(n.sm.index >= index for n in self.nodes.values()):
                    return True
            return False

        while not everywhere():
            if self.now >= deadline:
                self.fail(f"proposals {tried} did not commit everywhere after healing")
            seq = self.propose(self.rng.choice(self.ids))
            if seq is not None:
                tried.append(seq)
            self.run_until(everywhere, retry_every if seq is not None else TICK)
        seq = next(s for s in tried if s in self.acknowledged)
        digests = {n.sm.digest for n in self.nodes.values() if n.sm.index == self.acknowledged[seq]}
        if len(digests) > 1:
            self.fail("members applied different sequences")
        for s, index in self.acknowledged.items():
            if self.committed.get(index, (0, b""))[1] != self.proposal_data[s]:
                self.fail(f"acknowledged proposal {s} is not the committed entry at {index}")
