"""Spark through the roost source, beside Spark's built-in file source over the same records.

Four pipelines, each an availableNow streaming query over the same N posts, in the same run:
  roost -> no-op sink              | JSON-lines files (text source) -> no-op sink
  roost -> hashtag window counts   | JSON files (json source)       -> hashtag window counts
and the ratio roost / files for each. Prints figures; never asserts. Usage:
    python bench/spark_bench.py [--records 300000] [--partitions 4] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from roost.cli.demo import ChildNode

START_MS = 1_767_225_600_000
TAGS = [f"tag{i}" for i in range(1, 61)]


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


def timed(query: Any, records: int) -> float:
    began = time.perf_counter()
    assert query.awaitTermination(1800), "query did not finish"
    elapsed = time.perf_counter() - began
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    assert rows == records, f"read {rows} records, expected {records}"
    return records / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2, help="runs of each pipeline; the best is shown")
    args = parser.parse_args()
    from pyspark.sql import functions as F

    from roost.spark.session import local_session

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
            runs = iter(range(10_000))

            def checkpoint() -> str:
                return str(scratch / f"checkpoint-{next(runs)}")

            def roost_frame() -> Any:
                return (spark.readStream.format("roost").option("kafka.bootstrap.servers", bootstrap)
                        .option("subscribe", "bench-posts").option("startingOffsets", "earliest").load())

            def roost_noop() -> Any:
                return roost_frame()

            def files_noop() -> Any:
                return spark.readStream.format("text").load(str(scratch / "files"))

            def roost_windows() -> Any:
                parsed = roost_frame().select(
                    "timestamp", F.from_json(F.col("value").cast("string"), "user string, text string").alias("p"))
                return window_counts(parsed.select("timestamp", "p.text"), "timestamp")

            def files_windows() -> Any:
                frame = spark.readStream.schema("user string, text string, ts long").json(str(scratch / "files"))
                return window_counts(frame.select(F.timestamp_millis("ts").alias("timestamp"), "text"), "timestamp")

            def run(build: Any, output_mode: str = "append") -> float:
                query = (build().writeStream.format("noop").outputMode(output_mode)
                         .option("checkpointLocation", checkpoint()).trigger(availableNow=True).start())
                return timed(query, args.records)

            run(roost_noop)  # warm-up: the first streaming query of a session pays for JIT and workers
            results: dict[str, float] = {}
            for name, build in (("roost -> no-op", roost_noop), ("files -> no-op", files_noop),
                                ("roost -> window counts", roost_windows), ("files -> window counts", files_windows)):
                results[name] = max(run(build) for _ in range(args.repeat))
            spark.stop()
        finally:
            node.stop()
    sample = posts[:1000]
    mean_bytes = sum(len(json.dumps({"user": user, "text": text})) for user, text, _ in sample) / len(sample)
    print(f"Spark local[2], {args.records:,} posts (JSON, {mean_bytes:.0f} B on average), {args.partitions} "
          f"partitions, best of {args.repeat}, cpu count {os.cpu_count()}")
    print(f"{'pipeline':<26} {'records/s':>12}")
    for name, rate in results.items():
        print(f"{name:<26} {rate:>12,.0f}")
    print(f"ratio roost/files, no-op sink      : {results['roost -> no-op'] / results['files -> no-op']:.2f}")
    print(f"ratio roost/files, window counts   : "
          f"{results['roost -> window counts'] / results['files -> window counts']:.2f}")


if __name__ == "__main__":
    main()
