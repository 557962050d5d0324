"""The balancer's executor, pure: a plan's proposals as reassignment tasks carried out in batches
(Cruise Control's Executor and ExecutionTaskPlanner), with every decision here and every request
in the shell (`execution.py`).

- Phases, as Cruise Control's: INTER_BROKER_REPLICA_MOVEMENT (the data moves), then
  LEADER_MOVEMENT (preferred-leader elections for every partition whose leader changes), then
  done. The throttles are set before the first batch and removed at the end, however it ends.
- Batches: a task counts against every broker it touches (its old and new replicas: source and
  destination, as Cruise Control counts), and no broker has more than
  `num.concurrent.partition.movements.per.broker` tasks in progress; at most
  `max.num.cluster.partition.movements` in progress in all. Tasks go in the plan's order.
- One reassignment per task, to the proposal's full target: Kafka's controller then adds the new
  replicas first and removes the old ones only once every target replica is in the ISR, so the
  ISR never shrinks below the target's size. A task is refused (not submitted) when its target
  has fewer replicas than `min.insync.replicas`, names a broker that is not alive, or its
  partition is not at full ISR now (Cruise Control's PostponeUrp: it waits, bounded).
- A task is done when the partition's replicas are the target (as a set; the order is then
  fixed by the preferred-leader phase) and every one is in the ISR, and no reassignment of it
  is in progress.
- Stop (asked, or a broker a task in progress touches died): nothing new starts; the tasks in
  progress are cancelled (Kafka's null-target reassignment: back to the old replicas) and the
  throttles removed; the state says why.

Each observation of a partition in progress is checked for the executor's safety claims, and
what was seen is kept (`lowest_isr`, `most_in_progress`) so that tests and `roost balance status`
can show the claims held.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from roost.broker.balance.planner import Proposal

DEFAULT_MOVES_PER_BROKER = 5  # Cruise Control's num.concurrent.partition.movements.per.broker
DEFAULT_CLUSTER_MOVES = 1250  # Cruise Control's max.num.cluster.partition.movements
DEFAULT_POSTPONE_POLLS = 600  # polls a task may wait for its partition's full ISR before it is refused


class Phase(Enum):
    NO_TASK_IN_PROGRESS = "NO_TASK_IN_PROGRESS"
    INTER_BROKER_REPLICA_MOVEMENT = "INTER_BROKER_REPLICA_MOVEMENT_TASK_IN_PROGRESS"
    LEADER_MOVEMENT = "LEADER_MOVEMENT_TASK_IN_PROGRESS"
    STOPPING = "STOPPING_EXECUTION"
    COMPLETED = "COMPLETED"
    STOPPED = "STOPPED"


class TaskState(Enum):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    DONE = "done"
    REFUSED = "refused"  # never submitted: it would break a rule
    CANCELLED = "cancelled"  # in progress when the execution stopped: rolled back


@dataclass(frozen=True, slots=True)
class Observed:
    """A partition as the cluster shows it now."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    reassigning: bool  # ListPartitionReassignments names it
    min_insync_replicas: int = 1


@dataclass
class Task:
    proposal: Proposal
    state: TaskState = TaskState.PENDING
    reason: str = ""
    waited_polls: int = 0

    @property
    def brokers(self) -> frozenset[int]:
        return frozenset(self.proposal.old_replicas) | frozenset(self.proposal.new_replicas)

    @property
    def key(self) -> tuple[str, int]:
        return self.proposal.partition


