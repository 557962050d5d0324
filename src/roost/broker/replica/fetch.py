"""The fetch door's vocabulary and its plan: what comes in (`FetchParams` for the request,
`FetchWanted` per partition), what comes out (a `FetchOutcome` per partition, in order), and
`FetchPlan`, the leader-side checks made once and the reads made as often as a parked fetch needs.
`ReplicaManager.fetch` is the door itself (Kafka's `fetchMessages`); the purgatory
(`purgatory.DelayedFetch`) parks a fetch that found less than MinBytes.

Who reads through the door: a consumer's Fetch (replica id -1: below the high watermark, below
the last stable offset with read_committed), a follower's Fetch (a replica id >= 0: up to the log
end; its fetch offset tells the leader where it is, which may move the high watermark and grow the
ISR) and, next, share fetches and cluster links (consumers of the same door).

Per partition, Kafka's checks, in this order: the log directory is online (else
KAFKA_STORAGE_ERROR), the partition is hosted here, the leader epoch the fetcher believes in
(KIP-320: older -> FENCED_LEADER_EPOCH, newer -> UNKNOWN_LEADER_EPOCH), leadership
(NOT_LEADER_OR_FOLLOWER); for followers, that it is one of the partition's replicas, that its
offset is not past our log end (OFFSET_OUT_OF_RANGE: a confused or forged fetch must not move the
high watermark) and the divergence of its log (a DivergingEpoch answer, at once). Each read
checks again that the partition is still led here and, for a consumer, that its epoch is still
the partition's (a fetch parked across an epoch change is answered FENCED_LEADER_EPOCH).

Records are never parsed: an outcome carries the segment bytes read. The numbers an outcome
carries (high watermark, last stable offset, log start) are those of the read that made it, so a
parked fetch answers with what was true when it was answered.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

from roost.broker.replica.partition import Partition
from roost.broker.replica.throttle import ReplicationQuota
from roost.log import OffsetOutOfRange, ReadResult
from roost.wire.kafka.errors import ErrorCode

log = logging.getLogger("roost.broker.fetch")

NO_EPOCH = -1
CONSUMER_REPLICA_ID = -1


@dataclass(slots=True, frozen=True)
class FetchParams:
    """The request's own terms (Kafka's FetchParams)."""

    replica_id: int  # >= 0: a follower (another broker); -1: a consumer
    max_wait_s: float  # <= 0: answer at once
    min_bytes: int
    max_bytes: int
    read_committed: bool = False  # consumers only: below the LSO, with the aborted transactions

    @property
    def follower(self) -> bool:
        return self.replica_id >= 0


@dataclass(slots=True)
class FetchWanted:
    """One partition a fetch asks for (Kafka's FetchRequest.PartitionData)."""

    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = NO_EPOCH
    last_fetched_epoch: int = NO_EPOCH  # followers: the epoch of their last batch (KIP-595)


@dataclass(slots=True)
class FetchOutcome:
    """What one read found for one partition (Kafka's FetchPartitionData)."""

    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: Any = b""  # the segment bytes read (a list of buffers), never parsed
    size: int = 0  # bytes in `records`
    aborted: list[tuple[int, int]] | None = None  # read_committed: (producer id, first offset)
    diverging: tuple[int, int] | None = None  # a follower's log departs here: (epoch, end offset)
    name_leader: bool = False  # KIP-951: the answer should name the leader this broker knows of
    hosted: bool = False  # the partition is hosted here (an error on it counts for its topic)

    @property
    def failed(self) -> bool:
        """An error answered for this partition (a divergence is an answer, not an error)."""
        return self.error != ErrorCode.NONE


@dataclass(slots=True)
class Fetching:
    """The door's answer: the outcomes of the first read, in the order asked, final when `done` is
    None; else the fetch is parked and `done` (a future of the door's `Waits`) resolves with the
    outcomes of the read that answers it."""

    outcomes: list[FetchOutcome]
    done: Any = None


def _refused(code: ErrorCode) -> FetchOutcome:
    return FetchOutcome(code, name_leader=code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH))


