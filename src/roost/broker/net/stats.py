"""The broker's hot-path counters: plain integers on the event loop, read by the metrics
collector (roost.metrics.broker_metrics) when Prometheus scrapes, on the same loop.

Why plain integers rather than prometheus-client's Counter: a Counter child takes a lock on
every `inc()`, and the counts are only ever touched from the loop's one thread. Counting is per
produce partition or per fetch response, never per record (batches stay batches: the record
count comes from the offsets the append assigned).
"""

from __future__ import annotations

import math
import time
from collections import deque

# Yammer's exponentially decaying reservoir, which Kafka's request histograms use, keeps 1028
# samples; a sliding window of the same size gives comparable quantiles at scrape time.
LATENCY_SAMPLES = 1028
QUANTILES = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)  # the JMX exporter's 50th ... 999thPercentile


class TopicCounters:
    """Kafka's BrokerTopicMetrics for one topic."""

    __slots__ = ("bytes_in", "bytes_out", "failed_fetch", "failed_produce", "messages_in")

    def __init__(self) -> None:
        self.messages_in = 0  # records appended as leader (produce requests that succeeded)
        self.bytes_in = 0  # bytes of the record batches appended (the produce request's records)
        self.bytes_out = 0  # bytes of record batches sent in fetch responses (consumers and followers)
        self.failed_produce = 0  # produce partitions answered with an error
        self.failed_fetch = 0  # fetch partitions answered with an error


class RequestTimes:
    """Total time of one kind of request, from decode to response ready: a count, a sum, and
    the last LATENCY_SAMPLES samples for quantiles."""

    __slots__ = ("count", "samples", "sum_ms")

    def __init__(self) -> None:
        self.count = 0
        self.sum_ms = 0.0
        self.samples: deque[float] = deque(maxlen=LATENCY_SAMPLES)

    def record(self, ms: float) -> None:
        self.count += 1
        self.sum_ms += ms
        self.samples.append(ms)

    def quantiles(self) -> list[tuple[float, float]]:
        """(quantile, ms) for each of QUANTILES over the samples kept (none: no samples)."""
        ordered = sorted(self.samples)
        if not ordered:
            return []
        n = len(ordered)
        # Nearest rank: the smallest sample with at least q of the samples at or below it.
        return [(q, ordered[max(0, math.ceil(q * n) - 1)]) for q in QUANTILES]


class BrokerStats:
    """Every hot-path count of one broker. Read and written on the broker's event loop only."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicCounters] = {}
        self.request_times: dict[str, RequestTimes] = {}
        self.isr_shrinks = 0
        self.isr_expands = 0

    def topic(self, name: str) -> TopicCounters:
        counters = self.topics.get(name)
        if counters is None:
            counters = self.topics[name] = TopicCounters()
        return counters

    def forget_topic(self, name: str) -> None:
        """A deleted topic's series go with it (Kafka removes its BrokerTopicMetrics too)."""
        self.topics.pop(name, None)

    def timer(self, request: str) -> RequestTimes:
        times = self.request_times.get(request)
        if times is None:
            times = self.request_times[request] = RequestTimes()
        return times


def perf_ms() -> float:
    """A monotonic high-resolution timer in milliseconds, for request durations: not a clock
    (only differences of its readings mean anything; the clock is roost.clock)."""
    return time.perf_counter() * 1000.0
