"""The balancer's load signals, pure: windows of per-partition rates made from a broker's
cumulative counters, and the planner's model built from every broker's published load.

Each broker samples, every `balancer.load.sample.interval.ms`, the counters each partition it
leads keeps (bytes produced to it, records, bytes consumers fetched), every hosted replica's size
on disk and its own process CPU time. `LoadWindows` turns successive samples into one rate per
window and keeps the last `balancer.load.windows` windows (Cruise Control's
num.partition.metrics.windows, 5). The load the planner sees is each partition's rate predicted
for the next window from those windows (`predicted_rate`: a Theil-Sen line, the median of the
pairwise slopes, robust to a minority of outliers): a spike that fills one window of five moves
nothing, a level that has held for most of the windows moves all of it, and a rate rising or
falling window after window is planned at where it is heading, not at its past mean. With fewer
than three windows the mean is all there is. A partition whose leadership came here mid-window
has its counters started afresh (no negative rates).

`model_from_loads` turns the brokers' published documents (`LoadWindows.document`) and the
cluster's metadata into the planner's `BrokerInfo`s and `PartitionInfo`s. Cruise Control's
derivation of CPU: a broker's measured CPU is shared among its replicas by weighted bytes
(leader bytes in 0.7, bytes out 0.15, follower bytes in 0.15:
leader.network.inbound.weight.for.cpu.util and its two siblings).

No clock, no I/O: times and counters are passed in.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from roost.broker.balance.model import BrokerInfo, PartitionInfo, PartitionLoad, Resource

LEADER_IN_CPU_WEIGHT = 0.7
LEADER_OUT_CPU_WEIGHT = 0.15
FOLLOWER_IN_CPU_WEIGHT = 0.15
DOCUMENT_VERSION = 1


@dataclass(frozen=True, slots=True)
class PartitionCounters:
    """One hosted replica at one instant: the leader's cumulative counters (0 on a follower)
    and the replica's size."""

    leader: bool
    bytes_in: int
    bytes_out: int
    messages_in: int
    size: int


@dataclass(frozen=True, slots=True)
class PartitionRates:
    bytes_in: float = 0.0  # bytes/s
    bytes_out: float = 0.0
    messages_in: float = 0.0  # records/s


@dataclass(frozen=True, slots=True)
class Sample:
    time_ms: int
    cpu_seconds: float  # the process's CPU time so far
    partitions: Mapping[tuple[str, int], PartitionCounters]


TREND_MIN_WINDOWS = 3  # fewer windows: the mean (two points make a line any spike can tilt)


def predicted_rate(rates: Sequence[float]) -> float:
    """The rate one window after the last of `rates` (oldest first), on the Theil-Sen line:
    slope the median of the slopes between every two windows, intercept the median of what the
    windows leave over the slope. One outlier among five windows moves neither median, so a
    one-window spike is ignored, while a steady rise is followed past its mean. Never negative.
    Written here rather than taken from scipy's `theilslopes`: five points, and scipy is not a
    dependency of the broker."""
    n = len(rates)
    if n == 0:
        return 0.0
    if n < TREND_MIN_WINDOWS:
        return sum(rates) / n
    slope = statistics.median((rates[j] - rates[i]) / (j - i) for i in range(n) for j in range(i + 1, n))
    intercept = statistics.median(rate - slope * index for index, rate in enumerate(rates))
    return max(0.0, intercept + slope * n)


class LoadWindows:
    """The last `windows` windows of per-partition rates and broker CPU, from samples taken one
    window apart (a window is the time between two samples)."""

    def __init__(self, windows: int) -> None:
        assert windows >= 1, windows
        self.windows = windows
        self._last: Sample | None = None
        self._rates: deque[dict[tuple[str, int], PartitionRates]] = deque(maxlen=windows)
        self._cpu: deque[float] = deque(maxlen=windows)  # cores used in each window
        self._sizes: dict[tuple[str, int], int] = {}
        self._leading: set[tuple[str, int]] = set()

    def add(self, sample: Sample) -> None:
        last = self._last
        self._last = sample
        self._sizes = {key: counters.size for key, counters in sample.partitions.items()}
        self._leading = {key for key, counters in sample.partitions.items() if counters.leader}
        if last is None:
            return
        elapsed_s = (sample.time_ms - last.time_ms) / 1000.0
        if elapsed_s <= 0:
            return  # a clock that did not move: no window
        rates: dict[tuple[str, int], PartitionRates] = {}
        for key, now in sample.partitions.items():
            before = last.partitions.get(key)
            if not now.leader or before is None or not before.leader:
                continue  # led here for only part of the window (or not at all): no rate yet
            rates[key] = PartitionRates(max(0, now.bytes_in - before.bytes_in) / elapsed_s,
                                        max(0, now.bytes_out - before.bytes_out) / elapsed_s,
                                        max(0, now.messages_in - before.messages_in) / elapsed_s)
        self._rates.append(rates)
        self._cpu.append(max(0.0, sample.cpu_seconds - last.cpu_seconds) / elapsed_s)

    @property
    def complete_windows(self) -> int:
        return len(self._rates)

    def smoothed(self) -> dict[tuple[str, int], PartitionRates]:
        """Each partition led here now: its rate predicted from the kept windows
        (`predicted_rate`; a window in which it was not led here counts as no data, not as zero)."""
        out: dict[tuple[str, int], PartitionRates] = {}
        for key in sorted(self._leading):
            seen = [window[key] for window in self._rates if key in window]
            if not seen:
                continue
            out[key] = PartitionRates(predicted_rate([r.bytes_in for r in seen]),
                                      predicted_rate([r.bytes_out for r in seen]),
                                      predicted_rate([r.messages_in for r in seen]))
        return out

    def cpu_cores(self) -> float:
        return sum(self._cpu) / len(self._cpu) if self._cpu else 0.0

    def document(self, broker_id: int, rack: str | None, capacity: Mapping[Resource, float],
                 time_ms: int) -> dict[str, Any]:
        """What the broker publishes for the balancer (JSON-ready)."""
        rates = self.smoothed()
        partitions = []
        for (topic, index), size in sorted(self._sizes.items()):
            rate = rates.get((topic, index))
            entry: dict[str, Any] = {"topic": topic, "partition": index, "size": size,
                                     "leader": (topic, index) in self._leading}
            if rate is not None:
                entry.update(bytes_in=rate.bytes_in, bytes_out=rate.bytes_out, messages_in=rate.messages_in)
            partitions.append(entry)
        return {"version": DOCUMENT_VERSION, "broker": broker_id, "rack": rack or None, "time_ms": time_ms,
                "windows": self.complete_windows, "cpu_cores": self.cpu_cores(),
                "capacity": {resource.value: amount for resource, amount in sorted(
                    capacity.items(), key=lambda item: item[0].value)},
                "partitions": partitions}


