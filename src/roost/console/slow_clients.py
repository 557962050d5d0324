"""When the console's web server gives up on a connection that sends no whole request, and what it
says of it; pure: no sockets, no clock of its own (the shell is roost.console.http_guard).

One bound, `header_timeout_s` (`roost console --header-timeout`, 20 s by default, the first figure
of Apache httpd's mod_reqtimeout `header=20-40`): a connection must have sent a whole request head
(request line and headers) this long after it opened, or after its previous answer went out. It
ends a slow-loris client that trickles its headers a byte at a time, one that opens and sends
nothing, and an idle keep-alive connection alike. A request whose head has arrived is the
handler's until its answer is written: a long page or a stream of events is never cut. aiohttp's
own `keepalive_timeout` is not told of a partial head either, but logs nothing and defaults to an
hour; the console's is this one.

The same bound is the TLS handshake's (`ssl_handshake_timeout`) when the console serves HTTPS.

What is said: nothing for an idle keep-alive connection (browsers keep them as a matter of
course); for the others, one line at most a minute, counting what was cut since the last line.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

DEFAULT_HEADER_TIMEOUT_S = 20.0

PARTIAL = "partial"  # sent part of a request head, not all of it in time
SILENT = "silent"  # opened and sent nothing at all
IDLE = "idle"  # a kept-alive connection that sent no further request (quietly closed)
HANDSHAKE = "handshake"  # a TLS handshake not done in time (or failed)

GATHER_S = 1.0  # a burst of cuts is counted for this long before its line is written
LOG_EVERY_S = 60.0


@dataclass(slots=True)
class HeadClock:
    """What the shell has seen of one connection, in loop seconds."""

    waiting_since: float  # when it opened, or when its last answer was done
    requests: int = 0  # requests whose head has arrived and whose answer is not done
    received: int = 0  # bytes received since `waiting_since` while no request was in hand
    answered: int = 0  # requests answered on it so far
    output_seen: int = 0  # the transport's unsent bytes when last looked at


def cut_at(timeout_s: float, clock: HeadClock) -> float | None:
    """When the connection is cut unless a whole request head arrives first (None: not while a
    request is in hand, or without a bound)."""
    if timeout_s <= 0 or clock.requests:
        return None
    return clock.waiting_since + timeout_s


def verdict(timeout_s: float, clock: HeadClock, now: float) -> str | None:
    """PARTIAL, SILENT or IDLE when the connection is to be cut at `now`; else None."""
    deadline = cut_at(timeout_s, clock)
    if deadline is None or now < deadline:
        return None
    if clock.received:
        return PARTIAL
    return SILENT if clock.answered == 0 else IDLE


def answer_moving(clock: HeadClock, unsent: int, now: float) -> bool:
    """Whether the client is still taking an answer (its unsent bytes changed since the last look):
    the wait is then the answer's, not the client's head's."""
    if unsent != clock.output_seen:
        clock.output_seen = unsent
        clock.waiting_since = now
        return True
    return False


@dataclass
class CutSummary:
    """Counts the connections cut (IDLE ones aside) and writes one line for a burst of them, at
    most one a LOG_EVERY_S."""

    counts: Counter[str] = field(default_factory=Counter)
    last_line: float | None = None
    flush_due: float | None = None  # when the pending line is to be written

    def cut(self, kind: str, now: float) -> float | None:
        """Count one; when to call `flush` if a flush is not scheduled yet (else None)."""
        if kind == IDLE:
            return None
        self.counts[kind] += 1
        if self.flush_due is not None:
            return None
        due = now + GATHER_S
        if self.last_line is not None:
            due = max(due, self.last_line + LOG_EVERY_S)
        self.flush_due = due
        return due

    def flush(self, timeout_s: float, now: float) -> str | None:
        """The line for what was counted since the last one (None if nothing was)."""
        self.flush_due = None
        if not self.counts:
            return None
        parts = [f"{self.counts[PARTIAL]} sent part of a request head and stalled (slow-loris)"
                 if self.counts[PARTIAL] else "",
                 f"{self.counts[SILENT]} sent nothing after connecting" if self.counts[SILENT] else "",
                 f"{self.counts[HANDSHAKE]} did not finish the TLS handshake" if self.counts[HANDSHAKE] else ""]
        total = sum(self.counts.values())
        since = "" if self.last_line is None else f" in the last {now - self.last_line:.0f} s"
        self.counts.clear()
        self.last_line = now
        return (f"closed {total} connection{'s' if total != 1 else ''}{since} that sent no whole request within "
                f"{timeout_s:g} s (--header-timeout): {', '.join(p for p in parts if p)}; "
                "said at most once a minute")
