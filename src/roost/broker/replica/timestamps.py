"""The leader's check of produced records' timestamps (Kafka's LogValidator.validateTimestamp,
KIP-937): a CreateTime record stamped more than `message.timestamp.before.max.ms` before the
broker's clock, or more than `message.timestamp.after.max.ms` after it, is refused with
INVALID_TIMESTAMP and the index and reason of each such record (ProduceResponse v8's
`record_errors`); nothing of the partition's batches is appended. A batch that claims
LogAppendTime is not refused for that, as Kafka 3.9 does not refuse it (the differential against
Kafka showed it): its records' timestamp is the batch's max timestamp, checked as any other.

A pure core: the caller gives the batches, the topic's configs and the clock's reading.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from roost.wire.kafka.records import (
    NO_TIMESTAMP,
    BatchHeader,
    decode_batch_records,
)

UNBOUNDED = 2**63 - 1
# InvalidTimestampException's message in Kafka's answer (the records' own reasons are in record_errors).
REFUSAL = "One or more records have been rejected due to invalid timestamp"


@dataclass(frozen=True, slots=True)
class TimestampBounds:
    """How far a CreateTime record's timestamp may be before and after the broker's clock (ms)."""

    before_ms: int
    after_ms: int

    @staticmethod
    def of(configs: Mapping[str, Any]) -> TimestampBounds:
        """The topic's bounds: each of before/after, or the deprecated difference where it is at
        its default (Kafka's LogConfig does the same)."""
        difference = configs["message.timestamp.difference.max.ms"]
        before, after = configs["message.timestamp.before.max.ms"], configs["message.timestamp.after.max.ms"]
        return TimestampBounds(before if before != UNBOUNDED else difference,
                               after if after != UNBOUNDED else difference)

    @property
    def unbounded(self) -> bool:
        return self.before_ms == UNBOUNDED and self.after_ms == UNBOUNDED


def refused_timestamps(records: bytes | bytearray | memoryview, batches: Sequence[tuple[int, BatchHeader]],
                       bounds: TimestampBounds, create_time_topic: bool, now: int) -> list[tuple[int, str]]:
    """(index of the record among the entry's records, reason) for each refused record; empty
    when all may be appended. Records are decoded only when a bound is set (the default sets
    none), so the produce path pays nothing otherwise."""
    check_bounds = create_time_topic and not bounds.unbounded
    if not check_bounds:
        return []  # the produce path's common case: no bound set, nothing to look at
    refused: list[tuple[int, str]] = []
    view = memoryview(records)
    index = 0
    for pos, header in batches:
        count = header.last_offset_delta + 1
        if not _whole_batch_within(header, bounds, now):
            lowest, highest = now - bounds.before_ms, now + bounds.after_ms
            for i, record in enumerate(decode_batch_records(view[pos:pos + header.size], verify_crc=False)):
                stamp = record.timestamp
                if stamp != NO_TIMESTAMP and (now - stamp > bounds.before_ms or stamp - now > bounds.after_ms):
                    refused.append((index + i, f"Timestamp {stamp} of message with offset {record.offset} is out of "
                                               f"range. The timestamp should be within [{lowest}, {highest}]"))
        index += count
    return refused


def _whole_batch_within(header: BatchHeader, bounds: TimestampBounds, now: int) -> bool:
    """True when the batch's header alone shows every record within the bounds: no lower bound
    to check, and its largest timestamp not past the upper one (the first record's is not the
    smallest in general: deltas may be negative)."""
    return bounds.before_ms == UNBOUNDED and header.max_timestamp - now <= bounds.after_ms
