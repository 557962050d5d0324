"""The replication state of one partition on this broker, as a pure object.

Who leads and in which epoch, the replicas and the in-sync replica set (ISR), the high watermark,
and (on the leader) where each follower is. No I/O and no clock of its own: the caller passes the
local log end offset and `now`, and acts on what the methods return.

Rules (Kafka's, see the replication facts sheet):
- The high watermark (HW) is the smallest log end offset (LEO) over the *maximal* ISR: the ISR
  plus a replica whose addition is pending, while a replica whose removal is pending still counts.
- The HW never goes back while this broker stays leader, and never exceeds the local LEO. A
  follower's HW is min(the leader's HW, its own LEO); only truncation can lower it.
- Leader epochs and partition epochs never go back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

NO_LEADER = -1


@dataclass(slots=True)
class FollowerPosition:
    """What the leader knows of one follower, from its fetches."""

    log_end_offset: int = -1  # -1: not fetched in this leader epoch yet
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    leader_leo_at_last_fetch: int = -1


class PartitionState:
    def __init__(self, broker_id: int, replicas: Iterable[int], leader: int, leader_epoch: int,
                 isr: Iterable[int], partition_epoch: int = 0, high_watermark: int = 0) -> None:
        self.broker_id = broker_id
        self.replicas: tuple[int, ...] = tuple(replicas)
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.isr: frozenset[int] = frozenset(isr)
        self.pending_isr: frozenset[int] | None = None  # an ISR change sent, not yet accepted
        self.high_watermark = high_watermark
        self.followers: dict[int, FollowerPosition] = {}
        self.leader_epoch_start_offset = -1  # the log end when this broker last became leader
        self.recovering = False  # elected uncleanly: the ISR must not grow until it is recovered
        assert high_watermark >= 0 and leader_epoch >= -1

    @classmethod
    def sole_replica(cls, broker_id: int, local_leo: int) -> PartitionState:
        """A partition of which this broker holds the only replica: it leads, alone in the ISR,
        and everything in its log is committed."""
        state = cls(broker_id, (broker_id,), broker_id, 0, (broker_id,), high_watermark=local_leo)
        return state

    @property
    def is_leader(self) -> bool:
        return self.leader == self.broker_id

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The replicas the HW must wait for: the ISR and a pending change's members alike."""
        if self.pending_isr is None:
            return self.isr
        return self.isr | self.pending_isr

    # leadership changes -----------------------------------------------------------------------
    def become_leader(self, leader_epoch: int, partition_epoch: int, replicas: Iterable[int],
                      isr: Iterable[int], local_leo: int, now_ms: int) -> None:
        assert leader_epoch >= self.leader_epoch, "leader epochs never go back"
        assert partition_epoch >= self.partition_epoch, "partition epochs never go back"
        self.leader = self.broker_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = tuple(replicas)
        self.isr = frozenset(isr)
        self.pending_isr = None
        # Followers in the ISR count as caught up now; the others until they prove it.
        self.followers = {
            replica: FollowerPosition(last_caught_up_ms=now_ms if replica in self.isr else 0)
            for replica in self.replicas if replica != self.broker_id}
        self.high_watermark = min(self.high_watermark, local_leo)
        self.leader_epoch_start_offset = local_leo

    def update_isr(self, isr: Iterable[int], partition_epoch: int) -> None:
        """The controller accepted an ISR change (AlterPartition's answer)."""
        assert self.is_leader
        assert partition_epoch >= self.partition_epoch, "partition epochs never go back"
        self.isr = frozenset(isr)
        self.partition_epoch = partition_epoch
        self.pending_isr = None

    def become_follower(self, leader: int, leader_epoch: int, partition_epoch: int,
                        replicas: Iterable[int]) -> None:
        assert leader_epoch >= self.leader_epoch, "leader epochs never go back"
        assert partition_epoch >= self.partition_epoch, "partition epochs never go back"
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = tuple(replicas)
        self.isr = frozenset()  # only the leader tracks the ISR
        self.pending_isr = None
        self.followers = {}

    # followers, seen from the leader -----------------------------------------------------------
    def record_follower_fetch(self, replica: int, fetch_offset: int, local_leo: int, now_ms: int) -> None:
        """A follower fetched from `fetch_offset`: it holds everything below it. Kafka's caught-up
        clock: caught up now if it reached our log end; else caught up as of its previous fetch
        if it reached the log end we had then."""
        assert self.is_leader
        position = self.followers.setdefault(replica, FollowerPosition())
        if fetch_offset >= local_leo:
            position.last_caught_up_ms = max(position.last_caught_up_ms, now_ms)
        elif fetch_offset >= position.leader_leo_at_last_fetch >= 0:
            position.last_caught_up_ms = max(position.last_caught_up_ms, position.last_fetch_ms)
        position.log_end_offset = fetch_offset
        position.last_fetch_ms = now_ms
        position.leader_leo_at_last_fetch = local_leo

    def out_of_sync_replicas(self, local_leo: int, now_ms: int, max_lag_ms: int) -> set[int]:
        """ISR followers that are behind and have not caught up within `max_lag_ms`."""
        stale = set()
        for replica in self.isr:
            if replica == self.broker_id:
                continue
            position = self.followers.get(replica) or FollowerPosition()
            if position.log_end_offset != local_leo and now_ms - position.last_caught_up_ms > max_lag_ms:
                stale.add(replica)
        return stale

    def may_join_isr(self, replica: int) -> bool:
        """A follower outside the ISR may join once it holds everything committed and everything
        written since this leader's epoch began."""
        position = self.followers.get(replica)
        return (self.is_leader and not self.recovering and replica not in self.isr
                and replica in self.replicas and position is not None
                and position.log_end_offset >= self.high_watermark
                and position.log_end_offset >= self.leader_epoch_start_offset)

    # the high watermark ----------------------------------------------------------------------
    def advance_high_watermark(self, local_leo: int) -> bool:
        """On the leader: move the HW to the smallest LEO over the maximal ISR, if that is
        higher. Returns True when it moved."""
        assert self.is_leader
        candidate = local_leo
        for replica in self.maximal_isr:
            if replica == self.broker_id:
                continue
            position = self.followers.get(replica)
            known = position.log_end_offset if position is not None else -1
            if known < 0:
                return False  # a member we have not heard from in this epoch holds the HW
            candidate = min(candidate, known)
        if candidate <= self.high_watermark:
            return False
        self.high_watermark = candidate
        assert self.high_watermark <= local_leo
        return True

    def follow_high_watermark(self, leader_hw: int, local_leo: int) -> bool:
        """On a follower: take the leader's HW, capped by what this replica holds."""
        candidate = min(leader_hw, local_leo)
        if candidate <= self.high_watermark:
            return False
        self.high_watermark = candidate
        return True

    def truncated(self, local_leo: int) -> None:
        """The local log was cut to `local_leo` (a follower diverging, or recovery; on a leader,
        a cluster link's mirror cut where it parted from its source)."""
        self.high_watermark = min(self.high_watermark, local_leo)
        # A mirror's leader cut below where its leadership began: that point is its log end now.
        # Left above it, the high watermark (at most the log end) would stay below the epoch's
        # start until the source wrote past it, and ListOffsets answer OFFSET_NOT_AVAILABLE.
        self.leader_epoch_start_offset = min(self.leader_epoch_start_offset, local_leo)

    def check(self, local_leo: int) -> None:
        """The invariants that must hold between calls."""
        assert 0 <= self.high_watermark <= local_leo, (self.high_watermark, local_leo)
        if self.is_leader:
            assert self.broker_id in self.isr or not self.isr, "a leader is in its own ISR"
