"""Spark through the roost source, beside Spark's built-in file source over the same records.

Two pipelines, each an availableNow streaming query over the same N posts into a no-op sink:
  no-op          roost source                     | JSON-lines files (text source)
  window counts  roost source, hashtags per window | JSON files (json source), the same counts
The roost source runs with each of its consumers (`consumer` option): Roost's own (`roost`, whole
batches decoded into Arrow) and librdkafka's (`librdkafka`, the earlier path). Every round runs
every (pipeline, variant) once, in an order rotated per round, so a noisy shared machine favours
none; the ratio roost/files is taken within each round. Prints figures with their conditions and
never asserts. Usage:

    python bench/spark_bench.py [--records 300000] [--partitions 4] [--repeat 3] [--pure-python]

Per variant: records/s (median and worst of the rounds), the CPU seconds of Spark's processes
(JVM, Python workers, the driver) and of the broker per record, and where a query's time goes:
`before first trigger` is Spark starting the query (for a Python source, a new Python process
with PySpark imported per query), `trigger` Spark's triggerExecution (planning, reading, the
sink), the rest Spark finishing the query.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from roost.cli.servers.demo_command import ChildNode

START_MS = 1_767_225_600_000
TAGS = [f"tag{i}" for i in range(1, 61)]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def make_posts(count: int, seed: int = 1) -> list[tuple[str, str, int]]:
    rng = random.Random(seed)
    weights = [1 / r ** 1.1 for r in range(1, len(TAGS) + 1)]
    posts = []
    now = START_MS
    for n in range(count):
        now += rng.randint(1, 40)
        tags = " ".join(f"#{t}" for t in rng.choices(TAGS, weights, k=rng.randint(0, 3)))
        posts.append((f"user{n % 500}", f"hello {tags}", now))
    return posts


def publish(bootstrap: str, topic: str, partitions: int, posts: list[tuple[str, str, int]]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "enable.idempotence": True})
    for user, text, ts in posts:
        while True:
            try:
                producer.produce(topic, json.dumps({"user": user, "text": text}).encode(), user.encode(), timestamp=ts)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(300) == 0


def write_files(folder: Path, posts: list[tuple[str, str, int]], files: int) -> None:
    folder.mkdir(parents=True)
    per_file = -(-len(posts) // files)
    for index in range(files):
        chunk = posts[index * per_file:(index + 1) * per_file]
        with open(folder / f"part-{index:03d}.json", "w") as out:
            for user, text, ts in chunk:
                out.write(json.dumps({"user": user, "text": text, "ts": ts}) + "\n")


def window_counts(frame: Any, event_time: str) -> Any:
    from pyspark.sql import functions as F

    tags = frame.withWatermark(event_time, "2 minutes").select(
        event_time, F.explode(F.regexp_extract_all(F.col("text"), F.lit(r"#(\w+)"), 1)).alias("tag"))
    return tags.groupBy(F.window(event_time, "10 minutes", "5 minutes"), "tag").count()


# ------------------------------------------------------------------ CPU of a process tree

def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, user+system CPU seconds of the process and of its reaped children)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(fields[1]), sum(int(value) for value in fields[11:15]) / CLOCK_TICKS


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds used so far by `root` and every process below it (reaped ones included)."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            found = _stat(int(entry))
            if found is not None:
                stats[int(entry)] = found
    children: dict[int, list[int]] = {}
    for pid, (parent, _cpu) in stats.items():
        children.setdefault(parent, []).append(pid)
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        if pid in stats:
            total += stats[pid][1]
        stack.extend(children.get(pid, ()))
    return total


def own_cpu_seconds() -> float:
    """This process alone (the Spark driver's Python side), without its children."""
    times = os.times()
    return times.user + times.system


# ------------------------------------------------------------------ runs

@dataclass
class Run:
    rate: float  # records/s
    seconds: float
    spark_cpu: float
    broker_cpu: float
    before_trigger: float
    trigger: float


@dataclass
class Variant:
    pipeline: str
    name: str
    build: Callable[[], Any]
    is_files: bool


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3, help="rounds; medians and worst runs are printed")
    parser.add_argument("--pure-python", action="store_true",
                        help="run Roost's pure-Python decoder (ROOST_PURE_PYTHON=1), not the compiled one")
    args = parser.parse_args()
    if args.pure_python:
        os.environ["ROOST_PURE_PYTHON"] = "1"  # before Spark starts: its Python workers inherit it
    from pyspark import SparkContext
    from pyspark import __version__ as pyspark_version
    from pyspark.sql import functions as F

    from roost.spark.session import local_session
    from roost.wire.kafka.record_columns import ACCELERATED

    load_before = os.getloadavg()
    began = time.strftime("%Y-%m-%d %H:%M")
    with tempfile.TemporaryDirectory(prefix="spark-bench-") as scratch_text:
        scratch = Path(scratch_text)
        node = ChildNode(scratch / "data")
        try:
            assert node.address is not None
            bootstrap = node.address
            posts = make_posts(args.records)
            publish(bootstrap, "bench-posts", args.partitions, posts)
            write_files(scratch / "files", posts, files=args.partitions * 2)
            spark = local_session("roost-spark-bench", extra={"spark.sql.streaming.noDataMicroBatches.enabled": "false"})
            jvm = SparkContext._gateway.proc.pid  # type: ignore[union-attr]
            runs = iter(range(10_000))

            def checkpoint() -> str:
                return str(scratch / f"checkpoint-{next(runs)}")

            def roost_frame(consumer: str) -> Any:
                return (spark.readStream.format("roost").option("kafka.bootstrap.servers", bootstrap)
                        .option("subscribe", "bench-posts").option("startingOffsets", "earliest")
                        .option("consumer", consumer).load())

            def roost_windows(consumer: str) -> Any:
                parsed = roost_frame(consumer).select(
                    "timestamp", F.from_json(F.col("value").cast("string"), "user string, text string").alias("p"))
                return window_counts(parsed.select("timestamp", "p.text"), "timestamp")

            def files_windows() -> Any:
                frame = spark.readStream.schema("user string, text string, ts long").json(str(scratch / "files"))
                return window_counts(frame.select(F.timestamp_millis("ts").alias("timestamp"), "text"), "timestamp")

            variants = [
                Variant("no-op", "roost consumer", lambda: roost_frame("roost"), False),
                Variant("no-op", "librdkafka", lambda: roost_frame("librdkafka"), False),
                Variant("no-op", "files (text)", lambda: spark.readStream.format("text").load(str(scratch / "files")),
                        True),
                Variant("window counts", "roost consumer", lambda: roost_windows("roost"), False),
                Variant("window counts", "librdkafka", lambda: roost_windows("librdkafka"), False),
                Variant("window counts", "files (json)", files_windows, True),
            ]

            def run(variant: Variant) -> Run:
                query = (variant.build().writeStream.format("noop").outputMode("append")
                         .option("checkpointLocation", checkpoint()).trigger(availableNow=True).start())
                spark0, driver0, broker0 = tree_cpu_seconds(jvm), own_cpu_seconds(), tree_cpu_seconds(node.popen.pid)
                wall0, started = time.perf_counter(), time.time()
                assert query.awaitTermination(1800), "query did not finish"
                seconds = time.perf_counter() - wall0
                spark_cpu = tree_cpu_seconds(jvm) - spark0 + own_cpu_seconds() - driver0
                broker_cpu = tree_cpu_seconds(node.popen.pid) - broker0
                if query.exception() is not None:
                    raise RuntimeError(str(query.exception()))
                progress = query.recentProgress
                rows = sum(p["numInputRows"] for p in progress)
                assert rows == args.records, f"read {rows} records, expected {args.records}"
                trigger = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000
                first = min(datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp() for p in progress)
                before = max(0.0, first - started)
                return Run(args.records / seconds, seconds, spark_cpu, broker_cpu, before, trigger)

            for variant in variants:  # warm-up: the first queries of a session pay for JIT and workers
                run(variant)
            results: dict[tuple[str, str], list[Run]] = {(v.pipeline, v.name): [] for v in variants}
            ratios: dict[tuple[str, str], list[float]] = {}
            for round_index in range(args.repeat):
                shift = round_index % len(variants)
                order = variants[shift:] + variants[:shift]
                this_round: dict[tuple[str, str], Run] = {}
                for variant in order:
                    this_round[(variant.pipeline, variant.name)] = run(variant)
                    results[(variant.pipeline, variant.name)].append(this_round[(variant.pipeline, variant.name)])
                for variant in variants:
                    if variant.is_files:
                        continue
                    files = next(v for v in variants if v.is_files and v.pipeline == variant.pipeline)
                    ratios.setdefault((variant.pipeline, variant.name), []).append(
                        this_round[(variant.pipeline, variant.name)].rate / this_round[(files.pipeline, files.name)].rate)
                print(f"round {round_index + 1}: " + ", ".join(
                    f"{p}/{n} {r.rate:,.0f}/s" for (p, n), r in this_round.items()), flush=True)
            spark.stop()
        finally:
            node.stop()
    load_after = os.getloadavg()
    sample = posts[:1000]
    mean_bytes = sum(len(json.dumps({"user": user, "text": text})) for user, text, _ in sample) / len(sample)
    print()
    print(f"Spark {pyspark_version} local[2], Python {platform.python_version()}, {os.cpu_count()} CPUs, {began}; "
          f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after")
    print(f"{args.records:,} posts (JSON values of {mean_bytes:.0f} B on average, 8 B keys), {args.partitions} "
          f"partitions; {args.repeat} rounds after a warm-up round; roost decoder: "
          f"{'compiled' if ACCELERATED else 'pure Python'}")
    print(f"{'pipeline':<14} {'variant':<15} {'records/s median':>16} {'worst':>10} {'seconds':>8} "
          f"{'Spark CPU µs/rec':>16} {'broker µs/rec':>13} {'before 1st trigger':>18} {'trigger':>8}")
    for (pipeline, name), measured in results.items():
        rates = [r.rate for r in measured]
        print(f"{pipeline:<14} {name:<15} {statistics.median(rates):>16,.0f} {min(rates):>10,.0f} "
              f"{statistics.median(r.seconds for r in measured):>8.2f} "
              f"{statistics.median(r.spark_cpu for r in measured) / args.records * 1e6:>16.2f} "
              f"{statistics.median(r.broker_cpu for r in measured) / args.records * 1e6:>13.2f} "
              f"{statistics.median(r.before_trigger for r in measured):>17.2f}s "
              f"{statistics.median(r.trigger for r in measured):>7.2f}s")
    print("ratio roost/files within each round (median, worst, all):")
    for (pipeline, name), values in ratios.items():
        print(f"  {pipeline:<14} {name:<15} {statistics.median(values):.2f}  {min(values):.2f}  "
              f"[{', '.join(f'{v:.2f}' for v in values)}]")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
