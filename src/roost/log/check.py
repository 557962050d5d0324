"""Offline verification of a partition's files, as Kafka's `kafka-dump-log --verify`
(DumpLogSegments) does for segments, and more: `roost check-logs` runs it over log directories
without a broker. It reads and never writes.

What each file kind is checked for (what can be checked: Kafka's text checkpoints carry no CRC,
so a flipped digit that still parses is found only where it contradicts the segments):

- `<base>.log` segment: every batch's framing (length, magic, header fields) and CRC-32C, offsets
  increasing from the file's base offset, the file ending on a batch boundary.
- `<base>.index`: whole 8-byte entries, relative offsets and positions increasing, each position a
  batch boundary of its segment whose batch holds offsets at or past the entry's offset.
- `<base>.timeindex`: whole 12-byte entries, timestamps and offsets increasing, offsets inside the
  segment.
- `<offset>.snapshot` producer state: its version and CRC-32C (the snapshot's own).
- `leader-epoch-checkpoint`: Kafka's format; epochs and start offsets increasing, none past the
  log end.
- `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`: one integer and a newline,
  not past the log end.
"""

from __future__ import annotations

import itertools
import re
import struct
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path

from roost.log.leader_epochs import EpochEntry, parse_checkpoint
from roost.log.partition_state import LOG_START_FILE, RECOVERY_POINT_FILE
from roost.log.producer_state import SNAPSHOT_SUFFIX, ProducerStateManager
from roost.wire.kafka.records import InvalidRecordBatch, batch_crc, check_header, parse_header

EPOCH_FILE = "leader-epoch-checkpoint"
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_CHECKPOINT = re.compile(rb"^(\d{1,19})\n$")


@dataclass(frozen=True)
class Damage:
    path: Path
    position: int  # the byte in the file where it starts (-1: the file as a whole)
    what: str

    def __str__(self) -> str:
        where = f" at position {self.position}" if self.position >= 0 else ""
        return f"{self.path}{where}: {self.what}"


@dataclass
class PartitionReport:
    directory: Path
    damages: list[Damage] = field(default_factory=list)
    batches: int = 0
    log_end_offset: int = 0
    files: int = 0


@dataclass
class _Segment:
    base: int
    size: int
    next_offset: int
    boundaries: dict[int, int]  # position -> last offset of the batch there
    epochs: list[tuple[int, int]]  # (base offset, partition leader epoch) of each batch


def _base_of(path: Path) -> int | None:
    stem = path.name.split(".", 1)[0]
    return int(stem) if stem.isdigit() and len(stem) == 20 else None


def check_segment(path: Path, damages: list[Damage]) -> _Segment:
    data = memoryview(path.read_bytes())
    base = _base_of(path) or 0
    boundaries: dict[int, int] = {}
    epochs: list[tuple[int, int]] = []
    position, expected = 0, base
    while position < len(data):
        try:
            header = parse_header(data, position)
            check_header(header, len(data) - position)
        except InvalidRecordBatch as error:
            damages.append(Damage(path, position, f"record batch near offset {expected}: {error}"))
            break
        if batch_crc(data, position, header.size) != header.crc:
            damages.append(Damage(path, position, f"record batch at offset {header.base_offset}: CRC-32C does "
                                                  f"not match (stored {header.crc:#010x})"))
            break
        if header.base_offset < expected:
            damages.append(Damage(path, position, f"record batch at offset {header.base_offset} does not follow "
                                                  f"offset {expected - 1}"))
            break
        boundaries[position] = header.last_offset
        epochs.append((header.base_offset, header.partition_leader_epoch))
        expected = header.last_offset + 1
        position += header.size
    return _Segment(base, len(data), expected, boundaries, epochs)


def check_offset_index(path: Path, segment: _Segment | None, damages: list[Damage]) -> None:
    data = path.read_bytes()
    if len(data) % _OFFSET_ENTRY.size:
        damages.append(Damage(path, len(data) - len(data) % _OFFSET_ENTRY.size, "a torn entry at the end"))
    previous = (-1, -1)
    for n, (relative, position) in enumerate(_OFFSET_ENTRY.iter_unpack(data[: len(data) - len(data) % 8])):
        at = n * _OFFSET_ENTRY.size
        if relative <= previous[0] or position <= previous[1]:
            damages.append(Damage(path, at, f"entry ({relative}, {position}) does not increase"))
            return
        if segment is not None:
            last = segment.boundaries.get(position)
            if last is None:
                damages.append(Damage(path, at, f"entry for offset {segment.base + relative} points at position "
                                                f"{position}, not a batch boundary of its segment"))
                return
            if last < segment.base + relative:
                damages.append(Damage(path, at, f"entry for offset {segment.base + relative} points at a batch "
                                                f"ending at offset {last}"))
                return
        previous = (relative, position)


