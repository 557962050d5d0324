"""ListOffsets (earliest, latest, by timestamp) and DeleteRecords."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roost.broker.replica.manager import ReplicaManager
from roost.broker.replica.partition import Partition
from roost.broker.request import Request
from roost.wire.kafka.errors import ErrorCode

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3

PartitionAnswer = Callable[[Partition | None, dict[str, Any]], dict[str, Any]]


class OffsetsApi:
    def __init__(self, replicas: ReplicaManager) -> None:
        self._replicas = replicas

    def _per_partition(self, topics: list[dict[str, Any]], answer: PartitionAnswer) -> list[dict[str, Any]]:
        """The common shape: topics[name, partitions[partition_index, ...]] in, the same shape out."""
        partition = self._replicas.partition
        return [{"name": topic["name"],
                 "partitions": [answer(partition(topic["name"], request["partition_index"]), request)
                                for request in topic["partitions"]]}
                for topic in topics]

    def handle_list_offsets(self, request: Request) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "topics": self._per_partition(request.body["topics"], _list_offset)}

    def handle_delete_records(self, request: Request) -> dict[str, Any]:
        def answer(partition: Partition | None, wanted: dict[str, Any]) -> dict[str, Any]:
            index = wanted["partition_index"]
            if partition is None:
                return {"partition_index": index, "low_watermark": -1,
                        "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
            error, low_watermark = self._replicas.delete_records(partition, wanted["offset"])
            return {"partition_index": index, "low_watermark": low_watermark, "error_code": error}

        return {"throttle_time_ms": 0, "topics": self._per_partition(request.body["topics"], answer)}


def _list_offset(partition: Partition | None, request: dict[str, Any]) -> dict[str, Any]:
    index = request["partition_index"]
    if partition is None:
        return {"partition_index": index, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "timestamp": -1, "offset": -1, "leader_epoch": -1}
    timestamp = request["timestamp"]
    found_timestamp, offset = -1, -1
    if timestamp == LATEST:
        offset = partition.high_watermark
    elif timestamp == EARLIEST:
        offset = partition.log_start_offset
    elif timestamp == MAX_TIMESTAMP:
        found = partition.log.max_timestamp_offset()
        if found is not None:
            found_timestamp, offset = found
    else:
        found = partition.log.offset_for_timestamp(timestamp)
        if found is not None:
            offset, found_timestamp = found
    return {"partition_index": index, "error_code": ErrorCode.NONE, "timestamp": found_timestamp,
            "offset": offset, "leader_epoch": partition.leader_epoch,
            "old_style_offsets": [offset] if offset >= 0 else []}
