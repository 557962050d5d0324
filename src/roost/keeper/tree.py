"""The data tree: znodes and sessions as a deterministic state machine over replicated commands.

Every member applies the same sequence of `Command`s (see `roost.keeper.commands`) and ends in
the same state: the zxid is the tree's own counter (one per command, failed or not, as in
ZooKeeper), and times come from the batch, never from the local clock.

Applying a write is two steps, as in ZooKeeper's PrepRequestProcessor and DataTree:
  * prep: validate the request against the current tree plus the earlier ops of the same multi
    (an overlay of pending changes) and turn it into a transaction, or fail with an error code;
  * commit: apply the transactions (all of a multi's or none) and report which watches fire.

Reads are not commands; a member serves them from its own tree (`get`, `children_of` ...).
The tree knows nothing about connections or watches: it returns the watch triggers of each
command, and the server delivers them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from roost.keeper import acl as acls
from roost.keeper.commands import Command, CommandKind
from roost.keeper.paths import InvalidPath, split, validate_path
from roost.wire.zk.constants import CreateMode, Err, EventType, OpCode, Perms
from roost.wire.zk.errors import ZkCodecError
from roost.wire.zk.jute import JuteReader, JuteWriter
from roost.wire.zk.records import (
    ACL,
    CheckResult,
    CheckVersionRequest,
    CreateRequest,
    CreateResult,
    DeleteRequest,
    DeleteResult,
    ErrorResult,
    Id,
    MultiRequest,
    OpResult,
    PathRequest,
    Request,
    SetACLRequest,
    SetDataRequest,
    SetDataResult,
    Stat,
    decode_request,
    read_acl_list,
    write_acl_list,
    write_multi_response,
)

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)

# ephemeralOwner encodings of ZooKeeper's EphemeralType: containers and TTL nodes are marked by
# special owner values that no session id can take (session ids here are positive).
CONTAINER_OWNER = -(2**63)
TTL_MASK = -(2**56)  # 0xFF00000000000000 as a signed long
MAX_TTL = (1 << 40) - 1

CONFIG_PATH = "/zookeeper/config"  # the ensemble's dynamic configuration, as ZooKeeper 3.5+
SPECIAL_PATHS = frozenset({"/", "/zookeeper", "/zookeeper/quota", CONFIG_PATH})

SNAPSHOT_MAGIC = 0x524B5453  # "RKTS"
SNAPSHOT_VERSION = 2

Trigger = tuple[int, str]  # (EventType, path)


class KeeperError(Exception):
    """A request failed with a ZooKeeper error code."""

    def __init__(self, code: Err, path: str = "") -> None:
        super().__init__(f"{code.name} {path}".strip())
        self.code = code


def is_ttl_owner(owner: int) -> bool:
    return owner < 0 and owner != CONTAINER_OWNER and (owner & TTL_MASK) == TTL_MASK


def ttl_of(owner: int) -> int:
    return owner & ~TTL_MASK


def is_normal_ephemeral(owner: int) -> bool:
    return owner > 0


def _next_version(current: int) -> int:
    """ZooKeeper's checkAndIncVersion increment: int32 wrap-around, skipping -1 (ZOOKEEPER-4743)."""
    nxt = INT_MIN if current == INT_MAX else current + 1
    return 0 if nxt == -1 else nxt


def _check_version(current: int, expected: int, path: str) -> int:
    if expected != -1 and expected != current:
        raise KeeperError(Err.BAD_VERSION, path)
    return _next_version(current)


@dataclass(slots=True)
class Znode:
    # None is a null buffer (created or set with null data): ZooKeeper keeps it apart from b""
    # and gives it back as null, while its Stat's dataLength is 0 like an empty one's.
    data: bytes | None
    acl: tuple[ACL, ...]
    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    # ZooKeeper persists cversion as the number of children ever created (it names sequential
    # children) and reports 2 * cversion - numChildren (creates + deletes) in the Stat.
    cversion: int
    aversion: int
    ephemeral_owner: int
    pzxid: int
    children: set[str] = field(default_factory=set)

    def stat(self) -> Stat:
        count = len(self.children)
        return Stat(self.czxid, self.mzxid, self.ctime, self.mtime, self.version,
                    self.cversion * 2 - count, self.aversion, self.client_owner(), data_length(self.data),
                    count, self.pzxid)

    def client_owner(self) -> int:
        """The ephemeralOwner clients see: containers and TTL nodes show 0, as in ZooKeeper."""
        owner = self.ephemeral_owner
        return owner if owner > 0 else 0


