"""TLS handshakes that never finish: when to give their connections up, and what to say. Pure: no
sockets, no clock of its own.

A TLS listener is served by the event loop's own TLS (`create_server(ssl=...)`, with
`ssl.handshake.timeout.ms` as its `ssl_handshake_timeout`). The loop makes the connection's
protocol object when it accepts the TCP connection, but tells it nothing when the handshake then
fails or times out: it aborts the socket and drops the connection silently (asyncio and uvloop
alike). A broker that counts its connections from the protocol objects would count those for
ever, and a few hundred silent or stalled clients would hold every place under `max.connections`
until a restart. So the broker looks at each TLS connection once its handshake must be over (the
timeout and `GRACE_S` more): one never made ready is gone, and is forgotten.

What a slow-loris client costs there: an accepted socket and the loop's TLS state, for at most
`ssl.handshake.timeout.ms`; what it is told: nothing (the loop aborts the socket). The broker
says so once a minute per listener, with how many since the last line, not once per connection.
"""

from __future__ import annotations

from dataclasses import dataclass, field

GRACE_S = 0.25  # after the loop's handshake timer (started as the connection was accepted), so that it has fired
LOG_EVERY_S = 60.0


def overdue_at(accepted: float, handshake_timeout_s: float) -> float:
    """When to look at a TLS connection accepted at `accepted` (loop seconds)."""
    return accepted + handshake_timeout_s + GRACE_S


@dataclass
class OverdueLog:
    """Counts the handshakes given up per listener, and says so at most once a LOG_EVERY_S."""

    _since_line: dict[str, int] = field(default_factory=dict)  # given up since the last line
    _last_line: dict[str, float] = field(default_factory=dict)

    def given_up(self, listener: str, handshake_timeout_s: float, now: float) -> str | None:
        """Note one more; the line to log now, or None (said less than a minute ago)."""
        count = self._since_line.get(listener, 0) + 1
        last = self._last_line.get(listener)
        if last is not None and now - last < LOG_EVERY_S:
            self._since_line[listener] = count
            return None
        self._since_line[listener] = 0
        self._last_line[listener] = now
        what = "a TLS handshake" if count == 1 else f"{count} TLS handshakes"
        since = "" if last is None else f" in the last {now - last:.0f} s"
        return (f"listener {listener}: {what} not done within {handshake_timeout_s * 1000:.0f} ms "
                f"(ssl.handshake.timeout.ms){since}: the connection closed (a client silent after connecting, "
                "stalled in its ClientHello, or not speaking TLS); said once a minute per listener")
