"""Differential conformance of the data path: the same Produce, Fetch, ListOffsets and
DeleteRecords requests, edge cases included, to Apache Kafka 3.9 and to Roost, on topics made the
same way on both, answers compared field by field (tests/referees/differential.py normalises what
differs between any two clusters). The batches are built here with fixed timestamps, so the
record bytes each side returns are compared byte for byte too.

Cases: ListOffsets at -1 / -2 / -3 and by timestamp (before, inside, after the records), on an
empty topic, after DeleteRecords, with a current leader epoch fenced or unknown, for an unknown
partition; Produce with a corrupt CRC, an old magic, a batch over max.message.bytes, a count that
does not match lastOffsetDelta, acks 2, an unknown partition; Fetch at the end, past the end,
before the log start, with a fenced epoch, read_committed; DeleteRecords past the high
watermark, to the high watermark (-1), below the log start.
"""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from roost.wire.kafka.records import TIMESTAMP_LOG_APPEND_TIME, Record, build_batch
from tests.referees.differential import Count, ask_settled, normalise

PRODUCE, FETCH, LIST_OFFSETS, CREATE_TOPICS, DELETE_RECORDS = 0, 1, 2, 19, 21
BASE_TIME = 1_700_000_000_000
RECORDS = 10  # per batch; three batches, timestamps BASE_TIME + 10 * n ms
MAX_MESSAGE_BYTES = 2048

Ask = Callable[[str, int, int, dict[str, Any]], Any]


def _batch(first: int, count: int = RECORDS, **kwargs: Any) -> bytes:
    return build_batch([(f"k{n}".encode(), f"v{n}".encode()) for n in range(first, first + count)],
                       timestamp_ms=BASE_TIME + 10 * first, **kwargs)


def _create(address: str, name: str, configs: dict[str, str] | None = None) -> None:
    configs = {"max.message.bytes": str(MAX_MESSAGE_BYTES)} if configs is None else configs
    answer = ask_settled(address, CREATE_TOPICS, 5, {
        "topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                    "configs": [{"name": key, "value": value} for key, value in configs.items()]}],
        "timeout_ms": 10000, "validate_only": False})
    assert answer["topics"][0]["error_code"] == 0, answer


def _produce(address: str, topic: str, records: bytes, acks: int = -1, partition: int = 0) -> Any:
    return ask_settled(address, PRODUCE, 9, {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
                                             "topic_data": [{"name": topic, "partition_data": [
                                                 {"index": partition, "records": records}]}]})


def _list_offsets(address: str, topic: str, timestamp: int, epoch: int = -1, partition: int = 0,
                  isolation: int = 0) -> Any:
    return ask_settled(address, LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": isolation, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": epoch,
                                        "timestamp": timestamp}]}]})


def _fetch(address: str, topic: str, offset: int, epoch: int = -1, isolation: int = 0) -> Any:
    return ask_settled(address, FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": isolation,
        "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": epoch,
                                                   "fetch_offset": offset, "last_fetched_epoch": -1,
                                                   "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})


def _delete_records(address: str, topic: str, offset: int) -> Any:
    return ask_settled(address, DELETE_RECORDS, 2, {"timeout_ms": 5000, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "offset": offset}]}]})


def _corrupt_crc(batch: bytes) -> bytes:
    damaged = bytearray(batch)
    damaged[-1] ^= 0xFF  # inside the records: the CRC no longer matches
    return bytes(damaged)


def _magic(batch: bytes, magic: int) -> bytes:
    damaged = bytearray(batch)
    damaged[16] = magic
    return bytes(damaged)


def _wrong_count(batch: bytes) -> bytes:
    """recordsCount one more than lastOffsetDelta + 1, CRC recomputed so only the count is wrong."""
    import crc32c

    damaged = bytearray(batch)
    struct.pack_into(">i", damaged, 57, RECORDS + 1)
    struct.pack_into(">I", damaged, 17, crc32c.crc32c(bytes(damaged[21:])))
    return bytes(damaged)


def scenario(address: str, topic: str) -> dict[str, Any]:
    """Every case's answer from one broker, by name, on a fresh topic `topic`."""
    answers: dict[str, Any] = {}
    _create(address, topic)
    for name, stamp in (("empty latest", -1), ("empty earliest", -2), ("empty max timestamp", -3),
                        ("empty by time", BASE_TIME)):
        answers[f"list offsets, {name}"] = _list_offsets(address, topic, stamp)
    answers["fetch an empty topic"] = _fetch(address, topic, 0)
    for first in (0, RECORDS, 2 * RECORDS):
        answers[f"produce batch at {first}"] = _produce(address, topic, _batch(first))
    answers["produce, corrupt CRC"] = _produce(address, topic, _corrupt_crc(_batch(100)))
    answers["produce, old magic"] = _produce(address, topic, _magic(_batch(100), 1))
    answers["produce, unknown magic"] = _produce(address, topic, _magic(_batch(100), 3))
    answers["produce, count mismatch"] = _produce(address, topic, _wrong_count(_batch(100)))
    answers["produce, over max.message.bytes"] = _produce(address, topic, _batch(100, count=200))
    answers["produce, acks 2"] = _produce(address, topic, _batch(100), acks=2)
    answers["produce, unknown partition"] = _produce(address, topic, _batch(100), partition=7)
    end = 3 * RECORDS
    for name, stamp in (("latest", -1), ("earliest", -2), ("max timestamp", -3), ("before all", BASE_TIME - 5),
                        ("first", BASE_TIME), ("inside a batch", BASE_TIME + 10 * 13 + 1),
                        ("a batch's first", BASE_TIME + 10 * RECORDS), ("after all", BASE_TIME + 10 * end)):
        answers[f"list offsets, {name}"] = _list_offsets(address, topic, stamp)
    answers["list offsets, read_committed latest"] = _list_offsets(address, topic, -1, isolation=1)
    answers["list offsets, epoch ahead (unknown)"] = _list_offsets(address, topic, -1, epoch=5)
    answers["list offsets, unknown partition"] = _list_offsets(address, topic, -1, partition=3)
    for name, offset in (("from 0", 0), ("inside a batch", 15), ("at the end", end), ("past the end", end + 5)):
        answers[f"fetch {name}"] = _fetch(address, topic, offset)
    answers["fetch read_committed"] = _fetch(address, topic, 0, isolation=1)
    answers["fetch, epoch ahead (unknown)"] = _fetch(address, topic, 0, epoch=5)
    answers["delete records past the high watermark"] = _delete_records(address, topic, end + 1)
    answers["delete records to 15"] = _delete_records(address, topic, 15)
    answers["delete records below the log start"] = _delete_records(address, topic, 5)
    answers["list offsets after delete, earliest"] = _list_offsets(address, topic, -2)
    answers["list offsets after delete, before all"] = _list_offsets(address, topic, BASE_TIME - 5)
    answers["fetch below the log start"] = _fetch(address, topic, 3)
    answers["fetch at the log start"] = _fetch(address, topic, 15)
    answers["delete records to the high watermark (-1)"] = _delete_records(address, topic, -1)
    answers["list offsets after delete all, earliest"] = _list_offsets(address, topic, -2)
    return answers


