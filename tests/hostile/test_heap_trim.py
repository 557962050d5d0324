"""When the broker gives freed heap back after bursts of closed TLS connections
(roost.broker.net.heap_trim): the policy (pure), and the shell on a real event loop with libc's
trim replaced by a counter. What the trim does to a broker's RSS is measured by
`scripts/tls_churn_rss.py` (docs/hostile-input.md): a counter here, because the process-level
effect needs the 30 s between trims to be shown without sharing a broker."""

from __future__ import annotations

import asyncio

from roost.broker.net.heap_trim import (
    MIN_INTERVAL_S,
    QUIET_S,
    TRIM_AFTER_CLOSES,
    HeapTrimmer,
    TrimPolicy,
    _libc_trim,
)


def test_a_trim_is_due_after_a_burst_of_closes_and_not_more_often_than_the_interval() -> None:
    policy = TrimPolicy()
    for _ in range(TRIM_AFTER_CLOSES - 1):
        policy.closed()
    assert policy.due_at(100.0) is None  # not a burst yet
    policy.closed()
    assert policy.due_at(100.0) == 100.0 + QUIET_S  # after the burst, not in it
    policy.trimmed(102.0)
    assert policy.due_at(103.0) is None  # counting again from zero
    for _ in range(TRIM_AFTER_CLOSES):
        policy.closed()
    assert policy.due_at(103.0) == 102.0 + MIN_INTERVAL_S  # at most once an interval
    assert policy.due_at(200.0) == 200.0 + QUIET_S


def test_the_shell_trims_once_per_burst_on_the_loop() -> None:
    trims: list[float] = []

    async def burst() -> HeapTrimmer:
        loop = asyncio.get_running_loop()
        trimmer = HeapTrimmer(trim=lambda: trims.append(loop.time()) or 0, policy=TrimPolicy(after_closes=10))
        started = loop.time()
        for _ in range(25):
            trimmer.tls_connection_closed()
        assert trims == []  # not during the burst
        await asyncio.sleep(QUIET_S + 0.3)
        assert len(trims) == 1 and trims[0] - started >= QUIET_S - 0.01
        for _ in range(25):
            trimmer.tls_connection_closed()  # a second burst within the interval: scheduled, not run yet
        await asyncio.sleep(QUIET_S + 0.3)
        assert len(trims) == 1
        trimmer.close()
        return trimmer
    assert asyncio.run(burst()).trims == 1


def test_glibc_trim_is_found_here() -> None:
    # This machine's Python runs on glibc: the broker's trimmer is live, not a no-op.
    trim = _libc_trim()
    assert trim is not None and trim() in (0, 1)
