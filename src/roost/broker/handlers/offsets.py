"""ListOffsets (earliest, latest, by timestamp) and DeleteRecords."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roost.wire.kafka import RequestHeader
from roost.wire.kafka.errors import ErrorCode

if TYPE_CHECKING:
    from roost.broker.broker import Broker

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3


def handle_list_offsets(broker: Broker, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
    topics_out = []
    for topic in body["topics"]:
        name = topic["name"]
        partitions_out = []
        for request in topic["partitions"]:
            index = request["partition_index"]
            partition = broker.state.partition(name, index)
            if partition is None:
                partitions_out.append({"partition_index": index,
                                       "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                       "timestamp": -1, "offset": -1, "leader_epoch": -1})
                continue
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
            partitions_out.append({"partition_index": index, "error_code": ErrorCode.NONE,
                                   "timestamp": found_timestamp, "offset": offset,
                                   "leader_epoch": partition.leader_epoch,
                                   "old_style_offsets": [offset] if offset >= 0 else []})
        topics_out.append({"name": name, "partitions": partitions_out})
    return {"throttle_time_ms": 0, "topics": topics_out}


def handle_delete_records(broker: Broker, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
    topics_out = []
    for topic in body["topics"]:
        name = topic["name"]
        partitions_out = []
        for request in topic["partitions"]:
            index = request["partition_index"]
            partition = broker.state.partition(name, index)
            if partition is None:
                partitions_out.append({"partition_index": index, "low_watermark": -1,
                                       "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
                continue
            offset = request["offset"]
            if offset == -1:
                offset = partition.high_watermark
            if offset < 0 or offset > partition.high_watermark:
                partitions_out.append({"partition_index": index, "low_watermark": -1,
                                       "error_code": ErrorCode.OFFSET_OUT_OF_RANGE})
                continue
            low = partition.log.delete_records_before(offset)
            partitions_out.append({"partition_index": index, "low_watermark": low,
                                   "error_code": ErrorCode.NONE})
        topics_out.append({"name": name, "partitions": partitions_out})
    return {"throttle_time_ms": 0, "topics": topics_out}
