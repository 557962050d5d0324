"""Cruise Control's goals, by its names, in its priority order: each measures how far the model is
from it (`violation`, 0 when met), proposes actions that would bring it closer (`candidates`,
best first, bounded) and judges an action another goal wants (`accepts`: the action may not take
this goal further from met).

Hard goals: Roost's OfflineReplicaGoal first (replicas on dead or decommissioned brokers move:
self-healing and `roost broker decommission`; Cruise Control does this inside every goal), then
RackAwareGoal, ReplicaCapacityGoal and the four capacity goals. A plan never makes a hard goal
worse, and fails (OptimizationFailure) when it cannot meet one. Soft goals: the distribution
goals within avg * (1 +- threshold), and PreferredLeaderElectionGoal.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from roost.broker.balance.model import (
    Action,
    ClusterModel,
    LeadershipMove,
    PartitionInfo,
    ReplicaMove,
    ReplicaSwap,
    Resource,
    single_moves,
)

CANDIDATES_PER_ROUND = 64  # bounds each goal's search per accepted action


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Cruise Control's defaults (AnalyzerConfig)."""

    capacity: tuple[tuple[Resource, float], ...] = (
        (Resource.DISK, 0.8), (Resource.NW_IN, 0.8), (Resource.NW_OUT, 0.8), (Resource.CPU, 0.7))
    balance: float = 0.10  # *.balance.threshold 1.10
    max_replicas_per_broker: int = 10_000
    # A replica moved to even out network rates must pay for its copy within this long: the
    # bytes/s it takes off the band's edge, over this time, at least the bytes it copies.
    move_payback_s: float = 3600.0


class Goal:
    name = "Goal"
    hard = False
    judges_locally = False  # accepts() looks only at the partition moved (not at `violation_before`)

    def violation(self, model: ClusterModel) -> float:
        raise NotImplementedError

    def candidates(self, model: ClusterModel) -> Iterator[Action]:
        raise NotImplementedError

    def scale(self, model: ClusterModel) -> float:
        """The size of the figures this goal adds up (so rounding can be told from a change)."""
        return 1.0

    def violation_after(self, model: ClusterModel, action: Action, violation_before: float) -> float:
        """The violation with `action` applied to `model` (a goal that can tell it from the
        action alone overrides this)."""
        return self.violation(model)

    def accepts(self, model: ClusterModel, action: Action, befores: list[PartitionInfo],
                violation_before: float) -> bool:
        """Called with `action` applied to `model` (`befores`: the partitions as they were)."""
        return self.violation(model) <= violation_before + 1e-9 * max(1.0, self.scale(model))

    def worth(self, model: ClusterModel, action: Action, gain: float) -> bool:
        """Whether `gain` (this goal's violation taken off by `action`) is worth what the action
        costs: any gain is, but for goals that weigh it against the bytes copied."""
        return True


# ------------------------------------------------------------------------------ hard goals


class OfflineReplicaGoal(Goal):
    """No replica on a dead broker (when self-healing asks for it) or a decommissioned one."""

    name = "OfflineReplicaGoal"
    hard = True

    @staticmethod
    def _gone(model: ClusterModel) -> set[int]:
        return {b for b, info in model.brokers.items() if not info.alive or info.excluded}

    def violation(self, model: ClusterModel) -> float:
        gone = self._gone(model)
        return float(sum(model.replica_count[b] for b in gone) + sum(model.leader_count[b] for b in gone))

    def candidates(self, model: ClusterModel) -> Iterator[Action]:
        gone = self._gone(model)
        destinations = model.candidate_destinations()
        for key in sorted(model.partitions):
            partition = model.partitions[key]
            for replica in partition.replicas:
                if replica not in gone:
                    continue
                if replica == partition.leader:  # a leadership move first: no data to copy
                    for other in partition.replicas:
                        if other not in gone:
                            yield LeadershipMove(key, replica, other)
                by_load = sorted((d for d in destinations if d not in partition.replicas),
                                 key=lambda d: (model.replica_count[d], d))
                for destination in by_load:
                    yield ReplicaMove(key, replica, destination)


