"""Failing storage for real processes: the LD_PRELOAD shim in faultfs.c, built here with the
machine's C compiler, with a switch the test flips while the process runs.

Why a shim: it needs no root, no FUSE, no device mapper, and it touches only the files of one
directory of one process (a broker's second log directory, say), so the rest of the machine, and
the rest of the process, keep working. It interposes on libc's fsync, fdatasync and write family,
which is where CPython's os.fsync and os.write land. (A failing mmap'd page cannot be injected
this way; Roost's index files are written through mmap, so their faults are not covered here.)

    fs = FaultFs.build(tmp_path / "faultfs", prefix=second_disk)
    proc = start_roost([...], env=fs.env())
    fs.fail_fsync()                 # from now on fsync of files under `prefix` returns EIO
    ...
    fs.heal()
    fs.drop_unsynced()              # after a kill -9: cut what a power cut would have dropped
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support import referees

SOURCE = Path(__file__).with_name("faultfs.c")
CACHE = Path.home() / ".cache" / "roost" / "faultfs"


def shim_path() -> Path:
    """The compiled shim (built once per source version); skips as a missing referee without cc."""
    source = SOURCE.read_bytes()
    target = CACHE / f"faultfs-{hashlib.sha256(source).hexdigest()[:16]}.so"
    if target.exists():
        return target
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        referees.skip("a C compiler (cc or gcc) to build the fsync-failure shim; apt-get install gcc")
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".tmp")
    subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-Wall", "-o", str(partial), str(SOURCE), "-ldl"],
                   check=True, timeout=120, capture_output=True)
    partial.rename(target)
    return target


@dataclass(frozen=True)
class SyncRecord:
    ok: bool
    size: int
    path: str


@dataclass
class FaultFs:
    control: Path  # a directory of flag files the shim checks on each call
    prefix: Path  # files under it fail
    log: Path  # the shim's record of fsyncs under the prefix
    shim: Path

    @classmethod
    def build(cls, workdir: Path, prefix: Path) -> FaultFs:
        workdir.mkdir(parents=True, exist_ok=True)
        control = workdir / "control"
        control.mkdir(exist_ok=True)
        prefix.mkdir(parents=True, exist_ok=True)
        return cls(control, prefix.resolve(), workdir / "syncs.log", shim_path())

    def env(self) -> dict[str, str]:
        return {"LD_PRELOAD": str(self.shim), "FAULTFS_CONTROL": str(self.control),
                "FAULTFS_PREFIX": str(self.prefix), "FAULTFS_LOG": str(self.log)}

    def fail_fsync(self) -> None:
        (self.control / "fsync").touch()

    def fail_writes(self) -> None:
        (self.control / "write").touch()

    def heal(self) -> None:
        for flag in ("fsync", "write"):
            (self.control / flag).unlink(missing_ok=True)

    def records(self) -> Iterator[SyncRecord]:
        if not self.log.exists():
            return
        for line in self.log.read_text().splitlines():
            verdict, size, path = line.split(" ", 2)
            yield SyncRecord(verdict == "ok", int(size), path)

    def failed_files(self) -> set[str]:
        return {record.path for record in self.records() if not record.ok}

    def drop_unsynced(self, suffixes: tuple[str, ...] = ("",)) -> dict[str, tuple[int, int]]:
        """Cut every file whose fsync failed back to the size its last successful fsync before
        the first failure covered (0 if none): the writeback that failed is lost, as a power cut
        after it loses it on Linux. Only files whose names end with one of `suffixes` are cut
        (segments, say: an mmap'd index the shim never saw written is rebuilt from them anyway).
        Call only when no process has the files open (after kill -9). Returns {path: (size before, size after)} of the files cut."""
        durable: dict[str, int] = {}
        failed: set[str] = set()
        for record in self.records():
            if record.ok and record.path not in failed:
                durable[record.path] = record.size
            elif not record.ok:
                failed.add(record.path)
        cut: dict[str, tuple[int, int]] = {}
        for path in sorted(failed):
            file = Path(path)
            if not path.endswith(suffixes) or not file.exists():
                continue  # deleted since (a rolled-away temp file, say)
            before = file.stat().st_size
            after = min(before, durable.get(path, 0))
            if after < before:
                with file.open("r+b") as handle:
                    handle.truncate(after)
            cut[path] = (before, after)
        return cut


@contextlib.contextmanager
def small_disk(mountpoint: Path, size_mib: int) -> Iterator[Path]:
    """A tmpfs of `size_mib` MiB mounted at `mountpoint` for the block (root only: skips as a
    missing referee otherwise), unmounted afterwards whatever happens. A real filesystem that
    really fills: ENOSPC comes from the kernel, on every write path, mmap'd pages included."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        referees.skip("root and mount(8), to mount a small tmpfs for the full-disk tests")
    mountpoint.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m,mode=0755", "tmpfs", str(mountpoint)],
                   check=True, timeout=30, capture_output=True)
    try:
        yield mountpoint
    finally:
        for _ in range(20):  # bounded: a process that still has files open there is being stopped
            if subprocess.run(["umount", str(mountpoint)], timeout=30, capture_output=True).returncode == 0:
                break
            time.sleep(0.5)
        else:
            subprocess.run(["umount", "-l", str(mountpoint)], timeout=30, capture_output=True)


def fill(directory: Path, leave_bytes: int, name: str = "filler") -> Path:
    """Write a file into `directory` until its filesystem has about `leave_bytes` free."""
    path = directory / name
    chunk = b"\0" * (1 << 20)
    with path.open("wb") as handle:
        for _ in range(100_000):  # bounded: 100 GiB
            free = shutil.disk_usage(directory).free
            if free <= leave_bytes:
                break
            try:
                handle.write(chunk[: min(len(chunk), free - leave_bytes)])
                handle.flush()
            except OSError:
                break
    return path
