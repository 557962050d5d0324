"""The connector's pure parts: options, offset arithmetic, data-loss rules, record naming."""

from __future__ import annotations

import itertools
import random

import pytest

from roost.spark.exactly_once import (
    MARKER_BEGIN,
    MARKER_COMMIT,
    Marker,
    RecordNamer,
    plan_task,
    record_digest,
)
from roost.spark.offsets import (
    DataLossError,
    DataLossReporter,
    OffsetRange,
    TopicPartition,
    cap_to_target,
    from_json_dict,
    limit_records,
    plan_ranges,
    resolve_specific,
    split_ranges,
    to_json_dict,
)
from roost.spark.options import OptionError, parse_reader_options, parse_writer_options

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
BOOT = {"kafka.bootstrap.servers": "127.0.0.1:1"}


def test_offset_maps_round_trip_in_the_checkpoint_shape() -> None:
    offsets = {A1: 7, A0: 3, B0: 0}
    as_json = to_json_dict(offsets)
    assert as_json == {"a": {"0": 3, "1": 7}, "b": {"0": 0}}
    assert from_json_dict(as_json) == offsets
    assert from_json_dict('{"a": {"1": 7}}') == {A1: 7}


def test_reader_options_follow_spark_kafka_names_and_defaults() -> None:
    stream = parse_reader_options({**BOOT, "Subscribe": "a, b", "MAXOFFSETSPERTRIGGER": "10"}, streaming=True)
    assert stream.subscription.topics == ("a", "b")
    assert stream.starting.kind == "latest"  # streaming default, as Spark
    assert stream.max_offsets_per_trigger == 10
    assert stream.fail_on_data_loss is True
    batch = parse_reader_options({**BOOT, "subscribePattern": "a.*",
                                  "startingOffsets": '{"a": {"0": -2, "1": 5}}', "failOnDataLoss": "false"},
                                 streaming=False)
    assert batch.subscription.matches("abc") and not batch.subscription.matches("xabc")
    assert batch.subscription.matches("a__x")
    assert not parse_reader_options({**BOOT, "subscribePattern": ".*"}, streaming=True).subscription.matches(
        "__consumer_offsets")
    assert batch.starting.specific == {A0: -2, A1: 5}
    assert batch.ending.kind == "latest"
    assert batch.fail_on_data_loss is False


