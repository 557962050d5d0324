"""kill -9 safety: every offset a child process reported durable is readable after a restart."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from roost.log import LogConfig, PartitionLog
from roost.wire.kafka.records import iter_records, validate_batches

REPO = Path(__file__).resolve().parents[2]


def _run_child_and_kill(directory: Path, wanted: int) -> list[int]:
    """Start the child, collect `wanted` durable offsets (bounded by time), kill -9 it."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.log.kill9_child", str(directory), "120"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    durable: list[int] = []
    enough = threading.Event()

    def pump() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            if line.startswith("durable "):
                durable.append(int(line.split()[1]))
                if len(durable) >= wanted:
                    enough.set()
        enough.set()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        enough.wait(timeout=120)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        reader.join(timeout=30)
    assert child.returncode == -signal.SIGKILL, "the child ended before it was killed"
    return list(durable)


def test_everything_reported_durable_survives_kill_9(tmp_path: Path) -> None:
    directory = tmp_path / "kill-0"
    last_durable = -1
    for round_ in range(3):  # crash, recover, crash again on top of a recovered log
        durable = _run_child_and_kill(directory, wanted=150)
        assert len(durable) >= 150, f"round {round_}: only {len(durable)} flushes reported"
        assert durable == sorted(durable) and durable[0] > last_durable
        last_durable = durable[-1]

        log = PartitionLog.open(
            directory, LogConfig(segment_bytes=64 * 1024), lambda: int(time.time() * 1000)
        )
        try:
            assert log.log_end_offset > last_durable
            result = log.read(0, 1 << 30)
            offsets = []
            for buffer in result.buffers:
                validate_batches(buffer)  # whole, CRC-clean batches only: no torn tail is served
                for record in iter_records(buffer):
                    assert record.value is not None
                    assert record.value.startswith(b"offset=%d;" % record.offset)
                    offsets.append(record.offset)
            assert offsets == list(range(log.log_end_offset))
        finally:
            log.close()
