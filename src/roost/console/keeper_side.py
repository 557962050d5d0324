"""The console's view of the keeper (or any ZooKeeper ensemble): its members and their roles
(the four-letter word `srvr`, as `roost cluster status` reads it) and the znode tree through
kazoo: children, data, stat, ACL; create, set and delete with version checks; and watches that
tell the page when a znode changes.

kazoo blocks, so the web layer runs these methods in a thread executor; a watch's callback runs
on kazoo's thread and hands its news to the event loop.
"""

from __future__ import annotations

import asyncio
import posixpath
import threading
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    ZookeeperError,
)
from kazoo.protocol.states import ZnodeStat

from roost.admin.health import probe_keeper
from roost.console.display import shown_bytes
from roost.console.errors import ConsoleError, bad_request, not_found
from roost.console.keeper_identity import kazoo_identity, probe_context
from roost.console.settings import ConsoleSettings

MAX_CHILDREN_SHOWN = 1000  # of one znode; the count says how many there are


def checked_path(path: str) -> str:
    if not path.startswith("/") or (path != "/" and path.endswith("/")) or "//" in path \
            or posixpath.normpath(path) != path:
        raise bad_request(f"not a znode path: {path!r}")
    return path


def stat_fields(stat: ZnodeStat) -> dict[str, Any]:
    """A Stat as the keeper page shows it; the ephemeral owner (a session id) in hex, as zkCli
    prints it (0x0 for a persistent znode)."""
    return {"czxid": stat.czxid, "mzxid": stat.mzxid, "pzxid": stat.pzxid, "ctime": stat.ctime,
            "mtime": stat.mtime, "version": stat.version, "cversion": stat.cversion, "aversion": stat.aversion,
            "ephemeral_owner": f"{stat.ephemeralOwner & 0xFFFFFFFFFFFFFFFF:#x}", "data_length": stat.dataLength,
            "num_children": stat.numChildren}


class KeeperSide:
    def __init__(self, settings: ConsoleSettings) -> None:
        assert settings.zookeeper, "a keeper side needs a connect string"
        self.connect = settings.zookeeper
        self.timeout = settings.request_timeout_s
        self.display_bytes = settings.bounds.display_bytes
        self.identity = kazoo_identity(settings.keeper_settings)
        self.probe_tls = probe_context(self.identity)  # `srvr` over TLS when the client port is TLS
        self._client: KazooClient | None = None
        self._lock = threading.Lock()

    def client(self) -> KazooClient:
        with self._lock:
            if self._client is None:
                client = KazooClient(hosts=self.connect, timeout=self.timeout, **self.identity)
                try:
                    client.start(timeout=self.timeout)
                except Exception as error:  # kazoo raises its own timeout types
                    client.close()
                    raise ConsoleError(503, f"cannot reach the keeper at {self.connect}: {error}") from None
                self._client = client
            return self._client

    def members(self) -> list[dict[str, Any]]:
        addresses = [a.strip() for a in self.connect.split("/", 1)[0].split(",") if a.strip()]
        return [asdict(probe_keeper(address, min(self.timeout, 2.0), self.probe_tls)) for address in addresses]

    def node(self, path: str) -> dict[str, Any]:
        path = checked_path(path)
        client = self.client()
        try:
            data, stat = client.get(path)
            children = sorted(client.get_children(path))
            acls, _ = client.get_acls(path)
        except NoNodeError:
            raise not_found(f"znode {path}") from None
        except ZookeeperError as error:
            raise ConsoleError(502, f"{path}: {type(error).__name__}") from None
        return {"path": path, "data": shown_bytes(data, self.display_bytes), "stat": stat_fields(stat),
                "children": children[:MAX_CHILDREN_SHOWN], "children_total": len(children),
                "acl": [{"perms": acl.acl_list, "scheme": acl.id.scheme, "id": acl.id.id} for acl in acls]}

    def create(self, path: str, data: bytes, ephemeral: bool = False, sequential: bool = False) -> str:
        path = checked_path(path)
        try:
            return self.client().create(path, data, ephemeral=ephemeral, sequence=sequential)
        except NodeExistsError:
            raise ConsoleError(409, f"znode {path} exists") from None
        except NoNodeError:
            raise ConsoleError(404, f"the parent of {path} does not exist") from None
        except ZookeeperError as error:
            raise ConsoleError(502, f"create {path}: {type(error).__name__}") from None

    def set(self, path: str, data: bytes, version: int) -> dict[str, Any]:
        path = checked_path(path)
        try:
            stat = self.client().set(path, data, version=version)
        except BadVersionError:
            raise ConsoleError(409, f"{path} changed since version {version}: reload it and try again") from None
        except NoNodeError:
            raise not_found(f"znode {path}") from None
        except ZookeeperError as error:
            raise ConsoleError(502, f"set {path}: {type(error).__name__}") from None
        return stat_fields(stat)

    def delete(self, path: str, version: int) -> None:
        path = checked_path(path)
        if path in ("/", "/zookeeper"):
            raise ConsoleError(403, f"{path} cannot be deleted")
        try:
            self.client().delete(path, version=version)
        except BadVersionError:
            raise ConsoleError(409, f"{path} changed since version {version}: reload it and try again") from None
        except NotEmptyError:
            raise ConsoleError(409, f"{path} has children: delete them first") from None
        except NoNodeError:
            raise not_found(f"znode {path}") from None

    def watch(self, path: str, loop: asyncio.AbstractEventLoop, notify: Callable[[str], None],
              stopped: threading.Event) -> None:
        """Call `notify("data"|"children")` on the loop whenever `path`'s data or children
        change, until `stopped` is set (kazoo drops a watcher that returns False)."""
        path = checked_path(path)
        client = self.client()
        # kazoo calls each watcher once at once with the current state: that is not a change.
        first = {"data": True, "children": True}

        def changed(kind: str) -> bool:
            if stopped.is_set():
                return False
            if first[kind]:
                first[kind] = False
            else:
                loop.call_soon_threadsafe(notify, kind)
            return True

        def on_data(_data: bytes | None, _stat: ZnodeStat | None) -> bool:
            return changed("data")

        def on_children(_children: list[str]) -> bool:
            return changed("children")

        client.DataWatch(path, on_data)
        try:
            client.ChildrenWatch(path, on_children)
        except NoNodeError:
            pass  # the data watch reports its creation

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.stop()
                self._client.close()
                self._client = None
