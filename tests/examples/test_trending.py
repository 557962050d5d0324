"""Trending hashtags on Spark: the job's per-window counts equal a plain-Python count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from examples.trending.posts import WindowSpec, closing_post, expected_counts, generate_posts
from examples.trending.run import START_MS, check_table, publish_posts

from tests.spark.streaming import wait_until
from tests.support.procs import RoostProcess

pytestmark = pytest.mark.spark


def test_trending_windows_match_an_independent_count_while_posts_stream_in(
        spark: Any, roost_node: RoostProcess, tmp_path: Path) -> None:
    from examples.trending.job import read_trending, start_trending_query

    bootstrap = roost_node.address("kafka")
    spec = WindowSpec(top_n=4)
    posts = generate_posts(2400, seed=11, start_ms=START_MS)
    expected_windows = len(expected_counts(posts, spec))
    assert expected_windows >= 10  # enough windows for the comparison to mean something

    publish_posts(bootstrap, "tt-posts", posts[:1200])
    query = start_trending_query(spark, bootstrap, "tt-posts", "tt-trending", str(tmp_path / "checkpoint"),
                                 spec, {"processingTime": "500 milliseconds"},
                                 # Each half in a trigger of its own (a Spark micro-batch costs seconds here).
                                 max_offsets_per_trigger=1300)
    try:
        # The rest arrives while the query runs; the closing post moves the watermark past the end.
        publish_posts(bootstrap, "tt-posts", [*posts[1200:], closing_post(posts, spec)])
        wait_until(lambda: len(read_trending(bootstrap, "tt-trending")) >= expected_windows,
                   "every window to be written", query=query)
    finally:
        query.stop()
    rows = read_trending(bootstrap, "tt-trending")
    assert check_table(rows, posts, spec) == []
    assert len(rows) == expected_windows
    # the table's counts really are counts: the top entry of a window is its largest hashtag count
    counts = expected_counts(posts, spec)
    for row in rows:
        assert row.top[0][1] == max(counts[(row.start_ms, row.end_ms)].values())
