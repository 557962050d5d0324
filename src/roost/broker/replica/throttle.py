"""Kafka's replication throttles (KIP-73), pure: which partitions are throttled on this broker and
whether the broker's replication quota is spent.

- Broker configs (dynamic, bytes/s, unlimited by default): `leader.replication.throttled.rate`
  bounds what this broker sends to followers of throttled partitions it leads;
  `follower.replication.throttled.rate` what it fetches for throttled partitions it follows.
- Topic configs: `leader.replication.throttled.replicas` and `follower.replication.throttled.replicas`,
  each "partition:broker,..." or "*". A partition is leader-throttled on broker B when the leader
  list names (partition, B) and follower-throttled on B when the follower list does (Kafka's
  ConfigHandler.parseThrottledPartitions keeps the entries naming this broker).
- Only a replica *out of the ISR* is held back: once the quota is spent (the windowed rate above
  the bound), the leader answers such a follower with no records and the follower leaves such a
  partition out of its fetch. The bytes of every throttled partition count (in-sync ones too),
  as Kafka's ReplicationQuotaManager does. So a throttle slows a reassignment's catch-up and
  never the replication that acks=all waits for.

The rate is Kafka's windowed Rate (roost.broker.quotas.rate.SampledRate) over
`replication.quota.window.num` windows of `replication.quota.window.size.seconds`. Times are
milliseconds passed in (no clock here).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from roost.broker.quotas.rate import SampledRate

UNLIMITED = 2**63 - 1  # Kafka's default rate (Long.MAX_VALUE): no throttle
ALL_REPLICAS = "*"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"


class ThrottledReplicasError(ValueError):
    """A throttled-replicas value that is neither "*" nor "partition:broker,..."."""


@lru_cache(maxsize=4096)
def parse_throttled_replicas(value: str) -> frozenset[tuple[int, int]] | None:
    """{(partition, broker)} named by a throttled-replicas value; None for "*" (every one).
    Cached: the fetch path asks for every throttled partition it reads, and values are few."""
    text = value.strip()
    if text == ALL_REPLICAS:
        return None
    pairs: set[tuple[int, int]] = set()
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        partition, colon, broker = entry.partition(":")
        if not colon or not partition.strip().isdigit() or not broker.strip().lstrip("-").isdigit():
            raise ThrottledReplicasError(
                f"'{entry}' is not partition:broker (the value is '*' or a list like 0:101,0:102)")
        pairs.add((int(partition), int(broker)))
    return frozenset(pairs)


def names(value: str, partition: int, broker: int) -> bool:
    """Does the throttled-replicas `value` name `partition` on `broker`?"""
    if not value:
        return False
    try:
        pairs = parse_throttled_replicas(value)
    except ThrottledReplicasError:
        return False  # refused when set; a stored bad value throttles nothing
    return pairs is None or (partition, broker) in pairs


class ReplicationQuota:
    """One direction's quota on this broker (leader or follower): the bound is read on each use,
    so a dynamic config change applies at once."""

    def __init__(self, bound: Callable[[], int], window_num: int, window_ms: int, now_ms: int) -> None:
        self._bound = bound
        self.rate = SampledRate(max(2, window_num), window_ms, now_ms)
        self.recorded = 0  # bytes of throttled partitions, all time (for /metrics and tests)

    @property
    def bound(self) -> int:
        return self._bound()

    @property
    def limited(self) -> bool:
        return self._bound() < UNLIMITED

    def record(self, size: int, now_ms: int) -> None:
        if size > 0:
            self.rate.record(size, now_ms)
            self.recorded += size

    def exceeded(self, now_ms: int) -> bool:
        """Is the windowed rate above the bound (Kafka's isQuotaExceeded)?"""
        bound = self._bound()
        return bound < UNLIMITED and self.rate.per_second(now_ms) > bound


def _setting(config: Any, name: str, default: int) -> int:
    # A BrokerConfig has every setting; the replication cores' tests hand in a few in a dict.
    try:
        return int(config[name])
    except KeyError:
        return default


def quota_for(config: Mapping[str, Any] | Any, rate: str, now_ms: int) -> ReplicationQuota:
    """The quota bounded by the broker setting `rate` (read on each use: dynamic), over
    replication.quota.window.num windows of replication.quota.window.size.seconds."""
    return ReplicationQuota(lambda: _setting(config, rate, UNLIMITED),
                            _setting(config, "replication.quota.window.num", 11),
                            _setting(config, "replication.quota.window.size.seconds", 1) * 1000, now_ms)
