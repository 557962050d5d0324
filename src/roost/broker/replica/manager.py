"""The replica manager: the partitions this broker hosts, and the produce and fetch paths on them.

Produce: check the batches (headers, CRC, size, producer sequences), append to the leader's log,
and say what the acknowledgement must wait for (a group-commit fsync when the topic asks for
fsync before ack). Fetch: read a partition up to the high watermark, and park fetches that want
more data until an append wakes them. Handlers turn requests into these calls and the results
into responses; they never touch a log themselves.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from roost.broker.log_manager import LogManager
from roost.broker.metadata.cache import MetadataCache, PartitionInfo
from roost.broker.metadata.catalog import TopicCatalog, TopicInfo
from roost.broker.replica.partition import Partition
from roost.broker.replica.state import PartitionState
from roost.config import BrokerConfig
from roost.log import OK, Duplicate, MessageTooLarge, OffsetOutOfRange, ReadResult, RecordBatchTooLarge
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import MAX_SEQUENCE, BatchHeader, InvalidRecordBatch, validate_batches

log = logging.getLogger("roost.broker.replica")

ACKS_NONE, ACKS_LEADER, ACKS_ALL = 0, 1, -1


@dataclass(slots=True)
class AppendOutcome:
    """What became of one partition's records in a produce request."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    durable: asyncio.Future[None] | None = None  # the ack waits for this fsync, when set


class ReplicaManager:
    def __init__(self, broker_id: int, config: BrokerConfig, catalog: TopicCatalog, logs: LogManager,
                 metadata: MetadataCache) -> None:
        self.broker_id = broker_id
        self.config = config
        self.catalog = catalog
        self.logs = logs
        self.metadata = metadata
        self.partitions: dict[tuple[str, int], Partition] = {}
        logs.host(self.hosted)

    # hosting ----------------------------------------------------------------------------------
    def effective_configs(self, info: TopicInfo) -> dict[str, Any]:
        configs = self.config.topic_defaults()
        configs.update(info.configs)
        return configs

    def host_partitions(self, info: TopicInfo, indexes: Iterable[int]) -> None:
        """Open (or create) the logs of `info`'s partitions `indexes`; this broker holds their
        only replica, so it leads them."""
        configs = self.effective_configs(info)
        for index in indexes:
            partition_log = self.logs.open_log(info.name, index, configs)
            state = PartitionState.sole_replica(self.broker_id, partition_log.log_end_offset)
            self.partitions[(info.name, index)] = Partition(info.name, index, partition_log, configs, state)
            self.metadata.set_partition(info.name, index, PartitionInfo(
                leader=self.broker_id, leader_epoch=state.leader_epoch, replicas=state.replicas,
                isr=tuple(sorted(state.isr))))

    def drop_partitions(self, topic: str, indexes: Iterable[int]) -> None:
        """Stop hosting the partitions and delete their logs (topic deletion)."""
        for index in indexes:
            partition = self.partitions.pop((topic, index), None)
            if partition is not None:
                partition.wake_waiters()
            self.logs.delete_log(topic, index, partition.log if partition else None)
            self.metadata.remove_partition(topic, index)

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def hosted(self) -> Iterator[Partition]:
        return iter(list(self.partitions.values()))

    # produce ----------------------------------------------------------------------------------
    def append_records(self, partition: Partition, records: Any, acks: int) -> AppendOutcome:
        """Append a produce request's records for one partition, on its leader."""
        if records is None or len(records) == 0:
            return AppendOutcome(ErrorCode.CORRUPT_MESSAGE, "no records")
        try:
            batches = validate_batches(records)
        except InvalidRecordBatch as invalid:
            log.warning("rejected batch for %s-%d: %s", partition.topic, partition.index, invalid)
            return AppendOutcome(ErrorCode(invalid.error_code), str(invalid))
        max_batch = partition.configs["max.message.bytes"]
        for _, batch in batches:
            if batch.size > max_batch:
                return AppendOutcome(ErrorCode.MESSAGE_TOO_LARGE,
                                     f"batch of {batch.size} bytes exceeds max.message.bytes {max_batch}")
            if batch.is_transactional or batch.is_control:
                return AppendOutcome(ErrorCode.INVALID_RECORD, "transactions are not supported")
        if acks == ACKS_ALL and partition.configs["min.insync.replicas"] > len(partition.state.isr):
            return AppendOutcome(ErrorCode.NOT_ENOUGH_REPLICAS)

        if batches[0][1].producer_id >= 0:
            verdict = _check_sequences(partition, batches)
            if isinstance(verdict, Duplicate):
                return AppendOutcome(base_offset=verdict.first_offset, log_start_offset=partition.log_start_offset)
            if verdict != ErrorCode.NONE:
                return AppendOutcome(verdict)

        try:
            info = partition.log.append(records, batches)
        except MessageTooLarge as error:
            return AppendOutcome(ErrorCode.MESSAGE_TOO_LARGE, str(error))
        except RecordBatchTooLarge as error:
            # Kafka's answer when a batch cannot fit in any segment of this topic.
            return AppendOutcome(ErrorCode.RECORD_LIST_TOO_LARGE, str(error))
        partition.appended()
        return AppendOutcome(base_offset=info.first_offset, log_append_time=info.log_append_time,
                             log_start_offset=partition.log_start_offset,
                             durable=self.logs.flush_after_append(partition, len(batches)))

    def append_internal(self, partition: Partition, batch: bytearray) -> asyncio.Future[None] | None:
        """Append a batch this broker built itself (offset commits); returns the fsync to wait
        for when the topic asks for fsync before ack."""
        partition.log.append(batch)
        partition.appended()
        return self.logs.flush_after_append(partition, 1)

    # fetch ------------------------------------------------------------------------------------
    def read(self, partition: Partition, fetch_offset: int, max_bytes: int, min_one_batch: bool) -> ReadResult:
        """A consumer's read: whole batches from `fetch_offset`, below the high watermark.
        Raises OffsetOutOfRange."""
        return partition.log.read(fetch_offset, max_bytes, max_offset=partition.high_watermark,
                                  min_one_batch=min_one_batch)

    # offsets ----------------------------------------------------------------------------------
    def delete_records(self, partition: Partition, offset: int) -> tuple[ErrorCode, int]:
        """DeleteRecords: move the log start up to `offset` (-1: the high watermark)."""
        if offset == -1:
            offset = partition.high_watermark
        if offset < 0 or offset > partition.high_watermark:
            return ErrorCode.OFFSET_OUT_OF_RANGE, -1
        return ErrorCode.NONE, partition.log.delete_records_before(offset)

    async def close(self) -> None:
        for partition in self.partitions.values():
            partition.wake_waiters()
            partition.log.close()
        self.partitions.clear()


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


__all__ = ["ACKS_ALL", "ACKS_LEADER", "ACKS_NONE", "AppendOutcome", "OffsetOutOfRange", "ReplicaManager"]
