"""Watches: which connection wants to hear about which path (per server, never replicated).

One-shot data watches (getData, exists) and child watches (getChildren) fire once and are gone;
persistent and persistent-recursive watches (addWatch) stay. `trigger` follows ZooKeeper's
DataTree/WatchManager: NodeCreated and NodeDataChanged go to data watches, NodeChildrenChanged
to child watches, NodeDeleted to both (once per watcher); a recursive watch hears created,
deleted and changed events for its whole subtree but no child events.
"""

from __future__ import annotations

from collections.abc import Hashable
from enum import IntEnum
from typing import Generic, TypeVar

from roost.wire.zk.constants import EventType

W = TypeVar("W", bound=Hashable)


class WatchKind(IntEnum):
    DATA = 1
    CHILD = 2
    PERSISTENT = 3
    PERSISTENT_RECURSIVE = 4


class WatchLimitExceeded(Exception):
    """A watcher asked for more watches than the per-session limit allows."""


class WatchManager(Generic[W]):
    def __init__(self, max_per_watcher: int) -> None:
        assert max_per_watcher > 0
        self.max_per_watcher = max_per_watcher
        self._tables: dict[WatchKind, dict[str, set[W]]] = {kind: {} for kind in WatchKind}
        self._by_watcher: dict[W, set[tuple[WatchKind, str]]] = {}

    def add(self, kind: WatchKind, path: str, watcher: W) -> None:
        """Register a watch; raises WatchLimitExceeded past the per-watcher limit."""
        owned = self._by_watcher.get(watcher)
        if owned is None:
            owned = self._by_watcher[watcher] = set()
        key = (kind, path)
        if key in owned:
            return
        if len(owned) >= self.max_per_watcher:
            raise WatchLimitExceeded(f"more than {self.max_per_watcher} watches")
        owned.add(key)
        self._tables[kind].setdefault(path, set()).add(watcher)

    def _take(self, kind: WatchKind, path: str) -> set[W]:
        """Remove and return the one-shot watchers of `kind` on `path`."""
        watchers = self._tables[kind].pop(path, None)
        if not watchers:
            return set()
        key = (kind, path)
        for watcher in watchers:
            owned = self._by_watcher.get(watcher)
            if owned is not None:
                owned.discard(key)
        return watchers

    def trigger(self, event_type: int, path: str) -> set[W]:
        """The watchers to notify of `event_type` on `path`; one-shot watches are consumed."""
        if event_type == EventType.NODE_CHILDREN_CHANGED:
            notified = self._take(WatchKind.CHILD, path)
        elif event_type == EventType.NODE_DELETED:
            notified = self._take(WatchKind.DATA, path) | self._take(WatchKind.CHILD, path)
        else:
            notified = self._take(WatchKind.DATA, path)
        persistent = self._tables[WatchKind.PERSISTENT]
        if persistent:
            notified |= persistent.get(path, set())
        recursive = self._tables[WatchKind.PERSISTENT_RECURSIVE]
        if recursive and event_type != EventType.NODE_CHILDREN_CHANGED:
            notified |= recursive.get("/", set())
            position = 0
            while True:
                position = path.find("/", position + 1)
                prefix = path if position < 0 else path[:position]
                notified |= recursive.get(prefix, set())
                if position < 0:
                    break
        return notified

    def contains(self, kind: WatchKind, path: str, watcher: W) -> bool:
        return (kind, path) in self._by_watcher.get(watcher, ())

    def remove(self, kind: WatchKind, path: str, watcher: W) -> bool:
        owned = self._by_watcher.get(watcher)
        if owned is None or (kind, path) not in owned:
            return False
        owned.discard((kind, path))
        table = self._tables[kind]
        watchers = table.get(path)
        if watchers is not None:
            watchers.discard(watcher)
            if not watchers:
                del table[path]
        return True

    def remove_watcher(self, watcher: W) -> None:
        """Forget every watch of a closed connection."""
        for kind, path in self._by_watcher.pop(watcher, ()):
            table = self._tables[kind]
            watchers = table.get(path)
            if watchers is not None:
                watchers.discard(watcher)
                if not watchers:
                    del table[path]

    def count(self, watcher: W) -> int:
        return len(self._by_watcher.get(watcher, ()))

    def total(self) -> int:
        return sum(len(owned) for owned in self._by_watcher.values())

    def paths_watched(self) -> int:
        return sum(len(table) for table in self._tables.values())
