"""Produce: validate record batches, check producer sequences, append, acknowledge when durable.

Batches stay batches: only the batch headers and CRCs are checked, offsets are assigned by
rewriting baseOffset, and the bytes go to the log as they came (compressed ones stay compressed).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import TYPE_CHECKING, Any

from roost.broker.connection import NO_RESPONSE
from roost.log import OK, Duplicate, MessageTooLarge, RecordBatchTooLarge
from roost.wire.kafka import RequestHeader
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import MAX_SEQUENCE, BatchHeader, InvalidRecordBatch, validate_batches

if TYPE_CHECKING:
    from roost.broker.broker import Broker
    from roost.broker.partition import Partition

log = logging.getLogger("roost.broker.produce")

FIRST_SUPPORTED_PRODUCE_VERSION = 3  # v0-2 carry old message formats; advertised only for librdkafka


def _partition_error(index: int, code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"index": index, "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
            "log_start_offset": -1, "error_message": message}


def handle_produce(broker: Broker, header: RequestHeader, body: dict[str, Any]) -> Any:
    acks = body["acks"]
    version = header.api_version
    durable_waits: list[asyncio.Future[None]] = []
    topics_out = []
    for topic in body["topic_data"]:
        name = topic["name"]
        partitions_out = []
        for pdata in topic["partition_data"]:
            index = pdata["index"]
            if version < FIRST_SUPPORTED_PRODUCE_VERSION:
                result = _partition_error(index, ErrorCode.UNSUPPORTED_VERSION,
                                          "produce versions 0-2 are not supported; use v3 or later")
            elif acks not in (0, 1, -1):
                result = _partition_error(index, ErrorCode.INVALID_REQUIRED_ACKS)
            else:
                result = _produce_partition(broker, name, index, pdata["records"], acks, durable_waits)
            partitions_out.append(result)
        topics_out.append({"name": name, "partition_responses": partitions_out})
    response = {"responses": topics_out, "throttle_time_ms": 0}
    if acks == 0:
        if durable_waits:
            # Nobody waits for the answer, but the fsync must still happen.
            asyncio.gather(*durable_waits, return_exceptions=True)
        return NO_RESPONSE
    if not durable_waits:
        return response
    return _after_fsync(durable_waits, response)


async def _after_fsync(waits: list[asyncio.Future[None]], response: dict[str, Any]) -> dict[str, Any]:
    results = await asyncio.gather(*waits, return_exceptions=True)
    if any(isinstance(r, BaseException) for r in results):
        # Could not make the data durable: the client must not treat it as acknowledged.
        for topic in response["responses"]:
            for partition in topic["partition_responses"]:
                if partition["error_code"] == ErrorCode.NONE:
                    partition["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
    return response


def _produce_partition(broker: Broker, topic: str, index: int, records: Any, acks: int,
                       durable_waits: list[asyncio.Future[None]]) -> dict[str, Any]:
    partition, error = broker.partition_for_write(topic, index)
    if partition is None:
        return _partition_error(index, error)
    if records is None or len(records) == 0:
        return _partition_error(index, ErrorCode.CORRUPT_MESSAGE, "no records")
    try:
        batches = validate_batches(records)
    except InvalidRecordBatch as invalid:
        log.warning("rejected batch for %s-%d: %s", topic, index, invalid)
        return _partition_error(index, ErrorCode(invalid.error_code), str(invalid))
    max_batch = partition.configs["max.message.bytes"]
    for _, batch in batches:
        if batch.size > max_batch:
            return _partition_error(index, ErrorCode.MESSAGE_TOO_LARGE,
                                    f"batch of {batch.size} bytes exceeds max.message.bytes {max_batch}")
        if batch.is_transactional or batch.is_control:
            return _partition_error(index, ErrorCode.INVALID_RECORD, "transactions are not supported")
    if acks == -1 and partition.configs["min.insync.replicas"] > len(broker.in_sync_replicas(partition)):
        return _partition_error(index, ErrorCode.NOT_ENOUGH_REPLICAS)

    first_batch = batches[0][1]
    if first_batch.producer_id >= 0:
        verdict = _check_sequences(partition, batches)
        if isinstance(verdict, Duplicate):
            return {"index": index, "error_code": ErrorCode.NONE, "base_offset": verdict.first_offset,
                    "log_append_time_ms": -1, "log_start_offset": partition.log_start_offset}
        if verdict != ErrorCode.NONE:
            return _partition_error(index, verdict)

    try:
        info = partition.log.append(records, batches)
    except MessageTooLarge as error:
        return _partition_error(index, ErrorCode.MESSAGE_TOO_LARGE, str(error))
    except RecordBatchTooLarge as error:
        # Kafka's answer when a batch cannot fit in any segment of this topic.
        return _partition_error(index, ErrorCode.RECORD_LIST_TOO_LARGE, str(error))
    partition.wake_waiters()
    flushed = broker.state.flush_after_append(partition, len(batches))
    if flushed is not None:
        durable_waits.append(flushed)
    return {"index": index, "error_code": ErrorCode.NONE, "base_offset": info.first_offset,
            "log_append_time_ms": info.log_append_time,
            "log_start_offset": partition.log_start_offset}


def _check_sequences(partition: Partition, batches: list[tuple[int, BatchHeader]]) -> Duplicate | ErrorCode:
    """Idempotent producers: a re-sent batch is a duplicate; a gap or an old epoch is an error."""
    first = batches[0][1]
    verdict = partition.log.producer_state.check(first)
    if isinstance(verdict, Duplicate):
        return verdict if len(batches) == 1 else ErrorCode.DUPLICATE_SEQUENCE_NUMBER
    if verdict is not OK:
        return ErrorCode(verdict)
    # Clients send one batch per partition; if several come, each must continue the previous one.
    for (_, previous), (_, batch) in itertools.pairwise(batches):
        if (batch.producer_id, batch.producer_epoch) != (previous.producer_id, previous.producer_epoch) \
                or batch.base_sequence != (previous.last_sequence + 1) % (MAX_SEQUENCE + 1):
            return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    return ErrorCode.NONE
