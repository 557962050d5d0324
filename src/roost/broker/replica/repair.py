"""Repairing a replica whose stored data is damaged: the decision, with no I/O.

A read found a batch that fails its checks (`roost.log.errors.CorruptLog`) in a partition this
broker hosts. Nothing of it is served; the partition alone goes offline here (the controller moves
its leadership away and takes this replica out of the ISR). What then is decided here, from what
the replica knew when it found the damage and from each LeaderAndIsr that comes after:

- REFUSE: no other replica can be counted on to hold the damaged offsets (replication factor 1,
  this replica was the only in-sync one, or the damage lies at or above the high watermark, where
  records may be on this replica alone). The log stops with an error naming the file and offset;
  nothing is cut, so no acknowledged record goes silently. An operator decides.
- WAIT: the data is held elsewhere, but the state offered does not yet make it safe to cut: this
  broker is still named leader (or nobody is), the leader came from an unclean election (its log
  may lack committed records), or this replica is still counted in the ISR.
- TRUNCATE: a cleanly elected leader other than this broker (every such leader holds every record
  below the high watermark this replica knew, and the damage lies below it), and this replica out
  of the ISR: cut the log at the last good batch and follow. It rejoins the ISR only the way any
  lagging follower does, once its fetches reach the leader's high watermark, which lies past the
  damaged batch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

NO_LEADER = -1


class Verdict(Enum):
    REFUSE = "refuse"
    WAIT = "wait"
    TRUNCATE = "truncate"


@dataclass(frozen=True)
class Damage:
    """What the replica knew when a read found damage. `offset`: the first offset not known good
    (the next offset after the last batch of the segment whose checks pass)."""

    path: str
    position: int
    offset: int
    high_watermark: int
    holders: frozenset[int]  # replicas besides this one that hold every record below the HW


@dataclass(frozen=True)
class Plan:
    verdict: Verdict
    reason: str
    truncate_to: int = -1


def holders_at_damage(broker_id: int, is_leader: bool, leader: int, isr: Iterable[int]) -> frozenset[int]:
    """The other replicas known to hold every record below this replica's high watermark: a
    leader's ISR (less itself); a follower knows no ISR, but its leader holds everything below
    the follower's high watermark (a follower's HW never passes its leader's)."""
    if is_leader:
        return frozenset(isr) - {broker_id}
    return frozenset() if leader in (NO_LEADER, broker_id) else frozenset({leader})


def sole_copy(damage: Damage) -> str | None:
    """Why no other replica can be counted on for the damaged offsets, or None when one can."""
    if not damage.holders:
        return "no other in-sync replica holds these offsets (replication factor 1, or this was the only one)"
    if damage.offset >= damage.high_watermark:
        return (f"the damage is at offset {damage.offset}, at or above the high watermark {damage.high_watermark}: "
                "those records may be on this replica alone")
    return None


def plan_repair(damage: Damage, broker_id: int, leader: int, isr: Iterable[int], leader_recovered: bool) -> Plan:
    """What to do with a damaged replica given the partition's state offered now (a
    LeaderAndIsr's leader, ISR and whether its leader is recovered, i.e. not unclean)."""
    refused = sole_copy(damage)
    if refused is not None:
        return Plan(Verdict.REFUSE, refused)
    if leader in (NO_LEADER, broker_id):
        return Plan(Verdict.WAIT, "waiting for leadership to move to another in-sync replica")
    if not leader_recovered:
        return Plan(Verdict.WAIT, f"leader {leader} came from an unclean election; it may lack the records")
    if broker_id in frozenset(isr):
        return Plan(Verdict.WAIT, "this replica is still in the ISR; it must leave before it cuts its log")
    return Plan(Verdict.TRUNCATE, f"leader {leader} holds the records from offset {damage.offset}",
                damage.offset)
