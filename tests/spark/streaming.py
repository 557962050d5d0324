"""Helpers for running streaming queries in tests: bounded waits, exact output checks."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tests.spark.kafka_helpers import Produced, read_all

QUERY_TIMEOUT = 300.0


def copy_query(spark: Any, bootstrap: str, source: dict[str, str], out_topic: str, checkpoint: Path,
               trigger: dict[str, Any], transform: Callable[[Any], Any] | None = None) -> Any:
    """Start roost source -> roost sink, writing `topic|partition|offset|value` of each input."""
    reader = spark.readStream.format("roost").option("kafka.bootstrap.servers", bootstrap)
    for key, value in source.items():
        reader = reader.option(key, value)
    frame = reader.load()
    if transform is not None:
        frame = transform(frame)
    frame = frame.selectExpr(
        "key", "concat_ws('|', topic, CAST(partition AS STRING), CAST(offset AS STRING), "
        "CAST(value AS STRING)) AS value", "headers")
    return (frame.writeStream.format("roost").option("kafka.bootstrap.servers", bootstrap)
            .option("topic", out_topic).option("checkpointLocation", str(checkpoint))
            .trigger(**trigger).start())


def expected_lines(produced: Iterable[Produced]) -> Counter[bytes]:
    return Counter(f"{p.topic}|{p.partition}|{p.offset}|{p.value.decode()}".encode() for p in produced)


def output_lines(bootstrap: str, topic: str) -> Counter[bytes]:
    return Counter(record.value for record in read_all(bootstrap, topic))


def assert_exactly(expected: Counter[bytes], got: Counter[bytes]) -> None:
    missing = expected - got
    extra = got - expected
    assert not missing and not extra, (
        f"{sum(missing.values())} missing (e.g. {list(missing)[:3]}), "
        f"{sum(extra.values())} extra or duplicated (e.g. {list(extra)[:3]})")


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = QUERY_TIMEOUT,
               query: Any | None = None) -> None:
    """Poll `predicate` (bounded by `timeout`); fail early if `query` died."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if query is not None and query.exception() is not None:
            raise AssertionError(f"query failed while waiting for {what}: {query.exception()}")
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f}s waiting for {what}"
        time.sleep(0.5)


def run_available_now(query: Any) -> list[dict[str, Any]]:
    """Wait for an availableNow query to finish; its progress reports."""
    finished = query.awaitTermination(QUERY_TIMEOUT)
    if not finished:
        query.stop()
        raise AssertionError(f"availableNow query did not finish within {QUERY_TIMEOUT}s")
    if query.exception() is not None:
        raise AssertionError(f"query failed: {query.exception()}")
    return [dict(progress) for progress in query.recentProgress]
