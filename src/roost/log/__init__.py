"""The partition log: segments, offset and time indexes, append/read/truncate, retention, crash
recovery and idempotent producer state. Knows nothing about networks."""

from roost.log.config import LOG_APPEND_TIME, LogConfig
from roost.log.errors import (
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
