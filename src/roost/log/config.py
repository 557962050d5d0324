"""Settings of one partition log; names follow Kafka's topic configs (segment.bytes -> segment_bytes)."""

from __future__ import annotations

from dataclasses import dataclass

DAY_MS = 24 * 60 * 60 * 1000
NEVER = 2**63 - 1
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * DAY_MS
    # Up to this much off each segment's segment_ms, drawn when the segment is first checked
    # (Kafka's segment.jitter.ms): partitions made together do not all roll together.
    segment_jitter_ms: int = 0
    retention_ms: int = 7 * DAY_MS  # -1: keep forever
    retention_bytes: int = -1  # -1: no size limit
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10 * 1024 * 1024  # a segment rolls before either index passes this
    max_message_bytes: int = 1048588  # largest batch accepted (Kafka's max.message.bytes)
    flush_interval_messages: int = NEVER  # 1: fsync before every acknowledgement
    flush_interval_ms: int = NEVER
    # Kept for config compatibility: reads copy bytes out of the files, so a deleted segment is
    # unlinked at once instead of after this delay.
    file_delete_delay_ms: int = 60000
    message_timestamp_type: str = CREATE_TIME  # or LogAppendTime: the broker stamps batches
    # The recovery point checkpoint costs an fsync; after a flush it is rewritten at most this
    # often (a stale recovery point only makes crash recovery scan more, never lose data).
    recovery_checkpoint_interval_ms: int = 1000

    def __post_init__(self) -> None:
        if self.segment_bytes < 14:  # Kafka's minimum: room for the smallest header
            raise ValueError(f"segment_bytes {self.segment_bytes} is too small")
        if self.segment_ms < 1:
            raise ValueError(f"segment_ms {self.segment_ms} must be positive")
        if self.segment_jitter_ms < 0:
            raise ValueError(f"segment_jitter_ms {self.segment_jitter_ms} must be >= 0")
        if self.retention_ms < -1 or self.retention_bytes < -1:
            raise ValueError("retention_ms and retention_bytes must be >= -1")
        if self.index_interval_bytes < 0:
            raise ValueError("index_interval_bytes must be >= 0")
        if self.segment_index_bytes < 4:
            raise ValueError("segment_index_bytes must be >= 4")
        if self.max_message_bytes < 0:
            raise ValueError("max_message_bytes must be >= 0")
        if self.flush_interval_messages < 1 or self.flush_interval_ms < 0:
            raise ValueError("flush_interval_messages must be >= 1 and flush_interval_ms >= 0")
        if self.message_timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise ValueError(f"unknown message_timestamp_type {self.message_timestamp_type!r}")
