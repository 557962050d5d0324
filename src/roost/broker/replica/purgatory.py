"""Delayed appends: an acks=all append (a produce, an offset commit) waits here until the high
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
"""

from __future__ import annotations

from dataclasses import dataclass

from roost.broker.replica.append import AppendOutcome
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
