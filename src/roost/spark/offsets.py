"""Offset arithmetic for the roost source: plain functions, no network, no Spark.

An offset map says, per topic-partition, the offset of the next record to read. Spark keeps the
map verbatim in the query's checkpoint as `{"topic": {"0": 42, "1": 7}}` (Spark's Kafka source
uses the same shape), so restarting a query from its checkpoint resumes exactly where the last
committed micro-batch ended: nothing re-read, nothing skipped.

A micro-batch reads the half-open range [start, end) of every partition. Records that retention
(or DeleteRecords) removed before they were read are *data loss*: with `failOnDataLoss=true` the
query fails with Spark's explanation, otherwise the loss is logged and reading goes on from the
earliest offset still there.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

EARLIEST = -2  # Kafka's sentinel offsets in startingOffsets / endingOffsets JSON
LATEST = -1

DATA_LOSS_ADVICE = (
    "Some data may have been lost because they are not available in Roost any more; either the data "
    "was aged out by retention (or removed by DeleteRecords), or the topic may have been deleted "
    "before all the data in the topic was processed. If you don't want your streaming query to fail "
    "on such cases, set the source option \"failOnDataLoss\" to \"false\".")


class DataLossError(RuntimeError):
    """Records the query should have read are gone and `failOnDataLoss` is true."""


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


OffsetMap = dict[TopicPartition, int]


def to_json_dict(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The checkpoint form; sorted so that equal maps serialise to equal text."""
    result: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return result


def from_json_dict(data: Mapping[str, Any] | str) -> OffsetMap:
    if isinstance(data, str):
        data = json.loads(data)
    offsets: OffsetMap = {}
    for topic, partitions in data.items():
        assert isinstance(partitions, Mapping), f"bad offset entry for {topic!r}: {partitions!r}"
        for partition, offset in partitions.items():
            offsets[TopicPartition(topic, int(partition))] = int(offset)
    return offsets


@dataclass(frozen=True)
class OffsetRange:
    """Records [start, end) of one partition: what one Spark task reads."""

    tp: TopicPartition
    start: int
    end: int

    def __post_init__(self) -> None:
        assert 0 <= self.start < self.end, f"empty or negative range {self}"

    @property
    def size(self) -> int:
        return self.end - self.start


class DataLossReporter:
    """Fails on data loss, or records a warning, as `failOnDataLoss` says."""

    def __init__(self, fail_on_data_loss: bool) -> None:
        self.fail_on_data_loss = fail_on_data_loss
        self.warnings: list[str] = []

    def report(self, what: str) -> None:
        if self.fail_on_data_loss:
            raise DataLossError(f"{what}. {DATA_LOSS_ADVICE}")
        self.warnings.append(f"{what}. Some data may have been lost; failOnDataLoss is false so the "
                             "query goes on.")


def resolve_specific(spec: Mapping[TopicPartition, int], partitions: Iterable[TopicPartition],
                     earliest: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
                     option: str) -> OffsetMap:
    """JSON offsets to real ones; like Spark, the JSON must name every subscribed partition."""
    wanted = set(partitions)
    if set(spec) != wanted:
        missing = sorted(str(tp) for tp in wanted - set(spec))
        extra = sorted(str(tp) for tp in set(spec) - wanted)
        raise ValueError(
            f"option '{option}' with specific offsets must name every subscribed partition, exactly: "
            f"missing {missing}, not subscribed {extra}")
    resolved: OffsetMap = {}
    for tp, offset in spec.items():
        if offset == EARLIEST:
            resolved[tp] = earliest[tp]
        elif offset == LATEST:
            resolved[tp] = latest[tp]
        else:
            resolved[tp] = offset
    return resolved


def cap_to_target(latest: Mapping[TopicPartition, int], start: Mapping[TopicPartition, int],
                  target: Mapping[TopicPartition, int]) -> OffsetMap:
    """For Trigger.AvailableNow: never go past the offsets seen when the trigger was prepared.

    Partitions that appeared after the preparation are left out (they hold only newer data), and
    so are partitions of `start` missing from `latest` (deleted: planning reports them).
    """
    capped: OffsetMap = {tp: offset for tp, offset in start.items() if tp in latest}
    for tp, target_offset in target.items():
        if tp in latest:
            capped[tp] = min(latest[tp], target_offset)
    return capped


def limit_records(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
                  earliest_of_new: Mapping[TopicPartition, int], max_records: int) -> OffsetMap:
    """Admission control (`maxOffsetsPerTrigger`): at most `max_records` new offsets in total.

    The budget is shared in proportion to each partition's backlog, like Spark's Kafka source,
    but never overshoots: floors first, then the remainder one record at a time to the partitions
    with the largest backlog left (ties by name, so the split is deterministic). Partitions with
    no start (new ones) begin at `earliest_of_new`.
    """
    assert max_records > 0
    backlog: dict[TopicPartition, int] = {}
    begins: OffsetMap = {}
    for tp, until in end.items():
        begin = start.get(tp, earliest_of_new.get(tp, 0))
        begins[tp] = begin
        if until > begin:
            backlog[tp] = until - begin
    total = sum(backlog.values())
    if total <= max_records:
        return dict(end)
    shares = {tp: max_records * size // total for tp, size in backlog.items()}
    remainder = max_records - sum(shares.values())
    order = sorted(backlog, key=lambda tp: (-(backlog[tp] - shares[tp]), tp))
    for tp in order[:remainder]:
        shares[tp] += 1
    limited = dict(end)
    for tp, share in shares.items():
        limited[tp] = begins[tp] + share
    assert sum(limited[tp] - begins[tp] for tp in backlog) == max_records
    return limited


def plan_ranges(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
                earliest: Mapping[TopicPartition, int], reporter: DataLossReporter) -> list[OffsetRange]:
    """The ranges a micro-batch reads, with Spark's Kafka data-loss checks.

    `earliest` holds the current log start offset of every partition that still exists.
    """
    ranges: list[OffsetRange] = []
    for tp in sorted(set(start) - set(end)):
        reporter.report(f"Partition {tp} was deleted (offset {start[tp]} was the next to read)")
    for tp in sorted(end):
        until = end[tp]
        log_start = earliest.get(tp)
        if log_start is None:
            reporter.report(f"Partition {tp} was deleted while the batch was planned")
            continue
        if tp in start:
            begin = start[tp]
        else:
            begin = log_start
            if log_start != 0:
                reporter.report(f"Added partition {tp} starts from {log_start} instead of 0")
        if until < begin:
            reporter.report(f"Partition {tp}'s offset was changed from {begin} to {until}")
            continue
        if begin < log_start:
            reporter.report(f"Cannot read {tp} from offset {begin}: the earliest offset is now {log_start}")
            begin = log_start
        if until > begin:
            ranges.append(OffsetRange(tp, begin, until))
    return ranges


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Cut large ranges so that there are at least `min_partitions` tasks (Spark's `minPartitions`)."""
    if min_partitions is None or len(ranges) >= min_partitions or not ranges:
        return ranges
    total = sum(r.size for r in ranges)
    result: list[OffsetRange] = []
    for r in ranges:
        pieces = max(1, min(r.size, -(-r.size * min_partitions // total)))
        step, extra = divmod(r.size, pieces)
        begin = r.start
        for index in range(pieces):
            stop = begin + step + (1 if index < extra else 0)
            result.append(OffsetRange(r.tp, begin, stop))
            begin = stop
        assert begin == r.end
    return result
