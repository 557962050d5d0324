"""The CPU time another process has used, from /proc (Linux): the benchmarks print it beside
their figures (the broker's, the console's, a keeper's)."""

from __future__ import annotations

import os

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def user_system_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of process `pid` so far."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far."""
    return sum(user_system_seconds(pid))
