"""Kafka's windowed rate (org.apache.kafka.common.metrics.stats.Rate over SampledStat), pure.

A rate keeps `samples` windows of `window_ms` each. A value is added to the current window,
which is replaced by a fresh one once it is `window_ms` old; windows older than
`samples * window_ms` are forgotten (reset) before a measurement. The rate is the sum of the live
windows divided by the time they span, from the oldest window's start to now, but never less
than `samples - 1` whole windows: so a burst right after a quiet spell (or at start) is measured
over about ten seconds, not over the few milliseconds it took. That is the "precise window"
Kafka's throttle time uses, and so does `ClientQuota.throttle_ms`.

Times are milliseconds passed in by the caller (no clock here).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _Sample:
    start_ms: int
    value: float = 0.0


class SampledRate:
    """Events per second over the last `samples` windows of `window_ms` (Kafka's Rate)."""

    __slots__ = ("_current", "_samples", "samples", "window_ms")

    def __init__(self, samples: int, window_ms: int, now_ms: int) -> None:
        assert samples >= 2 and window_ms > 0, (samples, window_ms)
        self.samples = samples
        self.window_ms = window_ms
        self._samples = [_Sample(now_ms)]
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._samples[self._current]
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % self.samples
        if self._current >= len(self._samples):
            self._samples.append(_Sample(now_ms))
        else:
            self._samples[self._current] = _Sample(now_ms)
        return self._samples[self._current]

    def _purge(self, now_ms: int) -> None:
        expire_age = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.start_ms >= expire_age:
                sample.start_ms, sample.value = now_ms, 0.0

    def span_ms(self, now_ms: int) -> int:
        """The time the rate is measured over (Rate.windowSize)."""
        self._purge(now_ms)
        oldest = min(sample.start_ms for sample in self._samples)
        elapsed = now_ms - oldest
        full_windows = elapsed // self.window_ms
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return max(elapsed, 1)

    def per_second(self, now_ms: int) -> float:
        span = self.span_ms(now_ms)  # purges first, as Kafka measures
        return sum(sample.value for sample in self._samples) * 1000.0 / span


def throttle_ms(rate: SampledRate, bound: float, now_ms: int, max_ms: int | None = None) -> int:
    """How long the client must stay quiet for `rate` to come back to `bound` if nothing more
    were recorded (Kafka's QuotaUtils.throttleTime; bounded like boundedThrottleTime when
    `max_ms` is given). 0 when the rate is within the bound."""
    assert bound > 0
    observed = rate.per_second(now_ms)
    if observed <= bound:
        return 0
    wait = round((observed - bound) / bound * rate.span_ms(now_ms))
    return min(wait, max_ms) if max_ms is not None else wait
