"""The purgatory: delayed appends and delayed fetches, each parked on its partitions with callbacks
only (no polling, no task per request) until what it waits for is there.

Delayed appends: an acks=all append (a produce, an offset commit) waits here until the high
watermark covers what it wrote. Only `ReplicaManager.append` puts appends here; their outcomes
are the door's `AppendOutcome`s, whose error code is settled here (callers read it when `done` is).

Kafka's DelayedProduce: the outcome for each partition is NONE once the HW reaches the end of the
batches written (NOT_ENOUGH_REPLICAS_AFTER_APPEND if by then the ISR is smaller than
`min.insync.replicas`: the data is in the log and may yet be committed), NOT_LEADER_OR_FOLLOWER
when this broker stops leading the partition, or leads it in a later epoch whose log no longer
holds the records (a truncation cut them away; a new epoch of the same leader alone, as an ISR
change by the controller makes, keeps the wait as in Kafka), REQUEST_TIMED_OUT when the request's own timeout passes first. It is re-checked
when a partition's HW moves or its leadership changes; no polling, no task per request. Its
future and its timer come from the injected `Waits` (`waits.py`): the event loop's in a broker,
the simulated clock's in the replication simulation, which runs this very class.

Delayed fetches (Kafka's DelayedFetch): only `ReplicaManager.fetch` parks a fetch here, one that
found less than MinBytes; it is answered when MinBytes are there, a partition errs, or MaxWaitMs
passes, with the outcomes of the read that answers. `ParkedFollowerFetches` answers at once the
parked fetches of a partition's followers when this broker becomes its leader (see
`ReplicaManager.fetch`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from roost.broker.replica.append import AppendOutcome
from roost.broker.replica.fetch import FetchOutcome
from roost.broker.replica.partition import Partition
from roost.broker.replica.waits import Waits
from roost.wire.kafka.errors import ErrorCode


@dataclass(slots=True)
class AwaitedAppend:
    partition: Partition
    required_offset: int  # the HW that covers the batches (last offset + 1)
    leader_epoch: int  # the epoch they were written in
    outcome: AppendOutcome  # its error code is settled here


class DelayedProduce:
    def __init__(self, awaited: list[AwaitedAppend], timeout_s: float, waits: Waits) -> None:
        self.done = waits.future()  # resolved (with None) once every outcome is settled
        self._waiting = list(awaited)
        for entry in self._waiting:
            entry.partition.watch(self.check)
        self._timer = waits.call_later(max(0.0, timeout_s), self._expire)
        self.check()

    def check(self) -> None:
        still = []
        settled = []
        for entry in self._waiting:
            code = _verdict(entry)
            if code is None:
                still.append(entry)
                continue
            entry.outcome.error = code
            settled.append(entry.partition)
        # A partition named twice in one request stays watched while one of its entries waits.
        waiting_on = {id(entry.partition) for entry in still}
        for partition in settled:
            if id(partition) not in waiting_on:
                partition.unwatch(self.check)
        self._waiting = still
        if not still:
            self._finish()

    def _expire(self) -> None:
        for entry in self._waiting:
            entry.outcome.error = ErrorCode.REQUEST_TIMED_OUT
            entry.partition.unwatch(self.check)
        self._waiting = []
        self._finish()

    def _finish(self) -> None:
        self._timer.cancel()
        if not self.done.done():
            self.done.set_result(None)


def _verdict(entry: AwaitedAppend) -> ErrorCode | None:
    partition = entry.partition
    if not partition.is_leader or not _still_in_log(partition, entry):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if partition.high_watermark < entry.required_offset:
        return None
    if partition.committed_below_min_isr():
        return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    return ErrorCode.NONE


def _still_in_log(partition: Partition, entry: AwaitedAppend) -> bool:
    """Whether the records waited for are still those this leader wrote: always in the epoch they
    were written in; after a new epoch of the same leader (an ISR change by the controller) as
    long as that epoch still reaches past them in the leader-epoch cache, i.e. no truncation cut
    them away meanwhile. Kafka keeps waiting whenever the broker still leads; answering
    NOT_LEADER_OR_FOLLOWER for records that then commit makes a client think they were not
    written (librdkafka re-sends them under a bumped epoch: duplicates)."""
    if partition.leader_epoch == entry.leader_epoch:
        return True
    log = partition.log
    _epoch, end = log.leader_epochs.end_offset_for(entry.leader_epoch, log.log_end_offset)
    return end >= entry.required_offset


class FetchReads(Protocol):
    """What a parked fetch reads again (`fetch.FetchPlan`)."""

    follower: bool

    def partitions(self) -> list[Partition]: ...

    def read(self) -> tuple[list[FetchOutcome], int, bool]: ...


class DelayedFetch:
    """A fetch parked until its partitions have enough (Kafka's DelayedFetch), with callbacks only:
    woken by the partitions it reads (appends for followers, HW moves for consumers), answered
    when MinBytes are there, a partition errs, or MaxWaitMs passes. `done` holds the outcomes."""

    def __init__(self, plan: FetchReads, min_bytes: int, max_wait: float, waits: Waits) -> None:
        self._waits = waits
        self._plan = plan
        self._min_bytes = min_bytes
        self._deadline = waits.time() + max_wait
        self._partitions = plan.partitions()
        self._wake = self._woken  # one bound method: it is what the partitions hold
        self._check_scheduled = False
        self.done: Any = waits.future()  # resolved with the answering read's outcomes
        self.done.add_done_callback(self._cleanup)
        self._timer = waits.call_later(max_wait, self._expire)
        self._park()

    def _park(self) -> None:
        for partition in self._partitions:
            partition.add_waiter(self._wake, follower=self._plan.follower)
        # Read again once parked: an append between the first read and now has woken nobody.
        self._check()

    def _woken(self) -> None:
        # Answer on the next loop turn: the append that woke us answers its own producer first.
        if not self._check_scheduled and not self.done.done():
            self._check_scheduled = True
            self._waits.call_soon(self._check)

    def _check(self) -> None:
        self._check_scheduled = False
        if self.done.done():
            return
        outcomes, found, errored = self._plan.read()
        if found >= self._min_bytes or errored or self._waits.time() >= self._deadline:
            self.done.set_result(outcomes)
            return
        for partition in self._partitions:  # woken waiters were dropped: park again
            partition.add_waiter(self._wake, follower=self._plan.follower)

    def _expire(self) -> None:
        if not self.done.done():
            self.done.set_result(self._plan.read()[0])

    def answer_now(self) -> None:
        """Answer with what there is (the follower has a partition to add to its next fetch)."""
        self._expire()

    def _cleanup(self, _: Any) -> None:
        self._timer.cancel()
        for partition in self._partitions:
            partition.remove_waiter(self._wake)


# How long after becoming leader a follower's fetch is expected to change to name the partition,
# and the longest park of a follower fetch that leaves one out meanwhile.
NEW_LEADERSHIP_S = 2.0
MISSING_PARTITION_WAIT_S = 0.05


class ParkedFollowerFetches:
    """The followers' parked fetches, by follower, and the partitions newly led here.

    A follower fetches all its partitions from one leader in one request. When this broker becomes
    a partition's leader (a failover), its followers must add the partition to that request; a
    follower's fetch already parked here for its other partitions would hold the new one back for
    up to its MaxWaitMs (500 ms by default), and with it every acks=all produce to the new
    partition (and, behind those on the producer's connection, the producer's Metadata answers).
    So a new leadership answers the parked fetches of that partition's followers at once, and for
    a short while (NEW_LEADERSHIP_S) a follower fetch that leaves out a partition the follower
    should fetch from here parks at most MISSING_PARTITION_WAIT_S (it has not yet heard)."""

    def __init__(self, waits: Waits) -> None:
        self._waits = waits
        self._by_follower: dict[int, set[DelayedFetch]] = {}
        self._new_leaderships: dict[Partition, float] = {}  # partitions led here since (waits.time())

    def leadership_changed(self, partition: Partition, leader: bool) -> None:
        """Newly the leader: answer the parked fetches of its followers now."""
        if not leader:
            self._new_leaderships.pop(partition, None)
            return
        if len(partition.state.replicas) < 2:
            return  # no follower fetches it (and a lone broker hosts its first topics before its loop runs)
        now = self._waits.time()  # the injected clock: the replication simulation's time there
        self._new_leaderships = {p: t for p, t in self._new_leaderships.items() if now - t < NEW_LEADERSHIP_S}
        self._new_leaderships[partition] = now
        for replica in partition.state.replicas:
            for parked in list(self._by_follower.get(replica, ())):
                parked.answer_now()

    def max_wait(self, replica_id: int, asked: list[Partition], max_wait: float) -> float:
        """How long a follower's fetch of `asked` may park: shortened when it leaves out a
        partition it replicates that is newly led here."""
        if self._new_leaderships and self._missing_new_partition(replica_id, asked):
            return min(max_wait, MISSING_PARTITION_WAIT_S)
        return max_wait

    def _missing_new_partition(self, replica_id: int, asked: list[Partition]) -> bool:
        now = self._waits.time()
        ids = set(map(id, asked))
        return any(now - since < NEW_LEADERSHIP_S and id(partition) not in ids and partition.is_leader
                   and replica_id in partition.state.replicas
                   for partition, since in self._new_leaderships.items())

    def park(self, replica_id: int, parked: DelayedFetch) -> None:
        self._by_follower.setdefault(replica_id, set()).add(parked)
        parked.done.add_done_callback(lambda _f: self._unpark(replica_id, parked))

    def _unpark(self, replica_id: int, parked: DelayedFetch) -> None:
        waiting = self._by_follower.get(replica_id)
        if waiting is not None:
            waiting.discard(parked)
            if not waiting:
                del self._by_follower[replica_id]
