"""A follower's decisions about its own log, as pure functions (the replica fetchers act on them,
and the deterministic simulation runs them too).

Truncation is by leader epoch, never by the high watermark alone (KIP-101, KIP-279): the leader
tells where the follower's last fetched epoch ends in its own log (DivergingEpoch, or
OffsetForLeaderEpoch), and the follower cuts its log there (Kafka's
AbstractFetcherThread.getOffsetTruncationState):

- the leader knows nothing of the epoch (-1): fall back to the high watermark;
- the follower holds that epoch too: cut at min(the leader's end, its own end for the epoch, LEO);
- it does not: cut at the end of its largest lower epoch (the next fetch asks again from there).
"""

from __future__ import annotations

from typing import Protocol

UNDEFINED = -1


class EpochHistory(Protocol):
    """What truncation needs of a log's leader-epoch cache."""

    @property
    def latest_epoch(self) -> int: ...

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]: ...


def truncation_offset(epochs: EpochHistory, log_end_offset: int, high_watermark: int,
                      leader_epoch: int, leader_end_offset: int) -> int:
    """Where the follower's log must end, given the leader's (epoch, end offset) answer."""
    if leader_epoch == UNDEFINED or leader_end_offset == UNDEFINED:
        return min(high_watermark, log_end_offset)
    own_epoch, own_end = epochs.end_offset_for(leader_epoch, log_end_offset)
    if own_epoch == UNDEFINED:
        return min(high_watermark, log_end_offset)
    if own_epoch != leader_epoch:
        return min(own_end, log_end_offset)
    return min(leader_end_offset, own_end, log_end_offset)


def start_offset_without_epochs(log_end_offset: int, high_watermark: int, latest_epoch: int) -> int:
    """A log that holds records but no epoch history cannot be checked for divergence: it keeps
    only what is known committed (its high watermark), as Kafka did before leader epochs."""
    if latest_epoch == UNDEFINED and log_end_offset > 0:
        return min(high_watermark, log_end_offset)
    return log_end_offset


def divergence(epochs: EpochHistory, log_end_offset: int, last_fetched_epoch: int,
               fetch_offset: int) -> tuple[int, int] | None:
    """On the leader, for a follower's fetch: (epoch, end offset) where the follower's log departs
    from ours, or None when it does not (Kafka's Partition.readRecords with LastFetchedEpoch): the
    follower's last epoch ends earlier here, or we never had it."""
    if last_fetched_epoch < 0:
        return None
    epoch, end = epochs.end_offset_for(last_fetched_epoch, log_end_offset)
    if epoch < last_fetched_epoch or end < fetch_offset:
        return epoch, end
    return None