def check_time_index(path: Path, segment: _Segment | None, damages: list[Damage]) -> None:
    data = path.read_bytes()
    if len(data) % _TIME_ENTRY.size:
        damages.append(Damage(path, len(data) - len(data) % _TIME_ENTRY.size, "a torn entry at the end"))
    previous = (-(1 << 63), -1)
    whole = data[: len(data) - len(data) % _TIME_ENTRY.size]
    for n, (timestamp, relative) in enumerate(_TIME_ENTRY.iter_unpack(whole)):
        at = n * _TIME_ENTRY.size
        if timestamp <= previous[0] or relative < previous[1] or relative < 0:
            damages.append(Damage(path, at, f"entry ({timestamp}, {relative}) does not increase"))
            return
        if segment is not None and segment.base + relative >= max(segment.next_offset, segment.base + 1):
            damages.append(Damage(path, at, f"entry for offset {segment.base + relative} is past the segment's "
                                            f"end {segment.next_offset}"))
            return
        previous = (timestamp, relative)


def _check_int_checkpoint(path: Path, log_end: int, damages: list[Damage]) -> None:
    match = _CHECKPOINT.match(path.read_bytes())
    if match is None:
        damages.append(Damage(path, -1, "not one integer and a newline"))
    elif int(match.group(1)) > log_end:
        damages.append(Damage(path, -1, f"says {int(match.group(1))}, past the log end {log_end}"))


def _check_epochs_against_batches(path: Path, entries: list[EpochEntry], segments: list[_Segment],
                                  damages: list[Damage]) -> None:
    """Each batch's leader epoch is the one the checkpoint gives for its offset (a text file with
    no CRC: a changed digit shows only here)."""
    starts = [entry.start_offset for entry in entries]
    for segment in segments:
        for base_offset, epoch in segment.epochs:
            slot = bisect_right(starts, base_offset) - 1
            expected = entries[slot].epoch if slot >= 0 else None
            if expected != epoch:
                damages.append(Damage(path, -1, f"gives epoch {expected} for offset {base_offset}, whose batch "
                                                f"was written in epoch {epoch}"))
                return


def check_partition(directory: Path) -> PartitionReport:
    """Every file of one partition's directory; the damages found, in file order."""
    report = PartitionReport(directory)
    damages = report.damages
    segments: dict[int, _Segment] = {}
    files = sorted(p for p in directory.iterdir() if p.is_file())
    report.files = len(files)
    for path in files:
        if path.suffix == ".log" and _base_of(path) is not None:
            segment = check_segment(path, damages)
            segments[segment.base] = segment
            report.batches += len(segment.boundaries)
    ordered = [segments[b] for b in sorted(segments)]
    for before, after in itertools.pairwise(ordered):
        if before.next_offset > after.base:
            damages.append(Damage(directory / f"{after.base:020d}.log", -1,
                                  f"starts at offset {after.base}, inside the segment before (which ends at "
                                  f"{before.next_offset - 1})"))
        elif before.next_offset < after.base and before.boundaries:
            # Compaction leaves gaps inside segments, never between a segment's last batch and
            # the next one's base: the next segment is named after the offset the roll saw.
            damages.append(Damage(directory / f"{before.base:020d}.log", before.size,
                                  f"ends at offset {before.next_offset - 1} but the next segment starts at "
                                  f"{after.base}: its tail is missing"))
    report.log_end_offset = ordered[-1].next_offset if ordered else 0
    for path in files:
        base = _base_of(path)
        try:
            if path.suffix == ".index" and base is not None:
                check_offset_index(path, segments.get(base), damages)
            elif path.suffix == ".timeindex" and base is not None:
                check_time_index(path, segments.get(base), damages)
            elif path.name.endswith(SNAPSHOT_SUFFIX):
                try:
                    ProducerStateManager.from_bytes(path.read_bytes())
                except ValueError as error:
                    damages.append(Damage(path, -1, str(error)))
            elif path.name == EPOCH_FILE:
                try:
                    entries = parse_checkpoint(path.read_text())
                except (ValueError, UnicodeDecodeError) as error:
                    damages.append(Damage(path, -1, str(error)))
                else:
                    if entries and entries[-1].start_offset > report.log_end_offset:
                        damages.append(Damage(path, -1, f"epoch {entries[-1].epoch} starts at "
                                                        f"{entries[-1].start_offset}, past the log end "
                                                        f"{report.log_end_offset}"))
                    else:
                        _check_epochs_against_batches(path, entries, ordered, damages)
            elif path.name in (RECOVERY_POINT_FILE, LOG_START_FILE):
                _check_int_checkpoint(path, report.log_end_offset, damages)
        except OSError as error:
            damages.append(Damage(path, -1, f"cannot be read: {error}"))
    return report


def has_segments(directory: Path) -> bool:
    return any(p.suffix == ".log" and _base_of(p) is not None for p in directory.iterdir())

