"""Run the trending-hashtags scenario against a running Roost node.

    .venv/bin/python -m examples.trending.run --bootstrap 127.0.0.1:9092 [--posts 3000]

It publishes generated posts, runs the Spark job until every window is final (availableNow),
prints the trending table read back from the topic, and checks it against a plain-Python count.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from examples.trending.posts import Post, WindowSpec, closing_post, expected_counts, generate_posts, top_n

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z, a fixed simulated start


def create_posts_topic(bootstrap: str, topic: str) -> None:
    """One partition: posts arrive in event-time order, so none is ever behind the watermark.

    (With several partitions, a micro-batch can take one partition further in event time than
    another; the watermark delay must then cover that skew or late posts are dropped.)
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    except KafkaException as error:
        if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def publish_posts(bootstrap: str, topic: str, posts: list[Post]) -> None:
    """Publish posts keyed by user, each with its event time as the record timestamp."""
    create_posts_topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    failures: list[str] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(str(error))

    for post in posts:
        producer.produce(topic, post.encode(), post.user.encode(), timestamp=post.time_ms, on_delivery=delivered)
        producer.poll(0)
    remaining = producer.flush(120)
    if remaining or failures:
        raise RuntimeError(f"{remaining} posts unacknowledged, {len(failures)} failed: {failures[:1]}")


@dataclass
class TrendingResult:
    posts: int
    windows: int
    mismatches: list[str]
    table: str
    seconds: float


def check_table(rows: list[Any], posts: list[Post], spec: WindowSpec) -> list[str]:
    """Differences between the job's table and the plain-Python count (empty when they agree)."""
    expected = {window: top_n(counts, spec.top_n) for window, counts in expected_counts(posts, spec).items()}
    got = {(row.start_ms, row.end_ms): row.top for row in rows}
    problems: list[str] = []
    if len(rows) != len(got):
        problems.append(f"{len(rows) - len(got)} windows written more than once")
    for window in sorted(expected.keys() | got.keys()):
        if expected.get(window) != got.get(window):
            problems.append(f"window {window}: expected {expected.get(window)}, job wrote {got.get(window)}")
    return problems


def run_trending(spark: Any, bootstrap: str, checkpoint: str, posts_count: int = 3000, seed: int = 7,
                 spec: WindowSpec | None = None, posts_topic: str = "posts",
                 trending_topic: str = "trending") -> TrendingResult:
    from examples.trending.job import format_table, read_trending, start_trending_query

    spec = spec or WindowSpec()
    began = time.monotonic()
    posts = generate_posts(posts_count, seed, START_MS)
    publish_posts(bootstrap, posts_topic, [*posts, closing_post(posts, spec)])
    query = start_trending_query(spark, bootstrap, posts_topic, trending_topic, checkpoint, spec,
                                 {"availableNow": True}, max_offsets_per_trigger=max(1000, posts_count // 3))
    if not query.awaitTermination(600):
        query.stop()
        raise TimeoutError("the trending query did not finish in 600 s")
    if query.exception() is not None:
        raise RuntimeError(f"the trending query failed: {query.exception()}")
    rows = read_trending(bootstrap, trending_topic)
    return TrendingResult(len(posts), len(rows), check_table(rows, posts, spec), format_table(rows),
                          time.monotonic() - began)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--posts", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    from roost.spark.session import local_session

    spark = local_session("roost-trending")
    try:
        with tempfile.TemporaryDirectory(prefix="trending-checkpoint-") as checkpoint:
            result = run_trending(spark, args.bootstrap, checkpoint, args.posts, args.seed,
                                  posts_topic=f"posts-{args.seed}", trending_topic=f"trending-{args.seed}")
    finally:
        spark.stop()
    print(result.table)
    print(f"{result.posts} posts, {result.windows} windows, "
          f"{'matches the plain-Python count' if not result.mismatches else result.mismatches}")
    return 0 if not result.mismatches else 1


if __name__ == "__main__":
    sys.exit(main())