# Answers Roost gives on purpose otherwise (docs/kafka-differences.md says why).
OUT_OF_RANGE = ("Roost's OFFSET_OUT_OF_RANGE carries the partition's high watermark, last stable and log start "
                "offsets where Kafka's carries -1: a cluster link starts over past the source's retention from "
                "them without another request; clients read none of them on this error")
DATA_DIFFERENCES: dict[str, str] = {"fetch past the end": OUT_OF_RANGE, "fetch below the log start": OUT_OF_RANGE}


@pytest.mark.timeout(300)
def test_the_data_path_answers_as_kafka_does(kafka: str, roost: str) -> None:
    topic = f"data-{uuid.uuid4().hex[:8]}"
    theirs, ours = scenario(kafka, topic), scenario(roost, topic)
    assert theirs.keys() == ours.keys()
    Count.cases += len(theirs)
    differing = {case: (theirs[case], ours[case]) for case in theirs
                 if normalise(theirs[case]) != normalise(ours[case])}
    unexplained = {case: pair for case, pair in differing.items() if case not in DATA_DIFFERENCES}
    assert not unexplained, "\n".join(f"{case}:\n  kafka {a}\n  roost {b}" for case, (a, b) in unexplained.items())
    assert set(differing) == set(DATA_DIFFERENCES), "a documented difference is gone: update the list"


HOUR_MS = 3_600_000


def _stamped(stamps: list[int], **kwargs: Any) -> bytes:
    return build_batch([Record(None, f"v{n}".encode(), timestamp=stamp) for n, stamp in enumerate(stamps)],
                       timestamp_ms=stamps[0], **kwargs)


def timestamp_scenario(address: str, topic: str) -> dict[str, Any]:
    """KIP-937's bounds: records too old, too new, one bad record in a batch, a batch claiming
    LogAppendTime, the deprecated difference.max.ms, and a LogAppendTime topic (not checked)."""
    answers: dict[str, Any] = {}
    _create(address, topic, {"message.timestamp.before.max.ms": str(HOUR_MS),
                             "message.timestamp.after.max.ms": "60000"})
    now = int(time.time() * 1000)
    answers["within the bounds"] = _produce(address, topic, _stamped([now] * 3))
    answers["every record too old"] = _produce(address, topic, _stamped([BASE_TIME] * 3))
    answers["one record of three too old"] = _produce(address, topic, _stamped([now, now - 2 * HOUR_MS, now]))
    answers["too new"] = _produce(address, topic, _stamped([now + 10 * 60_000, now]))
    answers["a batch claiming LogAppendTime"] = _produce(
        address, topic, _stamped([now] * 2, timestamp_type=TIMESTAMP_LOG_APPEND_TIME))
    answers["a batch claiming LogAppendTime, too old"] = _produce(
        address, topic, _stamped([BASE_TIME] * 2, timestamp_type=TIMESTAMP_LOG_APPEND_TIME))
    answers["stored, latest"] = _list_offsets(address, topic, -1)
    _create(address, f"{topic}-difference", {"message.timestamp.difference.max.ms": str(HOUR_MS)})
    answers["difference: too old"] = _produce(address, f"{topic}-difference", _stamped([now - 2 * HOUR_MS]))
    answers["difference: too new"] = _produce(address, f"{topic}-difference", _stamped([now + 2 * HOUR_MS]))
    _create(address, f"{topic}-append", {"message.timestamp.before.max.ms": str(HOUR_MS),
                                          "message.timestamp.type": "LogAppendTime"})
    answers["LogAppendTime topic, old records"] = _produce(address, f"{topic}-append", _stamped([BASE_TIME] * 2))
    return answers


def test_produced_timestamps_are_bounded_as_kafka_bounds_them(kafka: str, roost: str) -> None:
    topic = f"stamps-{uuid.uuid4().hex[:8]}"
    theirs, ours = timestamp_scenario(kafka, topic), timestamp_scenario(roost, topic)
    Count.cases += len(theirs)
    differing = {case: (theirs[case], ours[case]) for case in theirs
                 if normalise(theirs[case]) != normalise(ours[case])}
    assert not differing, "\n".join(f"{case}:\n  kafka {a}\n  roost {b}" for case, (a, b) in differing.items())
