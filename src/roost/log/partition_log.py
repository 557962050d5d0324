"""The log of one partition: a directory of segments, appended and read as whole batches.

Threading: every method runs on one thread (the broker's event loop). The only thing another
thread may do is fsync the fds that `flush_handle` returns; fds of segments deleted meanwhile are
closed only once that flush is marked done, so the flusher never fsyncs a closed or reused fd.

Durability bookkeeping: the recovery point is the offset below which everything (batches and the
segments' indexes) is known to be on disk. After a crash (no clean-shutdown marker) every segment
from the one holding the recovery point on is re-read with CRC checks and cut at the first bad
batch, so a torn tail is never served.

The class joins the jobs of a partition log, each in a module of its own (as Kafka splits UnifiedLog,
LocalLog, LogSegment and LogLoader): its state (partition_state), opening and crash recovery
(log_loading), appends, rolls and truncation (log_writes), reads and time searches (log_reads),
retention and compaction hooks (log_retention), and the segment files' flushes, removal and
shutdown (segment_lifecycle).
"""

from __future__ import annotations

from roost.log.log_loading import LogLoading
from roost.log.log_reads import LogReads, ReadResult
from roost.log.log_retention import LogRetention
from roost.log.log_writes import AppendInfo, LogWrites
from roost.log.segment_lifecycle import SegmentLifecycle

__all__ = ["AppendInfo", "PartitionLog", "ReadResult"]


class PartitionLog(LogLoading, LogWrites, LogReads, LogRetention, SegmentLifecycle):
    """Segments of one partition; see the module docstring. Create with `PartitionLog.open`."""
