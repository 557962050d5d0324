"""Roost's own addition to share groups (not in Kafka): a dead-letter topic per share group.

A share group with the group config `roost.share.dead.letter.topic` set gets, for every record it
archives because a member REJECTed it or because it reached the delivery limit
(`group.share.delivery.count.limit`), a copy of that record in the dead-letter topic, written
(acks=all) *before* the state change that archives it is persisted: a crash in between delivers
the record again (and dead-letters it again), it never archives a record the dead-letter topic
lacks. The copy keeps the record's key, value, headers and timestamp, and adds headers that say
where it came from and why:

    roost.dlt.origin.topic      the topic, UTF-8
    roost.dlt.origin.partition  the partition, decimal
    roost.dlt.origin.offset     the offset, decimal
    roost.dlt.group             the share group, UTF-8
    roost.dlt.delivery.count    how many times it was delivered, decimal
    roost.dlt.reason            "rejected" or "delivery_limit"

`roost share-group replay` reads them back and produces each to its origin topic without these
headers (`replay_record`). Pure: the shell passes the log batches it read and the core's
`DeadLetter` ranges (share/partition.py) and appends what this returns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from roost.broker.share.partition import DeadLetter
from roost.wire.kafka.records import Record, build_batch, iter_records

DEAD_LETTER_TOPIC_CONFIG = "roost.share.dead.letter.topic"
HEADER_PREFIX = "roost.dlt."
ORIGIN_TOPIC = HEADER_PREFIX + "origin.topic"
ORIGIN_PARTITION = HEADER_PREFIX + "origin.partition"
ORIGIN_OFFSET = HEADER_PREFIX + "origin.offset"
GROUP = HEADER_PREFIX + "group"
DELIVERY_COUNT = HEADER_PREFIX + "delivery.count"
REASON = HEADER_PREFIX + "reason"


@dataclass(frozen=True, slots=True)
class Origin:
    topic: str
    partition: int
    offset: int


def dead_letter_records(group_id: str, topic: str, partition: int, letters: Sequence[DeadLetter],
                        log_data: Iterable[bytes | bytearray | memoryview]) -> list[Record]:
    """The dead-letter copies of the records `letters` name, from the log batches in `log_data`
    (control records are never dead-lettered: a gap has no record). Offsets not found in
    `log_data` are left out; the caller reads what it needs first."""
    wanted: dict[int, DeadLetter] = {}
    for letter in letters:
        for offset in range(letter.first_offset, letter.last_offset + 1):
            wanted[offset] = letter
    out: list[Record] = []
    for data in log_data:
        for record in iter_records(data, include_control=False):
            letter = wanted.pop(record.offset, None)
            if letter is None:
                continue
            headers = [*record.headers,
                       (ORIGIN_TOPIC, topic.encode()), (ORIGIN_PARTITION, str(partition).encode()),
                       (ORIGIN_OFFSET, str(record.offset).encode()), (GROUP, group_id.encode()),
                       (DELIVERY_COUNT, str(letter.delivery_count).encode()), (REASON, str(letter.reason).encode())]
            out.append(Record(record.key, record.value, headers, record.timestamp))
    return out


def dead_letter_batch(records: Sequence[Record], now_ms: int) -> bytes:
    """One batch for the dead-letter topic's append."""
    assert records, "a batch holds at least one record"
    return build_batch(records, timestamp_ms=now_ms)


def origin_of(record: Record) -> Origin | None:
    """Where a dead-lettered record came from (None: not a dead letter)."""
    found = {name: value for name, value in record.headers if name.startswith(HEADER_PREFIX)}
    try:
        return Origin(found[ORIGIN_TOPIC].decode(), int(found[ORIGIN_PARTITION]), int(found[ORIGIN_OFFSET]))
    except (KeyError, ValueError, AttributeError, UnicodeDecodeError):
        return None


def replay_record(record: Record) -> tuple[Origin, Record] | None:
    """The record to produce back to its origin topic (its own headers only), and where."""
    origin = origin_of(record)
    if origin is None:
        return None
    headers = [(name, value) for name, value in record.headers if not name.startswith(HEADER_PREFIX)]
    return origin, Record(record.key, record.value, headers, record.timestamp)
