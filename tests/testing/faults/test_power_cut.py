"""Power cuts: a real process writes, fsyncs some of it and is killed; the tracker (strace) then
truncates each file to what an fsync covered: exactly the unsynced appends are gone."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from roost.testing.faults.durability import SyncTracker

WRITER = '''
import os, sys, time
time.sleep(0.5)  # strace attaches meanwhile
d = sys.argv[1]
segment = os.open(d + "/segment.log", os.O_RDWR | os.O_CREAT, 0o644)     # the broker's way: pwrite
os.pwrite(segment, b"a" * 100, 0); os.fsync(segment); os.pwrite(segment, b"b" * 50, 100)
raft = os.open(d + "/raft.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)  # the Raft log's: append
os.write(raft, b"x" * 10); os.fdatasync(raft); os.write(raft, b"y" * 7)
never = os.open(d + "/never.log", os.O_WRONLY | os.O_CREAT, 0o644)
os.write(never, b"z" * 5)
print("written", flush=True)
time.sleep(60)
'''


@pytest.mark.skipif(shutil.which("strace") is None, reason="referee missing: strace (Debian's strace package)")
def test_a_power_cut_loses_exactly_the_writes_no_fsync_covered(tmp_path: Path) -> None:
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        tracker = SyncTracker(writer.pid, tmp_path).start()
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "written"
    finally:
        writer.kill()
        writer.wait(10)
    tracker.stop()
    changed = tracker.cut()
    assert (tmp_path / "segment.log").read_bytes() == b"a" * 100
    assert (tmp_path / "raft.log").read_bytes() == b"x" * 10
    assert (tmp_path / "never.log").read_bytes() == b""
    assert changed[str(tmp_path / "segment.log")] == (150, 100)


def test_strace_lines_split_across_threads_are_followed(tmp_path: Path) -> None:
    tracker = SyncTracker(0, tmp_path)
    p = str(tmp_path / "f.log")
    for line in (f'7 pwrite64(3<{p}>, ""..., 40, 0) = 40',
                 f"8 fsync(3<{p}> <unfinished ...>",  # the entry is what counts
                 f'7 pwrite64(3<{p}>, ""..., 10, 40 <unfinished ...>',
                 "8 <... fsync resumed>) = 0",
                 "7 <... pwrite64 resumed>) = 10",
                 f'7 write(4<{tmp_path}/other>, ""..., 3) = 3',
                 '7 write(5<socket:[1234]>, ""..., 99) = 99'):
        tracker.feed(line, str(tmp_path))
    state = tracker.files[p]
    assert state.durable == 40 and state.pending_min == 40 and state.written_end == 50
    assert tracker.files[f"{tmp_path}/other"].appended_since_sync == 3
    assert not any("socket" in name for name in tracker.files)
