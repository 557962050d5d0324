"""When the automatic balancer acts (`balancer.mode`), as pure functions: no I/O, no clock of its
own. The shell (roost.broker.balance.auto) gathers the facts on the active controller each
`balancer.check.interval.ms`, asks `decide`, and plans and executes only on a `Plan`.

Modes (Redpanda's `partition_autobalancing_mode`):
- `off`: nothing (the operator's `roost balance` still works).
- `node_add`: a live broker holding fewer than its share of replicas (the mean over live brokers
  less `balancer.imbalance.threshold` of it; a broker just added holds none) gets its share. While
  any broker that holds replicas is down, node_add holds: it does not heal, and a plan made then
  would move replicas off the dead broker (the planner's OfflineReplicaGoal).
- `continuous`: node_add's rule, plus self-healing (a broker down longer than
  `balancer.broker.unavailable.delay.ms` has its replicas re-created on live brokers; Redpanda's
  `partition_autobalancing_node_availability_timeout_sec`) and skew (replicas, leaders or bytes in
  of a live broker further from the mean than the threshold). While a broker is down but not yet
  past the delay, nothing moves at all: a broker restarting is not worth moving data for, and a
  plan made then would heal it at once. Skew is not acted on until the load has been measured
  again after the last moves (`remeasure_ms`: the smoothed windows, and the window a moved
  leader needs before it reports a rate): a partition whose leadership just moved reports no
  rate yet, and a plan made on that would treat a hot partition as cold and move it again, and
  the next plan back (measured: leaders flapping every check for minutes).

Safety, in order: only the active controller acts; never while an execution (ours or an
operator's) is running or a reassignment is in progress (so a controller that takes over never
duplicates the moves of the one before: it waits for them and plans from what they left).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

MODES = ("off", "node_add", "continuous")


class Kind(Enum):
    HOLD = "hold"
    NODE_ADD = "node_add"  # a broker below its share of replicas
    HEAL = "heal"  # replicas on brokers gone past the delay
    SKEW = "skew"  # load skew over the threshold


@dataclass(frozen=True, slots=True)
class Settings:
    mode: str = "off"
    unavailable_delay_ms: int = 300_000
    threshold: float = 0.10
    remeasure_ms: int = 0  # after moves, how long until the load windows are measured afresh

    def __post_init__(self) -> None:
        assert self.mode in MODES, self.mode
        assert self.unavailable_delay_ms >= 0 and self.threshold >= 0 and self.remeasure_ms >= 0


@dataclass(frozen=True, slots=True)
class BrokerLoad:
    """A broker's share of the cluster, as counted from the metadata and the load samples."""

    replicas: int = 0
    leaders: int = 0
    bytes_in: float = 0.0


@dataclass(frozen=True, slots=True)
class Facts:
    now_ms: int
    in_charge: bool  # this broker is the active controller
    live: frozenset[int]
    loads: Mapping[int, BrokerLoad]  # every live broker, and every dead one still named by a replica
    missing_since: Mapping[int, int]  # brokers named by a replica but not live -> first seen missing (ms)
    busy: str = ""  # why an execution or reassignment is under way ("" if none)
    last_moved_ms: int | None = None  # when this balancer's last execution that moved something ended


@dataclass(frozen=True, slots=True)
class Decision:
    kind: Kind
    reason: str
    heal: frozenset[int] = frozenset()  # the dead brokers a plan moves replicas off

    @property
    def acts(self) -> bool:
        return self.kind is not Kind.HOLD


def track_missing(before: Mapping[int, int], live: Iterable[int], hosting: Iterable[int],
                  now_ms: int) -> dict[int, int]:
    """Brokers that hold replicas but are not live, each with when it was first seen so. A broker
    that comes back, or holds nothing any more, leaves; one already missing keeps its time, so
    the delay is counted from the first time it was seen gone (by this controller: a new one
    starts the count again, which only makes the delay longer, never shorter)."""
    alive = set(live)
    return {b: before.get(b, now_ms) for b in sorted(set(hosting) - alive)}