class RackAwareGoal(Goal):
    """No two replicas of a partition on one rack (brokers without a rack are racks of their own)."""

    name = "RackAwareGoal"
    hard = True
    judges_locally = True

    def violation(self, model: ClusterModel) -> float:
        return float(model.rack_duplicates)

    def accepts(self, model: ClusterModel, action: Action, befores: list[PartitionInfo],
                violation_before: float) -> bool:
        return all(model.duplicate_racks(model.partitions[before.key]) <= model.duplicate_racks(before)
                   for before in befores)

    def candidates(self, model: ClusterModel) -> Iterator[Action]:
        destinations = model.candidate_destinations()
        for key in sorted(model.partitions):
            partition = model.partitions[key]
            if not model.duplicate_racks(partition):
                continue
            seen: set[str] = set()
            for replica in partition.replicas:
                if model.rack(replica) not in seen:
                    seen.add(model.rack(replica))
                    continue
                used = {model.rack(r) for r in partition.replicas}
                for destination in sorted(destinations, key=lambda d: (model.replica_count[d], d)):
                    if model.rack(destination) not in used:
                        yield ReplicaMove(key, replica, destination)


class ReplicaCapacityGoal(Goal):
    name = "ReplicaCapacityGoal"
    hard = True

    def __init__(self, thresholds: Thresholds) -> None:
        self.limit = thresholds.max_replicas_per_broker

    def violation(self, model: ClusterModel) -> float:
        return float(sum(max(0, n - self.limit) for n in model.replica_count.values()))

    def candidates(self, model: ClusterModel) -> Iterator[Action]:
        yield from _shed_replicas(model, [b for b, n in model.replica_count.items() if n > self.limit],
                                  key=lambda p: 0.0, room=lambda d: model.replica_count[d] < self.limit)


class CapacityGoal(Goal):
    """A broker's load of one resource at most capacity * threshold (brokers without a capacity
    for it are unlimited)."""

    hard = True

    def __init__(self, resource: Resource, threshold: float) -> None:
        self.resource = resource
        self.threshold = threshold
        self.name = {Resource.DISK: "DiskCapacityGoal", Resource.NW_IN: "NetworkInboundCapacityGoal",
                     Resource.NW_OUT: "NetworkOutboundCapacityGoal", Resource.CPU: "CpuCapacityGoal"}[resource]

    def scale(self, model: ClusterModel) -> float:
        return sum(model.load[b][self.resource] for b in model.brokers)

    def limit(self, model: ClusterModel, broker: int) -> float:
        capacity = model.brokers[broker].capacity.get(self.resource)
        return math.inf if capacity is None else capacity * self.threshold

    def violation(self, model: ClusterModel) -> float:
        return sum(max(0.0, model.load[b][self.resource] - self.limit(model, b)) for b in model.brokers)

    def candidates(self, model: ClusterModel) -> Iterator[Action]:
        over = sorted((b for b in model.brokers if model.load[b][self.resource] > self.limit(model, b)),
                      key=lambda b: (-(model.load[b][self.resource] - self.limit(model, b)), b))
        if self.resource in (Resource.NW_OUT, Resource.CPU):
            yield from _shed_leadership(model, over, self.resource)
        yield from _shed_replicas(model, over, key=lambda p: -_resource_of(p, self.resource),
                                  room=lambda d: model.load[d][self.resource] < self.limit(model, d))


# ------------------------------------------------------------------------------ soft goals


