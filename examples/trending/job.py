"""The Structured Streaming job: posts from Roost -> hashtag counts per sliding window with a
watermark -> the top N per window -> a Roost topic, exactly once.

Two chained stateful aggregations in append mode: the first counts (window, hashtag) and emits a
window's counts once the watermark has passed its end; the second gathers those counts per window
and keeps the N largest. Each window is therefore written once, final.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from examples.trending.posts import WindowSpec


def trending_frame(posts: DataFrame, spec: WindowSpec) -> DataFrame:
    """key = window start, value = JSON {start, end, top: [{tag, count}, ...]} (times in ms)."""
    parsed = posts.select(
        F.col("timestamp"),
        F.from_json(F.col("value").cast("string"), "user string, text string").alias("post"))
    # The watermark is set on posts, before hashtags are pulled out, so that a post without any
    # hashtag still moves event time forward.
    watermarked = parsed.withWatermark("timestamp", f"{spec.watermark_ms} milliseconds")
    tags = watermarked.select(
        "timestamp", F.explode(F.regexp_extract_all(F.lower(F.col("post.text")), F.lit(r"#(\w+)"), 1)).alias("tag"))
    counts = tags.groupBy(
        F.window("timestamp", f"{spec.size_ms} milliseconds", f"{spec.slide_ms} milliseconds"), "tag").count()
    # One slot per sliding window: the slide-sized bucket that holds the window's last instant.
    ranked = counts.groupBy(F.window(F.window_time("window"), f"{spec.slide_ms} milliseconds").alias("slot")).agg(
        F.max("window").alias("window"),
        F.slice(F.sort_array(F.collect_list(F.struct("count", "tag")), asc=False), 1, spec.top_n).alias("top"))
    start_ms = F.unix_millis(F.col("window.start"))
    return ranked.select(
        start_ms.cast("string").alias("key"),
        F.to_json(F.struct(start_ms.alias("start"), F.unix_millis(F.col("window.end")).alias("end"),
                           F.col("top"))).alias("value"))


def start_trending_query(spark: SparkSession, bootstrap: str, posts_topic: str, trending_topic: str,
                         checkpoint: str, spec: WindowSpec, trigger: dict[str, Any],
                         max_offsets_per_trigger: int | None = None) -> StreamingQuery:
    reader = (spark.readStream.format("roost").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", posts_topic).option("startingOffsets", "earliest"))
    if max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    return (trending_frame(reader.load(), spec).writeStream.format("roost")
            .option("kafka.bootstrap.servers", bootstrap).option("topic", trending_topic)
            .option("checkpointLocation", checkpoint).outputMode("append")
            .queryName("trending-hashtags").trigger(**trigger).start())


@dataclass(frozen=True)
class TrendingRow:
    start_ms: int
    end_ms: int
    top: list[tuple[str, int]]


def read_trending(bootstrap: str, topic: str, timeout: float = 60.0) -> list[TrendingRow]:
    """The trending table: every record of the topic, with a plain consumer, by window start."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "trending-reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    rows: list[TrendingRow] = []
    try:
        metadata = consumer.list_topics(topic, timeout=30)
        found = metadata.topics.get(topic)
        if found is None or found.error is not None:
            return []
        for partition in sorted(found.partitions):
            low, high = consumer.get_watermark_offsets(KafkaTopicPartition(topic, partition), timeout=30, cached=False)
            consumer.assign([KafkaTopicPartition(topic, partition, low)])
            next_offset, deadline = low, time.monotonic() + timeout
            while next_offset < high and time.monotonic() < deadline:
                for message in consumer.consume(500, 1.0):
                    if message.error() is not None:
                        if message.error().code() != KafkaError._PARTITION_EOF:
                            raise RuntimeError(str(message.error()))
                        continue
                    next_offset = message.offset() + 1
                    data = json.loads(message.value())
                    rows.append(TrendingRow(data["start"], data["end"],
                                            [(item["tag"], item["count"]) for item in data["top"]]))
            if next_offset < high:
                raise TimeoutError(f"could not read {topic}-{partition} up to {high}")
    finally:
        consumer.close()
    return sorted(rows, key=lambda row: row.start_ms)


def format_table(rows: list[TrendingRow], limit: int | None = None) -> str:
    """The trending table as text, one line per window."""
    lines = [f"{'window (UTC)':<27} top hashtags"]
    for row in rows[:limit]:
        start = time.strftime("%Y-%m-%d %H:%M", time.gmtime(row.start_ms / 1000))
        end = time.strftime("%H:%M", time.gmtime(row.end_ms / 1000))
        lines.append(f"{start}-{end:<10} " + ", ".join(f"#{tag} {count}" for tag, count in row.top))
    return "\n".join(lines)
