"""ListOffsets (earliest, latest, by timestamp) and DeleteRecords."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from roost.broker.partition import Partition
from roost.wire.kafka import RequestHeader
from roost.wire.kafka.errors import ErrorCode

if TYPE_CHECKING:
    from roost.broker.broker import Broker

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3

PartitionAnswer = Callable[[Partition | None, dict[str, Any]], dict[str, Any]]


def answer_per_partition(broker: Broker, topics: list[dict[str, Any]], answer: PartitionAnswer) -> list[dict[str, Any]]:
    """The common shape: topics[name, partitions[partition_index, ...]] in, the same shape out."""
    return [{"name": topic["name"],
             "partitions": [answer(broker.state.partition(topic["name"], request["partition_index"]), request)
                            for request in topic["partitions"]]}
            for topic in topics]


def handle_list_offsets(broker: Broker, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
    def answer(partition: Partition | None, request: dict[str, Any]) -> dict[str, Any]:
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

    return {"throttle_time_ms": 0, "topics": answer_per_partition(broker, body["topics"], answer)}


def handle_delete_records(broker: Broker, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
    def answer(partition: Partition | None, request: dict[str, Any]) -> dict[str, Any]:
        index = request["partition_index"]
        if partition is None:
            return {"partition_index": index, "low_watermark": -1,
                    "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        offset = request["offset"]
        if offset == -1:
            offset = partition.high_watermark
        if offset < 0 or offset > partition.high_watermark:
            return {"partition_index": index, "low_watermark": -1, "error_code": ErrorCode.OFFSET_OUT_OF_RANGE}
        return {"partition_index": index, "low_watermark": partition.log.delete_records_before(offset),
                "error_code": ErrorCode.NONE}

    return {"throttle_time_ms": 0, "topics": answer_per_partition(broker, body["topics"], answer)}
