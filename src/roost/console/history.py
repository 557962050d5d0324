"""Figures sampled over time for the charts: the cluster's message rate (from the sum of every
partition's end offset) and each consumer group's total lag. Kept in memory, a bounded number of
points each; sampled when a page asks, never more often than MIN_INTERVAL_S, so an idle console
costs the cluster nothing."""

from __future__ import annotations

import itertools
import time
from collections import deque
from dataclasses import dataclass, field

POINTS = 120
MIN_INTERVAL_S = 1.0
MAX_GROUPS = 200


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


class History:
    def __init__(self) -> None:
        self.end_offsets = Series()  # sum of end offsets: its slope is messages per second
        self.lag: dict[str, Series] = {}

    def due(self) -> bool:
        points = self.end_offsets.points
        return not points or time.time() - points[-1][0] >= MIN_INTERVAL_S

    def record_offsets(self, total: int) -> None:
        self.end_offsets.add(total)

    def messages_per_second(self) -> dict[str, list[float]]:
        """The rate between consecutive samples."""
        points = list(self.end_offsets.points)
        rates = [(b[0], max(0.0, (b[1] - a[1]) / (b[0] - a[0]))) for a, b in itertools.pairwise(points)
                 if b[0] > a[0]]
        return {"t": [t for t, _ in rates], "v": [v for _, v in rates]}

    def record_lag(self, group: str, lag: int) -> dict[str, list[float]]:
        if group not in self.lag and len(self.lag) >= MAX_GROUPS:
            self.lag.pop(next(iter(self.lag)))
        series = self.lag.setdefault(group, Series())
        series.add(lag)
        return series.as_lists()
