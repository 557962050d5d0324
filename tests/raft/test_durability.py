"""kill -9 a writing member: every acknowledged proposal is there after the restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def writer(directory: Path, write: bool) -> subprocess.Popen[str]:
    args = [sys.executable, "-m", "tests.raft.solo_writer", str(directory)] + (["--write"] if write else [])
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, text=True, env=env)


def recovered(directory: Path) -> list[tuple[int, str]]:
    proc = writer(directory, write=False)
    try:
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0 and "ready" in out.splitlines()
    return [(int(i), d) for _, i, d in (line.split() for line in out.splitlines() if line.startswith("applied "))]


@pytest.mark.parametrize("acks_before_kill", [50, 400])
def test_acknowledged_writes_survive_kill_9(tmp_path: Path, acks_before_kill: int) -> None:
    acked: list[tuple[int, str]] = []
    for round_ in range(2):  # kill, restart and write more, kill again
        proc = writer(tmp_path, write=True)
        wanted = acks_before_kill * (round_ + 1)
        try:
            assert proc.stdout is not None
            for line in proc.stdout:  # bounded: we stop reading after acks_before_kill acks
                if line.startswith("acked "):
                    _, index, data = line.split()
                    acked.append((int(index), data))
                    if len(acked) >= wanted:
                        break
            # The kill must hit a writer that is still writing, after it acknowledged what we
            # check below: a writer that died early, or acknowledged nothing, proves nothing.
            assert len(acked) == wanted, f"round {round_}: the writer stopped after {len(acked)} acks"
            assert proc.poll() is None, f"round {round_}: the writer exited before the kill"
            proc.send_signal(signal.SIGKILL)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(30)
        assert proc.returncode == -signal.SIGKILL, f"round {round_}: exit status {proc.returncode}"
    assert len(acked) == 2 * acks_before_kill
    state = recovered(tmp_path)
    assert set(acked) <= set(state), "an acknowledged write was lost"
    indices = [i for i, _ in state]
    assert indices == sorted(set(indices)), "applied out of order or twice"
