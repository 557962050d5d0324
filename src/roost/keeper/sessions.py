"""Session expiry bookkeeping (ZooKeeper's SessionTrackerImpl + ExpiryQueue), sans-IO.

Sessions are kept in expiry buckets: a touch at time t moves a session to the bucket that ends at
the first bucket boundary after t + timeout, and `expired(now)` hands back every session of the
buckets that have ended. Only the leader acts on expiries (it proposes a replicated closeSession);
followers forward their clients' touches to it. Time is passed in (monotonic milliseconds).

ZooKeeper's buckets are tickTime wide, which lets a session outlive its timeout by up to a tick;
`bucket_ms` may be set narrower (the server uses min(tickTime, 100 ms)) so that an ephemeral node
goes soon after its owner's timeout.
"""

from __future__ import annotations


def negotiate_timeout(requested_ms: int, min_ms: int, max_ms: int) -> int:
    """Clamp a client's requested session timeout into [min_ms, max_ms]."""
    assert 0 < min_ms <= max_ms
    return max(min_ms, min(requested_ms, max_ms))


class SessionTracker:
    def __init__(self, bucket_ms: int) -> None:
        assert bucket_ms > 0
        self.bucket_ms = bucket_ms
        self._timeouts: dict[int, int] = {}
        self._expiry: dict[int, int] = {}  # session -> end of its bucket
        self._buckets: dict[int, set[int]] = {}  # bucket end -> sessions

    def _bucket_end(self, time_ms: int) -> int:
        return (time_ms // self.bucket_ms + 1) * self.bucket_ms

    def __contains__(self, session_id: int) -> bool:
        return session_id in self._timeouts

    def __len__(self) -> int:
        return len(self._timeouts)

    def add(self, session_id: int, timeout_ms: int, now_ms: int) -> None:
        assert timeout_ms > 0
        self._timeouts[session_id] = timeout_ms
        self._move(session_id, self._bucket_end(now_ms + timeout_ms))

    def touch(self, session_id: int, now_ms: int) -> bool:
        """Restart a session's clock; False if the session is not tracked (closed or expiring)."""
        timeout = self._timeouts.get(session_id)
        if timeout is None:
            return False
        self._move(session_id, self._bucket_end(now_ms + timeout))
        return True

    def _move(self, session_id: int, bucket_end: int) -> None:
        current = self._expiry.get(session_id)
        if current == bucket_end:
            return
        if current is not None:
            bucket = self._buckets[current]
            bucket.discard(session_id)
            if not bucket:
                del self._buckets[current]
        self._expiry[session_id] = bucket_end
        self._buckets.setdefault(bucket_end, set()).add(session_id)

    def remove(self, session_id: int) -> None:
        self._timeouts.pop(session_id, None)
        current = self._expiry.pop(session_id, None)
        if current is not None:
            bucket = self._buckets[current]
            bucket.discard(session_id)
            if not bucket:
                del self._buckets[current]

    def expired(self, now_ms: int) -> list[int]:
        """Remove and return (sorted) every session whose bucket ended at or before `now_ms`."""
        due = [end for end in self._buckets if end <= now_ms]
        found: list[int] = []
        for end in due:
            for session_id in self._buckets.pop(end):
                del self._expiry[session_id]
                del self._timeouts[session_id]
                found.append(session_id)
        found.sort()
        return found

    def reset(self, sessions: dict[int, int], now_ms: int) -> None:
        """Track exactly `sessions` (id -> timeout), every clock restarted at `now_ms`.

        A new leader does this: it cannot know when the sessions were last heard from.
        """
        self._timeouts.clear()
        self._expiry.clear()
        self._buckets.clear()
        for session_id, timeout in sessions.items():
            self.add(session_id, timeout, now_ms)

    def deadline(self, session_id: int) -> int | None:
        return self._expiry.get(session_id)
