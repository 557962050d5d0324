"""The session tracker's expiry buckets and the watch manager's one-shot/persistent rules."""

from __future__ import annotations

import pytest

from roost.keeper.sessions import SessionTracker, negotiate_timeout
from roost.keeper.watches import WatchKind, WatchLimitExceeded, WatchManager
from roost.wire.zk.constants import EventType


def test_negotiation_clamps_to_the_bounds() -> None:
    assert negotiate_timeout(1, 4000, 40000) == 4000
    assert negotiate_timeout(10_000, 4000, 40000) == 10_000
    assert negotiate_timeout(10**9, 4000, 40000) == 40000


def test_sessions_expire_at_the_end_of_their_bucket() -> None:
    tracker = SessionTracker(bucket_ms=100)
    tracker.add(1, 1000, now_ms=50)  # 1050 rounds up to the bucket ending at 1100
    tracker.add(2, 1000, now_ms=0)  # bucket ends at 1100 as well
    assert tracker.deadline(1) == 1100
    assert tracker.expired(1099) == []
    assert tracker.expired(1100) == [1, 2]
    assert 1 not in tracker and len(tracker) == 0


def test_touch_moves_a_session_and_unknown_touches_are_ignored() -> None:
    tracker = SessionTracker(bucket_ms=100)
    tracker.add(7, 500, now_ms=0)
    assert tracker.touch(7, now_ms=400)
    assert tracker.expired(600) == []
    assert tracker.expired(1000) == [7]
    assert not tracker.touch(7, now_ms=1000)
    tracker.add(8, 500, 0)
    tracker.remove(8)
    assert tracker.expired(10_000) == []


def test_reset_restarts_every_clock() -> None:
    tracker = SessionTracker(bucket_ms=100)
    tracker.add(1, 500, 0)
    tracker.reset({1: 500, 2: 800}, now_ms=5000)
    assert tracker.expired(5000) == []
    assert tracker.expired(5600) == [1]
    assert tracker.expired(5900) == [2]


def test_one_shot_watches_fire_once_and_deleted_reaches_data_and_child_watchers() -> None:
    watches: WatchManager[str] = WatchManager(max_per_watcher=10)
    watches.add(WatchKind.DATA, "/a", "x")
    watches.add(WatchKind.CHILD, "/a", "x")
    watches.add(WatchKind.CHILD, "/a", "y")
    assert watches.trigger(EventType.NODE_DATA_CHANGED, "/a") == {"x"}
    assert watches.trigger(EventType.NODE_DATA_CHANGED, "/a") == set()
    watches.add(WatchKind.DATA, "/a", "x")
    assert watches.trigger(EventType.NODE_DELETED, "/a") == {"x", "y"}
    assert watches.total() == 0


def test_persistent_and_recursive_watches_stay() -> None:
    watches: WatchManager[str] = WatchManager(max_per_watcher=10)
    watches.add(WatchKind.PERSISTENT, "/a", "p")
    watches.add(WatchKind.PERSISTENT_RECURSIVE, "/a", "r")
    watches.add(WatchKind.PERSISTENT_RECURSIVE, "/", "root")
    assert watches.trigger(EventType.NODE_CHILDREN_CHANGED, "/a") == {"p"}
    assert watches.trigger(EventType.NODE_CREATED, "/a/b/c") == {"r", "root"}
    assert watches.trigger(EventType.NODE_DATA_CHANGED, "/a") == {"p", "r", "root"}
    assert watches.trigger(EventType.NODE_DATA_CHANGED, "/ab") == {"root"}
    assert watches.count("p") == 1
    assert watches.remove(WatchKind.PERSISTENT, "/a", "p")
    assert not watches.remove(WatchKind.PERSISTENT, "/a", "p")
    watches.remove_watcher("r")
    assert watches.trigger(EventType.NODE_CREATED, "/a/x") == {"root"}


def test_watch_limit_per_watcher() -> None:
    watches: WatchManager[str] = WatchManager(max_per_watcher=2)
    watches.add(WatchKind.DATA, "/a", "w")
    watches.add(WatchKind.DATA, "/a", "w")  # the same watch twice counts once
    watches.add(WatchKind.CHILD, "/a", "w")
    with pytest.raises(WatchLimitExceeded):
        watches.add(WatchKind.DATA, "/b", "w")
    watches.add(WatchKind.DATA, "/b", "other")
