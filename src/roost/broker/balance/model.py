"""The cluster as the balancer sees it: brokers (rack, capacities, alive), partitions (ordered
replicas whose head is the preferred leader, the current leader, min.insync.replicas) and the
smoothed load each partition puts on the brokers that hold it. Pure data; no I/O.

How a partition's load lands on its brokers (Cruise Control's model, simplified and stated here
so the planner's figures can be checked by hand):
- every replica holds the partition's bytes on disk and receives its bytes in (the leader from
  producers, each follower from the leader);
- the leader alone sends bytes out to consumers, plus bytes in once to each follower;
- CPU: the leader carries the partition's CPU, a follower `FOLLOWER_CPU_SHARE` of it (Cruise
  Control weighs follower bytes in at 0.15 against the leader's 0.7 + 0.15).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum

FOLLOWER_CPU_SHARE = 0.15 / 0.85


class Resource(Enum):
    DISK = "disk"  # bytes
    NW_IN = "nw_in"  # bytes/s
    NW_OUT = "nw_out"  # bytes/s
    CPU = "cpu"  # cores

    # Members are singletons compared by identity: object's C hash is right and much cheaper than
    # Enum's (hash of the name, in Python), which the planner's load dicts pay on every lookup.
    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True)
class PartitionLoad:
    """A partition's smoothed load: what its leader receives and sends for clients, and its size."""

    bytes_in: float = 0.0
    bytes_out: float = 0.0
    disk: float = 0.0
    cpu: float = 0.0

    def on_leader(self, replication_factor: int) -> dict[Resource, float]:
        return {Resource.DISK: self.disk, Resource.NW_IN: self.bytes_in,
                Resource.NW_OUT: self.bytes_out + self.bytes_in * (replication_factor - 1),
                Resource.CPU: self.cpu}

    def on_follower(self) -> dict[Resource, float]:
        return {Resource.DISK: self.disk, Resource.NW_IN: self.bytes_in, Resource.NW_OUT: 0.0,
                Resource.CPU: self.cpu * FOLLOWER_CPU_SHARE}


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    broker_id: int
    rack: str | None = None
    capacity: Mapping[Resource, float] = field(default_factory=dict)  # absent: unlimited
    alive: bool = True
    excluded: bool = False  # being decommissioned: may lose replicas, never gain them


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    replicas: tuple[int, ...]  # the head is the preferred leader
    leader: int
    load: PartitionLoad = PartitionLoad()
    min_insync_replicas: int = 1

    def __post_init__(self) -> None:
        assert len(set(self.replicas)) == len(self.replicas), f"duplicate replicas {self.replicas}"
        assert self.replicas, "a partition has at least one replica"

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class ReplicaMove:
    """Move the replica of `partition` on `source` to `destination` (same position in the list,
    so a moved preferred leader's place goes to the destination)."""

    partition: tuple[str, int]
    source: int
    destination: int


@dataclass(frozen=True, slots=True)
class LeadershipMove:
    """Make `destination` (already a replica) the preferred leader and the leader."""

    partition: tuple[str, int]
    source: int
    destination: int


@dataclass(frozen=True, slots=True)
class ReplicaSwap:
    """Two replica moves between two brokers as one action (Cruise Control's
    INTER_BROKER_REPLICA_SWAP): the only way to even out bytes when both brokers already hold
    their share of replicas."""

    first: ReplicaMove
    second: ReplicaMove

    @property
    def moves(self) -> tuple[ReplicaMove, ReplicaMove]:
        return (self.first, self.second)


Action = ReplicaMove | LeadershipMove | ReplicaSwap


def single_moves(action: Action) -> tuple[ReplicaMove | LeadershipMove, ...]:
    return action.moves if isinstance(action, ReplicaSwap) else (action,)