def _found(partition: Partition, error: ErrorCode = ErrorCode.NONE) -> FetchOutcome:
    return FetchOutcome(error, partition.high_watermark, partition.last_stable_offset,
                        partition.log_start_offset, hosted=True)


class LeaderReplicas(Protocol):
    """What the plan asks of the replica manager (`ReplicaManager`, the door's owner)."""

    def is_offline(self, topic: str, index: int) -> bool: ...

    def partition(self, topic: str, index: int) -> Partition | None: ...

    def diverging_epoch(self, partition: Partition, last_fetched_epoch: int,
                        fetch_offset: int) -> tuple[int, int] | None: ...

    def follower_fetched(self, partition: Partition, replica: int, fetch_offset: int) -> None: ...

    def leader_throttle(self, partition: Partition) -> ReplicationQuota | None: ...

    def clock_ms(self) -> int: ...

    def read(self, partition: Partition, fetch_offset: int, max_bytes: int, min_one_batch: bool,
             follower: bool = False, read_committed: bool = False) -> ReadResult: ...


class FetchPlan:
    """The partitions one fetch asked for, resolved and checked once, read as often as needed."""

    def __init__(self, replicas: LeaderReplicas, params: FetchParams, wanted: list[FetchWanted]) -> None:
        self.replicas = replicas
        self.params = params
        self.follower = params.follower
        self.read_committed = params.read_committed and not self.follower
        self.wanted = wanted
        # Per entry: the Partition to read, or the error to answer.
        self.targets: list[Partition | ErrorCode] = []
        self.diverging: dict[int, tuple[int, int]] = {}  # entry index -> (epoch, end offset)
        for entry in wanted:
            target = self._resolve(entry)
            if isinstance(target, Partition) and self.follower:
                target = self._follower_checks(target, entry)
            self.targets.append(target)

    def _resolve(self, wanted: FetchWanted) -> Partition | ErrorCode:
        replicas = self.replicas
        if replicas.is_offline(wanted.topic, wanted.partition):
            return ErrorCode.KAFKA_STORAGE_ERROR  # its log directory failed
        partition = replicas.partition(wanted.topic, wanted.partition)
        if partition is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        epoch = wanted.current_leader_epoch
        if epoch != NO_EPOCH and epoch < partition.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if epoch != NO_EPOCH and epoch > partition.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        if not partition.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return partition

    def _follower_checks(self, partition: Partition, wanted: FetchWanted) -> Partition | ErrorCode:
        replica_id = self.params.replica_id
        if not partition.has_replica(replica_id):
            log.warning("fetch for %s-%d from replica %d, which is not one of its replicas %s",
                        partition.topic, partition.index, replica_id, list(partition.replicas()))
            epoch = wanted.current_leader_epoch
            return ErrorCode.UNKNOWN_LEADER_EPOCH if epoch != NO_EPOCH else ErrorCode.NOT_LEADER_OR_FOLLOWER
        fetch_offset = wanted.fetch_offset
        if fetch_offset > partition.log_end_offset:
            # A follower cannot hold more than its leader: a confused or forged fetch. It must not
            # move the high watermark; it gets OFFSET_OUT_OF_RANGE and truncates.
            log.warning("fetch for %s-%d from replica %d at offset %d, past the log end %d",
                        partition.topic, partition.index, replica_id, fetch_offset, partition.log_end_offset)
            return ErrorCode.OFFSET_OUT_OF_RANGE
        diverging = self.replicas.diverging_epoch(partition, wanted.last_fetched_epoch, fetch_offset)
        if diverging is not None:
            self.diverging[len(self.targets)] = diverging
        else:
            self.replicas.follower_fetched(partition, replica_id, fetch_offset)
        return partition

    def partitions(self) -> list[Partition]:
        """The partitions a parked fetch waits on (not those in error, nor a diverging one)."""
        return [p for i, p in enumerate(self.targets) if isinstance(p, Partition) and i not in self.diverging]

    def read(self) -> tuple[list[FetchOutcome], int, bool]:
        """Read every partition once: (outcomes in the order asked, bytes found, any partition in
        error or diverging: the fetch is answered at once)."""
        remaining = self.params.max_bytes
        total = 0
        errored = False
        outcomes: list[FetchOutcome] = []
        replicas, follower, read_committed = self.replicas, self.follower, self.read_committed
        for position, (wanted, partition) in enumerate(zip(self.wanted, self.targets, strict=True)):
            if not isinstance(partition, Partition):
                outcomes.append(_refused(partition))
                errored = True
                continue
            refused = self._refusal(partition, wanted)
            if refused is not None:
                outcome = _refused(refused)
                outcome.hosted = True
                outcomes.append(outcome)
                errored = True
                continue
            diverging = self.diverging.get(position)
            if diverging is not None:
                outcome = _found(partition)
                outcome.diverging = diverging
                outcomes.append(outcome)
                errored = True  # answer at once: the follower must truncate first
                continue
            quota = replicas.leader_throttle(partition) if follower else None
            if quota is not None and self.params.replica_id not in partition.state.isr \
                    and quota.exceeded(replicas.clock_ms()):
                # KIP-73: a throttled replica catching up gets nothing while the quota is spent.
                outcomes.append(_found(partition))
                continue
            limit = min(wanted.partition_max_bytes, remaining)
            try:
                result = replicas.read(partition, wanted.fetch_offset, limit, min_one_batch=total == 0,
                                       follower=follower, read_committed=read_committed)
            except OffsetOutOfRange:
                outcomes.append(_found(partition, ErrorCode.OFFSET_OUT_OF_RANGE))
                errored = True
                continue
            except OSError:  # a failed disk (its directory went offline) or a damaged batch (its partition)
                outcomes.append(_found(partition, ErrorCode.KAFKA_STORAGE_ERROR))
                errored = True
                continue
            if quota is not None:
                quota.record(result.size, replicas.clock_ms())
            elif not follower:
                partition.bytes_out += result.size
            total += result.size
            remaining = max(0, remaining - result.size)
            outcome = _found(partition)
            outcome.records = result.buffers
            outcome.size = result.size
            if read_committed:
                outcome.aborted = partition.aborted_transactions(wanted.fetch_offset, result.next_offset)
            outcomes.append(outcome)
        return outcomes, total, errored

    def _refusal(self, partition: Partition, wanted: FetchWanted) -> ErrorCode | None:
        """Why a partition the fetch found is not read now (it may have waited parked), if it is not."""
        if partition.closed or not partition.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self._fenced_while_parked(partition, wanted):
            return ErrorCode.FENCED_LEADER_EPOCH
        return None

    def _fenced_while_parked(self, partition: Partition, wanted: FetchWanted) -> bool:
        """A consumer's fetch whose leader epoch the partition left while the fetch waited here
        (an ISR shrink bumps the epoch and the leader stays). Kafka's DelayedFetch answers it
        FENCED_LEADER_EPOCH; records of the new epoch would reach a consumer that has not yet
        validated its position against that epoch, and librdkafka, whose validation then finds
        its fetch position past the old epoch's end, takes it for a truncation and seeks back
        there, dropping the records it had fetched but not yet handed to the application: those
        are never read (seen in the transaction chaos loop, issue 20). Followers are left as
        they were: their truncation goes by DivergingEpoch, checked when the fetch came."""
        epoch = wanted.current_leader_epoch
        return not self.follower and epoch != NO_EPOCH and epoch < partition.leader_epoch


__all__ = ["CONSUMER_REPLICA_ID", "NO_EPOCH", "FetchOutcome", "FetchParams", "FetchPlan", "FetchWanted", "Fetching"]
