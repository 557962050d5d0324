"""Power cuts: lose every byte a process wrote but did not fsync.

A process killed with SIGKILL loses nothing it wrote: its writes sit in the kernel's page cache,
which survives it. A power cut loses everything the disk had not been told to keep. To show what
a machine would find after one, `SyncTracker` watches a node with strace (write, pwrite64, writev,
fsync, fdatasync on file descriptors under the node's data directory) and keeps, per file, what
is durable: an fsync or fdatasync *entry* makes every write that completed before it durable
(conservative: a write racing the fsync counts as lost). `cut()` then (after the process is
killed) truncates each file to its durable length — or, with `torn=True`, to a random point
between the durable length and the current size, as a disk that wrote part of its cache would.

Why this is faithful for Roost: the broker's segments and the Raft log are append-only (pwrite at
the end, O_APPEND write), and files replaced as a whole (snapshots, checkpoints, metadata) are
written to a temporary name, fsynced and renamed, so "truncate to the length at the last fsync"
is what a power cut leaves of them — LazyFS's "lose unsynced writes" without a FUSE layer in the
data path. What it does not model: a rename or a new file whose directory was not fsynced vanishing,
and overwrites inside the durable part coming back old (only appends are undone); both are said
in docs/fault-testing.md.
"""

from __future__ import annotations

import random
import re
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

WRITES = {"write", "pwrite64", "writev", "pwritev", "pwritev2"}
SYNCS = {"fsync", "fdatasync"}
_LINE = re.compile(r"^(?P<tid>\d+)\s+(?P<rest>.*)$")
_CALL = re.compile(r"^(?P<name>\w+)\((?P<fd>\d+)<(?P<path>[^>]*)>(?P<args>.*)$")
_RESUMED = re.compile(r"^<\.\.\. (?P<name>\w+) resumed>(?P<args>.*)$")
_RESULT = re.compile(r"\)\s+= (?P<n>-?\d+)")
_OFFSET = re.compile(r",\s*(?P<offset>\d+)\)\s+= -?\d+")


@dataclass
class FileState:
    durable: int = 0  # for files written at offsets: every byte below is durable
    durable_known: bool = False
    appended_since_sync: int = 0  # bytes write()n (offset unknown, O_APPEND) since the last sync
    written_end: int = 0  # highest end of a pwrite seen
    pending_min: int | None = None  # lowest offset pwritten since the last sync


@dataclass
class SyncTracker:
    """strace attached to `pid` (and its threads), following writes and syncs under `root`."""

    pid: int
    root: Path
    files: dict[str, FileState] = field(default_factory=dict)
    _process: subprocess.Popen[str] | None = None
    _reader: threading.Thread | None = None
    _pending: dict[int, tuple[str, str, str]] = field(default_factory=dict)  # tid -> (name, path, args)

    def start(self) -> SyncTracker:
        self._process = subprocess.Popen(
            ["strace", "-f", "-qq", "-y", "-s", "0", "-e", "trace=" + ",".join(sorted(WRITES | SYNCS)),
             "-e", "signal=none", "-p", str(self.pid), "-o", "/dev/stdout"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, errors="replace")
        self._reader = threading.Thread(target=self._read, name=f"strace-{self.pid}", daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        prefix = str(self.root.resolve())
        for line in self._process.stdout:
            self.feed(line.rstrip("\n"), prefix)

    def feed(self, line: str, prefix: str) -> None:
        match = _LINE.match(line)
        if not match:
            return
        tid, rest = int(match["tid"]), match["rest"]
        resumed = _RESUMED.match(rest)
        if resumed:
            started = self._pending.pop(tid, None)
            if started is None:
                return
            name, path, args = started
            rest_args = args + resumed["args"]
        else:
            call = _CALL.match(rest)
            if not call:
                return
            name, path, rest_args = call["name"], call["path"], call["args"]
            if not path.startswith(prefix):
                return
            if rest.endswith("<unfinished ...>"):
                if name in SYNCS:
                    self._synced(path)  # the entry is what counts for a sync
                else:
                    self._pending[tid] = (name, path, rest_args.removesuffix("<unfinished ...>").rstrip())
                return
            if name in SYNCS:
                self._synced(path)
                return
        if name in SYNCS:
            return
        result = _RESULT.search(rest_args)
        if not result or int(result["n"]) <= 0:
            return
        written = int(result["n"])
        state = self.files.setdefault(path, FileState())
        if name.startswith("pwrite"):
            offset_match = _OFFSET.search(rest_args)
            if not offset_match:
                return
            offset = int(offset_match["offset"])
            state.written_end = max(state.written_end, offset + written)
            state.pending_min = offset if state.pending_min is None else min(state.pending_min, offset)
        else:
            state.appended_since_sync += written

    def _synced(self, path: str) -> None:
        state = self.files.setdefault(path, FileState())
        state.durable = max(state.durable, state.written_end)
        state.durable_known = True
        state.appended_since_sync = 0
        state.pending_min = None

    def stop(self, timeout: float = 10.0) -> None:
        """After the process died (strace then ends by itself), read what strace still had to say."""
        if self._process is not None:
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout)
        if self._reader is not None:
            self._reader.join(timeout)

    def cut(self, rng: random.Random | None = None, torn: bool = False) -> dict[str, tuple[int, int]]:
        """Truncate every file to what a power cut leaves of it; returns path -> (size, new size)."""
        changed: dict[str, tuple[int, int]] = {}
        for path, state in self.files.items():
            file = Path(path)
            try:
                size = file.stat().st_size
            except FileNotFoundError:
                continue
            keep = size
            if state.appended_since_sync:
                keep = max(0, size - state.appended_since_sync)
            elif state.pending_min is not None and state.pending_min >= state.durable:
                keep = min(size, state.durable)  # appended at offsets since the last sync: gone
            if keep < size:
                if torn and rng is not None:
                    keep = rng.randint(keep, size)
                with file.open("r+b") as handle:
                    handle.truncate(keep)
                changed[path] = (size, keep)
        return changed