class ClusterModel:
    """Brokers and partitions, with each broker's load and replica counts kept current as actions
    are applied (the planner tries thousands of candidates: recomputing from scratch would be
    quadratic)."""

    def __init__(self, brokers: Iterable[BrokerInfo], partitions: Iterable[PartitionInfo]) -> None:
        self.brokers: dict[int, BrokerInfo] = {b.broker_id: b for b in brokers}
        self.partitions: dict[tuple[str, int], PartitionInfo] = {p.key: p for p in partitions}
        self.load: dict[int, dict[Resource, float]] = {b: dict.fromkeys(Resource, 0.0) for b in self.brokers}
        self.replica_count: dict[int, int] = dict.fromkeys(self.brokers, 0)
        self.leader_count: dict[int, int] = dict.fromkeys(self.brokers, 0)
        self.leader_bytes_in: dict[int, float] = dict.fromkeys(self.brokers, 0.0)
        self.topic_replicas: dict[str, dict[int, int]] = {}
        self.hosted: dict[int, set[tuple[str, int]]] = {b: set() for b in self.brokers}
        self.rack_duplicates = 0  # over all partitions: replicas beyond the first on a rack
        self._racks = {b: info.rack or f"broker-{b}" for b, info in self.brokers.items()}
        # Goals' orders of partitions by keys no action changes (load, replication factor),
        # computed once per model (goals._order).
        self.memo: dict[str, list[tuple[str, int]]] = {}
        for partition in self.partitions.values():
            assert all(r in self.brokers for r in partition.replicas), f"{partition.key}: unknown broker"
            self._account(partition, +1)

    def copy(self) -> ClusterModel:
        return ClusterModel(self.brokers.values(), self.partitions.values())

    def rack(self, broker: int) -> str:
        """A broker's rack; a broker without one is a rack of its own."""
        return self._racks[broker]

    def duplicate_racks(self, partition: PartitionInfo) -> int:
        racks = self._racks
        return len(partition.replicas) - len({racks[r] for r in partition.replicas})

    def _account(self, partition: PartitionInfo, sign: int) -> None:
        # The planner calls this four times per candidate it tries (apply, restore): the shares
        # of PartitionLoad.on_leader / on_follower are written out here, same sums in the same
        # order, without building their dicts.
        replicas = partition.replicas
        rf = len(replicas)
        self.rack_duplicates += sign * self.duplicate_racks(partition)
        counts = self.topic_replicas.setdefault(partition.topic, {})
        key = (partition.topic, partition.partition)
        load = partition.load
        disk, nw_in = sign * load.disk, sign * load.bytes_in
        leader_out = sign * (load.bytes_out + load.bytes_in * (rf - 1))
        leader_cpu, follower_cpu = sign * load.cpu, sign * (load.cpu * FOLLOWER_CPU_SHARE)
        for replica in replicas:
            broker_load = self.load[replica]
            broker_load[Resource.DISK] += disk
            broker_load[Resource.NW_IN] += nw_in
            if replica == partition.leader:
                broker_load[Resource.NW_OUT] += leader_out
                broker_load[Resource.CPU] += leader_cpu
                self.leader_count[replica] += sign
                self.leader_bytes_in[replica] += nw_in
            else:
                broker_load[Resource.NW_OUT] += 0.0
                broker_load[Resource.CPU] += follower_cpu
            self.replica_count[replica] += sign
            if sign > 0:
                self.hosted[replica].add(key)
            else:
                self.hosted[replica].discard(key)
            counts[replica] = counts.get(replica, 0) + sign

    def apply(self, action: Action) -> list[PartitionInfo]:
        """Apply `action`; returns the partitions as they were (to undo with `restore`)."""
        befores = []
        for move in single_moves(action):
            before = self.partitions[move.partition]
            after = self.after(move)
            self._account(before, -1)
            self.partitions[move.partition] = after
            self._account(after, +1)
            befores.append(before)
        return befores

    def restore(self, befores: list[PartitionInfo]) -> None:
        for before in reversed(befores):
            self._account(self.partitions[before.key], -1)
            self.partitions[before.key] = before
            self._account(before, +1)

    def after(self, action: ReplicaMove | LeadershipMove) -> PartitionInfo:
        """The partition as `action` would leave it."""
        partition = self.partitions[action.partition]
        assert action.source in partition.replicas, f"{action}: {action.source} holds no replica"
        if isinstance(action, ReplicaMove):
            assert action.destination not in partition.replicas, f"{action}: destination holds one"
            replicas = tuple(action.destination if r == action.source else r for r in partition.replicas)
            leader = action.destination if partition.leader == action.source else partition.leader
            return replace(partition, replicas=replicas, leader=leader)
        assert action.destination in partition.replicas, f"{action}: destination is no replica"
        replicas = (action.destination, *(r for r in partition.replicas if r != action.destination))
        return replace(partition, replicas=replicas, leader=action.destination)

    def live_brokers(self) -> list[int]:
        return sorted(b for b, info in self.brokers.items() if info.alive)

    def candidate_destinations(self) -> list[int]:
        """Brokers that may receive replicas: alive and not being decommissioned."""
        return sorted(b for b, info in self.brokers.items() if info.alive and not info.excluded)

