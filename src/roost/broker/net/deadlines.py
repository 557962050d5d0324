"""When a client connection is closed for taking too long, pure: no sockets, no clock of its own.

Two deadlines bound what an abusive client can hold (docs/hostile-input.md, "Abusive clients"):

- `connections.max.idle.ms` (Kafka's name and default, 10 minutes): a connection on which nothing
  moved for that long, no byte read and none of its answers taken by the client, is closed, as
  Kafka's socket server closes idle connections. A connection that owes an answer still being
  worked out (a long-poll fetch, a JoinGroup) is not idle: the wait is the broker's. One whose
  answers the client does not read is: its output stands still.
- `request.receive.timeout.ms` and `request.receive.min.bytes.per.second` (Roost's own; Kafka has
  no such bound): a request whose first bytes arrived must be whole within the timeout, plus one
  second for each `min.bytes.per.second` of it received so far (as Apache httpd's mod_reqtimeout
  earns time by the bytes received, not by a size the client merely declares). A slow-loris
  client that trickles one byte at a time keeps a connection "active" for the idle rule; this one
  ends it, and with it the partial frame it holds. A large request arriving at or above the
  minimum rate is never cut off.

The shell (`KafkaConnection`) notes the loop time of each activity and of each frame's first
byte, asks `next_check` when to look again, and `expired` whether to close.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Deadlines:
    idle_s: float  # connections.max.idle.ms in seconds; <= 0: never
    receive_s: float  # request.receive.timeout.ms in seconds; <= 0: never
    min_bytes_per_s: float  # request.receive.min.bytes.per.second; <= 0: no size allowance


@dataclass(slots=True)
class ConnectionClock:
    """What the shell has seen of one connection, in loop seconds."""

    last_activity: float
    frame_started: float | None = None  # the first byte of the frame being received
    frame_size: int = -1  # its declared size (-1: the length prefix is not whole yet)
    frame_received: int = 0  # bytes of it received so far
    waiting_on_broker: bool = False  # an answer owed that the broker is still working out


def idle_deadline(limits: Deadlines, clock: ConnectionClock) -> float | None:
    if limits.idle_s <= 0 or clock.waiting_on_broker:
        return None
    return clock.last_activity + limits.idle_s


def receive_deadline(limits: Deadlines, clock: ConnectionClock) -> float | None:
    if limits.receive_s <= 0 or clock.frame_started is None:
        return None
    allowance = clock.frame_received / limits.min_bytes_per_s if limits.min_bytes_per_s > 0 else 0.0
    return clock.frame_started + limits.receive_s + allowance


IDLE, RECEIVE = "idle", "receive"


def expired(limits: Deadlines, clock: ConnectionClock, now: float) -> tuple[str, str] | None:
    """Which deadline (IDLE or RECEIVE) closes the connection at `now`, and why; or None."""
    receive = receive_deadline(limits, clock)
    if receive is not None and now >= receive:
        assert clock.frame_started is not None
        size = f"of {clock.frame_size} bytes" if clock.frame_size >= 0 else "of a size not yet known"
        return RECEIVE, (f"a request {size} ({clock.frame_received} received) still incomplete {now - clock.frame_started:.1f} s after its first byte "
                "(request.receive.timeout.ms)")
    idle = idle_deadline(limits, clock)
    if idle is not None and now >= idle:
        return IDLE, f"idle for {now - clock.last_activity:.1f} s (connections.max.idle.ms)"
    return None


def next_check(limits: Deadlines, clock: ConnectionClock, now: float) -> float | None:
    """The loop time to look again (None: nothing can expire until something changes; the shell
    looks again after the next activity)."""
    candidates = [t for t in (idle_deadline(limits, clock), receive_deadline(limits, clock)) if t is not None]
    if not candidates:
        return None
    return max(min(candidates), now)