@dataclass
class Executor:
    proposals: Iterable[Proposal]
    moves_per_broker: int = DEFAULT_MOVES_PER_BROKER
    cluster_moves: int = DEFAULT_CLUSTER_MOVES
    postpone_polls: int = DEFAULT_POSTPONE_POLLS
    # Brokers already gone when the plan was made (self-healing moves replicas off them): their
    # absence stops nothing, and no throttle is asked of them.
    dead_at_start: frozenset[int] = frozenset()
    tasks: list[Task] = field(init=False)
    phase: Phase = field(init=False, default=Phase.NO_TASK_IN_PROGRESS)
    stop_reason: str = field(init=False, default="")
    lowest_isr: dict[tuple[str, int], int] = field(init=False, default_factory=dict)  # seen while moving
    most_in_progress: dict[int, int] = field(init=False, default_factory=dict)  # broker -> most at once
    batches: list[list[tuple[str, int]]] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        assert self.moves_per_broker >= 1 and self.cluster_moves >= 1
        self.tasks = [Task(p) for p in self.proposals if p.moves_data]
        self.leadership = [p for p in self.proposals if p.new_leader != p.old_leader or
                           (not p.moves_data and p.new_replicas != p.old_replicas)]
        self.phase = Phase.INTER_BROKER_REPLICA_MOVEMENT if self.tasks else (
            Phase.LEADER_MOVEMENT if self.leadership else Phase.COMPLETED)

    # questions -------------------------------------------------------------------------------
    def in_progress(self) -> list[Task]:
        return [t for t in self.tasks if t.state == TaskState.IN_PROGRESS]

    def pending(self) -> list[Task]:
        return [t for t in self.tasks if t.state == TaskState.PENDING]

    @property
    def finished(self) -> bool:
        return self.phase in (Phase.COMPLETED, Phase.STOPPED)

    def load_per_broker(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for task in self.in_progress():
            for broker in task.brokers:
                counts[broker] = counts.get(broker, 0) + 1
        return counts

    def throttled_brokers(self) -> set[int]:
        """Every broker any data-moving task touches (the throttle rates go on them)."""
        return {b for t in self.tasks for b in t.brokers} - self.dead_at_start

    def throttled_replicas(self) -> dict[str, str]:
        """topic -> the "partition:broker" list for both throttle lists: every old replica (any
        may lead during the move) and every new one (Cruise Control puts both in both lists)."""
        pairs: dict[str, set[tuple[int, int]]] = {}
        for task in self.tasks:
            topic, index = task.key
            pairs.setdefault(topic, set()).update((index, b) for b in task.brokers)
        return {topic: ",".join(f"{p}:{b}" for p, b in sorted(entries)) for topic, entries in sorted(pairs.items())}

    # decisions -------------------------------------------------------------------------------
    def refusal(self, task: Task, observed: Observed | None, live: set[int]) -> str | None:
        """Why `task` must not be submitted (ever), or None."""
        target = task.proposal.new_replicas
        if observed is None:
            return "the partition is gone"
        if len(target) < observed.min_insync_replicas:
            return f"target {list(target)} has fewer replicas than min.insync.replicas={observed.min_insync_replicas}"
        dead = sorted(set(target) - live)
        if dead:
            return f"target brokers {dead} are not alive"
        if set(observed.replicas) != set(task.proposal.old_replicas):
            return f"the partition's replicas changed since the plan ({list(observed.replicas)})"
        return None

    def next_batch(self, observed: Mapping[tuple[str, int], Observed], live: set[int]) -> list[Task]:
        """The tasks to submit now (marked in progress): in plan order, each within the
        per-broker and cluster bounds; a task whose partition is under-replicated waits."""
        if self.phase != Phase.INTER_BROKER_REPLICA_MOVEMENT:
            return []
        counts = self.load_per_broker()
        running = len(self.in_progress())
        batch: list[Task] = []
        for task in self.pending():
            if running >= self.cluster_moves:
                break
            seen = observed.get(task.key)
            reason = self.refusal(task, seen, live)
            if reason is not None:
                task.state, task.reason = TaskState.REFUSED, reason
                continue
            assert seen is not None
            # Full ISR, but for the replicas on brokers gone before the plan (healing moves them).
            if not set(seen.replicas) - self.dead_at_start <= set(seen.isr) or seen.reassigning:
                task.waited_polls += 1
                if task.waited_polls > self.postpone_polls:
                    task.state, task.reason = TaskState.REFUSED, "its partition stayed under-replicated"
                continue
            if any(counts.get(b, 0) >= self.moves_per_broker for b in task.brokers):
                continue
            for broker in task.brokers:
                counts[broker] = counts.get(broker, 0) + 1
            running += 1
            task.state = TaskState.IN_PROGRESS
            batch.append(task)
        for broker, count in counts.items():
            self.most_in_progress[broker] = max(self.most_in_progress.get(broker, 0), count)
        if batch:
            self.batches.append([t.key for t in batch])
        return batch

    def observe(self, observed: Mapping[tuple[str, int], Observed], live: set[int]) -> None:
        """Take the cluster as it is now: tasks done, a dead broker stopping the execution, the
        lowest ISR each moving partition showed."""
        for task in self.in_progress():
            seen = observed.get(task.key)
            if seen is None:
                continue
            self.lowest_isr[task.key] = min(self.lowest_isr.get(task.key, len(seen.isr)), len(seen.isr))
            target = set(task.proposal.new_replicas)
            if set(seen.replicas) == target and target <= set(seen.isr) and not seen.reassigning:
                task.state = TaskState.DONE
        if self.phase == Phase.INTER_BROKER_REPLICA_MOVEMENT:
            dead = sorted({b for t in self.in_progress() for b in t.brokers} - live - self.dead_at_start)
            if dead:
                self.stop(f"brokers {dead} died while their moves were in progress")
            elif not self.pending() and not self.in_progress():
                self.phase = Phase.LEADER_MOVEMENT if self.leadership else Phase.COMPLETED

    def leadership_done(self) -> None:
        assert self.phase == Phase.LEADER_MOVEMENT, self.phase
        self.phase = Phase.COMPLETED

    def stop(self, reason: str) -> list[Task]:
        """Stop: the tasks in progress are to be cancelled (returned); nothing new starts."""
        if self.finished:
            return []
        self.stop_reason = reason
        self.phase = Phase.STOPPING
        cancelled = self.in_progress()
        for task in cancelled:
            task.state, task.reason = TaskState.CANCELLED, reason
        return cancelled

    def stopped(self) -> None:
        self.phase = Phase.STOPPED

    def status(self) -> dict[str, Any]:
        """JSON-ready: what `roost balance status` shows."""
        counts: dict[str, int] = {}
        for task in self.tasks:
            counts[task.state.value] = counts.get(task.state.value, 0) + 1
        return {
            "phase": self.phase.value, "stop_reason": self.stop_reason, "tasks": counts,
            "moves_per_broker": self.moves_per_broker, "batches": len(self.batches),
            "most_in_progress_per_broker": {str(b): n for b, n in sorted(self.most_in_progress.items())},
            "lowest_isr_seen": {f"{t}-{p}": n for (t, p), n in sorted(self.lowest_isr.items())},
            "leadership_moves": len(self.leadership),
            "in_progress": [f"{t.key[0]}-{t.key[1]}: {list(t.proposal.old_replicas)} -> "
                            f"{list(t.proposal.new_replicas)}" for t in self.in_progress()],
            "refused": [f"{t.key[0]}-{t.key[1]}: {t.reason}" for t in self.tasks if t.state == TaskState.REFUSED],
        }