@dataclass(frozen=True, slots=True)
class Placement:
    """A partition as the cluster's metadata shows it."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int
    isr: tuple[int, ...]
    min_insync_replicas: int = 1


def model_from_loads(live_brokers: Mapping[int, str | None], placements: Iterable[Placement],
                     documents: Mapping[int, Mapping[str, Any]], *, excluded: Iterable[int] = (),
                     dead: Iterable[int] = ()) -> tuple[list[BrokerInfo], list[PartitionInfo]]:
    """The planner's model: `live_brokers` (id -> rack from metadata), the partitions, and the
    brokers' published load documents (a broker without one contributes no load: its partitions
    weigh only their replica counts). `dead` brokers still hold replicas in the assignment and
    are modelled as not alive (the planner moves their replicas); `excluded` ones are being
    drained."""
    excluded_set, dead_set = set(excluded), set(dead)
    placed = list(placements)
    rates: dict[tuple[str, int], dict[str, float]] = {}
    sizes: dict[tuple[str, int], int] = {}
    cpu_of: dict[int, float] = {}
    capacity_of: dict[int, dict[Resource, float]] = {}
    for broker, document in documents.items():
        cpu_of[broker] = float(document.get("cpu_cores", 0.0))
        capacity_of[broker] = {Resource(name): float(amount) for name, amount in document.get("capacity", {}).items()
                               if name in {r.value for r in Resource} and float(amount) > 0}
        for entry in document.get("partitions", []):
            key = (str(entry["topic"]), int(entry["partition"]))
            sizes[key] = max(sizes.get(key, 0), int(entry.get("size", 0)))
            if entry.get("leader") and "bytes_in" in entry:
                rates[key] = {"in": float(entry["bytes_in"]), "out": float(entry["bytes_out"])}
    # CPU shared by weighted bytes on each broker (Cruise Control's ModelUtils).
    weight: dict[int, float] = {}
    for p in placed:
        rate = rates.get((p.topic, p.partition))
        if rate is None:
            continue
        for replica in p.replicas:
            if replica == p.leader:
                share = LEADER_IN_CPU_WEIGHT * rate["in"] + LEADER_OUT_CPU_WEIGHT * rate["out"]
            else:
                share = FOLLOWER_IN_CPU_WEIGHT * rate["in"]
            weight[replica] = weight.get(replica, 0.0) + share
    partitions = []
    for p in sorted(placed, key=lambda q: (q.topic, q.partition)):
        key = (p.topic, p.partition)
        rate = rates.get(key, {"in": 0.0, "out": 0.0})
        leader_weight = LEADER_IN_CPU_WEIGHT * rate["in"] + LEADER_OUT_CPU_WEIGHT * rate["out"]
        total = weight.get(p.leader, 0.0)
        cpu = cpu_of.get(p.leader, 0.0) * leader_weight / total if total > 0 else 0.0
        load = PartitionLoad(rate["in"], rate["out"], float(sizes.get(key, 0)), cpu)
        leader = p.leader if p.leader in p.replicas else p.replicas[0]
        partitions.append(PartitionInfo(p.topic, p.partition, p.replicas, leader, load, p.min_insync_replicas))
    holders = {r for p in placed for r in p.replicas}
    brokers = [BrokerInfo(b, rack=live_brokers.get(b), capacity=capacity_of.get(b, {}),
                          alive=b in live_brokers and b not in dead_set, excluded=b in excluded_set)
               for b in sorted(set(live_brokers) | holders)]
    return brokers, partitions
