"""Read requests served from a member's own tree (ZooKeeper's FinalRequestProcessor read paths).

Each function returns (error code, encoded response body) and registers the watch the request
asked for. ACL checks, NoNode answers and the exists-watch-on-a-missing-node rule follow
ZooKeeper 3.8.
"""

from __future__ import annotations

from typing import Generic

from roost.keeper import acl as acls
from roost.keeper.paths import is_ancestor_or_self
from roost.keeper.tree import DataTree, data_length
from roost.keeper.watches import W, WatchKind, WatchManager
from roost.wire.zk.constants import AddWatchMode, Err, EventType, OpCode, Perms, WatcherType
from roost.wire.zk.jute import INT, STAT, JuteWriter
from roost.wire.zk.records import (
    ErrorResult,
    GetChildrenResult,
    GetDataResult,
    Id,
    MultiRequest,
    OpResult,
    PathModeRequest,
    PathRequest,
    PathWatchRequest,
    Request,
    SetWatchesRequest,
    write_acl_list,
    write_multi_response,
)

NULL_BUFFER = INT.pack(-1)  # jute's null buffer: a znode created or set with null data

Reply = tuple[int, bytes]

_NO_NODE: Reply = (Err.NO_NODE, b"")
_NO_AUTH: Reply = (Err.NO_AUTH, b"")
_OK: Reply = (Err.OK, b"")


