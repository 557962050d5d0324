"""ListOffsets (earliest, latest, by timestamp) and DeleteRecords, answered by the partition's
leader. A consumer's "latest" is the high watermark (a follower's, the log end); while a new
leader's high watermark is still below the start of its epoch (its followers have not fetched
yet), "latest" is not known: OFFSET_NOT_AVAILABLE, and the client retries (Kafka's rule). With
isolation level 1 (read_committed), "latest" is the last stable offset."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roost.broker.net.request import Request
from roost.broker.replica.manager import ReplicaManager
from roost.broker.replica.partition import Partition
from roost.wire.kafka.errors import ErrorCode

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3

NO_EPOCH = -1
READ_COMMITTED = 1
PartitionAnswer = Callable[[Partition | None, ErrorCode, dict[str, Any]], dict[str, Any]]


class OffsetsApi:
    def __init__(self, replicas: ReplicaManager) -> None:
        self._replicas = replicas

    def _per_partition(self, topics: list[dict[str, Any]], answer: PartitionAnswer) -> list[dict[str, Any]]:
        """The common shape: topics[name, partitions[partition_index, ...]] in, the same shape out."""
        out = []
        for topic in topics:
            partitions = []
            for wanted in topic["partitions"]:
                partition, error = self._replicas.leader_partition(topic["name"], wanted["partition_index"])
                epoch = wanted.get("current_leader_epoch", NO_EPOCH)
                if partition is not None and epoch != NO_EPOCH and epoch != partition.leader_epoch:
                    error = ErrorCode.FENCED_LEADER_EPOCH if epoch < partition.leader_epoch \
                        else ErrorCode.UNKNOWN_LEADER_EPOCH
                    partition = None
                partitions.append(answer(partition, error, wanted))
            out.append({"name": topic["name"], "partitions": partitions})
        return out

    def handle_list_offsets(self, request: Request) -> dict[str, Any]:
        follower = request.body.get("replica_id", -1) >= 0
        committed = request.body.get("isolation_level", 0) == READ_COMMITTED

        def answer(partition: Partition | None, error: ErrorCode, wanted: dict[str, Any]) -> dict[str, Any]:
            return _list_offset(partition, error, wanted, follower, committed)

        return {"throttle_time_ms": 0, "topics": self._per_partition(request.body["topics"], answer)}

    def handle_delete_records(self, request: Request) -> dict[str, Any]:
        def answer(partition: Partition | None, error: ErrorCode, wanted: dict[str, Any]) -> dict[str, Any]:
            index = wanted["partition_index"]
            if partition is None:
                return {"partition_index": index, "low_watermark": -1, "error_code": error}
            error, low_watermark = self._replicas.delete_records(partition, wanted["offset"])
            return {"partition_index": index, "low_watermark": low_watermark, "error_code": error}

        return {"throttle_time_ms": 0, "topics": self._per_partition(request.body["topics"], answer)}


def _list_offset(partition: Partition | None, error: ErrorCode, request: dict[str, Any],
                 follower: bool, read_committed: bool = False) -> dict[str, Any]:
    index = request["partition_index"]
    if partition is None:
        return {"partition_index": index, "error_code": error, "timestamp": -1, "offset": -1, "leader_epoch": -1}
    timestamp = request["timestamp"]
    found_timestamp, offset = -1, -1
    if timestamp == LATEST and follower:
        offset = partition.log_end_offset
    elif timestamp == LATEST:
        if partition.high_watermark < partition.leader_epoch_start_offset:
            return {"partition_index": index, "error_code": ErrorCode.OFFSET_NOT_AVAILABLE, "timestamp": -1,
                    "offset": -1, "leader_epoch": -1}
        offset = partition.last_stable_offset if read_committed else partition.high_watermark
    elif timestamp == EARLIEST:
        offset = partition.log_start_offset
    elif timestamp == MAX_TIMESTAMP:
        found = partition.max_timestamp_offset()
        if found is not None:
            found_timestamp, offset = found
    else:
        found = partition.offset_for_timestamp(timestamp)
        if found is not None:
            offset, found_timestamp = found
    if offset < 0:  # no record at or after the timestamp: Kafka names no epoch either
        return {"partition_index": index, "error_code": ErrorCode.NONE, "timestamp": -1, "offset": -1,
                "leader_epoch": -1, "old_style_offsets": []}
    # The epoch that wrote the offset (Kafka: the leader-epoch cache's entry for it; the latest
    # epoch for the log end), so that a client validating its position asks about the right one.
    epoch = partition.log.leader_epochs.epoch_for_offset(offset)
    return {"partition_index": index, "error_code": ErrorCode.NONE, "timestamp": found_timestamp,
            "offset": offset, "leader_epoch": partition.leader_epoch if epoch < 0 else epoch,
            "old_style_offsets": [offset]}
