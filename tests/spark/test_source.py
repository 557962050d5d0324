"""The roost source under Spark: exact reads across topics and partitions, triggers, restarts,
new partitions and topics, broker restarts, data loss. Real broker, real Spark, real sink."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.spark.fixtures import start_node
from tests.spark.kafka_helpers import (
    RecordingProducer,
    add_partitions,
    create_topics,
    delete_records_before,
    delete_topic,
)
from tests.spark.streaming import (
    assert_exactly,
    copy_query,
    expected_lines,
    output_lines,
    run_available_now,
    wait_until,
)
from tests.support.procs import RoostProcess

pytestmark = pytest.mark.spark

BASE_MS = 1_790_000_000_000


def produce_round(producer: RecordingProducer, topics: dict[str, int], count: int, tag: str) -> None:
    """`count` records per topic with keys (some null), headers and distinct event timestamps."""
    for topic, partitions in topics.items():
        for n in range(count):
            key = None if n % 7 == 0 else f"{tag}-{n % 13}".encode()
            headers = [("n", str(n).encode()), ("tag", tag.encode())] if n % 3 else []
            producer.send(topic, f"{tag}-{topic}-{n}".encode(), key=key, headers=headers,
                          partition=n % partitions, timestamp_ms=BASE_MS + n * 1000)
    producer.flush()


def test_batch_read_returns_exactly_what_was_produced(spark: Any, roost_node: RoostProcess) -> None:
    bootstrap = roost_node.address("kafka")
    topics = {"br-a": 3, "br-b": 4, "br-c": 2}
    create_topics(bootstrap, topics)
    producer = RecordingProducer(bootstrap)
    produce_round(producer, topics, 120, "r1")
    frame = (spark.read.format("roost").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", ",".join(topics)).load())
    rows = frame.selectExpr("topic", "partition", "offset", "key", "value", "headers",
                            "unix_millis(timestamp) AS ts", "timestampType").collect()
    got = sorted((r.topic, r.partition, r.offset, r.key, r.value,
                  tuple((h.key, h.value) for h in r.headers), r.ts, r.timestampType) for r in rows)
    expected = sorted((p.topic, p.partition, p.offset, p.key, p.value, p.headers, p.timestamp_ms, 0)
                      for p in producer.acked)
    assert len(got) == 360
    assert got == expected

    # A slice by explicit offsets: startingOffsets inclusive, endingOffsets exclusive, -2 / -1 allowed.
    starting = '{"br-a": {"0": 5, "1": -2, "2": 10}}'
    ending = '{"br-a": {"0": 20, "1": 3, "2": -1}}'
    sliced = (spark.read.format("roost").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", "br-a").option("startingOffsets", starting)
              .option("endingOffsets", ending).load().select("partition", "offset").collect())
    ends = {p: max(r.offset for r in producer.acked if r.topic == "br-a" and r.partition == p) + 1 for p in (2,)}
    want = ({(0, o) for o in range(5, 20)} | {(1, o) for o in range(0, 3)}
            | {(2, o) for o in range(10, ends[2])})
    assert sorted((r.partition, r.offset) for r in sliced) == sorted(want)


def test_stream_reads_everything_once_across_triggers_restarts_and_new_partitions(
        spark: Any, roost_node: RoostProcess, tmp_path: Path) -> None:
    bootstrap = roost_node.address("kafka")
    topics = {"st-a": 3, "st-b": 4, "st-c": 2}
    create_topics(bootstrap, topics)
    producer = RecordingProducer(bootstrap)
    produce_round(producer, topics, 200, "r1")
    checkpoint = tmp_path / "checkpoint"
    source = {"subscribePattern": "st-.*", "startingOffsets": "earliest", "maxOffsetsPerTrigger": "250"}

    # 1. availableNow with admission control: 600 records in batches of at most 250.
    progress = run_available_now(copy_query(spark, bootstrap, source, "out-st", checkpoint,
                                            {"availableNow": True}))
    sizes = [p["numInputRows"] for p in progress if p["numInputRows"]]
    assert sum(sizes) == 600 and max(sizes) <= 250 and len(sizes) >= 3, sizes
    assert_exactly(expected_lines(producer.acked), output_lines(bootstrap, "out-st"))

    # 2. Restart from the checkpoint with a processing-time trigger while the topics grow: more
    # records, two partitions added to st-a, and a new topic matching the pattern.
    produce_round(producer, topics, 150, "r2")
    add_partitions(bootstrap, "st-a", 5)
    create_topics(bootstrap, {"st-d": 2})
    grown = {**topics, "st-a": 5, "st-d": 2}
    later = RecordingProducer(bootstrap)  # a fresh producer knows the new partitions at once
    produce_round(later, grown, 50, "r3")
    query = copy_query(spark, bootstrap, source, "out-st", checkpoint, {"processingTime": "500 milliseconds"})
    try:
        expected = expected_lines(producer.acked + later.acked)
        wait_until(lambda: sum(output_lines(bootstrap, "out-st").values()) >= sum(expected.values()),
                   "the processing-time query to catch up", query=query)
    finally:
        query.stop()
    assert_exactly(expected, output_lines(bootstrap, "out-st"))

    # 3. Stopped, more data, availableNow again: it reads exactly what came in between.
    produce_round(later, grown, 40, "r4")
    run_available_now(copy_query(spark, bootstrap, source, "out-st", checkpoint, {"availableNow": True}))
    assert_exactly(expected_lines(producer.acked + later.acked), output_lines(bootstrap, "out-st"))


def test_stream_survives_a_broker_restart_mid_stream(spark: Any, tmp_path: Path) -> None:
    node = start_node(tmp_path / "node")
    port = node.port("kafka")
    try:
        bootstrap = node.address("kafka")
        topics = {"rs-a": 3, "rs-b": 2, "rs-c": 2}
        create_topics(bootstrap, topics)
        producer = RecordingProducer(bootstrap)
        produce_round(producer, topics, 150, "r1")
        query = copy_query(spark, bootstrap, {"subscribe": ",".join(topics), "startingOffsets": "earliest",
                                              "maxOffsetsPerTrigger": "100"},
                           "rs-out", tmp_path / "checkpoint", {"processingTime": "200 milliseconds"})
        try:
            wait_until(lambda: sum(output_lines(bootstrap, "rs-out").values()) >= 100,
                       "the first records through", query=query)
            node.stop()
            node = start_node(tmp_path / "node", port)
            produce_round(producer, topics, 150, "r2")
            expected = expected_lines(producer.acked)
            wait_until(lambda: sum(output_lines(bootstrap, "rs-out").values()) >= sum(expected.values()),
                       "the query to catch up after the restart", query=query)
        finally:
            query.stop()
        assert_exactly(expected, output_lines(bootstrap, "rs-out"))
    finally:
        node.stop()


def test_records_removed_by_retention_are_data_loss(spark: Any, roost_node: RoostProcess, tmp_path: Path) -> None:
    bootstrap = roost_node.address("kafka")
    create_topics(bootstrap, {"dl-a": 1})
    producer = RecordingProducer(bootstrap)
    for n in range(100):
        producer.send("dl-a", f"v{n}".encode())
    producer.flush()
    delete_records_before(bootstrap, "dl-a", 0, 40)

    def batch(fail: str) -> Any:
        return (spark.read.format("roost").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", "dl-a").option("startingOffsets", '{"dl-a": {"0": 0}}')
                .option("failOnDataLoss", fail).load())

    with pytest.raises(Exception, match="failOnDataLoss"):
        batch("true").collect()
    assert sorted(r.offset for r in batch("false").select("offset").collect()) == list(range(40, 100))

    source = {"subscribe": "dl-a", "startingOffsets": '{"dl-a": {"0": 10}}'}
    failing = copy_query(spark, bootstrap, source, "dl-out", tmp_path / "c1", {"availableNow": True})
    with pytest.raises(Exception, match="failOnDataLoss"):
        failing.awaitTermination(300)
    lenient = copy_query(spark, bootstrap, {**source, "failOnDataLoss": "false"}, "dl-out",
                         tmp_path / "c2", {"availableNow": True})
    run_available_now(lenient)
    assert sorted(int(v.split(b"|")[2]) for v in output_lines(bootstrap, "dl-out")) == list(range(40, 100))


def test_a_deleted_topic_is_data_loss(spark: Any, roost_node: RoostProcess, tmp_path: Path) -> None:
    bootstrap = roost_node.address("kafka")
    create_topics(bootstrap, {"dt-keep": 1, "dt-gone": 2})
    producer = RecordingProducer(bootstrap)
    for n in range(30):
        producer.send("dt-keep" if n % 2 else "dt-gone", f"first-{n}".encode())
    producer.flush()
    source = {"subscribePattern": "dt-.*", "startingOffsets": "earliest"}
    strict, lenient = tmp_path / "strict", tmp_path / "lenient"
    for checkpoint in (strict, lenient):
        run_available_now(copy_query(spark, bootstrap, source, f"out-{checkpoint.name}", checkpoint,
                                     {"availableNow": True}))
    delete_topic(bootstrap, "dt-gone")
    for n in range(10):
        producer.send("dt-keep", f"second-{n}".encode())
    producer.flush()
    failing = copy_query(spark, bootstrap, source, "out-strict", strict, {"availableNow": True})
    with pytest.raises(Exception, match="dt-gone-0 was deleted"):
        failing.awaitTermination(300)
    run_available_now(copy_query(spark, bootstrap, {**source, "failOnDataLoss": "false"}, "out-lenient",
                                 lenient, {"availableNow": True}))
    values = sorted(v.split(b"|")[3] for v in output_lines(bootstrap, "out-lenient"))
    assert values == sorted(p.value for p in producer.acked)
