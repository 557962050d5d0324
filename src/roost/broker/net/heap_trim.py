"""Giving freed heap back to the system after bursts of closed TLS connections.

A TLS connection holds OpenSSL's state and record buffers (about 50 KiB, against about 4 KiB for a
plaintext one), allocated with C `malloc`. When thousands of them close, glibc keeps the freed
memory in its arenas, fragmented, and the broker's RSS stays where the burst took it and creeps
up burst after burst (docs/hostile-input.md). A full `gc.collect()` frees the closed
connections' TLS objects (they sit in reference cycles), then `malloc_trim(0)` returns the free
pages to the kernel. Both walk the heap on the event loop (47 ms measured with 500 connections'
worth to free), so they run once per burst: when `TRIM_AFTER_CLOSES` TLS connections have closed since the last trim, after a
`QUIET_S` pause so that it lands after the burst rather than in it, and at most every
`MIN_INTERVAL_S`. Without glibc (musl, macOS) nothing is done.

Written here rather than taken from a library: Python exposes no heap trimming, and the call is
one function of libc reached through ctypes.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import logging
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("roost.broker.net.heap_trim")

TRIM_AFTER_CLOSES = 256
QUIET_S = 2.0
MIN_INTERVAL_S = 30.0


@dataclass
class TrimPolicy:
    """When to trim (pure: the caller gives the time)."""

    after_closes: int = TRIM_AFTER_CLOSES
    min_interval_s: float = MIN_INTERVAL_S
    closed_since: int = 0
    last_trim: float | None = None

    def closed(self) -> None:
        self.closed_since += 1

    def due_at(self, now: float) -> float | None:
        """When the next trim should run, or None (not enough closes yet)."""
        if self.closed_since < self.after_closes:
            return None
        earliest = now + QUIET_S
        if self.last_trim is not None:
            earliest = max(earliest, self.last_trim + self.min_interval_s)
        return earliest

    def trimmed(self, now: float) -> None:
        self.closed_since = 0
        self.last_trim = now


def _libc_trim() -> Callable[[], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: int(trim(0))


class HeapTrimmer:
    """The shell: counts TLS closes, and runs `malloc_trim(0)` on the loop when the policy says."""

    def __init__(self, trim: Callable[[], int] | None = None, policy: TrimPolicy | None = None) -> None:
        self._trim = trim if trim is not None else _libc_trim()
        self.policy = policy if policy is not None else TrimPolicy()
        self._scheduled: asyncio.TimerHandle | None = None
        self.trims = 0

    def tls_connection_closed(self) -> None:
        if self._trim is None:
            return
        self.policy.closed()
        if self._scheduled is not None:
            return
        loop = asyncio.get_running_loop()
        at = self.policy.due_at(loop.time())
        if at is not None:
            self._scheduled = loop.call_at(at, self._run)

    def _run(self) -> None:
        self._scheduled = None
        assert self._trim is not None
        loop = asyncio.get_running_loop()
        started = loop.time()
        # The closed connections' TLS objects sit in reference cycles (protocol, transport, SSL
        # object) that only the cyclic collector frees; its oldest generation runs seldom.
        gc.collect()
        self._trim()
        self.trims += 1
        self.policy.trimmed(loop.time())
        log.debug("heap trimmed after TLS connections closed (%.1f ms)", (loop.time() - started) * 1000)

    def close(self) -> None:
        if self._scheduled is not None:
            self._scheduled.cancel()
            self._scheduled = None
