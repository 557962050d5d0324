"""Placing the replicas of new partitions on brokers (Kafka's AdminUtils.assignReplicasToBrokers).

Leaders spread round-robin from a random broker, so each broker leads about as many partitions
as any other; each partition's followers are the brokers after its leader, shifted once per
round so that followers spread too. With racks, the brokers are first interleaved rack by rack,
and followers skip racks the partition already uses while any unused rack is left. Pure: the
randomness comes in as `start` and `shift`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping


class AssignmentError(ValueError):
    """The assignment cannot be made (too few brokers for the replication factor)."""


def rack_alternated(brokers: Mapping[int, str | None]) -> list[int]:
    """Broker ids ordered so that consecutive ones sit on different racks where possible."""
    by_rack: dict[str | None, list[int]] = {}
    for broker in sorted(brokers):
        by_rack.setdefault(brokers[broker], []).append(broker)
    racks = sorted(by_rack, key=lambda r: (r is None, r or ""))
    ordered: list[int] = []
    for round_index in range(max((len(ids) for ids in by_rack.values()), default=0)):
        for rack in racks:
            ids = by_rack[rack]
            if round_index < len(ids):
                ordered.append(ids[round_index])
    return ordered


def assign_replicas(brokers: Mapping[int, str | None], partitions: int, replication_factor: int,
                    *, first_partition: int = 0, start: int | None = None, shift: int | None = None,
                    rng: random.Random | None = None) -> dict[int, list[int]]:
    """{partition: [replicas]} for partitions first_partition.. first_partition+partitions-1.
    `brokers` maps live broker ids to their racks (None: no rack)."""
    if replication_factor < 1:
        raise AssignmentError("replication factor must be at least 1")
    if replication_factor > len(brokers):
        raise AssignmentError(f"replication factor {replication_factor} is larger than the "
                              f"{len(brokers)} available brokers")
    if partitions < 0:
        raise AssignmentError("the number of partitions cannot be negative")
    rng = rng or random.Random()
    racked = any(rack is not None for rack in brokers.values())
    ordered = rack_alternated(brokers) if racked else sorted(brokers)
    count = len(ordered)
    start = rng.randrange(count) if start is None else start
    shift = rng.randrange(count) if shift is None else shift
    racks_in_use = len({brokers[b] for b in ordered})
    result: dict[int, list[int]] = {}
    for offset in range(partitions):
        index = first_partition + offset
        if offset > 0 and offset % count == 0:
            shift += 1
        first = (offset + start) % count
        replicas = [ordered[first]]
        used_racks = {brokers[ordered[first]]}
        j = 0
        while len(replicas) < replication_factor:
            candidate = ordered[_replica_index(first, shift, j, count)]
            j += 1
            if candidate in replicas:
                if j > 4 * count:  # cannot happen for distinct brokers; a bound all the same
                    raise AssignmentError("no broker left for a replica")
                continue
            rack = brokers[candidate]
            if racked and rack in used_racks and len(used_racks) < racks_in_use and j <= count:
                continue  # another rack is still unused: keep looking this round
            replicas.append(candidate)
            used_racks.add(rack)
        assert len(set(replicas)) == replication_factor
        result[index] = replicas
    return result


def _replica_index(first: int, shift: int, replica: int, count: int) -> int:
    if count == 1:
        return first
    return (first + 1 + (shift + replica) % (count - 1)) % count
