"""Connection limits per address (Kafka's ConnectionQuotas), pure: `max.connections.per.ip` with
`max.connections.per.ip.overrides`, and the `connection_creation_rate` quota of an `ip` entity
(KIP-612). `admit(ip, now_ms)` says why a new connection is refused (None: accepted, and counted
until `release(ip)`). Refusals are logged by the caller at most once per address and minute
(`should_log`), so a flood of connections makes a line a minute, not a line each.
"""

from __future__ import annotations

from collections import Counter
from typing import Final

from roost.broker.quotas.core import QuotaConfigs
from roost.broker.quotas.rate import SampledRate, throttle_ms

LOG_EVERY_MS: Final = 60_000
MAX_TRACKED: Final = 100_000  # addresses with a creation rate or a log time, at most


class ConnectionQuotas:
    def __init__(self, max_per_ip: int, overrides: dict[str, int], configs: QuotaConfigs,
                 samples: int = 11, window_ms: int = 1000) -> None:
        self.max_per_ip = max_per_ip
        self.overrides = dict(overrides)
        self.configs = configs
        self.samples, self.window_ms = samples, window_ms
        self.open: Counter[str] = Counter()
        self._rates: dict[str, SampledRate] = {}
        self._logged: dict[str, int] = {}

    def limit_for(self, ip: str) -> int:
        return self.overrides.get(ip, self.max_per_ip)

    def admit(self, ip: str, now_ms: int) -> str | None:
        limit = self.limit_for(ip)
        if self.open[ip] >= limit:
            return f"max.connections.per.ip reached for {ip} ({self.open[ip]} open, limit {limit})"
        rate_quota = self.configs.ip_quota(ip)
        if rate_quota is not None:
            rate = self._rates.get(ip)
            if rate is None:
                if len(self._rates) >= MAX_TRACKED:
                    self._rates.clear()  # forget every rate rather than grow without end
                rate = self._rates[ip] = SampledRate(self.samples, self.window_ms, now_ms)
            rate.record(1.0, now_ms)
            if throttle_ms(rate, rate_quota, now_ms) > 0:
                return (f"connection_creation_rate quota of {ip} exceeded "
                        f"({rate.per_second(now_ms):.1f}/s, quota {rate_quota:g}/s)")
        self.open[ip] += 1
        return None

    def release(self, ip: str) -> None:
        assert self.open[ip] > 0, ip
        self.open[ip] -= 1
        if not self.open[ip]:
            del self.open[ip]

    def should_log(self, ip: str, now_ms: int) -> bool:
        last = self._logged.get(ip)
        if last is not None and now_ms - last < LOG_EVERY_MS:
            return False
        if len(self._logged) >= MAX_TRACKED:
            self._logged.clear()
        self._logged[ip] = now_ms
        return True
