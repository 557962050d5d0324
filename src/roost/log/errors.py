"""Errors of the partition log. Those a Produce can cause carry the Kafka error code to answer."""

from __future__ import annotations

from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import InvalidRecordBatch


class OffsetOutOfRange(Exception):
    """An offset outside [log_start_offset, log_end_offset]."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} is outside the log's range [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class CorruptLog(OSError):
    """Bytes on disk that are not what was written: a record batch whose CRC-32C or framing does
    not check, found when it was about to be served. An OSError, so that the callers' rule for a
    failed disk applies (the log directory goes offline, its leaders move to healthy replicas):
    corrupt data is never served to a consumer or a follower."""

    def __init__(self, path: object, position: int, offset: int, reason: str) -> None:
        super().__init__(f"corrupt record batch in {path} at position {position} (near offset {offset}): {reason}")
        self.path = path
        self.position = position
        self.offset = offset


class MessageTooLarge(InvalidRecordBatch):
    """A batch larger than max_message_bytes (Kafka's MESSAGE_TOO_LARGE)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.MESSAGE_TOO_LARGE)


class RecordBatchTooLarge(InvalidRecordBatch):
    """A batch larger than a whole segment (Kafka's RECORD_LIST_TOO_LARGE)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.RECORD_LIST_TOO_LARGE)


class NonMonotonicAppend(ValueError):
    """A replicated append whose offsets do not follow the log end (assign_offsets=False)."""
