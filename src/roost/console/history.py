"""Figures sampled over time: the cluster's message rate (from the sum of every partition's end
offset) and byte rate (from the sum of every partition's leader log size), each topic's latest
size and rates, and each consumer group's total lag. Kept in memory, a bounded number of points
each; sampled when a page asks, never more often than MIN_INTERVAL_S, so an idle console costs the
cluster nothing and any number of open pages cost it one sample per interval."""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

POINTS = 120
MIN_INTERVAL_S = 1.0
MAX_GROUPS = 200
MAX_TOPICS = 50_000


@dataclass
class Series:
    points: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=POINTS))

    def add(self, value: float, now: float | None = None) -> None:
        now = time.time() if now is None else now
        if self.points and now - self.points[-1][0] < MIN_INTERVAL_S:
            return
        self.points.append((now, value))

    def as_lists(self) -> dict[str, list[float]]:
        return {"t": [p[0] for p in self.points], "v": [p[1] for p in self.points]}

    def rates(self) -> dict[str, list[float]]:
        """The rate between consecutive points; a fall (retention, a deleted topic) counts as 0."""
        rates = [(b[0], max(0.0, (b[1] - a[1]) / (b[0] - a[0])))
                 for a, b in itertools.pairwise(self.points) if b[0] > a[0]]
        return {"t": [t for t, _ in rates], "v": [v for _, v in rates]}


class History:
    def __init__(self) -> None:
        self.sampled_at = 0.0
        self._lock = threading.Lock()
        self.end_offsets = Series()  # sum of end offsets: its slope is messages per second
        self.sizes = Series()  # sum of leader log sizes: its slope is bytes per second
        self.last_size: int | None = None
        self.lag: dict[str, Series] = {}

    def claim(self, now: float) -> bool:
        """Whether a whole-cluster sample is due; if so the caller takes it (and concurrent
        requests do not: each reads the last one)."""
        with self._lock:
            if now - self.sampled_at < MIN_INTERVAL_S:
                return False
            self.sampled_at = now
            return True

    def record_cluster(self, now: float, end_offsets: int | None, size: int | None) -> None:
        """One sample; None where a partition could not answer (a gap would read as a fall)."""
        if end_offsets is not None:
            self.end_offsets.add(end_offsets, now)
        if size is not None:
            self.sizes.add(size, now)
        self.last_size = size

    def messages_per_second(self) -> dict[str, list[float]]:
        return self.end_offsets.rates()

    def bytes_per_second(self) -> dict[str, list[float]]:
        return self.sizes.rates()

    def record_lag(self, group: str, lag: int) -> dict[str, list[float]]:
        if group not in self.lag and len(self.lag) >= MAX_GROUPS:
            self.lag.pop(next(iter(self.lag)))
        series = self.lag.setdefault(group, Series())
        series.add(lag)
        return series.as_lists()


@dataclass(frozen=True)
class TopicPoint:
    at: float
    end_offsets: int | None  # the sum of the topic's partitions' end offsets; None: one did not answer
    size: int | None  # bytes of the topic's leader replicas' logs; None: unknown


def rate(earlier: TopicPoint | None, later: TopicPoint, figure: str) -> float | None:
    if earlier is None or later.at <= earlier.at:
        return None
    before, after = getattr(earlier, figure), getattr(later, figure)
    if before is None or after is None:
        return None
    return max(0.0, (after - before) / (later.at - earlier.at))


@dataclass(frozen=True)
class Due:
    """The topics of a page that need a sample: `unseen` were never sampled (the page waits for
    them), `stale` have a point older than MIN_INTERVAL_S (claimed by the caller, who samples them
    while the page answers from that point)."""
    unseen: list[str]
    stale: list[str]


class TopicRates:
    """Each topic's last two samples, from which its size and rates are read. Shared by every
    request (pages sample only topics whose latest point is older than MIN_INTERVAL_S); written
    from the console's thread pool, hence the lock."""

    def __init__(self, max_topics: int = MAX_TOPICS) -> None:
        assert max_topics > 0
        self.max_topics = max_topics
        self._points: dict[str, tuple[TopicPoint | None, TopicPoint]] = {}
        self._claimed: dict[str, float] = {}  # stale topics a sample is under way for: when it was claimed
        self._lock = threading.Lock()
        self.sizes_known: bool | None = None  # None: never asked; False: no broker answers DescribeLogDirs

    def due(self, names: list[str], now: float | None = None) -> Due:
        """Which of `names` need a sample. A stale topic is claimed, so the requests that come
        while its sample is under way do not start another; a claim lapses after MIN_INTERVAL_S
        (a sample that failed is tried again)."""
        now = time.time() if now is None else now
        unseen: list[str] = []
        stale: list[str] = []
        with self._lock:
            if len(self._claimed) >= self.max_topics:  # claims only save work: dropping them is safe
                self._claimed.clear()
            for name in names:
                held = self._points.get(name)
                if held is None:
                    unseen.append(name)
                elif now - held[1].at >= MIN_INTERVAL_S and now - self._claimed.get(name, -math.inf) >= MIN_INTERVAL_S:
                    self._claimed[name] = now
                    stale.append(name)
        return Due(unseen, stale)

    def record(self, name: str, point: TopicPoint) -> None:
        with self._lock:
            self._claimed.pop(name, None)
            held = self._points.get(name)
            if held is not None and point.at - held[1].at < MIN_INTERVAL_S:
                return
            if held is None and len(self._points) >= self.max_topics:
                self._points.pop(next(iter(self._points)))
            self._points[name] = (held[1] if held is not None else None, point)

    def keep_only(self, names: set[str]) -> None:
        """Forgets deleted topics (a topic made again under the same name starts afresh)."""
        with self._lock:
            for name in [n for n in self._points if n not in names]:
                del self._points[name]
                self._claimed.pop(name, None)

    def figures(self, name: str) -> dict[str, Any]:
        with self._lock:
            held = self._points.get(name)
        if held is None:
            return {"size": None, "messages_per_second": None, "bytes_per_second": None}
        earlier, latest = held
        return {"size": latest.size, "messages_per_second": rate(earlier, latest, "end_offsets"),
                "bytes_per_second": rate(earlier, latest, "size")}
