"""Reading Roost topics from Spark: the batch reader and the micro-batch stream reader.

Process model (PySpark's Python data sources): `initialOffset`, `latestOffset`, `partitions` and
`commit` run in one long-lived Python process on the driver; the reader object is then pickled
into executor Python workers, which call `read(partition)`. So the driver-side client is created
lazily and dropped from the pickled state, and `read()` opens its own connection.

Offsets are an offset map per topic-partition kept by Spark in the checkpoint (see
`roost.spark.offsets`). Each micro-batch is planned as one task per partition range
[start, end); `read()` yields Arrow record batches in offset order, read with Roost's own
consumer (`roost.spark.record_reader`) or, when an option needs it, librdkafka (`kafka_io`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from roost.spark.driver_queries import ClusterQueries
from roost.spark.offsets import (
    DataLossReporter,
    OffsetMap,
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
from roost.spark.options import OffsetSpec, ReaderOptions

# Metadata asked again while a planned partition is missing from it: a broker just restarted
# answers it from an empty cache until the controller's UpdateMetadata reaches it, which took
# more than 5 s in the two-region run (a broker killed and restarted under load); 30 s here.
MISSING_PARTITION_RETRIES = 60
MISSING_PARTITION_WAIT_S = 0.5

log = logging.getLogger("roost.spark")


class RangePartition(InputPartition):
    """One Spark task: records [start, end) of one topic-partition."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(None)
        self.topic = offset_range.tp.topic
        self.partition = offset_range.tp.partition
        self.start = offset_range.start
        self.end = offset_range.end

    def __repr__(self) -> str:
        return f"RangePartition({self.topic}-{self.partition} [{self.start}, {self.end}))"

    def offset_range(self) -> OffsetRange:
        return OffsetRange(TopicPartition(self.topic, self.partition), self.start, self.end)


class _ReaderBase:
    """What the batch and the stream reader share: options, a lazy driver client, planning, read()."""

    def __init__(self, options: ReaderOptions) -> None:
        self.options = options
        self._cluster: ClusterQueries | None = None

    def __getstate__(self) -> dict[str, Any]:
        # The reader is pickled into executors; a live client (sockets, threads) cannot go along.
        state = dict(self.__dict__)
        state["_cluster"] = None
        return state

    @property
    def cluster(self) -> ClusterQueries:
        if self._cluster is None:
            if self.options.consumer == "roost":
                from roost.spark.driver_queries import RoostClusterView
                self._cluster = RoostClusterView(self.options.kafka)
            else:
                from roost.spark.kafka_io import ClusterView
                self._cluster = ClusterView(self.options.kafka)
        return self._cluster

    def _close_cluster(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    def _resolve(self, spec: OffsetSpec, option: str, tps: list[TopicPartition],
                 earliest: OffsetMap, latest: OffsetMap) -> OffsetMap:
        if spec.kind == "earliest":
            return dict(earliest)
        if spec.kind == "latest":
            return dict(latest)
        return resolve_specific(spec.specific, tps, earliest, latest, option)

    def _plan(self, start: OffsetMap, end: OffsetMap) -> list[RangePartition]:
        # Only partitions that still exist are asked for offsets; the others are data loss. A
        # broker restarting can leave a partition out of one Metadata answer: asked again, a
        # bounded number of times, before it counts as deleted.
        existing = set(self.cluster.partitions(self.options.subscription))
        for _ in range(MISSING_PARTITION_RETRIES):
            if all(tp in existing for tp in end):
                break
            time.sleep(MISSING_PARTITION_WAIT_S)
            existing = set(self.cluster.partitions(self.options.subscription))
        earliest, _latest = self.cluster.watermarks(sorted(tp for tp in end if tp in existing))
        reporter = DataLossReporter(self.options.fail_on_data_loss)
        ranges = plan_ranges(start, end, earliest, reporter)
        for warning in reporter.warnings:
            log.warning("roost: %s", warning)
        return [RangePartition(r) for r in split_ranges(ranges, self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition), partition
        # Roost's own consumer decodes whole batches into Arrow; librdkafka honours every kafka.* option.
        # Imported here: the driver's Python process (started anew for every query) never needs them.
        if self.options.consumer == "roost":
            from roost.spark.record_reader import read_range
        else:
            from roost.spark.kafka_io import read_range
        yield from read_range(self.options.kafka, partition.offset_range(),
                              self.options.fail_on_data_loss, self.options.poll_timeout_ms)


class RoostBatchReader(_ReaderBase, DataSourceReader):
    """`spark.read.format("roost")`: the records between startingOffsets and endingOffsets."""

    def partitions(self) -> Sequence[InputPartition]:
        try:
            tps = self.cluster.partitions(self.options.subscription)
            earliest, latest = self.cluster.watermarks(tps)
            start = self._resolve(self.options.starting, "startingOffsets", tps, earliest, latest)
            end = self._resolve(self.options.ending, "endingOffsets", tps, earliest, latest)
            return self._plan(start, end)
        finally:
            self._close_cluster()


class RoostStreamReader(_ReaderBase, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """`spark.readStream.format("roost")`: micro-batches of offset ranges with Spark's Kafka options."""

    def __init__(self, options: ReaderOptions) -> None:
        super().__init__(options)
        self._available_now_target: OffsetMap | None = None

    def _current(self) -> tuple[list[TopicPartition], OffsetMap, OffsetMap]:
        tps = self.cluster.partitions(self.options.subscription)
        earliest, latest = self.cluster.watermarks(tps)
        return tps, earliest, latest

    def initialOffset(self) -> dict:
        tps, earliest, latest = self._current()
        return to_json_dict(self._resolve(self.options.starting, "startingOffsets", tps, earliest, latest))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        _tps, _earliest, latest = self._current()
        self._available_now_target = latest

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json_dict(start)
        _tps, earliest, latest = self._current()
        # A partition of `begin` missing from the metadata was deleted (a broker restarting makes
        # the metadata request fail and retry, never answer partially): planning reports it.
        end: OffsetMap = dict(latest)
        if self._available_now_target is not None:
            end = cap_to_target(end, begin, self._available_now_target)
        new_partitions = {tp: earliest[tp] for tp in end if tp not in begin and tp in earliest}
        if isinstance(limit, ReadMaxRows):
            end = limit_records(begin, end, new_partitions, limit.max_rows)
        elif isinstance(limit, ReadMinRows):
            available = sum(max(0, end[tp] - begin.get(tp, new_partitions.get(tp, 0))) for tp in end)
            if available < limit.min_rows:
                return start
        return to_json_dict(end)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, until = from_json_dict(start), from_json_dict(end)
        if begin == until:
            return []
        return self._plan(begin, until)

    def commit(self, end: dict) -> None:
        # Offsets live in Spark's checkpoint; the brokers need not know how far the query got.
        pass

    def stop(self) -> None:
        self._close_cluster()
