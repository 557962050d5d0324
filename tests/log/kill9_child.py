"""Child process for the kill -9 test: append batches while another thread fsyncs (as the
broker's group commit does), and print each offset once it is durable.

Usage: python -m tests.log.kill9_child <partition directory> <max seconds>
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from roost.log import LogConfig, PartitionLog
from roost.wire.kafka.records import build_batch

MAX_BATCHES = 1_000_000


def _fsync_all(fds: list[int]) -> None:
    for fd in fds:
        os.fsync(fd)


def main() -> None:
    directory = Path(sys.argv[1])
    deadline = time.monotonic() + float(sys.argv[2])
    config = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=1024, recovery_checkpoint_interval_ms=0)
    log = PartitionLog.open(directory, config, lambda: int(time.time() * 1000))
    print(f"ready {log.log_end_offset}", flush=True)
    with ThreadPoolExecutor(max_workers=1) as flusher:
        pending = None
        for n in range(MAX_BATCHES):
            if time.monotonic() > deadline:
                break
            count = 1 + n % 7
            first = log.log_end_offset
            values = [b"offset=%d;" % (first + i) + b"x" * (n % 300) for i in range(count)]
            log.append(bytearray(build_batch([(None, v) for v in values], timestamp_ms=n)))
            if pending is None:
                handle = log.flush_handle()
                pending = (flusher.submit(_fsync_all, handle[0]), handle[1])
            elif pending[0].done():
                pending[0].result()
                log.mark_flushed(pending[1])
                print(f"durable {pending[1] - 1}", flush=True)
                pending = None


if __name__ == "__main__":
    main()
