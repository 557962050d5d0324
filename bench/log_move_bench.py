"""Moving a partition between log directories (AlterReplicaLogDirs), in process, on local disk.

For logs of a few sizes: how long the copy takes (wall and CPU) unthrottled, and how long the swap
holds the event loop (the pause appends see: both logs closed with their fsyncs, two renames, the
new log opened). Prints figures with their conditions; never asserts.

    .venv/bin/python bench/log_move_bench.py
"""

from __future__ import annotations

import asyncio
import os
import platform
import tempfile
import time
from pathlib import Path

from roost.broker.replica.log_move import LogMove
from roost.broker.replica.partition import Partition
from roost.broker.replica.state import PartitionState
from roost.clock import now_ms
from roost.config import BrokerConfig
from roost.log import PartitionLog
from roost.storage.directories import LogDirs
from roost.storage.log_manager import log_config_from_topic
from roost.wire.kafka.records import build_batch

RECORD_BYTES = 1000
RECORDS_PER_BATCH = 100


class TimedMove(LogMove):
    swap_seconds = 0.0

    def _swap(self) -> Path:
        started = time.perf_counter()
        doomed = super()._swap()
        self.swap_seconds = time.perf_counter() - started
        return doomed


def run(megabytes: int, root: Path) -> tuple[float, float, float]:
    config = BrokerConfig.build([])
    dirs = LogDirs([root / "a", root / "b"], broker_id=0)
    source = dirs.place("bench", 0)
    target = next(d for d in dirs.dirs if d is not source)
    configs = config.topic_defaults()
    plog = PartitionLog.open(source.logs / "bench-0", log_config_from_topic(configs), now_ms)
    value = os.urandom(RECORD_BYTES)
    batch = build_batch([(None, value)] * RECORDS_PER_BATCH, timestamp_ms=now_ms())
    for _ in range(megabytes * (1 << 20) // len(batch)):
        plog.append(bytearray(batch), leader_epoch=0)  # as a leader stamps them
    plog.flush()
    partition = Partition("bench", 0, plog, configs, PartitionState.sole_replica(0, plog.log_end_offset))
    move = TimedMove(partition, target, dirs, 2**63 - 1, lambda _log, error: None)
    wall, cpu = time.perf_counter(), time.process_time()
    asyncio.run(move.run())
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert dirs.dir_of("bench", 0) is target and partition.log.log_end_offset == plog.log_end_offset
    partition.log.close()
    return wall, cpu, move.swap_seconds


def main() -> None:
    print(f"log move between two directories on one local disk ({platform.system()}, {os.cpu_count()} cores, "
          f"python {platform.python_version()}); batches of {RECORDS_PER_BATCH} x {RECORD_BYTES} B records, "
          "unthrottled, no appends meanwhile")
    print(f"{'log size':>9} {'copy wall s':>12} {'copy cpu s':>11} {'MB/s':>7} {'swap pause ms':>14}")
    for megabytes in (10, 100, 400):
        with tempfile.TemporaryDirectory(dir=os.environ.get("ROOST_BENCH_DIR")) as scratch:
            wall, cpu, swap = run(megabytes, Path(scratch))
        print(f"{megabytes:>6} MB {wall:>12.2f} {cpu:>11.2f} {megabytes / wall:>7.0f} {swap * 1000:>14.1f}")


if __name__ == "__main__":
    main()
