"""Durable raft state on disk: the log with hard state, and snapshots.

Files in the member's directory:
- `raft.log`: an append-only sequence of records `length:u32 | crc32c:u32 | payload`. A payload is an
  ENTRY, a HARDSTATE (the last one wins) or a BASE (the log restarts after (index, term), written at
  the head of a compacted log). An ENTRY whose index is not past the end replaces the suffix from
  there (a new leader overwrote it), so a conflict never rewrites bytes in place.
- `snapshot-<index>.snap`: the state machine at `index`, written to a temporary file, fsynced and
  renamed. The newest valid one is used; older ones are removed after a newer one is durable.

Recovery reads records until the first one that is torn or fails its CRC and cuts the file there:
a crash mid-write loses at most what was never fsynced (and so never acknowledged).

All methods are blocking and run one at a time (on the event loop, or on one worker thread: see
`roost.raft.node`); one fsync covers everything a Ready carried (group commit).
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from roost.raft.core import Ready
from roost.raft.messages import Entry, EntryKind, HardState, Membership, Snapshot

log = logging.getLogger(__name__)

LOG_NAME = "raft.log"
_RECORD_HEAD = struct.Struct(">II")
_ENTRY = struct.Struct(">BBQQ")  # record type, kind, term, index; data follows
_HARD_STATE = struct.Struct(">BQQQ")  # record type, term, vote, commit
_BASE = struct.Struct(">BQQ")  # record type, index, term
_SNAP_HEAD = struct.Struct(">4sBQQQ")  # magic, version, index, term, length
_CRC = struct.Struct(">I")
SNAP_MAGIC = b"RSNP"
MAX_RECORD = 1 << 30

REC_ENTRY = 1
REC_HARD_STATE = 2
REC_BASE = 3
_KINDS = {k.value: k for k in EntryKind}


class StorageError(Exception):
    """The directory holds something we cannot recover from safely."""


@dataclass
class Recovered:
    hard_state: HardState = field(default_factory=HardState)
    snapshot: Snapshot | None = None
    entries: list[Entry] = field(default_factory=list)
    truncated_bytes: int = 0  # a torn tail cut on recovery


def _record(payload: bytes) -> bytes:
    return _RECORD_HEAD.pack(len(payload), crc32c.crc32c(payload)) + payload


def encode_entry(entry: Entry) -> bytes:
    return _record(_ENTRY.pack(REC_ENTRY, entry.kind.value, entry.term, entry.index) + entry.data)


def encode_hard_state(hs: HardState) -> bytes:
    return _record(_HARD_STATE.pack(REC_HARD_STATE, hs.term, hs.vote, hs.commit))


def encode_base(index: int, term: int) -> bytes:
    return _record(_BASE.pack(REC_BASE, index, term))


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class DiskStorage:
    def __init__(self, directory: str | os.PathLike[str], fsync: bool = True) -> None:
        self.directory = Path(directory)
        self.fsync = fsync
        self.directory.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = None
        self._hard_state = HardState()
        self.fsyncs = 0  # for benchmarks: how many fsyncs group commit needed

    @property
    def log_path(self) -> Path:
        return self.directory / LOG_NAME

    # --- recovery ----------------------------------------------------------------------------

    def load(self) -> Recovered:
        """Read snapshot and log; cut a torn tail; open the log for appending."""
        assert self._fd is None, "load() once, before any save()"
        out = Recovered()
        out.snapshot = self._load_newest_snapshot()
        offset, offset_term, entries, hard_state, good_bytes, size = self._replay_log()
        if good_bytes < size:
            out.truncated_bytes = size - good_bytes
            log.warning("raft log %s: cut a torn or corrupt tail of %d bytes at offset %d",
                        self.log_path, size - good_bytes, good_bytes)
            with self.log_path.open("r+b") as handle:
                handle.truncate(good_bytes)
                os.fsync(handle.fileno())
        snap = out.snapshot
        if snap is not None:
            # Keep the log after the snapshot only if it continues the snapshot's history.
            if snap.index < offset:
                raise StorageError(f"log starts after {offset} but the newest snapshot is at {snap.index}")
            term_at_snap = offset_term if snap.index == offset else next(
                (e.term for e in entries if e.index == snap.index), None)
            entries = [e for e in entries if e.index > snap.index] if term_at_snap == snap.term else []
        elif offset > 0:
            raise StorageError(f"log was compacted to {offset} but no snapshot is readable")
        out.entries = entries
        base = snap.index if snap else 0
        last = entries[-1].index if entries else base
        out.hard_state = HardState(hard_state.term, hard_state.vote, min(max(hard_state.commit, base), last))
        self._hard_state = out.hard_state
        self._fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return out

    def _replay_log(self) -> tuple[int, int, list[Entry], HardState, int, int]:
        if not self.log_path.exists():
            return 0, 0, [], HardState(), 0, 0
        data = self.log_path.read_bytes()
        view = memoryview(data)
        offset = offset_term = 0
        entries: list[Entry] = []
        hard_state = HardState()
        pos = 0
        while pos + _RECORD_HEAD.size <= len(data):
            length, crc = _RECORD_HEAD.unpack_from(view, pos)
            start = pos + _RECORD_HEAD.size
            if length == 0 or length > MAX_RECORD or start + length > len(data):
                break
            payload = view[start:start + length]
            if crc32c.crc32c(payload) != crc:
                break
            kind = payload[0]
            if kind == REC_ENTRY and length >= _ENTRY.size:
                _, kind_value, term, index = _ENTRY.unpack_from(payload, 0)
                entry_kind = _KINDS.get(kind_value)
                if entry_kind is None:
                    break
                first = offset + 1 if not entries else entries[0].index
                if index <= offset or index > first + len(entries):
                    raise StorageError(f"raft log entry {index} does not follow ({offset}, {first + len(entries) - 1}]")
                del entries[index - first:]
                entries.append(Entry(term, index, bytes(payload[_ENTRY.size:]), entry_kind))
            elif kind == REC_HARD_STATE and length == _HARD_STATE.size:
                _, term, vote, commit = _HARD_STATE.unpack_from(payload, 0)
                hard_state = HardState(term, vote, commit)
            elif kind == REC_BASE and length == _BASE.size:
                _, offset, offset_term = _BASE.unpack_from(payload, 0)
                entries = []
            else:
                break
            pos = start + length
        return offset, offset_term, entries, hard_state, pos, len(data)

    def _snapshot_paths(self) -> list[tuple[int, Path]]:
        found = []
        for path in self.directory.glob("snapshot-*.snap"):
            try:
                found.append((int(path.stem.split("-", 1)[1]), path))
            except ValueError:
                continue
        return sorted(found, reverse=True)

    def _load_newest_snapshot(self) -> Snapshot | None:
        for index, path in self._snapshot_paths():
            snap = self._read_snapshot(path)
            if snap is not None and snap.index == index:
                return snap
            log.warning("raft snapshot %s is unreadable; trying an older one", path)
        return None

    @staticmethod
    def _read_snapshot(path: Path) -> Snapshot | None:
        data = path.read_bytes()
        if len(data) < _SNAP_HEAD.size + _CRC.size:
            return None
        magic, version, index, term, length = _SNAP_HEAD.unpack_from(data, 0)
        # Version 1: the state machine only; 2: then a u32-length-prefixed configuration.
        if magic != SNAP_MAGIC or version not in (1, 2) or _SNAP_HEAD.size + length + _CRC.size > len(data):
            return None
        (crc,) = _CRC.unpack_from(data, len(data) - _CRC.size)
        if crc32c.crc32c(data[:-_CRC.size]) != crc:
            return None
        end = _SNAP_HEAD.size + length
        membership = None
        if version == 1:
            if end + _CRC.size != len(data):
                return None
        else:
            if end + 4 + _CRC.size > len(data):
                return None
            (size,) = struct.unpack_from(">I", data, end)
            if end + 4 + size + _CRC.size != len(data):
                return None
            try:
                membership = Membership.decode(data[end + 4:end + 4 + size])
            except (ValueError, AssertionError):
                return None
        return Snapshot(index, term, data[_SNAP_HEAD.size:end], membership)

    # --- writing -----------------------------------------------------------------------------

    def save(self, rd: Ready) -> None:
        """Make a Ready durable: snapshot first, then entries, then hard state; one fsync."""
        assert self._fd is not None, "load() first"
        hard_state = rd.hard_state or self._hard_state
        if rd.snapshot is not None:
            self.save_snapshot(rd.snapshot)
            # The snapshot replaces the whole log (the leader found ours behind or divergent).
            self._rewrite_log(rd.snapshot.index, rd.snapshot.term, [], hard_state)
        parts = [encode_entry(e) for e in rd.entries]
        if rd.hard_state is not None:
            parts.append(encode_hard_state(rd.hard_state))
            self._hard_state = rd.hard_state
        if parts:
            self._write(b"".join(parts))
        if rd.must_sync:
            self._sync()

    def _write(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    def _sync(self) -> None:
        assert self._fd is not None
        if self.fsync:
            os.fdatasync(self._fd)
            self.fsyncs += 1

    def save_snapshot(self, snap: Snapshot) -> None:
        path = self.directory / f"snapshot-{snap.index:020d}.snap"
        temp = path.with_suffix(".tmp")
        version = 1 if snap.membership is None else 2
        head = _SNAP_HEAD.pack(SNAP_MAGIC, version, snap.index, snap.term, len(snap.data))
        tail = b""
        if snap.membership is not None:
            membership = snap.membership.encode()
            tail = struct.pack(">I", len(membership)) + membership
        crc = crc32c.crc32c(tail, crc32c.crc32c(snap.data, crc32c.crc32c(head)))
        with temp.open("wb") as handle:
            handle.write(head)
            handle.write(snap.data)
            handle.write(tail)
            handle.write(_CRC.pack(crc))
            handle.flush()
            if self.fsync:
                os.fsync(handle.fileno())
        os.replace(temp, path)
        if self.fsync:
            _fsync_directory(self.directory)
        for index, old in self._snapshot_paths():
            if index < snap.index:
                old.unlink(missing_ok=True)

    def compact(self, snap: Snapshot, base_index: int, base_term: int, entries: list[Entry]) -> None:
        """After taking `snap`: make it durable, then rewrite the log to keep only `entries` (those
        after `base_index`, which is <= snap.index so that lagging followers can still catch up
        from the log)."""
        assert base_index <= snap.index
        assert not entries or entries[0].index == base_index + 1
        self.save_snapshot(snap)
        self._rewrite_log(base_index, base_term, entries, self._hard_state)

    def _rewrite_log(self, base_index: int, base_term: int, entries: list[Entry], hs: HardState) -> None:
        temp = self.directory / (LOG_NAME + ".tmp")
        with temp.open("wb") as handle:
            handle.write(encode_base(base_index, base_term))
            for entry in entries:
                handle.write(encode_entry(entry))
            handle.write(encode_hard_state(hs))
            handle.flush()
            if self.fsync:
                os.fsync(handle.fileno())
        if self._fd is not None:
            os.close(self._fd)
        os.replace(temp, self.log_path)
        if self.fsync:
            _fsync_directory(self.directory)
        self._fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND, 0o644)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
