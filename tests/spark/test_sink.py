"""The roost sink: writes what Spark hands it, and a replayed batch adds no duplicate."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.spark.kafka_helpers import RecordingProducer, create_topics, read_all
from tests.spark.streaming import assert_exactly, copy_query, expected_lines, output_lines, run_available_now
from tests.support import referees
from tests.support.procs import RoostProcess

pytestmark = pytest.mark.spark


def produce_values(bootstrap: str, topic: str, partitions: int, count: int, pad: int = 0) -> RecordingProducer:
    create_topics(bootstrap, {topic: partitions})
    producer = RecordingProducer(bootstrap)
    for n in range(count):
        producer.send(topic, f"v{n}{'.' * pad}".encode(), key=f"k{n % 17}".encode(), partition=n % partitions)
    producer.flush()
    return producer


def test_batch_write_with_topic_partition_and_headers_columns(spark: Any, roost_node: RoostProcess) -> None:
    bootstrap = roost_node.address("kafka")
    create_topics(bootstrap, {"bw-a": 2, "bw-b": 1})
    rows = [(f"k{n}", f"v{n}".encode(), "bw-a" if n % 2 else "bw-b", n % 2 if n % 2 else None,
             [(f"h{n}", b"x")]) for n in range(60)]
    frame = spark.createDataFrame(
        rows, "key string, value binary, topic string, partition int, headers array<struct<key:string,value:binary>>")
    frame.write.format("roost").option("kafka.bootstrap.servers", bootstrap).mode("append").save()
    written = read_all(bootstrap, "bw-a") + read_all(bootstrap, "bw-b")
    got = sorted((r.topic, r.key, r.value, r.headers[0]) for r in written)
    assert got == sorted((t, k.encode(), v, (h[0][0], h[0][1])) for k, v, t, _p, h in rows)
    assert {r.partition for r in written if r.topic == "bw-a"} == {1}  # the partition column was obeyed

    # With a sink id and a batch id (as foreachBatch would pass them) a repeated job writes nothing.
    def write_once() -> None:
        (frame.write.format("roost").option("kafka.bootstrap.servers", bootstrap)
         .option("sinkId", "nightly-export").option("batchId", "41").mode("append").save())
    write_once()
    write_once()
    again = read_all(bootstrap, "bw-a") + read_all(bootstrap, "bw-b")
    assert len(again) == 2 * len(rows)


def test_keys_are_partitioned_like_the_java_clients(spark: Any, roost_node: RoostProcess) -> None:
    """Without a partition column a row goes where Kafka's Java clients send its key: murmur2 of
    the key bytes, positive, modulo the partition count (kafka-python's copy of that hash)."""
    from kafka.partitioner.default import murmur2

    bootstrap = roost_node.address("kafka")
    partitions = 7
    create_topics(bootstrap, {"by-key": partitions})
    rng = random.Random(12)
    keys = {b"", "clé-ü".encode(), bytes(range(256))}
    while len(keys) < 3000:
        keys.add(rng.randbytes(rng.randint(1, 40)))
    rows = [(key, b"v") for key in sorted(keys)]
    frame = spark.createDataFrame(rows, "key binary, value binary")
    frame.write.format("roost").option("kafka.bootstrap.servers", bootstrap).option("topic", "by-key") \
        .mode("append").save()
    written = read_all(bootstrap, "by-key")
    assert sorted(r.key for r in written) == sorted(keys)
    wrong = [(r.key, r.partition) for r in written if r.partition != (murmur2(r.key) & 0x7FFFFFFF) % partitions]
    assert not wrong, f"{len(wrong)} of {len(written)} keys off the Java partitioner, e.g. {wrong[:3]}"
    assert len({r.partition for r in written}) == partitions


def test_a_batch_replayed_after_its_commit_writes_nothing(spark: Any, roost_node: RoostProcess,
                                                           tmp_path: Path) -> None:
    bootstrap = roost_node.address("kafka")
    producer = produce_values(bootstrap, "rc-in", 3, 500)
    checkpoint = tmp_path / "checkpoint"
    source = {"subscribe": "rc-in", "startingOffsets": "earliest", "maxOffsetsPerTrigger": "200"}
    run_available_now(copy_query(spark, bootstrap, source, "rc-out", checkpoint, {"availableNow": True}))
    assert_exactly(expected_lines(producer.acked), output_lines(bootstrap, "rc-out"))

    # Spark failed after our commit() but before recording the batch in its commit log: remove that
    # record, and Spark runs the same batch (same offsets) again.
    commits = checkpoint / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    for crc in commits.glob(f".{last}.crc"):
        crc.unlink()
    progress = run_available_now(copy_query(spark, bootstrap, source, "rc-out", checkpoint, {"availableNow": True}))
    assert any(p["batchId"] == last and p["numInputRows"] > 0 for p in progress), progress
    assert_exactly(expected_lines(producer.acked), output_lines(bootstrap, "rc-out"))


def test_a_task_rerun_after_a_partial_write_completes_the_batch_once(roost_node: RoostProcess) -> None:
    """The exactly-once rule with a real broker, one step at a time: a first run of a task writes
    part of its rows and dies before the commit; the re-run (rows in another order) writes only
    the rest; after the commit a third run writes nothing."""
    referees.import_or_skip("pyspark", "PySpark")
    import pyarrow as pa

    from roost.spark.exactly_once import MARKER_COMMIT, Marker, query_commit_log
    from roost.spark.options import parse_writer_options
    from roost.spark.sink import TaskTarget, write_task
    from roost.spark.sink_io import SinkClient

    bootstrap = roost_node.address("kafka")
    create_topics(bootstrap, {"pw-out": 3})
    options = parse_writer_options({"kafka.bootstrap.servers": bootstrap, "topic": "pw-out"})
    # 300 rows with repeated contents: duplicates that the query really produced must all arrive.
    rows = [(f"k{n % 11}".encode(), f"v{n % 40}".encode()) for n in range(300)]

    def batches(subset: list[tuple[bytes, bytes]]) -> Any:
        for start in range(0, len(subset), 64):
            chunk = subset[start:start + 64]
            yield pa.RecordBatch.from_arrays([pa.array([k for k, _ in chunk], pa.binary()),
                                              pa.array([v for _, v in chunk], pa.binary())], names=["key", "value"])

    log_topic = query_commit_log("query-1")
    client = SinkClient(options.kafka)
    try:
        client.ensure_log_topic(log_topic)

        def run(task: int, attempt: int, subset: list[tuple[bytes, bytes]]) -> Any:
            markers = client.markers_at_tail(log_topic, 7)
            return write_task(options, TaskTarget("query-1", 7, task, attempt, log_topic), batches(subset), markers,
                              client)

        first = run(0, 0, rows[:120])
        assert (first.written, first.skipped) == (120, 0)
        shuffled = rows[:]
        random.Random(5).shuffle(shuffled)
        rerun = run(0, 1, shuffled)
        assert (rerun.written, rerun.skipped) == (180, 120)
        other_task = run(1, 0, rows[:50])  # another task of the batch is not confused by task 0's names
        assert (other_task.written, other_task.skipped) == (50, 0)
        client.append_marker(log_topic, Marker(MARKER_COMMIT, "query-1", 7, records=350))
        after_commit = run(0, 2, rows)
        assert (after_commit.written, after_commit.skipped) == (0, 300)
    finally:
        client.close()
    got = Counter((r.key, r.value) for r in read_all(bootstrap, "pw-out"))
    assert got == Counter(rows) + Counter(rows[:50])


def wrote_from_partition_zero(bootstrap: str, topic: str) -> int:
    """How many records of `topic` copy input partition 0 of fm-in (see `copy_query`'s value)."""
    return sum(1 for r in read_all(bootstrap, topic) if r.value.startswith(b"fm-in|0|"))


@pytest.mark.filterwarnings("ignore:Cannot infer the eval type:UserWarning")
def test_a_query_that_fails_mid_batch_and_restarts_loses_and_duplicates_nothing(
        spark: Any, roost_node: RoostProcess, tmp_path: Path) -> None:
    from pyspark.sql.functions import col, udf

    bootstrap = roost_node.address("kafka")
    # Values of 2 KB: a Python UDF's results reach the rest of the task in 64 KB flushes of its
    # worker's output, so the sink gets rows before the UDF is through its partition.
    producer = produce_values(bootstrap, "fm-in", 2, 600, pad=2048)
    create_topics(bootstrap, {"fm-out": 1})
    flag = tmp_path / "fail-once"
    flag.write_text("armed")
    flag_path = str(flag)

    @udf("binary")
    def fail_once(value: bytes, offset: int, partition: int) -> bytes:
        # Runs on an executor: the first time partition 0 reaches offset 250, the task dies, but
        # only once the same task's sink has written some of the rows before it (it gets them in
        # Arrow batches of 50 while the UDF still runs): the restart must then skip exactly those.
        import os

        from tests.support.procs import wait_for
        if partition == 0 and offset == 250 and os.path.exists(flag_path):
            os.remove(flag_path)
            wait_for(lambda: wrote_from_partition_zero(bootstrap, "fm-out") > 0, timeout=120,
                     interval=0.2, what="the failing task's sink to write its first records")
            raise RuntimeError("injected failure in the middle of a batch")
        return value

    def transform(frame: Any) -> Any:
        return frame.withColumn("value", fail_once(col("value"), col("offset"), col("partition")))

    checkpoint = tmp_path / "checkpoint"
    source = {"subscribe": "fm-in", "startingOffsets": "earliest"}
    batch_rows = "spark.sql.execution.arrow.maxRecordsPerBatch"
    saved = spark.conf.get(batch_rows)
    spark.conf.set(batch_rows, "50")
    try:
        failed = copy_query(spark, bootstrap, source, "fm-out", checkpoint, {"availableNow": True}, transform)
        with pytest.raises(Exception, match="injected failure"):
            failed.awaitTermination(300)
    finally:
        spark.conf.set(batch_rows, saved)
    assert not flag.exists()
    # The failed run of task 0 left records behind (fewer than its 300: it died at offset 250).
    left_behind = wrote_from_partition_zero(bootstrap, "fm-out")
    assert 0 < left_behind <= 250, left_behind
    run_available_now(copy_query(spark, bootstrap, source, "fm-out", checkpoint, {"availableNow": True}, transform))
    # Exactly once although the re-run's rows include those `left_behind`: the re-run skipped them.
    assert_exactly(expected_lines(producer.acked), output_lines(bootstrap, "fm-out"))


# A write task's first attempt, killed (SIGKILL: no abort, no cleanup) once 120 of its rows are sent.
DYING_ATTEMPT = """
import os, signal, sys, time
import pyarrow as pa
from roost.spark.options import parse_writer_options
from roost.spark.sink import TaskTarget, write_task
from roost.spark.sink_io import SinkClient
bootstrap, topic, log_topic = sys.argv[1:4]
options = parse_writer_options({"kafka.bootstrap.servers": bootstrap, "topic": topic, "transactional": "true"})
def batches():
    for start in range(0, 120, 60):
        yield pa.RecordBatch.from_arrays([pa.array([b"v%d" % n for n in range(start, start + 60)], pa.binary())],
                                         names=["value"])
    time.sleep(1.0)  # librdkafka sends what it has (linger 5 ms)
    os.kill(os.getpid(), signal.SIGKILL)
write_task(options, TaskTarget("tq", 7, 0, 0, log_topic), batches(), None, SinkClient(options.kafka))
"""


def test_a_transactional_task_killed_mid_batch_is_never_seen_in_part_by_read_committed(
        roost_node: RoostProcess) -> None:
    """transactional=true: a task attempt killed after sending part of its rows leaves them in an
    open transaction, which read_committed readers do not see (read_uncommitted ones do); the next
    attempt fences it (its transaction is aborted) and commits all the rows; a replay of the same
    batch after that commit writes nothing, and the next batch is written."""
    referees.import_or_skip("pyspark", "PySpark")
    import subprocess
    import sys

    import pyarrow as pa

    from roost.spark.exactly_once import query_commit_log
    from roost.spark.options import parse_writer_options
    from roost.spark.sink import TaskTarget, write_task
    from roost.spark.sink_io import SinkClient
    from tests.broker.test_transactions import read_all as read_isolated

    bootstrap = roost_node.address("kafka")
    create_topics(bootstrap, {"tq-out": 1})
    log_topic = query_commit_log("tq")
    options = parse_writer_options({"kafka.bootstrap.servers": bootstrap, "topic": "tq-out", "transactional": "true"})
    client = SinkClient(options.kafka)
    client.ensure_log_topic(log_topic)
    dying = subprocess.run([sys.executable, "-c", DYING_ATTEMPT, bootstrap, "tq-out", log_topic], timeout=120,
                           capture_output=True)
    assert dying.returncode == -9, dying.stderr.decode()[-2000:]
    assert len(read_isolated(roost_node, "tq-out", "read_uncommitted", partitions=1)) == 120
    assert read_isolated(roost_node, "tq-out", "read_committed", partitions=1) == []

    rows = [b"v%d" % n for n in range(300)]

    def run(batch: int, attempt: int) -> Any:
        frame = pa.RecordBatch.from_arrays([pa.array(rows, pa.binary())], names=["value"])
        return write_task(options, TaskTarget("tq", batch, 0, attempt, log_topic), iter([frame]), None, client)

    try:
        second = run(7, 1)
        assert (second.written, second.skipped) == (300, 0)
        assert sorted(read_isolated(roost_node, "tq-out", "read_committed", partitions=1)) == sorted(rows)
        replay = run(7, 2)
        assert (replay.written, replay.skipped) == (0, 300)
        following = run(8, 0)
        assert (following.written, following.skipped) == (300, 0)
    finally:
        client.close()
    assert Counter(read_isolated(roost_node, "tq-out", "read_committed", partitions=1)) == Counter(rows * 2)
