"""Partition log throughput: appends of 16 KiB batches and sequential 1 MiB reads, and the
cost of compaction (PartitionLog.clean) on a log shaped like __consumer_offsets.

Prints MB/s and CPU seconds; never asserts. Usage:
    python bench/log_bench.py [--megabytes 256] [--fsync-every 0] [--dir /tmp]
                              [--compaction-megabytes 32] [--compaction-keys 10000]
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
    parser.add_argument("--compaction-megabytes", type=int, default=32, help="0: skip the compaction bench")
    parser.add_argument("--compaction-keys", type=int, default=10_000)
    args = parser.parse_args()
    if args.compaction_megabytes:
        _bench_compaction(args.compaction_megabytes, args.compaction_keys, args.dir)
    if not args.megabytes:
        return

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


def _bench_compaction(megabytes: int, keys: int, directory: str | None) -> None:
    """Offset commits: batches of 10 records keyed like (group, topic, partition) over `keys`
    keys, ~100 bytes each; a first clean of the whole log, a no-op call, then a pass after
    another quarter of the data arrived (it recopies the clean part, as Kafka's cleaner does)."""
    root = Path(tempfile.mkdtemp(prefix="roost-clean-bench-", dir=directory))
    now = int(time.time() * 1000)
    try:
        config = LogConfig(segment_bytes=8 << 20)
        log = PartitionLog.open(root / "__consumer_offsets-0", config, lambda: now)
        value = os.urandom(24)

        def fill(nbytes: int, start: int) -> int:
            written, n = 0, start
            while written < nbytes:
                records = [
                    (b"group-%05d/orders/%03d" % divmod((n + i) % keys, 100), value) for i in range(10)
                ]
                batch = bytearray(build_batch(records, timestamp_ms=now))
                log.append(batch, validate_batches(batch))
                written += len(batch)
                n += 10
            return n

        n = fill(megabytes << 20, 0)
        log.roll_if_due()
        log._roll(log.log_end_offset, now)  # all of it cleanable
        size = log.size_bytes
        print(f"compaction: {size / 1e6:.1f} MB in {log.segment_count} segments, {keys} keys")
        wall, cpu = time.perf_counter(), time.process_time()
        stats = log.clean(now)
        _measure("clean (first pass, all dirty)", wall, cpu, stats.bytes_read)
        print(
            f"{'':<34} {1000 * (time.perf_counter() - wall) / (size / 1e6):8.1f} ms per MB of log; "
            f"{stats.bytes_before / 1e6:.1f} MB -> {stats.bytes_after / 1e6:.2f} MB, "
            f"{stats.records_removed} records removed"
        )
        wall = time.perf_counter()
        again = log.clean(now)
        print(
            f"{'clean again (nothing dirty)':<34} {1e6 * (time.perf_counter() - wall):8.1f} us ({again.reason})"
        )
        fill(size // 4, n)
        log._roll(log.log_end_offset, now)
        wall, cpu = time.perf_counter(), time.process_time()
        stats = log.clean(now, min_cleanable_ratio=0.0)
        _measure("clean (a quarter more, dirty)", wall, cpu, stats.bytes_read)
        log.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
