"""A deterministic simulation of one share-partition through leader and share-coordinator moves.

Roost's two pure cores, driven from a seed: the share-partition core (`SharePartition`,
broker/share/partition.py) on the data partition's leader, and the share coordinator's core
(`ShareCoordinatorCore`, coordinator_core.py) deciding the state writes, whose records are
replayed into it only once committed (replicated), as the coordinator's shell does. Between them
the simulation plays the shells' protocol:

- consumers (share members) fetch (`acquire` over the log's batch bounds), acknowledge what they
  hold (accept, release, reject, one `acknowledge` per commit), and leave now and then
  (`release_member`); the clock moves, so locks expire (`tick`);
- every `StateChange` the leader core makes is written in order, one at a time (the persister's
  order): sent, decided by the coordinator core (a record appended, not yet committed),
  committed (replayed), answered; an acknowledgement is answered to its consumer only then
  (`complete`), or fails (`fail`) when its write did;
- a **leader move** drops the leader core with everything in flight on it (the consumers'
  unanswered acknowledgements are unknown to them); the new leader reads the state with a higher
  leader epoch (which fences the old one's writes still on their way) and rebuilds its core with
  `SharePartition.load` from the coordinator's start offset and batches;
- a **coordinator move** loses the appended but uncommitted record; the new coordinator replays
  the committed log into a fresh core; the write in flight is retried there (the persister's
  retry) or given up (a failed write).

Every operation goes into a history in roost.testing.history.share's format (sends, share-polls
with delivery counts, share-acks ok / fail / unknown, the final share-state after a quiescent
end in which the consumers accept everything), and the same share checker as the real fault run
judges it. After each leader move the simulation also checks at once that every record whose
accept or reject was answered is terminal in the rebuilt core.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from dataclasses import dataclass, field

from roost.broker.share.coordinator_core import ShareCoordinatorCore, StateRecord
from roost.broker.share.coordinator_records import ShareKey
from roost.broker.share.partition import (
    AckBatch,
    AckType,
    LogBatch,
    ShareConfig,
    SharePartition,
    StateChange,
)
from roost.testing.history.model import FAIL, OK, UNKNOWN, History, Op
from roost.wire.kafka.errors import ErrorCode

KEY = ShareKey("sim-group", uuid.UUID(int=7), 0)
CONFIG = ShareConfig(delivery_limit=3, max_record_locks=40, lock_duration_ms=1000)
KINDS = {AckType.ACCEPT: "accept", AckType.RELEASE: "release", AckType.REJECT: "reject"}


class SimulationFailure(AssertionError):
    pass


@dataclass
class Write:
    change: StateChange | None  # None: an acknowledgement that changed nothing, answered in its turn
    epoch: int  # the leader epoch it was made in
    ack: tuple[str, int, tuple[tuple[int, str, int], ...]] | None = None  # (member, invoke, entries)
    phase: str = "queued"  # queued -> appended -> committed


@dataclass
class ShareSim:
    seed: int
    members: int = 3
    rng: random.Random = field(init=False)
    t: float = 0.0
    now_ms: int = 0
    log: list[LogBatch] = field(default_factory=list)
    hwm: int = 0
    ops: list[Op] = field(default_factory=list)
    stats: Counter[str] = field(default_factory=Counter)
    # the coordinator: its committed log, its core (replayed from it), an appended record
    committed: list[StateRecord] = field(default_factory=list)
    coordinator: ShareCoordinatorCore = field(default_factory=ShareCoordinatorCore)
    # the leader
    epoch: int = 0
    core: SharePartition | None = None
    writes: list[Write] = field(default_factory=list)
    held: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # member -> (offset, count)
    answered_ends: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        decision = self.coordinator.initialize(KEY, 0, 0, now=0)
        assert decision.record is not None
        self._commit(decision.record)
        self._load()

    # the history ----------------------------------------------------------------------------
    def tick_time(self) -> float:
        self.t += 1.0
        return self.t

    def record(self, process: str, f: str, invoke: float, outcome: str = OK, key=None, value=None,
               result=None) -> None:
        self.ops.append(Op(process, f, invoke, self.tick_time(), outcome, key, value, result))  # type: ignore[arg-type]

    def history(self) -> History:
        return History(sorted(self.ops, key=lambda op: (op.invoke, op.complete)))

    # the coordinator ------------------------------------------------------------------------
    def _commit(self, record: StateRecord) -> None:
        self.committed.append(record)
        self.coordinator.replay(record, len(self.committed) - 1)

    def _coordinator_moves(self) -> None:
        self.stats["coordinator moves"] += 1
        self.ops.append(Op("nemesis", "coordinator-move", self.t, self.t))
        self.coordinator = ShareCoordinatorCore()
        for offset, record in enumerate(self.committed):
            self.coordinator.replay(record, offset)
        if self.writes and self.writes[0].phase == "appended":  # not replicated: gone with the leader
            self.writes[0].phase = "queued"
            if self.rng.random() < 0.3:  # the persister gave up on it
                self._answer(self.writes.pop(0), ErrorCode.COORDINATOR_NOT_AVAILABLE)

    def _coordinator_step(self) -> None:
        if not self.writes:
            return
        head = self.writes[0]
        if head.change is None:
            self._answer(self.writes.pop(0), ErrorCode.NONE)
        elif head.phase == "queued":
            decision = self.coordinator.write(
                KEY, state_epoch=0, leader_epoch=head.epoch, start_offset=head.change.start_offset,
                delivery_complete_count=head.change.delivery_complete_count, batches=head.change.batches,
                now=self.now_ms)
            if decision.error != ErrorCode.NONE:
                self._answer(self.writes.pop(0), decision.error)
                return
            assert decision.record is not None
            head.phase = "appended"
            self._pending_record = decision.record
        elif head.phase == "appended":
            self._commit(self._pending_record)
            head.phase = "committed"
        else:
            self._answer(self.writes.pop(0), ErrorCode.NONE)

    # the leader -----------------------------------------------------------------------------
    def _load(self) -> None:
        self.epoch += 1
        decision = self.coordinator.read(KEY, self.epoch, now=self.now_ms)
        assert decision.error == ErrorCode.NONE and decision.state is not None, decision
        if decision.record is not None:
            self._commit(decision.record)
        state = decision.state
        self.core = SharePartition.load(max(0, state.start_offset), state.batches, CONFIG)
        self._background(self.core.start_change())
        for offset in self.answered_ends:
            if not self.core.state_of(offset).terminal:
                raise SimulationFailure(f"seed {self.seed}: leader epoch {self.epoch} rebuilt offset {offset} as "
                                        f"{self.core.state_of(offset).name} after its acknowledgement was answered")

    def _leader_moves(self) -> None:
        self.stats["leader moves"] += 1
        self.ops.append(Op("nemesis", "leader-move", self.t, self.t, OK, None, {"epoch": self.epoch + 1}))
        # Writes of the old leader still on their way: one may land before the new leader's read.
        if self.writes and self.writes[0].phase == "queued" and self.rng.random() < 0.5:
            self._coordinator_step()
        if self.writes and self.writes[0].phase == "appended":
            self._coordinator_step()  # the coordinator finishes what it decided (it did not move)
        for write in self.writes:
            if write.ack is not None:
                member, invoke, entries = write.ack
                self.record(member, "share-ack", invoke, UNKNOWN, KEY.group_id, _entries(entries))
        self.writes = []
        self.held = {}
        self._load()

    def _answer(self, write: Write, code: ErrorCode) -> None:
        core = self.core
        assert core is not None
        if write.change is None:
            pass
        elif code == ErrorCode.NONE:
            follow = core.complete(write.change)
            if follow is not None:
                self.writes.append(Write(follow, self.epoch))
        else:
            core.fail(write.change)
            self.stats["failed writes"] += 1
            if write.change.start_offset >= 0:
                self.stats["failed writes carrying a start"] += 1
        if write.ack is not None:
            member, invoke, entries = write.ack
            outcome = OK if code == ErrorCode.NONE else UNKNOWN
            self.record(member, "share-ack", invoke, outcome, KEY.group_id, _entries(entries))
            if code == ErrorCode.NONE:
                self.answered_ends.update(o for o, kind, _ in entries if kind != "release")
                mine = self.held.get(member, [])
                done = {o for o, _, _ in entries}
                self.held[member] = [(o, c) for o, c in mine if o not in done]

    def _background(self, change: StateChange | None) -> None:
        if change is not None:
            self.writes.append(Write(change, self.epoch))

    # the workload ---------------------------------------------------------------------------
    def _produce(self) -> None:
        size = self.rng.randint(1, 3)
        base = self.hwm
        self.log.append(LogBatch(base, base + size - 1))
        self.hwm += size
        for offset in range(base, base + size):
            invoke = self.tick_time()
            self.record("producer", "send", invoke, OK, None, f"v{offset}", (0, offset))

    def _fetch(self, member: str, accept_all: bool = False) -> None:
        core = self.core
        assert core is not None
        offset = core.fetch_offset()
        if offset is None or offset >= self.hwm:
            return
        batches = [b for b in self.log if b.last_offset >= offset]
        invoke = self.tick_time()
        result = core.acquire(member, batches, now=self.now_ms, max_records=self.rng.randint(1, 6),
                              high_watermark=self.hwm)
        self._background(result.change)
        got = [(o, r.delivery_count) for r in result.ranges for o in range(r.first_offset, r.last_offset + 1)]
        if got:
            fresh = {o for o, _ in got}
            self.held[member] = [h for h in self.held.get(member, []) if h[0] not in fresh] + got
            self.record(member, "share-poll", invoke, OK, None, None, tuple((0, o, f"v{o}", c) for o, c in got))

    def _acknowledge(self, member: str, accept_all: bool = False) -> None:
        core = self.core
        assert core is not None
        mine = sorted(set(self.held.get(member, [])))
        if not mine:
            return
        chosen = mine if accept_all else [h for h in mine if self.rng.random() < 0.7]
        if not chosen:
            return
        entries = []
        for offset, count in chosen:
            roll = self.rng.random()
            kind = AckType.ACCEPT if accept_all or roll < 0.8 else (AckType.RELEASE if roll < 0.95 else AckType.REJECT)
            entries.append((offset, KINDS[kind], count))
        invoke = self.tick_time()
        kinds = {"accept": AckType.ACCEPT, "release": AckType.RELEASE, "reject": AckType.REJECT}
        result = core.acknowledge(member, [AckBatch(o, o, (kinds[k],)) for o, k, _ in entries], now=self.now_ms)
        if result.error != ErrorCode.NONE:
            # refused whole (a lock expired): nothing changed, certainly
            self.record(member, "share-ack", invoke, FAIL, KEY.group_id, _entries(tuple(entries)))
            self.stats["refused acknowledgements"] += 1
            expired = {o for o, _, _ in entries if core.holder(o) != member}
            self.held[member] = [h for h in mine if h[0] not in expired]
            return
        # Nothing to write (every offset already terminal, below SPSO): answered once the writes
        # before it are, as the leader's shell does (the write that ended them may be among them).
        self.writes.append(Write(result.change, self.epoch, (member, invoke, tuple(entries))))

    def _leave(self, member: str) -> None:
        core = self.core
        assert core is not None
        self._background(core.release_member(member, self.now_ms))
        pending = {o for w in self.writes if w.ack is not None and w.ack[0] == member for o, _, _ in w.ack[2]}
        self.held[member] = [h for h in self.held.get(member, []) if h[0] in pending]

    def _tick(self) -> None:
        core = self.core
        assert core is not None
        self.now_ms += self.rng.randint(0, 400)
        self._background(core.tick(self.now_ms))

    # running --------------------------------------------------------------------------------
    def step(self, faults: bool = True) -> None:
        names = [f"m{i}" for i in range(self.members)]
        roll = self.rng.random()
        if faults and roll < 0.01:
            self._leader_moves()
        elif faults and roll < 0.02:
            self._coordinator_moves()
        elif roll < 0.12:
            if self.hwm < 400:
                self._produce()
        elif roll < 0.35:
            self._fetch(self.rng.choice(names))
        elif roll < 0.55:
            self._acknowledge(self.rng.choice(names))
        elif roll < 0.58:
            self._leave(self.rng.choice(names))
        elif roll < 0.68:
            self._tick()
        else:
            self._coordinator_step()

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step()
        self.quiesce()

    def quiesce(self, limit: int = 200_000) -> None:
        """No more faults: the consumers accept everything until the coordinator's start offset
        passes every record; then the final share-state."""
        names = [f"m{i}" for i in range(self.members)]
        for _ in range(limit):
            core = self.core
            assert core is not None
            if self.finished() >= self.hwm and not self.writes:
                break
            member = self.rng.choice(names)
            choice = self.rng.random()
            if choice < 0.3:
                self._fetch(member)
            elif choice < 0.6:
                self._acknowledge(member, accept_all=True)
            elif choice < 0.65:
                self._tick()
            else:
                self._coordinator_step()
        else:
            raise SimulationFailure(f"seed {self.seed}: no quiescence in {limit} steps "
                                    f"(start {self.coordinator.summary(KEY, -1).state}, hwm {self.hwm})")
        state = self.coordinator.summary(KEY, -1).state
        assert state is not None
        if state.start_offset < self.finished():
            self.stats["persisted start behind"] += 1
        invoke = self.tick_time()
        self.record("final", "share-state", invoke, OK, KEY.group_id, None, ((0, self.finished()),))

    def finished(self) -> int:
        """The first offset the coordinator's state does not say is done: its start offset, past
        the batches above it that are terminal (what a new leader's load starts at). The persisted
        StartOffset itself may lag it after a failed write (see docs/fault-testing.md)."""
        state = self.coordinator.summary(KEY, -1).state
        assert state is not None
        offset = state.start_offset
        terminal = {o for b in state.batches if b.delivery_state in (2, 4)
                    for o in range(b.first_offset, b.last_offset + 1)}
        while offset in terminal:
            offset += 1
        return offset


def _entries(entries: tuple[tuple[int, str, int], ...]) -> tuple[tuple[int, int, str, int], ...]:
    return tuple((0, offset, kind, count) for offset, kind, count in entries)
