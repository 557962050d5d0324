"""DescribeLogDirs (35) and AlterReplicaLogDirs (34): this broker's log directories.

DescribeLogDirs lists every directory with the partitions it holds: their size, their offset lag
(0 for a current replica; for a future copy being moved in, how far it is behind the current log)
and whether they are a future copy; from v4 the directory's total and usable bytes. A failed
directory answers KAFKA_STORAGE_ERROR and no partitions, as Kafka's does.

AlterReplicaLogDirs starts moving each named partition to the named directory (see
`roost.broker.replica.log_move`) and answers at once, as Kafka does: LOG_DIR_NOT_FOUND for a path
that is not one of this broker's log directories, KAFKA_STORAGE_ERROR when the destination or the
partition's directory is offline, REPLICA_NOT_AVAILABLE when no replica of it is here (the
directory is remembered for when one is created, Kafka's rule).
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from typing import Any

from roost.broker.net.request import Request
from roost.broker.replica.log_move import LogMoves
from roost.broker.replica.manager import ReplicaManager
from roost.storage.directories import LogDir, LogDirs
from roost.wire.kafka.errors import ErrorCode


class LogDirsApi:
    def __init__(self, replicas: ReplicaManager, dirs: LogDirs, moves: LogMoves) -> None:
        self._replicas = replicas
        self._dirs = dirs
        self._moves = moves

    def handle_describe(self, request: Request) -> dict[str, Any]:
        asked = request.body.get("topics")
        wanted: dict[str, set[int]] | None = None
        if asked is not None:
            wanted = defaultdict(set)
            for topic in asked:
                wanted[topic["topic"]].update(topic["partitions"])
        results = [self._describe_dir(log_dir, wanted) for log_dir in self._dirs.dirs]
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results}

    def _describe_dir(self, log_dir: LogDir, wanted: dict[str, set[int]] | None) -> dict[str, Any]:
        if not log_dir.online:
            return {"error_code": ErrorCode.KAFKA_STORAGE_ERROR, "log_dir": str(log_dir.path), "topics": [],
                    "total_bytes": -1, "usable_bytes": -1}
        # (topic) -> [(index, size, lag, future?)]
        found: dict[str, list[tuple[int, int, int, bool]]] = defaultdict(list)
        # Only the partitions asked about: the console asks about a page of 50 topics, and looking
        # at every hosted partition cost 15 ms at 1,000 partitions.
        asked_for = self._replicas.hosted() if wanted is None else (
            partition for topic, indexes in wanted.items() for index in indexes
            if (partition := self._replicas.partition(topic, index)) is not None)
        for partition in asked_for:
            if self._dirs.dir_holding(partition.log_directory) is log_dir:
                found[partition.topic].append((partition.index, partition.size_bytes, 0, False))
        for move in self._moves.futures():
            if move.target is log_dir and move.future is not None:
                found[move.partition.topic].append(
                    (move.partition.index, move.future.size_bytes, move.lag, True))
        topics = []
        for name in sorted(found):
            rows = [row for row in sorted(found[name]) if wanted is None or row[0] in wanted.get(name, ())]
            if rows:
                topics.append({"name": name, "partitions": [
                    {"partition_index": index, "partition_size": size, "offset_lag": lag, "is_future_key": future}
                    for index, size, lag, future in rows]})
        try:
            usage = shutil.disk_usage(log_dir.path)
            total, usable = usage.total, usage.free
        except OSError:
            total = usable = -1
        return {"error_code": ErrorCode.NONE, "log_dir": str(log_dir.path), "topics": topics,
                "total_bytes": total, "usable_bytes": usable}

    def handle_alter(self, request: Request) -> dict[str, Any]:
        results: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for wanted in request.body["dirs"]:
            target = self._dirs.find(wanted["path"])
            for topic in wanted["topics"]:
                for index in topic["partitions"]:
                    error = self._alter_one(topic["name"], index, target)
                    results[topic["name"]].append({"partition_index": index, "error_code": error})
        return {"throttle_time_ms": 0, "results": [
            {"topic_name": name, "partitions": partitions} for name, partitions in results.items()]}

    def _alter_one(self, topic: str, index: int, target: LogDir | None) -> ErrorCode:
        if target is None:
            return ErrorCode.LOG_DIR_NOT_FOUND
        if not target.online or self._replicas.is_offline(topic, index):
            return ErrorCode.KAFKA_STORAGE_ERROR
        partition = self._replicas.partition(topic, index)
        if partition is None or partition.closed:
            self._dirs.prefer(topic, index, target)
            return ErrorCode.REPLICA_NOT_AVAILABLE
        self._moves.start(partition, target)
        return ErrorCode.NONE