class DistributionGoal(Goal):
    """A per-broker figure within avg * (1 +- threshold) over the brokers that may hold replicas.
    Counts use Cruise Control's integer bounds (floor and ceil of the band)."""

    def __init__(self, name: str, threshold: float, integral: bool) -> None:
        self.name = name
        self.threshold = threshold
        self.integral = integral

    def value(self, model: ClusterModel, broker: int) -> float:
        raise NotImplementedError

    def scale(self, model: ClusterModel) -> float:
        return sum(self.value(model, b) for b in model.brokers)

    def band(self, model: ClusterModel) -> tuple[float, float, list[int]]:
        brokers = model.candidate_destinations()
        if not brokers:
            return 0.0, math.inf, brokers
        total = sum(self.value(model, b) for b in model.brokers)  # what leaving brokers hold must land somewhere
        average = total / len(brokers)
        low, high = average * (1 - self.threshold), average * (1 + self.threshold)
        if self.integral:
            low, high = math.floor(low), math.ceil(high)
        return low, high, brokers

    def violation(self, model: ClusterModel) -> float:
        low, high, brokers = self.band(model)
        return sum(max(0.0, self.value(model, b) - high) + max(0.0, low - self.value(model, b)) for b in brokers)

    def heavy_and_light(self, model: ClusterModel) -> tuple[list[int], list[int]]:
        low, high, brokers = self.band(model)
        by_value = sorted(brokers, key=lambda b: (self.value(model, b), b))
        heavy = [b for b in reversed(by_value) if self.value(model, b) > high]
        light = [b for b in by_value if self.value(model, b) < low]
        if heavy and not light:
            light = by_value[: max(1, len(by_value) // 2)]
        if light and not heavy:
            heavy = list(reversed(by_value))[: max(1, len(by_value) // 2)]
        return heavy, light


class ReplicaDistributionGoal(DistributionGoal):
    def __init__(self, thresholds: Thresholds) -> None:
        super().__init__("ReplicaDistributionGoal", thresholds.balance, integral=True)

    def value(self, model: ClusterModel, broker: int) -> float:
        return float(model.replica_count[broker])

    def candidates(self, model: ClusterModel) -> Iterator[Action]:
        heavy, light = self.heavy_and_light(model)
        # The replicas nearest the average load first: a broker that fills up (a new one) then
        # takes a fair sample of the load, so the resource goals after this one need no swaps
        # (one move each way) to even the bytes out.
        replicas = sum(model.replica_count.values()) or 1
        typical = {r: sum(model.load[b][r] for b in model.brokers) / replicas for r in (Resource.NW_IN, Resource.DISK)}
        yield from _moves_between(model, heavy, light, key=lambda p: (
            abs(p.load.bytes_in - typical[Resource.NW_IN]) / (typical[Resource.NW_IN] or 1)
            + abs(p.load.disk - typical[Resource.DISK]) / (typical[Resource.DISK] or 1), p.key),
            order_name="typical")


class ResourceDistributionGoal(DistributionGoal):
    def __init__(self, resource: Resource, thresholds: Thresholds) -> None:
        names = {Resource.DISK: "DiskUsageDistributionGoal", Resource.NW_IN: "NetworkInboundUsageDistributionGoal",
                 Resource.NW_OUT: "NetworkOutboundUsageDistributionGoal", Resource.CPU: "CpuUsageDistributionGoal"}
        super().__init__(names[resource], thresholds.balance, integral=False)
        self.resource = resource
        self.payback_s = thresholds.move_payback_s

    def worth(self, model: ClusterModel, action: Action, gain: float) -> bool:
        """Network rates are bytes/s: a replica copied to even them out must take off at least
        its size over `move_payback_s` (a big, lukewarm partition is not copied for a sliver of
        rate). Leadership moves copy nothing; disk and CPU are not rates of bytes."""
        if self.resource not in (Resource.NW_IN, Resource.NW_OUT):
            return True
        copied = sum(model.partitions[m.partition].load.disk for m in single_moves(action)
                     if isinstance(m, ReplicaMove))
        return gain * self.payback_s >= copied

    def value(self, model: ClusterModel, broker: int) -> float:
        return model.load[broker][self.resource]

    def candidates(self, model: ClusterModel) -> Iterator[Action]:
        heavy, light = self.heavy_and_light(model)
        if self.resource in (Resource.NW_OUT, Resource.CPU):
            yield from _leadership_between(model, heavy, light)
        # Biggest contributors first; among equals the smaller partition (less to copy).
        yield from _moves_between(model, heavy, light,
                                  key=lambda p: (-_resource_of(p, self.resource), p.load.disk),
                                  order_name=f"biggest-{self.resource.value}")
        yield from _swaps_between(model, heavy, light, self.resource)


class TopicReplicaDistributionGoal(Goal):
    """Each topic's replicas spread over the brokers: a broker holds between floor(avg) - 1 and
    ceil(avg) + 1 of a topic's replicas (Cruise Control's minimum gap of 2 around the average)."""

    name = "TopicReplicaDistributionGoal"

    @staticmethod
    def bounds(replicas: int, brokers: int) -> tuple[int, int]:
        average = replicas / brokers
        return max(0, math.floor(average) - 1), math.ceil(average) + 1

    judges_locally = True  # an action changes the counts of its own partitions' topics only

    def violation(self, model: ClusterModel) -> float:
        brokers = model.candidate_destinations()
        if not brokers:
            return 0.0
        total = 0
        for counts in model.topic_replicas.values():
            low, high = self.bounds(sum(counts.values()), len(brokers))
            total += sum(max(0, counts.get(b, 0) - high) + max(0, low - counts.get(b, 0)) for b in brokers)
        return float(total)

    def _change(self, model: ClusterModel, action: Action) -> float:
        """violation(after `action`, applied) - violation(before it), from the moved replicas'
        topics alone (the planner asks this for every candidate: a full count over every topic
        and broker each time was its main cost at 10,000 partitions)."""
        brokers = model.candidate_destinations()
        if not brokers:
            return 0.0
        wanted = set(brokers)
        shifts: dict[str, dict[int, int]] = {}  # topic -> broker -> count after - count before
        for move in single_moves(action):
            if isinstance(move, ReplicaMove):
                shift = shifts.setdefault(move.partition[0], {})
                shift[move.source] = shift.get(move.source, 0) - 1
                shift[move.destination] = shift.get(move.destination, 0) + 1
        change = 0
        for topic, shift in shifts.items():
            counts = model.topic_replicas[topic]
            low, high = self.bounds(sum(counts.values()), len(brokers))
            for broker, delta in shift.items():
                if broker not in wanted or delta == 0:
                    continue
                after = counts.get(broker, 0)
                before = after - delta
                change += (max(0, after - high) + max(0, low - after)) - (max(0, before - high) + max(0, low - before))
        return float(change)

    def violation_after(self, model: ClusterModel, action: Action, violation_before: float) -> float:
        return violation_before + self._change(model, action)

    def accepts(self, model: ClusterModel, action: Action, befores: list[PartitionInfo],
                violation_before: float) -> bool:
        return self._change(model, action) <= 0

    def candidates(self, model: ClusterModel) -> Iterator[Action]:
        brokers = model.candidate_destinations()
        for topic in sorted(model.topic_replicas):
            counts = model.topic_replicas[topic]
            low, high = self.bounds(sum(counts.values()), len(brokers))
            ordered = sorted(brokers, key=lambda b: (counts.get(b, 0), b))
            heavy = [b for b in reversed(ordered) if counts.get(b, 0) > high]
            light = [b for b in ordered if counts.get(b, 0) < low] or ordered[:1]
            if heavy or any(counts.get(b, 0) < low for b in ordered):
                yield from _moves_between(model, heavy or list(reversed(ordered))[:1], light,
                                          key=lambda p: p.load.disk, topic=topic, order_name=f"disk-{topic}")


class LeaderReplicaDistributionGoal(DistributionGoal):
    def __init__(self, thresholds: Thresholds) -> None:
        super().__init__("LeaderReplicaDistributionGoal", thresholds.balance, integral=True)

    def value(self, model: ClusterModel, broker: int) -> float:
        return float(model.leader_count[broker])

    def candidates(self, model: ClusterModel) -> Iterator[Action]:
        heavy, light = self.heavy_and_light(model)
        yield from _leadership_between(model, heavy, light)


class LeaderBytesInDistributionGoal(DistributionGoal):
    """Even leader bytes in, by leadership moves only."""

    def __init__(self, thresholds: Thresholds) -> None:
        super().__init__("LeaderBytesInDistributionGoal", thresholds.balance, integral=False)

    def value(self, model: ClusterModel, broker: int) -> float:
        return model.leader_bytes_in[broker]

    def candidates(self, model: ClusterModel) -> Iterator[Action]:
        heavy, light = self.heavy_and_light(model)
        yield from _leadership_between(model, heavy, light)


class PreferredLeaderElectionGoal(Goal):
    """Every partition led by its preferred (first) live replica."""

    name = "PreferredLeaderElectionGoal"

    def violation(self, model: ClusterModel) -> float:
        return float(sum(1 for p in model.partitions.values() if p.leader != p.replicas[0]
                         and model.brokers[p.replicas[0]].alive))

    def candidates(self, model: ClusterModel) -> Iterator[Action]:
        for key in sorted(model.partitions):
            p = model.partitions[key]
            if p.leader != p.replicas[0] and model.brokers[p.replicas[0]].alive:
                yield LeadershipMove(key, p.leader, p.replicas[0])


def default_goals(thresholds: Thresholds | None = None) -> list[Goal]:
    """Cruise Control's default.goals order, Roost's OfflineReplicaGoal first."""
    t = thresholds or Thresholds()
    return [OfflineReplicaGoal(), RackAwareGoal(), ReplicaCapacityGoal(t),
            *(CapacityGoal(resource, limit) for resource, limit in t.capacity),
            ReplicaDistributionGoal(t),
            *(ResourceDistributionGoal(r, t) for r in (Resource.DISK, Resource.NW_IN, Resource.NW_OUT, Resource.CPU)),
            TopicReplicaDistributionGoal(), LeaderReplicaDistributionGoal(t), LeaderBytesInDistributionGoal(t),
            PreferredLeaderElectionGoal()]


# ------------------------------------------------------------------------------ candidate helpers


def _resource_of(partition: PartitionInfo, resource: Resource) -> float:
    return partition.load.on_leader(len(partition.replicas))[resource]


def _hosted(model: ClusterModel, broker: int) -> Iterator[PartitionInfo]:
    """The replicas on `broker`, in no order (callers order them by a key that ends with the
    partition's own key, so the result is as deterministic as a sort)."""
    partitions = model.partitions
    return (partitions[key] for key in model.hosted[broker])


def _smallest(model: ClusterModel, broker: int, n: int, key: Callable[[PartitionInfo], Any],
              topic: str | None = None) -> list[PartitionInfo]:
    """The `n` replicas on `broker` (of `topic`) that sort first by `key`, ties by partition: what
    sorted(...)[:n] over the sorted replicas gives, in O(replicas) rather than a sort per call
    (profiled: the planner's main cost at 10,000 partitions)."""
    found = _hosted(model, broker) if topic is None else (p for p in _hosted(model, broker) if p.topic == topic)
    return heapq.nsmallest(n, found, key=lambda p: (key(p), p.key))


def _replicas_on(model: ClusterModel, broker: int, topic: str | None = None) -> list[PartitionInfo]:
    partitions = (model.partitions[key] for key in sorted(model.hosted[broker]))
    return [p for p in partitions if topic is None or p.topic == topic]


def _shed_replicas(model: ClusterModel, sources: list[int], key: Callable[[PartitionInfo], Any],
                   room: Callable[[int], bool]) -> Iterator[Action]:
    destinations = model.candidate_destinations()
    for source in sources:
        for partition in _smallest(model, source, CANDIDATES_PER_ROUND, key):
            for destination in destinations:
                if destination not in partition.replicas and room(destination):
                    yield ReplicaMove(partition.key, source, destination)


def _shed_leadership(model: ClusterModel, sources: list[int], resource: Resource) -> Iterator[Action]:
    for source in sources:
        led = heapq.nsmallest(CANDIDATES_PER_ROUND, (p for p in _hosted(model, source) if p.leader == source),
                              key=lambda p: (-_resource_of(p, resource), p.key))
        for partition in led:
            for other in sorted(partition.replicas, key=lambda b: (model.load[b][resource], b)):
                if other != source and model.brokers[other].alive and not model.brokers[other].excluded:
                    yield LeadershipMove(partition.key, source, other)


def _order(model: ClusterModel, name: str, key: Callable[[PartitionInfo], Any],
           topic: str | None = None) -> list[tuple[str, int]]:
    """Every partition (of `topic`) by `key`, ties by partition, sorted once per model: for keys
    that depend only on a partition's load and replication factor, which no action changes."""
    order = model.memo.get(name)
    if order is None:
        partitions = model.partitions
        keys = [k for k in partitions if topic is None or k[0] == topic]
        order = model.memo[name] = sorted(keys, key=lambda k: (key(partitions[k]), k))
    return order


def _first_hosted(model: ClusterModel, broker: int, order: list[tuple[str, int]], n: int) -> list[PartitionInfo]:
    """The first `n` partitions of `order` with a replica on `broker`: what nsmallest over the
    broker's replicas by the order's key gives, found by walking the order (a broker holds a
    share of every partition, so about n / share steps) instead of keying all its replicas."""
    hosted, partitions = model.hosted[broker], model.partitions
    found: list[PartitionInfo] = []
    for key in order:
        if key in hosted:
            found.append(partitions[key])
            if len(found) == n:
                break
    return found


def _moves_between(model: ClusterModel, heavy: list[int], light: list[int], key: Callable[[PartitionInfo], Any],
                   topic: str | None = None, order_name: str | None = None) -> Iterator[Action]:
    """`order_name`: `key` is constant per partition through a plan; its order is kept."""
    for source in heavy:
        chosen = _first_hosted(model, source, _order(model, order_name, key, topic), CANDIDATES_PER_ROUND) \
            if order_name is not None else _smallest(model, source, CANDIDATES_PER_ROUND, key, topic)
        for partition in chosen:
            for destination in light:
                if destination not in partition.replicas:
                    yield ReplicaMove(partition.key, source, destination)


def _leadership_between(model: ClusterModel, heavy: list[int], light: list[int]) -> Iterator[Action]:
    wanted = set(light)
    for source in heavy:
        for partition in _replicas_on(model, source):
            if partition.leader != source:
                continue
            for other in partition.replicas:
                if other in wanted:
                    yield LeadershipMove(partition.key, source, other)


SWAP_SIDE = 16  # partitions tried on each side of a swap


def _swaps_between(model: ClusterModel, heavy: list[int], light: list[int], resource: Resource) -> Iterator[Action]:
    for source in heavy:
        mine = _first_hosted(model, source, _order(model, f"desc-{resource.value}",
                                                   lambda p: -_resource_of(p, resource)), SWAP_SIDE)
        for destination in light:
            theirs = _first_hosted(model, destination, _order(model, f"asc-{resource.value}",
                                                              lambda p: _resource_of(p, resource)), SWAP_SIDE)
            for a in mine:
                if destination in a.replicas:
                    continue
                for b in theirs[:SWAP_SIDE]:
                    if source in b.replicas or b.key == a.key:
                        continue
                    if _resource_of(a, resource) <= _resource_of(b, resource):
                        break
                    yield ReplicaSwap(ReplicaMove(a.key, source, destination), ReplicaMove(b.key, destination, source))