@dataclass(slots=True)
class SessionInfo:
    timeout: int
    passwd: bytes


@dataclass(slots=True)
class ApplyResult:
    """What one command did: its zxid, error code, encoded response body and fired watches."""

    zxid: int
    err: int = Err.OK
    body: bytes = b""
    triggers: list[Trigger] = field(default_factory=list)
    created_session: int | None = None
    closed_session: int | None = None


# --------------------------------------------------------------------------------- prep overlay


@dataclass(slots=True)
class _Record:
    """A node as seen by prep: the tree's node with the multi's earlier ops applied."""

    version: int
    cversion: int
    aversion: int
    ephemeral_owner: int
    acl: tuple[ACL, ...]
    child_count: int


@dataclass(slots=True)
class _CreateTxn:
    path: str
    data: bytes | None
    acl: tuple[ACL, ...]
    owner: int
    parent_cversion: int
    opcode: int


@dataclass(slots=True)
class _DeleteTxn:
    path: str


@dataclass(slots=True)
class _SetDataTxn:
    path: str
    data: bytes | None
    version: int


@dataclass(slots=True)
class _SetACLTxn:
    path: str
    acl: tuple[ACL, ...]
    aversion: int


@dataclass(slots=True)
class _CheckTxn:
    path: str


_Txn = _CreateTxn | _DeleteTxn | _SetDataTxn | _SetACLTxn | _CheckTxn


