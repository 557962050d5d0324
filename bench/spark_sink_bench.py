"""The Spark sink's two exactly-once modes, one write task at a time, against one local broker:

  exactly-once   (the default) named records, a `begin` marker per topic before the first record,
                 acks=all idempotent producer (roost.spark.exactly_once)
  transactional  (`transactional=true`) one Kafka transaction per task: init_transactions (the
                 fence), the committed-progress lookup, the records, send_offsets_to_transaction,
                 commit (roost.spark.sink_txn)

Each round writes one micro-batch task of N rows in each mode (order alternated per round) by
calling the sink's `write_task` directly, as a Spark task would after Spark hands it Arrow
batches: Spark's own part (planning, the Arrow hand-over) is the same for both modes and is left
out. Prints figures with their conditions and never asserts. Usage:

    python bench/spark_sink_bench.py [--rows 50000] [--value-bytes 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import pyarrow as pa
from confluent_kafka.admin import AdminClient, NewTopic

from roost.cli.servers.demo_command import ChildNode
from roost.spark.exactly_once import query_commit_log
from roost.spark.options import parse_writer_options
from roost.spark.sink import TaskTarget, write_task
from roost.spark.sink_io import SinkClient

ARROW_ROWS = 10_000  # rows per Arrow batch, Spark's spark.sql.execution.arrow.maxRecordsPerBatch default


def frames(rows: int, value_bytes: int) -> list[pa.RecordBatch]:
    pad = b"x" * max(0, value_bytes - 8)
    out = []
    for start in range(0, rows, ARROW_ROWS):
        count = min(ARROW_ROWS, rows - start)
        out.append(pa.RecordBatch.from_arrays(
            [pa.array([b"k%d" % (n % 1000) for n in range(start, start + count)], pa.binary()),
             pa.array([b"%08d" % n + pad for n in range(start, start + count)], pa.binary())], names=["key", "value"]))
    return out


def run_once(bootstrap: str, mode: str, batch: int, data: list[pa.RecordBatch]) -> tuple[float, float]:
    """(wall seconds, this process's CPU seconds) of one task writing `data`."""
    options = parse_writer_options({"kafka.bootstrap.servers": bootstrap, "topic": f"bench-{mode}",
                                    "transactional": str(mode == "transactional").lower()})
    log_topic = query_commit_log(f"bench-{mode}")
    client = SinkClient(options.kafka)
    try:
        client.ensure_log_topic(log_topic)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        markers = None if mode == "transactional" else client.markers_at_tail(log_topic, batch)
        message = write_task(options, TaskTarget(f"bench-{mode}", batch, 0, 0, log_topic), iter(data), markers, client)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    finally:
        client.close()
    assert message.written == sum(f.num_rows for f in data), message
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    data = frames(args.rows, args.value_bytes)
    modes = ["exactly-once", "transactional"]
    with tempfile.TemporaryDirectory(prefix="spark-sink-bench-") as scratch:
        node = ChildNode(Path(scratch) / "data")
        try:
            assert node.address is not None
            bootstrap = node.address
            admin = AdminClient({"bootstrap.servers": bootstrap})
            for mode in modes:
                admin.create_topics([NewTopic(f"bench-{mode}", 4, 1)])[f"bench-{mode}"].result(30)
            run_once(bootstrap, "transactional", 0, data[:1])  # warm-up: __transaction_state, the coordinator
            run_once(bootstrap, "exactly-once", 0, data[:1])
            results: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
            for round_ in range(args.repeat):
                order = modes if round_ % 2 == 0 else modes[::-1]
                for mode in order:
                    results[mode].append(run_once(bootstrap, mode, round_ + 1, data))
        finally:
            node.stop()
    print(f"# Spark sink write path, {datetime.now().astimezone():%Y-%m-%d %H:%M %Z}")
    print(f"{platform.node()}, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, one local broker "
          f"(roost up), one task writing {args.rows} rows of {args.value_bytes}-byte values to 4 partitions, "
          f"{args.repeat} rounds (mode order alternated); a shared, noisy machine")
    medians = {}
    for mode in modes:
        rates = sorted(args.rows / wall for wall, _ in results[mode])
        medians[mode] = statistics.median(rates)
        cpu = statistics.median(c for _, c in results[mode])
        print(f"{mode:14} median {medians[mode]:9.0f} rows/s  worst {rates[0]:9.0f} rows/s  "
              f"task CPU {cpu / args.rows * 1e6:.1f} us/row (median)")
    print(f"transactional / exactly-once: {medians['transactional'] / medians['exactly-once']:.2f} (medians)")


if __name__ == "__main__":
    main()
