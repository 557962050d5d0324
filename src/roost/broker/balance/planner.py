"""The balancer's planner: a pure, deterministic function from a cluster model to a plan.

Goals run in priority order (goals.py). For each, the planner takes the goal's candidates in the
order the goal gives them and keeps the first one that (a) brings this goal strictly closer to
met and (b) every goal already optimized accepts (takes none of them further from met); it
repeats until the goal is met, no candidate qualifies, or the plan's action budget is spent. A
hard goal that is still unmet after its turn fails the plan (OptimizationFailure), as in Cruise
Control. Then the whole sequence runs again, because a later goal's actions can open a candidate
for an earlier one. It ends: every action lowers its goal's violation and raises none of a goal
before it, so the violations, read in priority order, fall lexicographically with each action,
and a cluster has finitely many placements. The planner stops at the first pass that adds
nothing, which makes its output a fixed point: planning the planned cluster proposes nothing
(unless the action budget cut it short, which the plan says in `truncated`).

Why this is safe to execute (the executor's rules, checked by `steps` in the tests):
- no action changes a partition's replication factor, and no replica is placed on a dead or
  decommissioned broker;
- a replica move is carried out as Kafka's reassignment does, the new replica added first and the
  old one removed only once the new one is in the ISR, so the number of in-sync replicas never
  drops below what the partition had, and never below `min.insync.replicas` when it had that many.

Determinism: every iteration is over sorted keys and the goals break ties by broker id; no clock,
no randomness.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import islice

from roost.broker.balance.goals import CANDIDATES_PER_ROUND, Goal, default_goals
from roost.broker.balance.model import (
    Action,
    BrokerInfo,
    ClusterModel,
    PartitionInfo,
    ReplicaMove,
    Resource,
    single_moves,
)

CANDIDATES_TRIED = 4 * CANDIDATES_PER_ROUND  # per accepted action: bounds the search


def negligible(amount: float, scale: float) -> bool:
    """Loads are sums of floats kept current by adding and subtracting: a difference within
    rounding of the figures' size is no difference (else a fresh model of the same placement
    could find an 'improvement' of 1e-7 bytes, and a plan would not be a fixed point)."""
    return abs(amount) <= 1e-9 * max(1.0, abs(scale))


class OptimizationFailure(Exception):
    """A hard goal cannot be met (Cruise Control's OptimizationFailureException)."""

    def __init__(self, goal: str, violation: float) -> None:
        super().__init__(f"{goal} cannot be met (violation {violation:g} left)")
        self.goal = goal
        self.violation = violation


@dataclass(frozen=True, slots=True)
class Proposal:
    """One partition's change: what the executor submits as one reassignment (replicas) and,
    where the leader changes, one preferred-leader election (the new head)."""

    partition: tuple[str, int]
    old_replicas: tuple[int, ...]
    new_replicas: tuple[int, ...]
    old_leader: int
    new_leader: int

    @property
    def moves_data(self) -> bool:
        return set(self.old_replicas) != set(self.new_replicas)

    @property
    def adding(self) -> tuple[int, ...]:
        return tuple(r for r in self.new_replicas if r not in self.old_replicas)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(r for r in self.old_replicas if r not in self.new_replicas)


@dataclass(frozen=True, slots=True)
class BrokerLoad:
    replicas: int
    leaders: int
    load: dict[Resource, float]


@dataclass(frozen=True)
class Plan:
    actions: tuple[Action, ...]
    proposals: tuple[Proposal, ...]
    before: dict[int, BrokerLoad]
    after: dict[int, BrokerLoad]
    violations_before: dict[str, float]
    violations_after: dict[str, float]
    truncated: bool  # the action budget ran out before every goal was done
    bytes_to_move: float = 0.0
    goal_order: tuple[str, ...] = field(default=())
    # The goal each action was kept for (parallel to `actions`), and the hard ones: what a person
    # reading the plan asks first is why a partition moves.
    action_goals: tuple[str, ...] = field(default=())
    hard_goals: tuple[str, ...] = field(default=())

    @property
    def empty(self) -> bool:
        return not self.proposals

    def goals_of(self) -> dict[tuple[str, int], tuple[str, ...]]:
        """Each changed partition's goals: those whose actions moved it, in priority order."""
        found: dict[tuple[str, int], set[str]] = {}
        for action, goal in zip(self.actions, self.action_goals, strict=True):
            for move in single_moves(action):
                found.setdefault(move.partition, set()).add(goal)
        rank = {name: index for index, name in enumerate(self.goal_order)}
        return {key: tuple(sorted(names, key=lambda n: rank.get(n, len(rank)))) for key, names in found.items()}


def _broker_loads(model: ClusterModel) -> dict[int, BrokerLoad]:
    return {b: BrokerLoad(model.replica_count[b], model.leader_count[b], dict(model.load[b]))
            for b in sorted(model.brokers)}


def broker_loads(brokers: Iterable[BrokerInfo], partitions: Iterable[PartitionInfo]) -> dict[int, BrokerLoad]:
    """The load model per broker now, without planning (the console shows it on every refresh;
    a plan costs seconds on a large cluster)."""
    return _broker_loads(ClusterModel(brokers, partitions))


def plan(brokers: Iterable[BrokerInfo], partitions: Iterable[PartitionInfo], *,
         goals: Sequence[Goal] | None = None, max_actions: int = 1000) -> Plan:
    """The plan that takes the cluster towards `goals` (Cruise Control's defaults if None) in at
    most `max_actions` partition moves (a swap moves two partitions and counts two), so that the
    budget bounds the proposals the executor carries out."""
    assert max_actions >= 0
    goals = list(goals) if goals is not None else default_goals()
    model = ClusterModel(brokers, partitions)
    initial = {key: p for key, p in model.partitions.items()}
    before = _broker_loads(model)
    violations_before = {g.name: g.violation(model) for g in goals}
    actions: list[Action] = []
    served: list[str] = []  # the goal of each action
    truncated = False
    # Each pass but the last adds an action, so at most max_actions + 1 passes.
    for _ in range(max_actions + 1):
        added = len(actions)
        for index, goal in enumerate(goals):
            kept = len(actions)
            truncated = _optimize(model, goal, goals[:index], actions, max_actions) or truncated
            served += [goal.name] * (len(actions) - kept)
            if goal.hard and not truncated and not negligible(goal.violation(model), goal.scale(model)):
                raise OptimizationFailure(goal.name, goal.violation(model))
        if len(actions) == added or truncated:
            break
    proposals = tuple(
        Proposal(key, initial[key].replicas, p.replicas, initial[key].leader, p.leader)
        for key, p in sorted(model.partitions.items())
        if p.replicas != initial[key].replicas or p.leader != initial[key].leader)
    moved = sum(initial[p.partition].load.disk * len(p.adding) for p in proposals)
    return Plan(tuple(actions), proposals, before, _broker_loads(model), violations_before,
                {g.name: g.violation(model) for g in goals}, truncated, moved, tuple(g.name for g in goals),
                tuple(served), tuple(g.name for g in goals if g.hard))


def _optimize(model: ClusterModel, goal: Goal, optimized: Sequence[Goal], actions: list[Action],
              max_actions: int) -> bool:
    """Apply `goal`'s accepted candidates to `model`; True when the budget stopped it."""
    while True:
        violation = goal.violation(model)
        scale = goal.scale(model)
        if negligible(violation, scale):
            return False
        spent = _moves_in(actions)
        if spent >= max_actions:
            return True
        earlier = [(g, 0.0 if g.judges_locally else g.violation(model)) for g in optimized]
        for candidate in islice(goal.candidates(model), CANDIDATES_TRIED):
            if spent + len(single_moves(candidate)) > max_actions or not _safe(model, candidate):
                continue
            undo = model.apply(candidate)
            gain = violation - goal.violation_after(model, candidate, violation)
            if gain > 0 and not negligible(gain, scale) and goal.worth(model, candidate, gain) and all(
                    g.accepts(model, candidate, undo, was) for g, was in earlier):
                actions.append(candidate)
                break
            model.restore(undo)
        else:
            return False


def _moves_in(actions: Sequence[Action]) -> int:
    """Partition moves the actions make: what the action budget counts."""
    return sum(len(single_moves(action)) for action in actions)


def _safe(model: ClusterModel, action: Action) -> bool:
    """The rules every action keeps, whichever goal wants it."""
    moves = single_moves(action)
    if len({m.partition for m in moves}) != len(moves):
        return False
    for move in moves:
        partition = model.partitions[move.partition]
        destination = model.brokers[move.destination]
        if not destination.alive:
            return False
        if isinstance(move, ReplicaMove):
            if destination.excluded or move.destination in partition.replicas or move.source not in partition.replicas:
                return False
        elif move.destination not in partition.replicas or move.destination == partition.leader:
            return False
    return True


def steps(proposal: Proposal) -> list[tuple[int, ...]]:
    """The replica sets a reassignment goes through as the executor carries it out (Kafka's
    controller: RS = TRS + ORS while adding, then TRS once the added replicas are in sync)."""
    if not proposal.moves_data:
        return [proposal.new_replicas]
    adding = (*proposal.new_replicas, *proposal.removing)
    return [adding, proposal.new_replicas]