class DataTree:
    """Znodes, sessions and ephemeral ownership; see the module docstring."""

    def __init__(self, extended_types_enabled: bool = False) -> None:
        self.extended_types_enabled = extended_types_enabled
        self.nodes: dict[str, Znode] = {}
        self.sessions: dict[int, SessionInfo] = {}
        self.ephemerals: dict[int, set[str]] = {}
        self.containers: set[str] = set()
        self.ttls: set[str] = set()
        self.last_zxid = 0
        # Per proposing member: the (incarnation, epoch) of the last batch applied from it.
        self.origins: dict[int, tuple[int, int]] = {}
        self._acl_intern: dict[tuple[ACL, ...], tuple[ACL, ...]] = {}
        self._init_special_nodes()

    def _init_special_nodes(self) -> None:
        # The nodes every ZooKeeper 3.8 server starts with, with their odd initial stats.
        def node(acl: tuple[ACL, ...] = acls.OPEN_ACL_UNSAFE, aversion: int = 0) -> Znode:
            return Znode(b"", self._intern(acl), 0, 0, 0, 0, 0, 0, aversion, 0, 0)

        self.nodes["/"] = node()
        self.nodes["/zookeeper"] = node()
        self.nodes["/zookeeper/quota"] = node()
        self.nodes["/zookeeper/config"] = node(acls.READ_ACL_UNSAFE, aversion=-1)
        self.nodes["/"].children.add("zookeeper")
        self.nodes["/zookeeper"].children.update(("quota", "config"))

    def _intern(self, acl: tuple[ACL, ...]) -> tuple[ACL, ...]:
        # Most nodes share a handful of ACL lists; keep one copy of each (ZooKeeper's ACL cache).
        return self._acl_intern.setdefault(acl, acl)

    # ----------------------------------------------------------------------------------- reads

    def get(self, path: str) -> Znode | None:
        return self.nodes.get(path)

    @property
    def node_count(self) -> int:
        return len(self.nodes)

    def ephemeral_count(self) -> int:
        return sum(len(paths) for paths in self.ephemerals.values())

    def approximate_data_size(self) -> int:
        return sum(len(path) + data_length(node.data) for path, node in self.nodes.items())

    # ---------------------------------------------------------------------------------- apply

    def admit(self, origin_node: int, incarnation: int, epoch: int) -> bool:
        """Whether to apply a batch, or skip it as stale (see `roost.keeper.commands`).

        A batch is stale when the same member process already had a batch of a later epoch
        applied: its proposer abandoned it (and closed its clients) before moving on.
        """
        seen = self.origins.get(origin_node)
        if seen is not None and seen[0] == incarnation and epoch < seen[1]:
            return False
        self.origins[origin_node] = (incarnation, epoch)
        return True

    def set_config(self, data: bytes, mtime_ms: int) -> list[tuple[int, str]]:
        """A membership change was applied: `/zookeeper/config` gets its rendering (whose
        version line names the zxid this consumes, `last_zxid + 1`). Returns the watch triggers."""
        self.last_zxid += 1
        node = self.nodes[CONFIG_PATH]
        node.data = data
        node.mzxid = self.last_zxid
        node.mtime = mtime_ms
        node.version = -1  # as ZooKeeper 3.8 shows it once reconfigured (mzxid is what moves)
        return [(EventType.NODE_DATA_CHANGED, CONFIG_PATH)]

    def apply(self, command: Command, time_ms: int) -> ApplyResult:
        """Apply one command; consumes exactly one zxid whatever the outcome."""
        self.last_zxid += 1
        zxid = self.last_zxid
        kind = command.kind
        if kind == CommandKind.REQUEST:
            return self._apply_request(command, zxid, time_ms)
        if kind == CommandKind.CREATE_SESSION:
            result = ApplyResult(zxid)
            if command.session_id in self.sessions or command.session_id <= 0:
                result.err = Err.SESSION_EXPIRED
                return result
            self.sessions[command.session_id] = SessionInfo(command.timeout, command.passwd)
            result.created_session = command.session_id
            return result
        if kind in (CommandKind.CLOSE_SESSION, CommandKind.EXPIRE_SESSION):
            return self._close_session(command.session_id, zxid)
        if kind == CommandKind.DELETE_CONTAINER:
            return self._delete_container(command.path, zxid)
        raise AssertionError(f"unhandled command kind {kind}")

    def _close_session(self, session_id: int, zxid: int) -> ApplyResult:
        result = ApplyResult(zxid, closed_session=session_id)
        if self.sessions.pop(session_id, None) is None:
            return result
        # Sorted, so that every member deletes (and fires watches) in the same order.
        for path in sorted(self.ephemerals.pop(session_id, ())):
            self._delete_node(path, zxid, result.triggers)
        return result

    def _delete_container(self, path: str, zxid: int) -> ApplyResult:
        result = ApplyResult(zxid)
        node = self.nodes.get(path)
        if node is None:
            result.err = Err.NO_NODE
        elif node.children:
            result.err = Err.NOT_EMPTY
        elif node.ephemeral_owner != CONTAINER_OWNER and not is_ttl_owner(node.ephemeral_owner):
            result.err = Err.BAD_VERSION
        else:
            self._delete_node(path, zxid, result.triggers)
        return result

    def _apply_request(self, command: Command, zxid: int, time_ms: int) -> ApplyResult:
        result = ApplyResult(zxid)
        request = command.request
        if request is None:
            try:
                request = decode_request(command.opcode, command.body)
            except ZkCodecError:
                result.err = Err.MARSHALLING_ERROR
                return result
        if command.null_as_empty:
            request = _null_as_empty(request)
        opcode = command.opcode
        if opcode == OpCode.MULTI:
            assert isinstance(request, MultiRequest)
            self._apply_multi(request, command, zxid, time_ms, result)
            return result
        if opcode == OpCode.RECONFIG:
            result.err = Err.RECONFIG_DISABLED
            return result
        if opcode not in _SINGLE_WRITE_OPS:
            result.err = Err.UNIMPLEMENTED
            return result
        try:
            txn = self._prep(request, command.session_id, command.auth_ids, {})
        except KeeperError as exc:
            result.err = exc.code
            return result
        op_result = self._commit(txn, zxid, time_ms, command.session_id, result.triggers)
        result.body = _encode_single(op_result)
        return result

    def _apply_multi(self, multi: MultiRequest, command: Command, zxid: int, time_ms: int,
                     result: ApplyResult) -> None:
        overlay: dict[str, _Record | None] = {}
        txns: list[_Txn] = []
        failed_at = -1
        failure = Err.OK
        for index, op in enumerate(multi.ops):
            if op.opcode not in _MULTI_OPS:
                failed_at, failure = index, Err.BAD_ARGUMENTS
                break
            try:
                txns.append(self._prep(op, command.session_id, command.auth_ids, overlay))
            except KeeperError as exc:
                failed_at, failure = index, exc.code
                break
        results: list[OpResult]
        if failed_at >= 0:
            # All or nothing: the ops before the failure report OK (rolled back), the failing op
            # its error, the ops after it RuntimeInconsistency; the tree is unchanged.
            results = [
                ErrorResult(Err.OK if i < failed_at else failure if i == failed_at
                            else Err.RUNTIME_INCONSISTENCY)
                for i in range(len(multi.ops))
            ]
        else:
            results = [self._commit(txn, zxid, time_ms, command.session_id, result.triggers)
                       for txn in txns]
            # ZooKeeper 3.8 answers a create2 inside a multi like a plain create (no Stat), while
            # containers and TTL nodes keep theirs.
            results = [CreateResult(r.path) if isinstance(r, CreateResult) and op.opcode == OpCode.CREATE2
                       else r for r, op in zip(results, multi.ops, strict=True)]
        w = JuteWriter()
        write_multi_response(w, results)
        result.body = w.getvalue()

    # ------------------------------------------------------------------------------------ prep

    def _record(self, path: str, overlay: dict[str, _Record | None]) -> _Record:
        if path in overlay:
            record = overlay[path]
            if record is None:
                raise KeeperError(Err.NO_NODE, path)
            return record
        node = self.nodes.get(path)
        if node is None:
            raise KeeperError(Err.NO_NODE, path)
        return _Record(node.version, node.cversion, node.aversion, node.ephemeral_owner, node.acl,
                       len(node.children))

    def _exists(self, path: str, overlay: dict[str, _Record | None]) -> bool:
        if path in overlay:
            return overlay[path] is not None
        return path in self.nodes

    def _check_session(self, session_id: int) -> None:
        if session_id not in self.sessions:
            raise KeeperError(Err.SESSION_EXPIRED)

    def _prep(self, request: Request, session_id: int, auth_ids: tuple[Id, ...],
              overlay: dict[str, _Record | None]) -> _Txn:
        opcode = request.opcode
        if opcode in _CREATE_OPS:
            assert isinstance(request, CreateRequest)
            return self._prep_create(request, session_id, auth_ids, overlay)
        self._check_session(session_id)
        if opcode == OpCode.DELETE:
            assert isinstance(request, DeleteRequest)
            return self._prep_delete(request.path, request.version, auth_ids, overlay)
        if opcode == OpCode.SET_DATA:
            assert isinstance(request, SetDataRequest)
            path = request.path
            _validate(path)
            record = self._record(path, overlay)
            if not acls.check_acl(record.acl, Perms.WRITE, auth_ids):
                raise KeeperError(Err.NO_AUTH, path)
            new_version = _check_version(record.version, request.version, path)
            overlay[path] = _Record(new_version, record.cversion, record.aversion,
                                    record.ephemeral_owner, record.acl, record.child_count)
            return _SetDataTxn(path, request.data, new_version)
        if opcode == OpCode.SET_ACL:
            assert isinstance(request, SetACLRequest)
            path = request.path
            _validate(path)
            new_acl = _fixup(request.acl, auth_ids, path)
            record = self._record(path, overlay)
            if not acls.check_acl(record.acl, Perms.ADMIN, auth_ids):
                raise KeeperError(Err.NO_AUTH, path)
            new_aversion = _check_version(record.aversion, request.version, path)
            overlay[path] = _Record(record.version, record.cversion, new_aversion,
                                    record.ephemeral_owner, new_acl, record.child_count)
            return _SetACLTxn(path, new_acl, new_aversion)
        if opcode == OpCode.CHECK:
            assert isinstance(request, CheckVersionRequest)
            path = request.path
            _validate(path)
            record = self._record(path, overlay)
            if not acls.check_acl(record.acl, Perms.READ, auth_ids):
                raise KeeperError(Err.NO_AUTH, path)
            _check_version(record.version, request.version, path)
            return _CheckTxn(path)
        if opcode == OpCode.DELETE_CONTAINER:
            assert isinstance(request, PathRequest)
            raise KeeperError(Err.UNIMPLEMENTED, request.path)
        raise KeeperError(Err.UNIMPLEMENTED)

    def _prep_create(self, request: CreateRequest, session_id: int, auth_ids: tuple[Id, ...],
                     overlay: dict[str, _Record | None]) -> _CreateTxn:
        path = request.path
        try:
            mode = CreateMode(request.flags)
        except ValueError:
            raise KeeperError(Err.BAD_ARGUMENTS, path) from None
        opcode = request.opcode
        if opcode == OpCode.CREATE_CONTAINER:
            mode = CreateMode.CONTAINER
        elif opcode == OpCode.CREATE_TTL and not mode.is_ttl:
            raise KeeperError(Err.BAD_ARGUMENTS, path)
        if mode.is_ttl and not self.extended_types_enabled:
            raise KeeperError(Err.UNIMPLEMENTED, path)
        ttl = request.ttl if opcode == OpCode.CREATE_TTL else -1
        if mode.is_ttl:
            if not 0 < ttl <= MAX_TTL:
                raise KeeperError(Err.BAD_ARGUMENTS, path)
        elif ttl >= 0:
            raise KeeperError(Err.BAD_ARGUMENTS, path)
        self._check_session(session_id)
        slash = path.rfind("/")
        if slash < 0 or "\x00" in path:
            raise KeeperError(Err.BAD_ARGUMENTS, path)
        parent_path = path[:slash] or "/"
        new_acl = _fixup(request.acl, auth_ids, path)
        parent = self._record(parent_path, overlay)
        if not acls.check_acl(parent.acl, Perms.CREATE, auth_ids):
            raise KeeperError(Err.NO_AUTH, path)
        if mode.is_sequential:
            path = f"{path}{parent.cversion:010d}"
        _validate(path)
        if self._exists(path, overlay):
            raise KeeperError(Err.NODE_EXISTS, path)
        if is_normal_ephemeral(parent.ephemeral_owner):
            raise KeeperError(Err.NO_CHILDREN_FOR_EPHEMERALS, path)
        new_cversion = parent.cversion + 1
        if mode == CreateMode.CONTAINER:
            owner = CONTAINER_OWNER
        elif mode.is_ttl:
            owner = TTL_MASK | ttl
        elif mode.is_ephemeral:
            owner = session_id
        else:
            owner = 0
        overlay[parent_path] = _Record(parent.version, new_cversion, parent.aversion,
                                       parent.ephemeral_owner, parent.acl, parent.child_count + 1)
        overlay[path] = _Record(0, 0, 0, owner, new_acl, 0)
        return _CreateTxn(path, request.data, new_acl, owner, new_cversion, opcode)

    def _prep_delete(self, path: str, version: int, auth_ids: tuple[Id, ...],
                     overlay: dict[str, _Record | None]) -> _DeleteTxn:
        slash = path.rfind("/")
        if slash < 0 or "\x00" in path or path in SPECIAL_PATHS:
            raise KeeperError(Err.BAD_ARGUMENTS, path)
        parent_path = path[:slash] or "/"
        parent = self._record(parent_path, overlay)
        if not acls.check_acl(parent.acl, Perms.DELETE, auth_ids):
            raise KeeperError(Err.NO_AUTH, path)
        record = self._record(path, overlay)
        _check_version(record.version, version, path)
        if record.child_count > 0:
            raise KeeperError(Err.NOT_EMPTY, path)
        overlay[parent_path] = _Record(parent.version, parent.cversion, parent.aversion,
                                       parent.ephemeral_owner, parent.acl, parent.child_count - 1)
        overlay[path] = None
        return _DeleteTxn(path)

    # ---------------------------------------------------------------------------------- commit

    def _commit(self, txn: _Txn, zxid: int, time_ms: int, session_id: int,
                triggers: list[Trigger]) -> OpResult:
        if isinstance(txn, _CreateTxn):
            node = self._create_node(txn, zxid, time_ms, triggers)
            if txn.opcode == OpCode.CREATE:
                return CreateResult(txn.path)
            # Creates with a Stat (create2, TTL, container) all report as create2 (OpResult).
            return CreateResult(txn.path, node.stat(), OpCode.CREATE2)
        if isinstance(txn, _DeleteTxn):
            self._delete_node(txn.path, zxid, triggers)
            return DeleteResult()
        if isinstance(txn, _SetDataTxn):
            node = self.nodes[txn.path]
            node.data = txn.data
            node.version = txn.version
            node.mzxid = zxid
            node.mtime = time_ms
            triggers.append((EventType.NODE_DATA_CHANGED, txn.path))
            return SetDataResult(node.stat())
        if isinstance(txn, _SetACLTxn):
            node = self.nodes[txn.path]
            node.acl = self._intern(txn.acl)
            node.aversion = txn.aversion
            # setACL fires no watches in ZooKeeper; the Stat is the reply.
            return SetDataResult(node.stat())
        assert isinstance(txn, _CheckTxn)
        return CheckResult()

    def _create_node(self, txn: _CreateTxn, zxid: int, time_ms: int, triggers: list[Trigger]) -> Znode:
        parent_path, name = split(txn.path)
        parent = self.nodes[parent_path]
        assert txn.path not in self.nodes, txn.path
        assert txn.parent_cversion > parent.cversion, (txn.path, txn.parent_cversion, parent.cversion)
        parent.cversion = txn.parent_cversion
        parent.pzxid = zxid
        parent.children.add(name)
        node = Znode(txn.data, self._intern(txn.acl), zxid, zxid, time_ms, time_ms, 0, 0, 0,
                     txn.owner, zxid)
        self.nodes[txn.path] = node
        self._index_owner(txn.path, txn.owner)
        triggers.append((EventType.NODE_CREATED, txn.path))
        triggers.append((EventType.NODE_CHILDREN_CHANGED, parent_path))
        return node

    def _index_owner(self, path: str, owner: int) -> None:
        if owner == 0:
            return
        if owner == CONTAINER_OWNER:
            self.containers.add(path)
        elif is_ttl_owner(owner):
            self.ttls.add(path)
        else:
            self.ephemerals.setdefault(owner, set()).add(path)

    def _delete_node(self, path: str, zxid: int, triggers: list[Trigger]) -> None:
        parent_path, name = split(path)
        node = self.nodes.pop(path)
        assert not node.children, path
        parent = self.nodes[parent_path]
        parent.children.discard(name)
        if zxid > parent.pzxid:
            parent.pzxid = zxid
        owner = node.ephemeral_owner
        if owner == CONTAINER_OWNER:
            self.containers.discard(path)
        elif is_ttl_owner(owner):
            self.ttls.discard(path)
        elif owner:
            owned = self.ephemerals.get(owner)
            if owned is not None:
                owned.discard(path)
                if not owned:
                    del self.ephemerals[owner]
        triggers.append((EventType.NODE_DELETED, path))
        triggers.append((EventType.NODE_CHILDREN_CHANGED, parent_path))

    # ---------------------------------------------------------------------- container reaping

    def reapable(self, now_ms: int, limit: int) -> list[str]:
        """Empty containers that once had children, and TTL nodes idle past their TTL."""
        found: list[str] = []
        for path in sorted(self.containers):
            node = self.nodes[path]
            if not node.children and node.cversion > 0:
                found.append(path)
                if len(found) >= limit:
                    return found
        for path in sorted(self.ttls):
            node = self.nodes[path]
            if not node.children and now_ms - node.mtime > ttl_of(node.ephemeral_owner):
                found.append(path)
                if len(found) >= limit:
                    return found
        return found

    # -------------------------------------------------------------------------------- snapshot

    def snapshot(self) -> bytes:
        """Serialise the whole tree (nodes, sessions, zxid) deterministically."""
        w = JuteWriter()
        w.int(SNAPSHOT_MAGIC).int(SNAPSHOT_VERSION).long(self.last_zxid)
        w.int(len(self.sessions))
        for session_id in sorted(self.sessions):
            info = self.sessions[session_id]
            w.long(session_id).int(info.timeout).buffer(info.passwd)
        w.int(len(self.origins))
        for node_id in sorted(self.origins):
            incarnation, epoch = self.origins[node_id]
            w.int(node_id).long(incarnation).long(epoch)
        w.int(len(self.nodes))
        for path in sorted(self.nodes):
            node = self.nodes[path]
            w.ustring(path).buffer(node.data)
            write_acl_list(w, node.acl)
            w.long(node.czxid).long(node.mzxid).long(node.ctime).long(node.mtime)
            w.int(node.version).int(node.cversion).int(node.aversion)
            w.long(node.ephemeral_owner).long(node.pzxid)
        return w.getvalue()

    @classmethod
    def from_snapshot(cls, blob: bytes, extended_types_enabled: bool = False) -> DataTree:
        r = JuteReader(blob)
        if r.int() != SNAPSHOT_MAGIC or r.int() != SNAPSHOT_VERSION:
            raise ZkCodecError("not a keeper tree snapshot")
        tree = cls(extended_types_enabled)
        tree.nodes.clear()
        tree.last_zxid = r.long()
        for _ in range(r.vector_length(16)):
            session_id = r.long()
            timeout = r.int()
            tree.sessions[session_id] = SessionInfo(timeout, r.buffer() or b"")
        for _ in range(r.vector_length(20)):
            node_id = r.int()
            tree.origins[node_id] = (r.long(), r.long())
        for _ in range(r.vector_length(60)):
            path = r.path()
            if not path.startswith("/") or path in tree.nodes:
                raise ZkCodecError(f"snapshot has a bad or repeated path {path!r}")
            # A null buffer is a null znode's data. The field was always a jute buffer and keepers
            # before null data wrote only b"" there, so their snapshots read as they always did.
            data = r.buffer()
            acl = tuple(read_acl_list(r))
            czxid, mzxid, ctime, mtime = r.long(), r.long(), r.long(), r.long()
            version, cversion, aversion = r.int(), r.int(), r.int()
            owner, pzxid = r.long(), r.long()
            tree.nodes[path] = Znode(data, tree._intern(acl), czxid, mzxid, ctime, mtime, version,
                                     cversion, aversion, owner, pzxid)
        r.expect_end("tree snapshot")
        for path, node in tree.nodes.items():
            if path != "/":
                parent_path, name = split(path)
                parent = tree.nodes.get(parent_path)
                if parent is None:
                    raise ZkCodecError(f"snapshot node {path} has no parent")
                parent.children.add(name)
            tree._index_owner(path, node.ephemeral_owner)
        if "/" not in tree.nodes:
            raise ZkCodecError("snapshot has no root")
        return tree

    def digest(self) -> tuple[object, ...]:
        """A comparable summary of the whole state (for tests of determinism)."""
        return (
            self.last_zxid,
            tuple(sorted((sid, info.timeout, info.passwd) for sid, info in self.sessions.items())),
            tuple(sorted(self.origins.items())),
            tuple(sorted((path, node.data, node.acl, node.stat()) for path, node in self.nodes.items())),
        )

    def paths(self) -> Iterable[str]:
        return self.nodes.keys()