def skew(loads: Mapping[int, BrokerLoad], live: Iterable[int]) -> tuple[float, str]:
    """The largest relative distance from the mean, over live brokers, of replicas, leaders and
    bytes in, and which it is (what `balancer.imbalance.threshold` is compared with)."""
    brokers = sorted(set(live) & set(loads))
    worst, what = 0.0, ""
    for name, measure in (("replicas", lambda b: float(b.replicas)), ("leaders", lambda b: float(b.leaders)),
                          ("bytes in", lambda b: b.bytes_in)):
        values = {b: measure(loads[b]) for b in brokers}
        mean = sum(values.values()) / len(values) if values else 0.0
        if mean <= 0:
            continue
        for broker, value in values.items():
            distance = abs(value - mean) / mean
            if distance > worst:
                worst, what = distance, f"broker {broker} {name} {value:.4g} vs mean {mean:.4g}"
    return worst, what


def below_share(loads: Mapping[int, BrokerLoad], live: Iterable[int], threshold: float) -> list[tuple[int, float]]:
    """Live brokers holding fewer replicas than the mean less `threshold` of it, with the mean.
    (At least one replica short: on a cluster with fewer replicas than a broker's rounding, a
    broker one short of a fractional mean is not 'below its share'.)"""
    brokers = sorted(set(live))
    if not brokers:
        return []
    mean = sum(loads.get(b, BrokerLoad()).replicas for b in brokers) / len(brokers)
    floor = mean * (1 - threshold)
    return [(b, mean) for b in brokers if loads.get(b, BrokerLoad()).replicas < floor
            and mean - loads.get(b, BrokerLoad()).replicas >= 1]


def decide(settings: Settings, facts: Facts) -> Decision:
    """Whether to plan now, and why (or why not)."""
    if settings.mode == "off":
        return Decision(Kind.HOLD, "balancer.mode is off")
    if not facts.in_charge:
        return Decision(Kind.HOLD, "not the active controller")
    if facts.busy:
        return Decision(Kind.HOLD, facts.busy)
    missing = dict(facts.missing_since)
    if missing:
        if settings.mode == "node_add":
            return Decision(Kind.HOLD, f"brokers {sorted(missing)} are down; node_add does not heal")
        waiting = {b: facts.now_ms - since for b, since in missing.items()
                   if facts.now_ms - since < settings.unavailable_delay_ms}
        if waiting:
            broker = min(waiting, key=lambda b: (-waiting[b], b))
            return Decision(Kind.HOLD, f"brokers {sorted(waiting)} down (broker {broker} for "
                                       f"{waiting[broker] / 1000:.1f} s); healing after "
                                       f"{settings.unavailable_delay_ms / 1000:g} s")
        return Decision(Kind.HEAL, f"brokers {sorted(missing)} down longer than "
                                   f"{settings.unavailable_delay_ms / 1000:g} s: re-replicating their partitions",
                        frozenset(missing))
    under = below_share(facts.loads, facts.live, settings.threshold)
    if under:
        broker, mean = under[0]
        return Decision(Kind.NODE_ADD, f"broker {broker} holds {facts.loads.get(broker, BrokerLoad()).replicas} "
                                       f"replicas, below its share ({mean:.1f})")
    if settings.mode == "continuous":
        worst, what = skew(facts.loads, facts.live)
        if worst > settings.threshold:
            since = None if facts.last_moved_ms is None else facts.now_ms - facts.last_moved_ms
            if since is not None and since < settings.remeasure_ms:
                return Decision(Kind.HOLD, f"skew {worst:.2f} ({what}): the load is measured again after the last "
                                           f"moves, for {(settings.remeasure_ms - since) / 1000:.1f} s more")
            return Decision(Kind.SKEW, f"skew {worst:.2f} over the threshold {settings.threshold:g} ({what})")
    return Decision(Kind.HOLD, "balanced")
