"""The one clock of the servers' decisions: wall-clock milliseconds, as Kafka's Time.milliseconds.

Every part that decides by time takes a `Clock` when it is built and never reads the time
otherwise: the broker builds each of its parts with one (`now_ms` here), the replication
simulation with its own simulated one, and tests with a hand-held one. Pure cores go further and
take `now` as an argument of each call. (Durations of requests for the metrics are measured with
a monotonic timer instead, `roost.broker.net.stats.perf_ms`: only their differences mean anything.)
"""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], int]


def now_ms() -> int:
    """Milliseconds since the epoch."""
    return int(time.time() * 1000)