@pytest.mark.parametrize(("options", "streaming", "message"), [
    ({"subscribe": "a"}, True, "kafka.bootstrap.servers"),
    (BOOT, True, "exactly one of"),
    ({**BOOT, "subscribe": "a", "subscribePattern": "a"}, True, "exactly one of"),
    ({**BOOT, "subscribePattern": "("}, True, "regular expression"),
    ({**BOOT, "subscribe": "a", "startingOffsets": "soon"}, True, "startingOffsets"),
    ({**BOOT, "subscribe": "a", "startingOffsets": "latest"}, False, "batch"),
    ({**BOOT, "subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'}, False, "-2"),
    ({**BOOT, "subscribe": "a", "endingOffsets": "latest"}, True, "batch queries"),
    ({**BOOT, "subscribe": "a", "maxOffsetsPerTrigger": "0"}, True, "positive"),
    ({**BOOT, "subscribe": "a", "failOnDataLoss": "maybe"}, True, "true or false"),
    ({**BOOT, "subscribe": "a", "kafka.group.id": "g"}, True, "kafka.group.id"),
    ({**BOOT, "subscribe": "a", "startingTimestamp": "1000"}, True, "not supported"),
    ({**BOOT, "subscribe": "a", "includeHeaders": "false"}, True, "headers column"),
])
def test_bad_reader_options_are_refused_with_the_option_named(options: dict[str, str], streaming: bool,
                                                              message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_reader_options(options, streaming=streaming)


def test_writer_options() -> None:
    parsed = parse_writer_options({**BOOT, "topic": "Out", "exactlyOnce": "false"})
    assert (parsed.topic, parsed.exactly_once, parsed.sink_id) == ("Out", False, None)


def test_specific_offsets_must_name_every_partition_like_spark() -> None:
    earliest, latest = {A0: 2, A1: 0}, {A0: 10, A1: 20}
    assert resolve_specific({A0: -2, A1: -1}, [A0, A1], earliest, latest, "startingOffsets") == {A0: 2, A1: 20}
    with pytest.raises(ValueError, match="missing"):
        resolve_specific({A0: 5}, [A0, A1], earliest, latest, "startingOffsets")


def test_limit_records_shares_the_budget_by_backlog_and_never_overshoots() -> None:
    rng = random.Random(7)
    for _ in range(300):
        tps = [TopicPartition("t", i) for i in range(rng.randint(1, 6))]
        start = {tp: rng.randint(0, 50) for tp in tps}
        end = {tp: start[tp] + rng.choice([0, 1, 3, 100, 1000]) for tp in tps}
        limit = rng.randint(1, 500)
        limited = limit_records(start, end, {}, limit)
        taken = sum(limited[tp] - start[tp] for tp in tps)
        backlog = sum(end[tp] - start[tp] for tp in tps)
        assert taken == min(limit, backlog)
        assert all(start[tp] <= limited[tp] <= end[tp] for tp in tps)
        assert limit_records(start, end, {}, limit) == limited  # deterministic
    # proportional: 900 vs 100 backlog, budget 100 -> 90 / 10
    assert limit_records({A0: 0, A1: 0}, {A0: 900, A1: 100}, {}, 100) == {A0: 90, A1: 10}
    # a new partition (not in start) begins at its earliest offset
    assert limit_records({A0: 0}, {A0: 10, A1: 60}, {A1: 50}, 10) == {A0: 5, A1: 55}


def test_plan_ranges_reports_data_loss_as_spark_does() -> None:
    assert plan_ranges({A0: 0}, {A0: 10}, {A0: 0}, DataLossReporter(True)) == [OffsetRange(A0, 0, 10)]
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        plan_ranges({A0: 0}, {A0: 10}, {A0: 4}, DataLossReporter(True))
    lenient = DataLossReporter(False)
    assert plan_ranges({A0: 0}, {A0: 10}, {A0: 4}, lenient) == [OffsetRange(A0, 4, 10)]
    assert "earliest offset is now 4" in lenient.warnings[0]
    # a new partition starts at its earliest offset; not at 0 means records were lost
    assert plan_ranges({}, {A1: 5}, {A1: 0}, DataLossReporter(True)) == [OffsetRange(A1, 0, 5)]
    with pytest.raises(DataLossError, match="Added partition a-1 starts from 3"):
        plan_ranges({}, {A1: 5}, {A1: 3}, DataLossReporter(True))
    # a deleted partition, an offset that went backwards
    with pytest.raises(DataLossError, match="deleted"):
        plan_ranges({A0: 3, B0: 1}, {A0: 3}, {A0: 0}, DataLossReporter(True))
    lenient = DataLossReporter(False)
    assert plan_ranges({A0: 8}, {A0: 2}, {A0: 0}, lenient) == []
    assert "changed from 8 to 2" in lenient.warnings[0]


def test_available_now_never_passes_the_target() -> None:
    start = {A0: 5, A1: 0}
    latest = {A0: 50, A1: 7, B0: 9}  # b-0 appeared after the trigger was prepared
    assert cap_to_target(latest, start, {A0: 20, A1: 30}) == {A0: 20, A1: 7}
    # a partition deleted since (missing from latest) is dropped, so planning reports it once
    assert cap_to_target({A0: 50}, start, {A0: 20, A1: 30}) == {A0: 20}


def test_split_ranges_covers_each_range_exactly() -> None:
    ranges = [OffsetRange(A0, 0, 100), OffsetRange(A1, 10, 13)]
    pieces = split_ranges(ranges, 8)
    assert len(pieces) >= 8
    for original in ranges:
        mine = [p for p in pieces if p.tp == original.tp]
        assert mine[0].start == original.start and mine[-1].end == original.end
        assert all(a.end == b.start for a, b in itertools.pairwise(mine))
    assert split_ranges(ranges, None) == ranges


def test_record_names_do_not_depend_on_row_order() -> None:
    rows = [("t", None, b"k%d" % (i % 3), b"v%d" % (i % 5), []) for i in range(40)]  # many duplicates

    def names(ordered: list[tuple]) -> list[str]:
        namer = RecordNamer("sink", 4, 1)
        return [namer.name(record_digest(*row)) for row in ordered]

    first = names(rows)
    assert len(set(first)) == len(rows)  # duplicates of content still get distinct names
    shuffled = rows[:]
    random.Random(3).shuffle(shuffled)
    assert sorted(names(shuffled)) == sorted(first)
    assert all(name.startswith("sink/4/1/") for name in first)
    # every part of the record is in the digest
    base = record_digest("t", None, b"k", b"v", [("h", b"1")])
    assert len({base, record_digest("u", None, b"k", b"v", [("h", b"1")]),
                record_digest("t", 0, b"k", b"v", [("h", b"1")]),
                record_digest("t", None, None, b"v", [("h", b"1")]),
                record_digest("t", None, b"k", b"v", [("h", b"2")]),
                record_digest("t", None, b"kv", b"", [("h", b"1")])}) == 6


def test_plan_task_reads_the_markers_of_its_own_batch_and_task() -> None:
    markers = [
        Marker(MARKER_COMMIT, "s", 3),
        Marker(MARKER_BEGIN, "s", 4, task=0, attempt=0, topic="out", offsets={0: 10, 1: 4}),
        Marker(MARKER_BEGIN, "s", 4, task=0, attempt=1, topic="out", offsets={0: 12, 1: 3}),
        Marker(MARKER_BEGIN, "s", 4, task=1, attempt=0, topic="other", offsets={0: 1}),
        Marker(MARKER_BEGIN, "other-sink", 4, task=0, attempt=0, topic="x", offsets={0: 0}),
    ]
    for marker in markers:
        assert Marker.decode(marker.encode()) == marker
    plan = plan_task(markers, "s", 4, 0)
    assert not plan.batch_committed
    assert plan.scan_from == {"out": {0: 10, 1: 3}}
    assert plan_task(markers, "s", 4, 2).scan_from == {}
    assert plan_task(markers, "s", 3, 0).batch_committed
