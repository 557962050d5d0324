"""Writing to Roost topics from Spark: `df.write.format("roost")` and `df.writeStream.format("roost")`.

Columns, as Spark's Kafka sink: `value` (binary or string, required), `key` (binary or string),
`topic` (string; the `topic` option, when given, wins), `partition` (int; otherwise the key's
murmur2 hash, as Java clients do), `headers` (array<struct<key string, value binary>>). Other
columns are ignored. Writes are exactly-once by default; the argument is in
`roost.spark.exactly_once`.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from roost.spark.exactly_once import (
    BATCH_JOBS_LOG,
    MARKER_BEGIN,
    MARKER_COMMIT,
    RECORD_NAME_HEADER,
    Marker,
    RecordNamer,
    plan_task,
    query_commit_log,
    record_digest,
)
from roost.spark.options import OptionError, WriterOptions
from roost.spark.sink_io import SinkClient
from roost.spark.sink_txn import TransactionalTask

log = logging.getLogger("roost.spark")

# A batch job's retried task looks for its earlier attempts' markers written since the job began,
# less this much for clock differences between the driver and the brokers.
CLOCK_SKEW_MS = 5 * 60 * 1000


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    sink_id: str
    batch_id: int
    task: int
    attempt: int
    written: int = 0
    skipped: int = 0
    topics: list[str] = field(default_factory=list)


def check_sink_schema(schema: StructType, options: WriterOptions) -> None:
    """Refuse, on the driver and before any task runs, a frame the sink cannot write."""
    types = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in types:
        raise OptionError("the roost sink needs a 'value' column (binary or string)")
    for name in ("key", "value"):
        if name in types and not isinstance(types[name], (BinaryType, StringType)):
            raise OptionError(f"column '{name}' must be binary or string, not {types[name].simpleString()}")
    if options.topic is None and "topic" not in types:
        raise OptionError("the roost sink needs a 'topic' column or the option 'topic'")
    if "topic" in types and not isinstance(types["topic"], StringType):
        raise OptionError("column 'topic' must be a string")
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise OptionError("column 'partition' must be an int")
    if "headers" in types:
        headers = types["headers"]
        ok = (isinstance(headers, ArrayType) and isinstance(headers.elementType, StructType)
              and [f.name for f in headers.elementType.fields] == ["key", "value"])
        if not ok:
            raise OptionError("column 'headers' must be array<struct<key string, value binary>>")


def _as_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


def _rows(batches: Iterator[pa.RecordBatch], topic_option: str | None) -> Iterator[tuple[Any, ...]]:
    """(topic, partition, key, value, headers) of each row, in order."""
    for batch in batches:
        columns = {name.lower(): batch.column(i) for i, name in enumerate(batch.schema.names)}
        count = batch.num_rows
        values = columns["value"].to_pylist()
        keys = columns["key"].to_pylist() if "key" in columns else [None] * count
        topics = [topic_option] * count if topic_option else columns["topic"].to_pylist()
        partitions = columns["partition"].to_pylist() if "partition" in columns else [None] * count
        headers = columns["headers"].to_pylist() if "headers" in columns else [None] * count
        for index in range(count):
            topic = topics[index]
            if topic is None:
                raise ValueError("roost sink: a row has a null topic and no 'topic' option is set")
            row_headers = [(h["key"], _as_bytes(h["value"])) for h in headers[index] or ()]
            yield topic, partitions[index], _as_bytes(keys[index]), _as_bytes(values[index]), row_headers


@dataclass(frozen=True)
class TaskTarget:
    """Where a task's markers go and whom they name."""

    sink_id: str
    batch_id: int
    task: int
    attempt: int
    log_topic: str


def write_task(options: WriterOptions, target: TaskTarget, batches: Iterator[pa.RecordBatch],
               markers: list[Marker] | None, client: SinkClient) -> SinkCommitMessage:
    """Write one task's rows following the exactly-once rule; `markers` are those of its batch
    (None when the task knows no earlier run of it can exist)."""
    message = SinkCommitMessage(target.sink_id, target.batch_id, target.task, target.attempt)
    if options.transactional:
        return write_task_transactionally(options, target, batches, message)
    if not options.exactly_once:
        for topic, partition, key, value, headers in _rows(batches, options.topic):
            client.produce(topic, key, value, partition, headers)
            message.written += 1
        client.flush()
        return message
    plan = plan_task(markers or [], target.sink_id, target.batch_id, target.task)
    if plan.batch_committed:
        for _ in _rows(batches, options.topic):
            message.skipped += 1
        log.info("roost sink: batch %s already committed; task %s writes nothing", target.batch_id, target.task)
        return message
    namer = RecordNamer(target.sink_id, target.batch_id, target.task)
    already: set[str] = set()
    for topic, scan_from in plan.scan_from.items():
        already |= client.names_written(topic, scan_from, namer.prefix)
    begun: set[str] = set()
    for topic, partition, key, value, headers in _rows(batches, options.topic):
        if topic not in begun:
            client.append_marker(target.log_topic, Marker(
                MARKER_BEGIN, target.sink_id, target.batch_id, task=target.task, attempt=target.attempt,
                topic=topic, offsets=client.end_offsets(topic)))
            begun.add(topic)
        name = namer.name(record_digest(topic, partition, key, value, headers))
        if name in already:
            message.skipped += 1
            continue
        client.produce(topic, key, value, partition, [*headers, (RECORD_NAME_HEADER, name.encode())])
        message.written += 1
    client.flush()
    message.topics = sorted(begun)
    return message


