"""The client's book of one-shot watches (sans-IO): who to tell when a notification arrives, and
what to re-arm with SetWatches after a reconnect.

A watch is registered when the reply of the read that set it arrives (as ZooKeeper's Java client
does): getData → data watch; exists → data watch if the node exists, exist watch if it does not;
getChildren → child watch. A notification pops the watchers it concerns (ZKWatchManager's rules):
created/changed → data and exist watchers; deleted → data, exist and child watchers; children
changed → child watchers. The same watcher set twice on one path and kind fires once.

Paths here are the server's (chroot included): notifications and SetWatches use those.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

from roost.wire.zk.constants import EventType, KeeperState
from roost.wire.zk.records import SetWatchesRequest

Watcher = Callable[["WatchedEvent"], Any]

# Java's ClientCnxn splits SetWatches at 128 KB so that no packet nears jute.maxbuffer.
SET_WATCHES_MAX_BYTES = 128 * 1024


class WatchKind(Enum):
    DATA = "data"
    EXIST = "exist"
    CHILD = "child"


@dataclass(frozen=True, slots=True)
class WatchedEvent:
    """What a watcher receives. `type` is NODE_CREATED / NODE_DELETED / NODE_DATA_CHANGED /
    NODE_CHILDREN_CHANGED with `state` SYNC_CONNECTED, or NONE with state EXPIRED when the
    session ended and the watch with it. `path` is the client's path (chroot removed)."""

    type: EventType
    state: KeeperState
    path: str


_KINDS_FOR_EVENT: dict[int, tuple[WatchKind, ...]] = {
    EventType.NODE_CREATED: (WatchKind.DATA, WatchKind.EXIST),
    EventType.NODE_DATA_CHANGED: (WatchKind.DATA, WatchKind.EXIST),
    EventType.NODE_DELETED: (WatchKind.DATA, WatchKind.EXIST, WatchKind.CHILD),
    EventType.NODE_CHILDREN_CHANGED: (WatchKind.CHILD,),
}


class WatchRegistry:
    def __init__(self) -> None:
        self._by_kind: dict[WatchKind, dict[str, list[Watcher]]] = {kind: {} for kind in WatchKind}

    def add(self, kind: WatchKind, path: str, watcher: Watcher) -> None:
        watchers = self._by_kind[kind].setdefault(path, [])
        if watcher not in watchers:
            watchers.append(watcher)

    def pop_for(self, event_type: int, path: str) -> list[Watcher]:
        """The watchers a notification of `event_type` on `path` fires, removed from the book."""
        fired: list[Watcher] = []
        for kind in _KINDS_FOR_EVENT.get(event_type, ()):
            for watcher in self._by_kind[kind].pop(path, ()):
                if watcher not in fired:
                    fired.append(watcher)
        return fired

    def pop_all(self) -> list[tuple[str, Watcher]]:
        """Every (path, watcher) pair, removing them all (the session ended)."""
        pairs = [(path, watcher) for book in self._by_kind.values()
                 for path, watchers in book.items() for watcher in watchers]
        for book in self._by_kind.values():
            book.clear()
        return pairs

    def __len__(self) -> int:
        return sum(len(watchers) for book in self._by_kind.values() for watchers in book.values())

    def paths(self, kind: WatchKind) -> list[str]:
        return list(self._by_kind[kind])

    def set_watches_requests(self, relative_zxid: int,
                             max_bytes: int = SET_WATCHES_MAX_BYTES) -> Iterator[SetWatchesRequest]:
        """SetWatches requests re-arming every watch, each under `max_bytes` of paths. The server
        fires at once any watch whose node changed after `relative_zxid` (the last zxid this
        client saw), so nothing that happened while disconnected is missed."""
        lists: tuple[list[str], list[str], list[str]] = ([], [], [])
        size = 0
        for index, kind in enumerate((WatchKind.DATA, WatchKind.EXIST, WatchKind.CHILD)):
            for path in self._by_kind[kind]:
                cost = 4 + len(path.encode("utf-8"))
                if size and size + cost > max_bytes:
                    yield SetWatchesRequest(relative_zxid, *lists)
                    lists, size = ([], [], []), 0
                lists[index].append(path)
                size += cost
        if size:
            yield SetWatchesRequest(relative_zxid, *lists)
