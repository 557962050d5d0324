"""The append door's vocabulary: what comes in (entries, acks, origin), what comes out (an
`AppendOutcome` per entry), and the idempotent producer's sequence check that the leader makes
before its log takes a client's batches. `ReplicaManager.append` is the door itself (Kafka's `appendRecords`); the
purgatory (`purgatory.py`) settles the acks=all outcomes it cannot settle at once.

The acks rule, in one place (`ReplicaManager.append` and the purgatory's verdict):
- acks=0 and acks=1: the outcome is final once the leader's log took the records (and the fsync
  that `flush.messages` asks for before an ack is done); acks=0 callers send no answer, but the
  fsync still happens.
- acks=-1: refused with NOT_ENOUGH_REPLICAS before anything is written when the ISR is smaller
  than `min.insync.replicas`; otherwise final once the high watermark covers the records (NONE,
  or NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below the minimum meanwhile), when the
  leader loses the partition or a truncation cuts the records away (NOT_LEADER_OR_FOLLOWER; a new
  epoch of the same leader alone keeps the wait), or when the caller's timeout passes
  (REQUEST_TIMED_OUT).
- Whatever the acks, an fsync before the ack that fails turns every NONE outcome of the call into
  KAFKA_STORAGE_ERROR: the caller must not treat the records as acknowledged.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from roost.broker.replica.partition import Partition
from roost.log import Duplicate
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import MAX_SEQUENCE, BatchHeader

log = logging.getLogger("roost.broker.replica")

ACKS_NONE, ACKS_LEADER, ACKS_ALL = 0, 1, -1
VALID_ACKS = (ACKS_NONE, ACKS_LEADER, ACKS_ALL)

TopicPartition = tuple[str, int]
Batches = list[tuple[int, BatchHeader]]


class AppendOrigin(Enum):
    """Who is appending (Kafka's AppendOrigin): what the leader checks before its log takes them."""

    CLIENT = "client"  # a producer's batches: headers, CRCs, sizes, sequences checked
    # Batches this broker built (the group coordinator's offset commits, group metadata and their
    # tombstones; next, transaction markers): trusted, only the log's own checks apply.
    COORDINATOR = "coordinator"
    # A cluster link's mirrored batches (roost.broker.link): offsets and bytes kept, as a follower's.
    LINK = "link"


@dataclass(slots=True)
class AppendOutcome:
    """What became of one entry of an append. `error` is final once the call's `done` is."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    appended_records: int = 0  # records this call added to the log (not a retried duplicate)
    record_errors: tuple[tuple[int, str], ...] = ()  # (record index, reason): Produce v8's record_errors
    # What the door waits for before the outcome is final (not for callers):
    durable: asyncio.Future[None] | None = None  # the fsync before the ack, when the topic asks for one
    required_offset: int = -1  # acks=all: the high watermark that covers these records
    leader_epoch: int = -1  # the epoch they were written in


@dataclass(slots=True)
class Appending:
    """The door's answer: one outcome per entry, in the entries' order, and what to wait for
    before they are final (None: they are final now)."""

    outcomes: list[AppendOutcome]
    done: asyncio.Future[None] | None = None


def refused(entries: Sequence[tuple[TopicPartition, Any]], error: ErrorCode, message: str | None = None) -> Appending:
    """Every entry answered `error`, nothing written."""
    return Appending([AppendOutcome(error, message) for _ in entries])


def check_sequences(partition: Partition, batches: Batches) -> Duplicate | ErrorCode:
    """Idempotent producers: a re-sent batch is a duplicate; a gap or an old epoch is an error."""
    first = batches[0][1]
    verdict = partition.producer_verdict(first)
    if isinstance(verdict, Duplicate):
        return verdict if len(batches) == 1 else ErrorCode.DUPLICATE_SEQUENCE_NUMBER
    if isinstance(verdict, ErrorCode):  # not OK
        return verdict
    # Clients send one batch per partition; if several come, each must continue the previous one.
    for (_, previous), (_, batch) in itertools.pairwise(batches):
        if (batch.producer_id, batch.producer_epoch) != (previous.producer_id, previous.producer_epoch) \
                or batch.base_sequence != (previous.last_sequence + 1) % (MAX_SEQUENCE + 1):
            return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    return ErrorCode.NONE


def mark_failed_fsync(outcomes: list[AppendOutcome], results: list[BaseException | None]) -> None:
    """After the call's waits: a failed fsync means nothing of it may count as acknowledged."""
    failed = next((r for r in results if r is not None), None)
    if failed is None:
        return
    log.error("an append could not be made durable: %r", failed)
    for outcome in outcomes:
        if outcome.error == ErrorCode.NONE:
            outcome.error = ErrorCode.KAFKA_STORAGE_ERROR


__all__ = ["ACKS_ALL", "ACKS_LEADER", "ACKS_NONE", "VALID_ACKS", "AppendOrigin", "AppendOutcome", "Appending",
           "TopicPartition"]
