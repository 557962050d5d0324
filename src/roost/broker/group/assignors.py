"""Server-side partition assignors of KIP-848's consumer groups: `uniform` and `range`.

Pure functions: given each member's subscribed topics, the topics' partition counts, and the
previous target assignment, they return the new target (member id -> partitions). Partitions
are (topic id, index) pairs; a topic is named by its id so that a topic deleted and created
again under the same name is a different topic.

- `uniform` (Kafka's default) spreads partitions as evenly as the subscriptions allow and keeps
  every partition where it was unless moving it is needed for balance (sticky), so a member
  joining takes partitions from the others without reshuffling the rest.
- `range` gives each member, topic by topic, a contiguous range of partitions; members subscribed
  to the same co-partitioned topics get the same indexes of each.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import TypeAlias

TopicPartition: TypeAlias = tuple[uuid.UUID, int]
Assignment: TypeAlias = dict[str, frozenset[TopicPartition]]
# member id -> the ids of the topics it subscribes to (those that exist)
Subscriptions: TypeAlias = Mapping[str, frozenset[uuid.UUID]]
# topic id -> partition count
PartitionCounts: TypeAlias = Mapping[uuid.UUID, int]
Assignor = Callable[[Subscriptions, PartitionCounts, Mapping[str, frozenset[TopicPartition]]], Assignment]


def uniform(subscriptions: Subscriptions, counts: PartitionCounts,
            previous: Mapping[str, frozenset[TopicPartition]]) -> Assignment:
    members = sorted(subscriptions)
    owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    owner: dict[TopicPartition, str] = {}
    # Keep what each member had, where it still subscribes and the partition still exists.
    for member in members:
        for tp in sorted(previous.get(member, ())):
            topic, index = tp
            if topic in subscriptions[member] and index < counts.get(topic, 0) and tp not in owner:
                owned[member].add(tp)
                owner[tp] = member
    # Give every other partition to its least loaded subscriber.
    for topic in sorted(counts):
        candidates = [m for m in members if topic in subscriptions[m]]
        if not candidates:
            continue
        for index in range(counts[topic]):
            tp = (topic, index)
            if tp not in owner:
                chosen = min(candidates, key=lambda m: (len(owned[m]), m))
                owned[chosen].add(tp)
                owner[tp] = chosen
    # Balance: move a partition from the most to a less loaded subscriber while they differ by
    # more than one. Each move lowers the sum of squared loads, so the loop ends; the bound is a guard.
    for _ in range(len(owner) * max(len(members), 1) + 1):
        move = _one_balancing_move(members, subscriptions, owned)
        if move is None:
            break
        tp, source, target = move
        owned[source].discard(tp)
        owned[target].add(tp)
    return {m: frozenset(owned[m]) for m in members}


def _one_balancing_move(members: list[str], subscriptions: Subscriptions,
                        owned: dict[str, set[TopicPartition]]) -> tuple[TopicPartition, str, str] | None:
    loads = [len(owned[m]) for m in members]
    if not loads or max(loads) - min(loads) <= 1:
        return None  # balanced already (the common case): no search
    for source in sorted(members, key=lambda m: (-len(owned[m]), m)):
        for tp in sorted(owned[source], reverse=True):
            takers = [m for m in members if tp[0] in subscriptions[m] and len(owned[m]) + 1 < len(owned[source])]
            if takers:
                return tp, source, min(takers, key=lambda m: (len(owned[m]), m))
    return None


def range_assignor(subscriptions: Subscriptions, counts: PartitionCounts,
                   previous: Mapping[str, frozenset[TopicPartition]]) -> Assignment:
    del previous  # ranges depend on the members and topics only
    assigned: dict[str, set[TopicPartition]] = {m: set() for m in subscriptions}
    for topic in sorted(counts):
        members = sorted(m for m in subscriptions if topic in subscriptions[m])
        if not members:
            continue
        share, extra = divmod(counts[topic], len(members))
        start = 0
        for position, member in enumerate(members):
            size = share + (1 if position < extra else 0)
            assigned[member].update((topic, index) for index in range(start, start + size))
            start += size
    return {m: frozenset(p) for m, p in assigned.items()}


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_assignor}
