"""The partition log: segments, offset and time indexes, append/read/truncate, retention, crash
recovery and idempotent producer state. Knows nothing about networks; depends only on
roost.wire.kafka.records and roost.wire.kafka.errors (the error codes it answers with).

    log = PartitionLog.open(data_dir / "orders-0", LogConfig(segment_bytes=...), clock_ms)
    batches = validate_batches(records)                # the Produce request's records bytes
    verdict = log.producer_state.check(batches[0][1])  # OK, Duplicate(first_offset) or an ErrorCode
    info = log.append(records, batches)                # assigns offsets from log_end_offset
    fds, end = log.flush_handle()                      # fsync fds on a thread, then:
    log.mark_flushed(end)
    result = log.read(offset, max_bytes, max_offset=high_watermark)  # whole batches
    stats = log.clean(now_ms, high_watermark=hw)       # compaction, for cleanup.policy=compact
    log.close()                                        # clean shutdown: no recovery scan next time

All methods are called from one thread (the broker's event loop); only the fsync of the fds that
`flush_handle` returns may run elsewhere.
"""

from roost.log.cleaner import CleanStats, CompactionLags
from roost.log.config import LOG_APPEND_TIME, LogConfig
from roost.log.errors import (
    CorruptLog,
    MessageTooLarge,
    NonMonotonicAppend,
    OffsetOutOfRange,
    RecordBatchTooLarge,
)
from roost.log.partition_log import AppendInfo, PartitionLog, ReadResult
from roost.log.producer_state import OK, Duplicate, ProducerStateManager

__all__ = [
    "LOG_APPEND_TIME",
    "OK",
    "AppendInfo",
    "CleanStats",
    "CompactionLags",
    "CorruptLog",
    "Duplicate",
    "LogConfig",
    "MessageTooLarge",
    "NonMonotonicAppend",
    "OffsetOutOfRange",
    "PartitionLog",
    "ProducerStateManager",
    "ReadResult",
    "RecordBatchTooLarge",
]