class Reader(Generic[W]):
    """Serves reads for one member: the tree, the watch table, and who is asking."""

    def __init__(self, tree: DataTree, watches: WatchManager[W]) -> None:
        self.tree = tree
        self.watches = watches

    def execute(self, request: Request, watcher: W, auth_ids: tuple[Id, ...],
                session_id: int, last_zxid_seen: int = 0) -> Reply:
        """Run a read request. May raise WatchLimitExceeded (the caller closes the connection)."""
        opcode = request.opcode
        if opcode == OpCode.GET_DATA:
            assert isinstance(request, PathWatchRequest)
            return self.get_data(request.path, request.watch, watcher, auth_ids)
        if opcode == OpCode.EXISTS:
            assert isinstance(request, PathWatchRequest)
            return self.exists(request.path, request.watch, watcher)
        if opcode in (OpCode.GET_CHILDREN, OpCode.GET_CHILDREN2):
            assert isinstance(request, PathWatchRequest)
            return self.get_children(request.path, request.watch, watcher, auth_ids,
                                     with_stat=opcode == OpCode.GET_CHILDREN2)
        if opcode == OpCode.GET_ACL:
            assert isinstance(request, PathRequest)
            return self.get_acl(request.path, auth_ids)
        if opcode == OpCode.ADD_WATCH:
            assert isinstance(request, PathModeRequest)
            return self.add_watch(request.path, request.mode, watcher)
        if opcode in (OpCode.CHECK_WATCHES, OpCode.REMOVE_WATCHES):
            assert isinstance(request, PathModeRequest)
            return self.check_or_remove_watches(request.path, request.mode, watcher,
                                                remove=opcode == OpCode.REMOVE_WATCHES)
        if opcode == OpCode.GET_ALL_CHILDREN_NUMBER:
            assert isinstance(request, PathRequest)
            return self.all_children_number(request.path, auth_ids)
        if opcode == OpCode.GET_EPHEMERALS:
            assert isinstance(request, PathRequest)
            return self.ephemerals(request.path, session_id)
        if opcode == OpCode.WHO_AM_I:
            return self.who_am_i(auth_ids)
        if opcode == OpCode.MULTI_READ:
            assert isinstance(request, MultiRequest)
            return self.multi_read(request, watcher, auth_ids)
        return (Err.UNIMPLEMENTED, b"")

    def get_data(self, path: str, watch: bool, watcher: W, auth_ids: tuple[Id, ...]) -> Reply:
        node = self.tree.nodes.get(path)
        if node is None:
            return _NO_NODE
        if not acls.check_acl(node.acl, Perms.READ, auth_ids):
            return _NO_AUTH
        if watch:
            self.watches.add(WatchKind.DATA, path, watcher)
        data = node.data
        count = len(node.children)
        return Err.OK, b"".join((
            NULL_BUFFER if data is None else INT.pack(len(data)), data or b"",
            STAT.pack(node.czxid, node.mzxid, node.ctime, node.mtime, node.version,
                      node.cversion * 2 - count, node.aversion, node.client_owner(), data_length(data),
                      count, node.pzxid),
        ))

    def exists(self, path: str, watch: bool, watcher: W) -> Reply:
        if "\x00" in path:
            return (Err.BAD_ARGUMENTS, b"")
        if watch:
            # ZooKeeper registers the watch even when the node does not exist (it then fires on
            # creation), and exists needs no ACL.
            self.watches.add(WatchKind.DATA, path, watcher)
        node = self.tree.nodes.get(path)
        if node is None:
            return _NO_NODE
        return Err.OK, STAT.pack(*node.stat())

    def get_children(self, path: str, watch: bool, watcher: W, auth_ids: tuple[Id, ...],
                     with_stat: bool) -> Reply:
        node = self.tree.nodes.get(path)
        if node is None:
            return _NO_NODE
        if not acls.check_acl(node.acl, Perms.READ, auth_ids):
            return _NO_AUTH
        if watch:
            self.watches.add(WatchKind.CHILD, path, watcher)
        w = JuteWriter()
        w.ustring_vector(sorted(node.children))
        if with_stat:
            w.stat(node.stat())
        return Err.OK, w.getvalue()

    def get_acl(self, path: str, auth_ids: tuple[Id, ...]) -> Reply:
        node = self.tree.nodes.get(path)
        if node is None:
            return _NO_NODE
        if not acls.check_acl(node.acl, Perms.READ | Perms.ADMIN, auth_ids):
            return _NO_AUTH
        shown = node.acl if acls.check_acl(node.acl, Perms.ADMIN, auth_ids) else acls.redact(node.acl)
        w = JuteWriter()
        write_acl_list(w, shown)
        w.stat(node.stat())
        return Err.OK, w.getvalue()

    def set_watches(self, request: SetWatchesRequest, watcher: W) -> list[tuple[int, str]]:
        """Re-register a reconnecting client's watches; return the events it missed meanwhile.

        Like ZooKeeper's DataTree.setWatches: a watch whose node changed after the client's
        `relative_zxid` (or appeared, or vanished) fires at once instead of being registered; the
        caller sends those events before the reply.
        """
        tree = self.tree
        relative = request.relative_zxid
        events: list[tuple[int, str]] = []
        for path in request.data_watches:
            node = tree.nodes.get(path)
            if node is None:
                events.append((EventType.NODE_DELETED, path))
            elif node.mzxid > relative:
                events.append((EventType.NODE_DATA_CHANGED, path))
            else:
                self.watches.add(WatchKind.DATA, path, watcher)
        for path in request.exist_watches:
            if path in tree.nodes:
                events.append((EventType.NODE_CREATED, path))
            else:
                self.watches.add(WatchKind.DATA, path, watcher)
        for path in request.child_watches:
            node = tree.nodes.get(path)
            if node is None:
                events.append((EventType.NODE_DELETED, path))
            elif node.pzxid > relative:
                events.append((EventType.NODE_CHILDREN_CHANGED, path))
            else:
                self.watches.add(WatchKind.CHILD, path, watcher)
        for path in request.persistent_watches:
            self.watches.add(WatchKind.PERSISTENT, path, watcher)
        for path in request.persistent_recursive_watches:
            self.watches.add(WatchKind.PERSISTENT_RECURSIVE, path, watcher)
        return events

    def add_watch(self, path: str, mode: int, watcher: W) -> Reply:
        if mode == AddWatchMode.PERSISTENT:
            self.watches.add(WatchKind.PERSISTENT, path, watcher)
        elif mode == AddWatchMode.PERSISTENT_RECURSIVE:
            self.watches.add(WatchKind.PERSISTENT_RECURSIVE, path, watcher)
        else:
            return (Err.BAD_ARGUMENTS, b"")
        return _OK

    def check_or_remove_watches(self, path: str, watcher_type: int, watcher: W,
                                remove: bool) -> Reply:
        kinds_by_type: dict[int, tuple[WatchKind, ...]] = {
            WatcherType.CHILDREN: (WatchKind.CHILD,),
            WatcherType.DATA: (WatchKind.DATA,),
            WatcherType.ANY: tuple(WatchKind),
            WatcherType.PERSISTENT: (WatchKind.PERSISTENT,),
            WatcherType.PERSISTENT_RECURSIVE: (WatchKind.PERSISTENT_RECURSIVE,),
        }
        kinds = kinds_by_type.get(watcher_type)
        if kinds is None:
            return (Err.BAD_ARGUMENTS, b"")
        found = False
        for kind in kinds:
            if remove:
                found = self.watches.remove(kind, path, watcher) or found
            else:
                found = found or self.watches.contains(kind, path, watcher)
        return _OK if found else (Err.NO_WATCHER, b"")

    def all_children_number(self, path: str, auth_ids: tuple[Id, ...]) -> Reply:
        node = self.tree.nodes.get(path)
        if node is None:
            return _NO_NODE
        if not acls.check_acl(node.acl, Perms.READ, auth_ids):
            return _NO_AUTH
        count = sum(1 for other in self.tree.nodes if other != path and is_ancestor_or_self(path, other))
        return Err.OK, INT.pack(count)

    def ephemerals(self, prefix: str, session_id: int) -> Reply:
        owned = self.tree.ephemerals.get(session_id, set())
        if prefix.strip() in ("", "/"):
            found = sorted(owned)
        else:
            found = sorted(p for p in owned if p.startswith(prefix))
        return Err.OK, JuteWriter().ustring_vector(found).getvalue()

    def who_am_i(self, auth_ids: tuple[Id, ...]) -> Reply:
        auth_ids = tuple(i for i in auth_ids if i.scheme != acls.PROVIDERS_SCHEME)
        w = JuteWriter()
        w.int(len(auth_ids))
        for ident in auth_ids:
            # ZooKeeper names a digest identity by its user, not `user:hash` (the provider's
            # getUserName).
            user = ident.id.split(":", 1)[0] if ident.scheme == "digest" else ident.id
            w.ustring(ident.scheme).ustring(user)
        return Err.OK, w.getvalue()

    def multi_read(self, request: MultiRequest, watcher: W, auth_ids: tuple[Id, ...]) -> Reply:
        results: list[OpResult] = []
        for op in request.ops:
            if not isinstance(op, PathWatchRequest) or op.opcode not in (OpCode.GET_DATA, OpCode.GET_CHILDREN):
                return (Err.MARSHALLING_ERROR, b"")
            node = self.tree.nodes.get(op.path)
            if node is None:
                results.append(ErrorResult(Err.NO_NODE))
            elif not acls.check_acl(node.acl, Perms.READ, auth_ids):
                results.append(ErrorResult(Err.NO_AUTH))
            elif op.opcode == OpCode.GET_DATA:
                if op.watch:
                    self.watches.add(WatchKind.DATA, op.path, watcher)
                results.append(GetDataResult(node.data, node.stat()))
            else:
                if op.watch:
                    self.watches.add(WatchKind.CHILD, op.path, watcher)
                results.append(GetChildrenResult(sorted(node.children)))
        w = JuteWriter()
        write_multi_response(w, results)
        return Err.OK, w.getvalue()