def write_task_transactionally(options: WriterOptions, target: TaskTarget, batches: Iterator[pa.RecordBatch],
                               message: SinkCommitMessage) -> SinkCommitMessage:
    """The task's rows in one transaction, unless an earlier run of it committed this batch
    (roost.spark.sink_txn)."""
    task = TransactionalTask(options.kafka, target.sink_id, target.task, target.log_topic)
    try:
        task.fence()
        if task.committed_batches() > target.batch_id:
            for _ in _rows(batches, options.topic):
                message.skipped += 1
            log.info("roost sink: task %s of batch %s committed earlier; writing nothing", target.task,
                     target.batch_id)
            return message
        message.written = task.write(_rows(batches, options.topic), target.batch_id)
    finally:
        task.close()
    return message


def _task_context() -> TaskContext:
    context = TaskContext.get()
    assert context is not None, "write() runs inside a Spark task"
    return context


class RoostStreamWriter(DataSourceStreamArrowWriter):
    """Micro-batch writes; the sink id is the query id, which survives restarts from a checkpoint."""

    def __init__(self, options: WriterOptions, schema: StructType) -> None:
        check_sink_schema(schema, options)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        context = _task_context()
        sink_id = self.options.sink_id or context.getLocalProperty("sql.streaming.queryId")
        batch_text = context.getLocalProperty("streaming.sql.batchId")
        assert sink_id and batch_text is not None, "not running in a streaming query"
        target = TaskTarget(sink_id, int(batch_text), context.partitionId(), context.attemptNumber(),
                            query_commit_log(sink_id))
        client = SinkClient(self.options.kafka)
        try:
            markers = None
            if self.options.transactional:
                client.ensure_log_topic(target.log_topic)  # its partition 0 holds the tasks' progress
            elif self.options.exactly_once:
                client.ensure_log_topic(target.log_topic)
                markers = client.markers_at_tail(target.log_topic, target.batch_id)
            return write_task(self.options, target, iterator, markers, client)
        finally:
            client.close()

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        written = [m for m in messages if isinstance(m, SinkCommitMessage)]
        if not self.options.exactly_once or self.options.transactional or not written:
            return
        sink_id = written[0].sink_id
        assert all(m.sink_id == sink_id and m.batch_id == batchId for m in written), written
        client = SinkClient(self.options.kafka)
        try:
            client.append_marker(query_commit_log(sink_id), Marker(
                MARKER_COMMIT, sink_id, batchId, records=sum(m.written + m.skipped for m in written)))
        finally:
            client.close()

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # Nothing to undo: what the failed run wrote is named, and a re-run skips those names.
        log.warning("roost sink: batch %s aborted; a re-run of it writes only what is missing", batchId)


class RoostBatchWriter(DataSourceArrowWriter):
    """`df.write`: one job. Its id is made on the driver and travels to the tasks in the pickle.

    With the options `sinkId` and `batchId` (for example from `foreachBatch`), the job takes part
    in that sink's commit log, so re-running the same batch id writes nothing twice.
    """

    def __init__(self, options: WriterOptions, schema: StructType, batch_id: int | None) -> None:
        check_sink_schema(schema, options)
        if batch_id is not None and options.sink_id is None:
            raise OptionError("option 'batchId' needs the option 'sinkId'")
        self.options = options
        self.batch_id = batch_id
        self.job_id = options.sink_id if batch_id is not None else str(uuid.uuid4())
        self.started_ms = int(time.time() * 1000)

    def _target(self, context: TaskContext) -> TaskTarget:
        if self.batch_id is not None:
            assert self.options.sink_id is not None
            return TaskTarget(self.options.sink_id, self.batch_id, context.partitionId(), context.attemptNumber(),
                              query_commit_log(self.options.sink_id))
        return TaskTarget(self.job_id, 0, context.partitionId(), context.attemptNumber(), BATCH_JOBS_LOG)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        target = self._target(_task_context())
        client = SinkClient(self.options.kafka)
        try:
            markers = None
            if self.options.transactional:
                client.ensure_log_topic(target.log_topic)
            elif self.options.exactly_once:
                client.ensure_log_topic(target.log_topic)
                if self.batch_id is not None:
                    markers = client.markers_at_tail(target.log_topic, target.batch_id)
                elif target.attempt > 0:  # only a retried task can follow an earlier run of itself
                    markers = client.markers_since(target.log_topic, self.started_ms - CLOCK_SKEW_MS)
            return write_task(self.options, target, iterator, markers, client)
        finally:
            client.close()

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        written = [m for m in messages if isinstance(m, SinkCommitMessage)]
        if self.batch_id is None or not self.options.exactly_once or self.options.transactional or not written:
            return
        assert self.options.sink_id is not None
        client = SinkClient(self.options.kafka)
        try:
            client.append_marker(query_commit_log(self.options.sink_id), Marker(
                MARKER_COMMIT, self.options.sink_id, self.batch_id,
                records=sum(m.written + m.skipped for m in written)))
        finally:
            client.close()
