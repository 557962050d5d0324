"""Log compaction (Kafka's cleanup.policy=compact) for one partition log: the pass, its reads,
writes and swaps. What it keeps of each batch is decided by the pure rules of
`roost.log.cleaner_rules` (the offset map, the aborted ranges, the record filter).

A pass (`clean_log`, called through `PartitionLog.clean`):

1. Decide whether it is worth it: the dirty ratio (bytes of cleanable segments not yet cleaned,
   over all cleanable bytes) must reach `min_cleanable_ratio`, or a kept tombstone must have
   become old enough to go. Cleanable = every segment before the active one (and, with a high
   watermark, wholly below it). The "clean point" (first offset not yet cleaned) and the oldest
   kept tombstone's timestamp live in `cleaner-offset-checkpoint`, so a call that finds nothing
   to do costs no I/O.
2. Build the offset map: key -> offset of its latest record, scanning from the clean point to the
   high watermark (the active segment included: its keys are newer). The map holds at most
   `max_keys` keys; when it is full the pass ends the map at a batch boundary and cleans only the
   prefix of the log it covers (the next pass continues from there).
3. Rewrite the cleanable segments from the start of the log in groups (consecutive segments whose
   sizes add up to at most segment.bytes merge into one), keeping for every key only its latest
   record; keyless records stay; a tombstone stays until its timestamp is more than
   `delete_retention_ms` old. Each group goes to a temp file, is fsynced, then swapped in by
   renames (see `_swap`).

Offsets never change. A batch that loses some records is rewritten as one batch per run of
consecutive surviving offsets (its first batch's base offset = the first surviving offset), so
every batch stays a standard one (lastOffsetDelta + 1 == recordsCount), which every reader of
our own logs and every Kafka client accepts; gaps lie between batches. Kafka itself keeps a
rewritten batch's base and last offsets and leaves the gaps inside it; we cannot, because our
RecordBatch checks (recovery, replication) insist on dense batches.

Rewritten batches keep the original's producer id and epoch, partition leader epoch, timestamp
type, each record's timestamp, headers and codec (they are recompressed with it, as Kafka does);
a run's base sequence is shifted by its distance from the original base offset, so each offset
keeps its sequence number. A rewrite that would not be smaller than the original batch is not
done (the batch is kept whole), so a cleaned segment is never larger than its sources.

Transactions (as Kafka's cleaner): a pass never reaches the first unstable offset (the first
offset of a transaction not yet decided, or decided by a marker the high watermark does not yet
cover), so every transactional batch it sees is decided, and the aborted-transaction index says
which: a batch inside an aborted transaction's range (same producer, first offset .. marker) is
aborted, any other committed. Aborted records never enter the map and are removed; committed
ones are compacted like any record (a rewritten run stays transactional). A control batch (a
COMMIT or ABORT marker) goes once no record of its transaction is left before it and the marker
is older than `delete_retention_ms` (the time a consumer has to read past it); until then it
stays, and its age counts like a kept tombstone's for the next pass's trigger. An ABORT marker
goes one pass after its index entry: a pass that leaves an aborted transaction without records
drops its entry once its swaps are durable, and only a later pass removes the marker. The order
matters to read_committed consumers: given an entry, a consumer counts every later batch of the
producer as aborted until it meets an ABORT marker, so an entry must never outlive its marker
(Kafka's cleaner likewise rebuilds each cleaned segment's index). Offsets never move, so the
other entries stay valid.

Kept as they are, never rewritten: batches that fail their CRC or cannot be decoded (a codec
library missing). The last batch of each idempotent producer keeps its last record, so the
producer's last sequence survives a rebuild of the producer state from the batch headers (Kafka
keeps that batch, emptied, for the same reason); a transaction one of whose records stays keeps
its marker, so such a rebuild never meets a transaction without its end.

Tombstone safety: a tombstone may go only when no older record of its key survives (else that
older value would come back to life). Older values may survive on purpose (kept whole batches,
transactional batches, producer-last records) or because the map of the pass that removes the
tombstone does not reach back to them, so a pass checks it directly: it rewrites from the start
of the log in offset order and remembers a hash of the key of every record it keeps; a tombstone
whose key hash is among them stays (a hash collision only keeps a tombstone longer). Past
`max_keys` remembered keys, or after a batch it cannot read, a pass drops no tombstone at all.

Durability and crashes: before the first swap a pass fsyncs every segment its map read (a
power cut must not keep the removal but lose the newer record that justified it). A swap is
crash-safe at every step (see `_swap`; opening the log deletes temp files, rebuilds missing
indexes and drops segments a merged segment already covers). The clean point is written only
after the whole pass, so a pass cut short is simply redone.

Compaction lags, as Kafka's: a segment holding a record newer than `min_compaction_lag_ms` is
not cleanable yet (nor is any after it), so a consumer that reads within the lag sees every
update; a dirty segment whose first record is older than `max_compaction_lag_ms` makes a pass
run whatever the dirty ratio (and the log manager rolls a compacted log's active segment by then).

Simplifications against Kafka: tombstones expire by their own record timestamp (Kafka 3 uses a
delete horizon stamped on the batch when it is first cleaned); records below the log start (DeleteRecords inside the
first segment) are left as they are; a pass runs on the caller's thread. Cost: about 50 ms per
MB of log on this machine for the first pass over small records (both phases read every record;
bench/log_bench.py), and a pass rereads the whole cleanable log, as Kafka's cleaner does.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from roost.log.cleaner_rules import AbortedRanges, OffsetMap, RecordFilter, is_aborted, summarize_batch
from roost.log.config import NEVER, LogConfig
from roost.log.files import TEMP_SUFFIX, atomic_write, fsync_directory
from roost.log.producer_state import ProducerStateManager
from roost.log.segment import INT32_MAX, Segment
from roost.log.transactions import AbortedIndex
from roost.wire.kafka.records import BatchHeader, parse_header


class CleanableLog(Protocol):
    """What a pass needs of a partition log (PartitionLog is one): its segments and bookkeeping,
    and a way to put a cleaned segment in place of the ones it replaces."""

    directory: Path
    config: LogConfig
    segments: list[Segment]
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    producer_state: ProducerStateManager
    aborted_index: AbortedIndex
    cleaner_checkpoint: CleanerCheckpoint

    def replace_segments(self, old: list[Segment], new: Segment | None) -> None: ...

logger = logging.getLogger("roost.log.cleaner")

CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
CLEANED_SUFFIX = ".cleaned" + TEMP_SUFFIX  # opening a log deletes leftovers (they end in .tmp)
DEFAULT_MAX_KEYS = 1_000_000  # a few hundred bytes each with small keys: ~100-200 MB at most
DEFAULT_DELETE_RETENTION_MS = 86_400_000  # Kafka's delete.retention.ms
DEFAULT_MIN_CLEANABLE_RATIO = 0.5  # Kafka's min.cleanable.dirty.ratio
_WRITE_BUFFER_BYTES = 1 << 20


# ---------------------------------------------------------------------------------------------
# results and the checkpoint


@dataclass
class CleanStats:
    """What one `clean` call did. `cleaned` is False when it decided the log was not worth it
    (`reason` says why); the byte and record counts then stay 0."""

    cleaned: bool = False
    reason: str = ""
    dirty_ratio: float = 0.0
    clean_point: int = 0  # first offset not cleaned, after the call
    map_end: int = 0  # the offset map covered [previous clean point, map_end)
    map_full: bool = False  # max_keys stopped the map before the high watermark
    keys: int = 0
    segments_before: int = 0  # cleanable segments rewritten, and what replaced them
    segments_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    bytes_read: int = 0  # every byte read: the map's scan plus the rewritten segments
    records_removed: int = 0
    tombstones_removed: int = 0
    markers_removed: int = 0  # control batches (their records count in records_removed too)
    batches_rewritten: int = 0
    duration_s: float = 0.0


@dataclass(frozen=True)
class CleanerCheckpoint:
    """Where the last complete pass left the log (persisted in CLEANER_CHECKPOINT_FILE)."""

    clean_point: int = 0
    # Timestamp of the oldest tombstone a pass kept only because it was too young (and that a
    # later pass may drop): once it is old enough a pass runs whatever the dirty ratio.
    oldest_tombstone_ms: int = NEVER

    def to_bytes(self) -> bytes:
        return b"%d %d\n" % (self.clean_point, self.oldest_tombstone_ms)

    @classmethod
    def from_bytes(cls, data: bytes) -> CleanerCheckpoint | None:
        """None for anything but two integers and a newline (a torn write never parses)."""
        match = _CHECKPOINT_FORMAT.fullmatch(data)
        if match is None:
            return None
        clean_point, oldest = int(match[1]), int(match[2])
        return cls(clean_point, oldest) if clean_point >= 0 else None


_CHECKPOINT_FORMAT = re.compile(rb"(-?[0-9]+) (-?[0-9]+)\n")


def read_cleaner_checkpoint(directory: Path) -> CleanerCheckpoint:
    """The checkpoint in `directory`; the start (nothing cleaned) when missing or unreadable."""
    try:
        data = (directory / CLEANER_CHECKPOINT_FILE).read_bytes()
    except FileNotFoundError:
        return CleanerCheckpoint()
    checkpoint = CleanerCheckpoint.from_bytes(data)
    if checkpoint is None:
        logger.warning("ignoring unreadable %s in %s", CLEANER_CHECKPOINT_FILE, directory)
        return CleanerCheckpoint()
    return checkpoint


def write_cleaner_checkpoint(directory: Path, checkpoint: CleanerCheckpoint) -> None:
    # Durable: a pass may drop a tombstone below the clean point only because an earlier,
    # complete pass removed the older records of its key. A lost checkpoint is harmless (the
    # next pass recleans more); a too high one is impossible, it is written after the pass.
    atomic_write(directory / CLEANER_CHECKPOINT_FILE, checkpoint.to_bytes())


# ---------------------------------------------------------------------------------------------
# the shell: deciding, scanning, writing and swapping segments


@dataclass
class _Plan:
    limit: int  # offsets at or above are neither mapped nor cleaned (high watermark, first unstable)
    cleanable: list[Segment]
    clean_point: int
    dirty_ratio: float
    reason: str  # why a pass runs, or why not


@dataclass(frozen=True)
class CompactionLags:
    """min.compaction.lag.ms and max.compaction.lag.ms (Kafka's defaults: 0 and never)."""

    min_ms: int = 0
    max_ms: int = NEVER


NO_LAGS = CompactionLags()


def _plan(
    log: CleanableLog, now_ms: int, delete_retention_ms: int, min_ratio: float, hw: int | None,
    lags: CompactionLags = NO_LAGS,
) -> _Plan:
    checkpoint = log.cleaner_checkpoint
    limit = log.log_end_offset if hw is None else min(hw, log.log_end_offset)
    # Never past an undecided transaction: whether its records stay is not known yet.
    limit = log.producer_state.last_stable_offset(limit)
    cleanable = []
    for segment, after in zip(log.segments, log.segments[1:], strict=False):
        # A prefix of the log: the first segment past the limit or younger than the minimum lag
        # ends it (Kafka's firstUncleanableDirtyOffset).
        young = lags.min_ms > 0 and segment.size > 0 and now_ms - segment.largest_timestamp() < lags.min_ms
        if after.base_offset > limit or young:
            break
        cleanable.append(segment)
    clean_point = min(max(checkpoint.clean_point, log.log_start_offset), log.log_end_offset)
    total = sum(segment.size for segment in cleanable)
    # Cleanable segments not wholly cleaned yet: their bytes make the dirty ratio, and their
    # oldest first batch is what max.compaction.lag.ms measures.
    dirty_segments = [
        segment for segment, after in zip(cleanable, log.segments[1:], strict=False) if after.base_offset > clean_point
    ]
    dirty = sum(segment.size for segment in dirty_segments)
    oldest_dirty_ms = min(
        (s.first_batch_timestamp for s in dirty_segments if s.first_batch_timestamp >= 0), default=NEVER
    )
    ratio = dirty / total if total else 0.0
    plan = _Plan(limit, cleanable, clean_point, ratio, "")
    if not total:
        plan.reason = (
            "nothing cleanable (no data below the active segment, the high watermark and the first "
            "unstable offset)"
        )
    elif dirty and ratio >= min_ratio:
        plan.reason = f"dirty ratio {ratio:.2f} >= {min_ratio}"
    elif dirty and oldest_dirty_ms < now_ms - lags.max_ms:
        plan.reason = f"dirty records older than max.compaction.lag.ms {lags.max_ms}"
    elif (
        checkpoint.oldest_tombstone_ms != NEVER
        and now_ms - checkpoint.oldest_tombstone_ms > delete_retention_ms
    ):
        plan.reason = "tombstones past delete.retention.ms"
    else:
        plan.cleanable = []
        plan.reason = f"dirty ratio {ratio:.2f} below {min_ratio}"
    if not total:
        plan.cleanable = []
    return plan


def clean_log(
    log: CleanableLog,
    now_ms: int,
    *,
    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS,
    min_cleanable_ratio: float = DEFAULT_MIN_CLEANABLE_RATIO,
    high_watermark: int | None = None,
    max_keys: int = DEFAULT_MAX_KEYS,
    lags: CompactionLags = NO_LAGS,
) -> CleanStats:
    """One compaction pass over `log` if it is worth it; see the module docstring."""
    assert delete_retention_ms >= 0 and 0.0 <= min_cleanable_ratio <= 1.0 and max_keys >= 1
    assert lags.min_ms >= 0 and lags.max_ms >= 1
    started = time.monotonic()
    plan = _plan(log, now_ms, delete_retention_ms, min_cleanable_ratio, high_watermark, lags)
    stats = CleanStats(reason=plan.reason, dirty_ratio=plan.dirty_ratio, clean_point=plan.clean_point)
    if not plan.cleanable:
        return stats

    aborted = AbortedRanges(log.aborted_index.collect(log.log_start_offset, plan.limit))
    offset_map = _build_offset_map(log, plan, max_keys, aborted, stats)
    stats.map_end, stats.map_full, stats.keys = offset_map.end, offset_map.full, len(offset_map)
    # Rewrite every cleanable segment the map reaches; records past the map's end are kept.
    targets = [s for s in plan.cleanable if s.base_offset < offset_map.end]
    assert targets, "the map covers at least one batch past the clean point"
    boundary = log.segments[log.segments.index(targets[-1]) + 1].base_offset
    new_clean_point = min(offset_map.end, boundary)

    # A record may go only once the records that replace it are durable (a power cut must not
    # lose the newer value after the older one was removed): fsync what the map read.
    for segment in log.segments:
        if segment.size and segment.next_offset > log.recovery_point and segment.base_offset < offset_map.end:
            os.fsync(segment.log_fd)
    # Likewise the index entries that make records aborted (recovery would put them back from
    # the markers, but only while the records before a marker are still there).
    log.aborted_index.sync()

    record_filter = RecordFilter(
        offset_map,
        tombstone_horizon_ms=now_ms - delete_retention_ms,
        # The last data batch (markers carry no sequence): what a rebuild takes the sequence from.
        producer_last_offsets={
            pid: entry.batches[-1].last_offset for pid, entry in log.producer_state.producers.items() if entry.batches
        },
        max_kept_keys=max_keys,
        aborted=aborted,
    )
    stats.segments_before = len(targets)
    stats.bytes_before = sum(s.size for s in targets)
    for group in _groups(targets, log.config.segment_bytes):
        after = _clean_group(log, group, record_filter, now_ms, stats)
        stats.segments_after += len(after)
        stats.bytes_after += sum(s.size for s in after)

    # The emptied aborted transactions' entries go only now that their records are durably gone
    # (a crash before this leaves entries whose records are gone: harmless, the next pass drops them).
    log.aborted_index.drop(record_filter.emptied_aborts)

    oldest = record_filter.oldest_kept_tombstone_ms if record_filter.tombstone_drops_allowed else NEVER
    checkpoint = CleanerCheckpoint(new_clean_point, oldest)
    write_cleaner_checkpoint(log.directory, checkpoint)
    log.cleaner_checkpoint = checkpoint
    stats.cleaned = True
    stats.markers_removed = record_filter.markers_removed
    stats.clean_point = new_clean_point
    stats.duration_s = time.monotonic() - started
    if record_filter.unreadable_batches:
        logger.warning(
            "cleaner kept %d unreadable batches of %s as they are (and no tombstone went)",
            record_filter.unreadable_batches,
            log.directory,
        )
    logger.info(
        "cleaned %s (%s): %d segments of %d bytes -> %d of %d; %d records and %d tombstones removed; "
        "%d keys mapped up to offset %d%s; clean point %d; %.3fs",
        log.directory,
        plan.reason,
        stats.segments_before,
        stats.bytes_before,
        stats.segments_after,
        stats.bytes_after,
        stats.records_removed,
        stats.tombstones_removed,
        stats.keys,
        stats.map_end,
        " (map full)" if stats.map_full else "",
        new_clean_point,
        stats.duration_s,
    )
    return stats


def _build_offset_map(
    log: CleanableLog, plan: _Plan, max_keys: int, aborted: AbortedRanges, stats: CleanStats
) -> OffsetMap:
    """Scan from the clean point up to the limit (the active segment too), key by key."""
    offset_map = OffsetMap(plan.clean_point, max_keys)
    for segment in log.segments:
        if segment.next_offset <= plan.clean_point or not segment.size:
            continue
        start = segment.offset_index.lookup(plan.clean_point) if plan.clean_point > segment.base_offset else 0
        for _position, header, raw in segment.iter_batches(start):
            if header.last_offset < plan.clean_point:
                continue
            if header.last_offset >= plan.limit:
                return offset_map
            if not offset_map.room_for(header):
                offset_map.full = True
                return offset_map
            stats.bytes_read += header.size
            mapped = not header.is_control and not is_aborted(header, aborted)
            offset_map.add(header, summarize_batch(header, raw) if mapped else None)
    return offset_map


def _groups(segments: list[Segment], segment_bytes: int) -> Iterator[list[Segment]]:
    """Consecutive segments that fit one segment together (in bytes and in int32 offsets)."""
    max_bytes = min(segment_bytes, INT32_MAX)
    group: list[Segment] = []
    size = 0
    for segment in segments:
        fits = (
            size + segment.size <= max_bytes
            and segment.next_offset - 1 - (group[0].base_offset if group else segment.base_offset)
            <= INT32_MAX
        )
        if group and not fits:
            yield group
            group, size = [], 0
        group.append(segment)
        size += segment.size
    if group:
        yield group


class _SegmentWriter:
    """Appends batches to a new segment through a buffer (one pwrite per megabyte or so)."""

    def __init__(self, segment: Segment, index_interval_bytes: int) -> None:
        self.segment = segment
        self.index_interval_bytes = index_interval_bytes
        self.buffer = bytearray()
        self.batches: list[tuple[int, BatchHeader]] = []

    def add(self, data: bytes | memoryview, header: BatchHeader) -> None:
        self.batches.append((len(self.buffer), header))
        self.buffer += data
        if len(self.buffer) >= _WRITE_BUFFER_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.batches:
            self.segment.append(memoryview(self.buffer), self.batches, self.index_interval_bytes)
        self.buffer = bytearray()
        self.batches = []


def _clean_group(
    log: CleanableLog, group: list[Segment], record_filter: RecordFilter, now_ms: int, stats: CleanStats
) -> list[Segment]:
    """Write the cleaned form of `group` and swap it in; returns the segments now in its place
    (the group itself when nothing changed, none when nothing was left)."""
    base = group[0].base_offset
    new = Segment.create_temp(log.directory, base, now_ms, CLEANED_SUFFIX)
    temp_paths = new.paths  # only these names are ever removed here, whatever fails
    swapped = False
    try:
        writer = _SegmentWriter(new, log.config.index_interval_bytes)
        changed = len(group) > 1
        for segment in group:
            fallback_timestamp = segment.largest_timestamp()
            for _position, header, raw in segment.iter_batches():
                stats.bytes_read += header.size
                verdict = record_filter.filter(header, raw, fallback_timestamp)
                if verdict.keep:
                    writer.add(raw, header)
                    continue
                changed = True
                stats.records_removed += verdict.removed
                stats.tombstones_removed += verdict.tombstones_removed
                stats.batches_rewritten += 1
                for batch in verdict.batches:
                    writer.add(batch, parse_header(batch))
        writer.flush()
        if not changed:
            return group
        assert new.size <= sum(s.size for s in group), "a cleaned segment never grows"
        if new.size == 0 and group[0] is not log.segments[0]:
            # Nothing left: the segments just go (the first segment of the log stays, even
            # empty, since it holds the log start). A crash midway leaves some old segments,
            # which is harmless: they hold only what this pass would have removed.
            for segment in group:
                segment.delete_files()
            fsync_directory(log.directory)
            log.replace_segments(group, None)
            return []
        new.on_roll()  # the final time-index entry, as for any segment that is not active
        new.fsync()
        _swap(log, group, new)
        swapped = True
        return [new]
    finally:
        if not swapped:
            new.close()
            for path in temp_paths:
                path.unlink(missing_ok=True)


def _swap(log: CleanableLog, group: list[Segment], new: Segment) -> None:
    """Replace the files of `group` with the fsynced temp segment `new`, crash-safely:

    1. delete the first segment's index files (durably): from here until step 2 ends, a crash
       leaves a log file (old or new, each whole) without indexes, which opening rebuilds;
    2. rename the new log, then its indexes, over the first segment's names;
    3. delete the group's other segments. A crash before that leaves them next to the new
       segment; opening the log deletes every segment that starts below the end of the one
       before it (the new one holds all they had left to keep).

    The old files' inodes live on for any read views of them until those are gone."""
    for path in (group[0].index_path, group[0].time_index_path):
        path.unlink(missing_ok=True)
    fsync_directory(log.directory)
    new.promote()
    fsync_directory(log.directory)
    for segment in group[1:]:
        segment.delete_files()
    fsync_directory(log.directory)
    log.replace_segments(group, new)