_CREATE_OPS = frozenset({OpCode.CREATE, OpCode.CREATE2, OpCode.CREATE_CONTAINER, OpCode.CREATE_TTL})
_SINGLE_WRITE_OPS = _CREATE_OPS | {OpCode.DELETE, OpCode.SET_DATA, OpCode.SET_ACL, OpCode.CHECK}
_MULTI_OPS = _CREATE_OPS | {OpCode.DELETE, OpCode.SET_DATA, OpCode.CHECK}


def data_length(data: bytes | None) -> int:
    """A Stat's dataLength: 0 for null data, as in ZooKeeper."""
    return 0 if data is None else len(data)


def _null_as_empty(request: Request) -> Request:
    """`request` as a format 2 keeper applied it: null create/setData data as empty."""
    if isinstance(request, CreateRequest | SetDataRequest) and request.data is None:
        return replace(request, data=b"")
    if isinstance(request, MultiRequest):
        return replace(request, ops=[_null_as_empty(op) for op in request.ops])
    return request


def _validate(path: str) -> None:
    try:
        validate_path(path)
    except InvalidPath:
        raise KeeperError(Err.BAD_ARGUMENTS, path) from None


def _fixup(acl: list[ACL], auth_ids: tuple[Id, ...], path: str) -> tuple[ACL, ...]:
    try:
        return acls.fixup_acl(acl, auth_ids)
    except acls.InvalidACL:
        raise KeeperError(Err.INVALID_ACL, path) from None


def _encode_single(result: OpResult) -> bytes:
    """The response record of a single (non-multi) write."""
    w = JuteWriter()
    if isinstance(result, CreateResult):
        w.ustring(result.path)
        if result.stat is not None:
            w.stat(result.stat)
    elif isinstance(result, SetDataResult):
        w.stat(result.stat)
    elif isinstance(result, CheckResult):
        # ZooKeeper answers a standalone check with a SetDataResponse carrying an empty Stat.
        w.stat(Stat(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    return w.getvalue()
