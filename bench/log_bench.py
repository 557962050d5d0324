"""Partition log throughput: appends of 16 KiB batches and sequential 1 MiB reads.

Prints MB/s and CPU seconds; never asserts. Usage:
    python bench/log_bench.py [--megabytes 256] [--fsync-every 0] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from roost.log import LogConfig, PartitionLog
from roost.wire.kafka.records import build_batch, validate_batches

BATCH_BYTES = 16 * 1024
READ_BYTES = 1 << 20


def _sample_batch() -> bytes:
    record = os.urandom(64).hex().encode() * 4  # 512 bytes, like a small JSON event
    count = BATCH_BYTES // (len(record) + 12)
    return build_batch([(b"user-%d" % i, record) for i in range(count)], timestamp_ms=int(time.time() * 1000))


def _measure(label: str, started_wall: float, started_cpu: float, nbytes: int) -> None:
    wall = time.perf_counter() - started_wall
    cpu = time.process_time() - started_cpu
    print(f"{label:<34} {nbytes / wall / 1e6:8.1f} MB/s   wall {wall:6.2f} s   cpu {cpu:6.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--megabytes", type=int, default=256)
    parser.add_argument("--fsync-every", type=int, default=0, help="fsync after every N appends (0: never)")
    parser.add_argument("--dir", default=None, help="where to put the log (default: a temp dir)")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="roost-log-bench-", dir=args.dir))
    try:
        config = LogConfig(segment_bytes=64 << 20)
        log = PartitionLog.open(root / "bench-0", config, lambda: int(time.time() * 1000))
        sample = _sample_batch()
        appends = args.megabytes * (1 << 20) // len(sample)
        print(f"{appends} appends of {len(sample)}-byte batches into {root}")

        wall, cpu = time.perf_counter(), time.process_time()
        for n in range(appends):
            buf = bytearray(sample)  # a produce request's bytes, as the broker would hold them
            log.append(buf, validate_batches(buf))
            if args.fsync_every and (n + 1) % args.fsync_every == 0:
                fds, end = log.flush_handle()
                for fd in fds:
                    os.fsync(fd)
                log.mark_flushed(end)
        _measure("append (validate+assign+write)", wall, cpu, appends * len(sample))

        wall, cpu = time.perf_counter(), time.process_time()
        log.flush()
        _measure("final fsync", wall, cpu, appends * len(sample))

        wall, cpu = time.perf_counter(), time.process_time()
        offset, total, reads = 0, 0, 0
        while offset < log.log_end_offset:
            result = log.read(offset, READ_BYTES)
            total += result.size
            offset = result.next_offset
            reads += 1
        _measure(f"read ({reads} x {READ_BYTES >> 10} KiB, page cache)", wall, cpu, total)

        log.close()
        wall, cpu = time.perf_counter(), time.process_time()
        log = PartitionLog.open(root / "bench-0", config, lambda: int(time.time() * 1000))
        _measure("reopen after clean shutdown", wall, cpu, log.size_bytes)
        log._release_fds()  # as a crash would leave it
        os.remove(root / "bench-0" / "recovery-point-offset-checkpoint")
        wall, cpu = time.perf_counter(), time.process_time()
        log = PartitionLog.open(root / "bench-0", config, lambda: int(time.time() * 1000))
        _measure("full crash recovery (CRC scan)", wall, cpu, log.size_bytes)
        log.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
