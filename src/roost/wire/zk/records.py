"""ZooKeeper's jute records (zookeeper.jute): requests, responses, stats, ACLs, watcher events.

Each request type reads itself from a `JuteReader` and writes itself to a `JuteWriter`; the server
decodes requests and encodes responses, a client (our tests) does the opposite. `REQUEST_TYPES`
maps an opcode to its request record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from roost.wire.zk.constants import OpCode
from roost.wire.zk.errors import ZkCodecError
from roost.wire.zk.jute import JuteReader, JuteWriter


class Stat(NamedTuple):
    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int
    pzxid: int


# exists() on a missing node: ZooKeeper answers NoNode; this all -1 stat is what clients show.
NO_STAT = Stat(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1)


class Id(NamedTuple):
    scheme: str
    id: str


class ACL(NamedTuple):
    perms: int
    scheme: str
    id: str


def read_acl_list(r: JuteReader) -> list[ACL]:
    acls = []
    for _ in range(r.vector_length(12)):
        perms = r.int()
        scheme = r.ustring()
        ident = r.ustring()
        # kazoo writes empty strings as null (length -1), e.g. the id of an "auth" ACL.
        acls.append(ACL(perms, scheme or "", ident or ""))
    return acls


def write_acl_list(w: JuteWriter, acls: list[ACL] | tuple[ACL, ...]) -> None:
    w.int(len(acls))
    for acl in acls:
        w.int(acl.perms).ustring(acl.scheme).ustring(acl.id)


def read_id_list(r: JuteReader) -> list[Id]:
    ids = []
    for _ in range(r.vector_length(8)):
        scheme = r.ustring()
        ident = r.ustring()
        if scheme is None or ident is None:
            raise ZkCodecError("Id with a null scheme or id")
        ids.append(Id(scheme, ident))
    return ids


def write_id_list(w: JuteWriter, ids: list[Id] | tuple[Id, ...]) -> None:
    w.int(len(ids))
    for ident in ids:
        w.ustring(ident.scheme).ustring(ident.id)


# ----------------------------------------------------------------------------------- handshake


@dataclass(slots=True)
class ConnectRequest:
    protocol_version: int
    last_zxid_seen: int
    timeout: int
    session_id: int
    passwd: bytes
    read_only: bool = False
    # Old clients omit the readOnly byte; the response then omits it too.
    has_read_only: bool = True

    @classmethod
    def read(cls, r: JuteReader) -> ConnectRequest:
        protocol_version = r.int()
        last_zxid_seen = r.long()
        timeout = r.int()
        session_id = r.long()
        passwd = r.buffer() or b""
        has_read_only = r.remaining > 0
        read_only = r.bool() if has_read_only else False
        r.expect_end("ConnectRequest")
        return cls(protocol_version, last_zxid_seen, timeout, session_id, passwd, read_only, has_read_only)

    def write(self, w: JuteWriter) -> None:
        w.int(self.protocol_version).long(self.last_zxid_seen).int(self.timeout).long(self.session_id)
        w.buffer(self.passwd)
        if self.has_read_only:
            w.bool(self.read_only)


@dataclass(slots=True)
class ConnectResponse:
    protocol_version: int
    timeout: int
    session_id: int
    passwd: bytes
    read_only: bool = False
    has_read_only: bool = True

    @classmethod
    def read(cls, r: JuteReader) -> ConnectResponse:
        protocol_version = r.int()
        timeout = r.int()
        session_id = r.long()
        passwd = r.buffer() or b""
        has_read_only = r.remaining > 0
        read_only = r.bool() if has_read_only else False
        r.expect_end("ConnectResponse")
        return cls(protocol_version, timeout, session_id, passwd, read_only, has_read_only)

    def write(self, w: JuteWriter) -> None:
        w.int(self.protocol_version).int(self.timeout).long(self.session_id).buffer(self.passwd)
        if self.has_read_only:
            w.bool(self.read_only)


# ------------------------------------------------------------------------------------ requests


class Request:
    """Base of request records; each has an `opcode` field holding the op's ZooKeeper code."""

    if not TYPE_CHECKING:  # (to the checker, empty slots would forbid setting `opcode`)
        __slots__ = ()
    opcode: int  # declared for the checker: each record's dataclass defines the field

    @classmethod
    def read(cls, r: JuteReader) -> Request:
        raise NotImplementedError

    def write(self, w: JuteWriter) -> None:
        raise NotImplementedError


@dataclass(slots=True)
class EmptyRequest(Request):
    """Ping, closeSession and whoAmI carry no body."""

    opcode: int = OpCode.PING

    @classmethod
    def read(cls, r: JuteReader) -> EmptyRequest:
        return cls()

    def write(self, w: JuteWriter) -> None:
        return None


@dataclass(slots=True)
class CreateRequest(Request):
    path: str
    data: bytes | None  # None is jute's null buffer, which ZooKeeper keeps apart from b""
    acl: list[ACL]
    flags: int
    opcode: int = OpCode.CREATE
    ttl: int = -1

    @classmethod
    def read(cls, r: JuteReader) -> CreateRequest:
        path = r.path()
        data = r.buffer()
        acl = read_acl_list(r)
        flags = r.int()
        return cls(path, data, acl, flags)

    def write(self, w: JuteWriter) -> None:
        w.ustring(self.path).buffer(self.data)
        write_acl_list(w, self.acl)
        w.int(self.flags)
        if self.opcode == OpCode.CREATE_TTL:
            w.long(self.ttl)


def _read_create(opcode: int) -> Callable[[JuteReader], CreateRequest]:
    def read(r: JuteReader) -> CreateRequest:
        request = CreateRequest.read(r)
        request.opcode = opcode
        if opcode == OpCode.CREATE_TTL:
            request.ttl = r.long()
        return request

    return read


@dataclass(slots=True)
class DeleteRequest(Request):
    path: str
    version: int
    opcode: int = OpCode.DELETE

    @classmethod
    def read(cls, r: JuteReader) -> DeleteRequest:
        return cls(r.path(), r.int())

    def write(self, w: JuteWriter) -> None:
        w.ustring(self.path).int(self.version)


@dataclass(slots=True)
class PathWatchRequest(Request):
    """exists, getData, getChildren and getChildren2: a path and a watch flag."""

    path: str
    watch: bool
    opcode: int = OpCode.GET_DATA

    @classmethod
    def read(cls, r: JuteReader) -> PathWatchRequest:
        return cls(r.path(), r.bool())

    def write(self, w: JuteWriter) -> None:
        w.ustring(self.path).bool(self.watch)


@dataclass(slots=True)
class SetDataRequest(Request):
    path: str
    data: bytes | None  # None is jute's null buffer, which ZooKeeper keeps apart from b""
    version: int
    opcode: int = OpCode.SET_DATA

    @classmethod
    def read(cls, r: JuteReader) -> SetDataRequest:
        path = r.path()
        data = r.buffer()
        return cls(path, data, r.int())

    def write(self, w: JuteWriter) -> None:
        w.ustring(self.path).buffer(self.data).int(self.version)


@dataclass(slots=True)
class PathRequest(Request):
    """getACL, sync, getEphemerals, getAllChildrenNumber: just a path."""

    path: str
    opcode: int = OpCode.SYNC

    @classmethod
    def read(cls, r: JuteReader) -> PathRequest:
        return cls(r.path())

    def write(self, w: JuteWriter) -> None:
        w.ustring(self.path)


@dataclass(slots=True)
class SetACLRequest(Request):
    path: str
    acl: list[ACL]
    version: int
    opcode: int = OpCode.SET_ACL

    @classmethod
    def read(cls, r: JuteReader) -> SetACLRequest:
        path = r.path()
        acl = read_acl_list(r)
        return cls(path, acl, r.int())

    def write(self, w: JuteWriter) -> None:
        w.ustring(self.path)
        write_acl_list(w, self.acl)
        w.int(self.version)


@dataclass(slots=True)
class CheckVersionRequest(Request):
    path: str
    version: int
    opcode: int = OpCode.CHECK

    @classmethod
    def read(cls, r: JuteReader) -> CheckVersionRequest:
        return cls(r.path(), r.int())

    def write(self, w: JuteWriter) -> None:
        w.ustring(self.path).int(self.version)


# The sub-operations a multi may carry (MultiOperationRecord); reads only inside multiRead.
MULTI_WRITE_OPS = frozenset(
    {OpCode.CREATE, OpCode.CREATE2, OpCode.CREATE_CONTAINER, OpCode.CREATE_TTL, OpCode.DELETE,
     OpCode.DELETE_CONTAINER, OpCode.SET_DATA, OpCode.CHECK}
)
MULTI_READ_OPS = frozenset({OpCode.GET_CHILDREN, OpCode.GET_DATA})


@dataclass(slots=True)
class MultiRequest(Request):
    ops: list[Request]
    opcode: int = OpCode.MULTI

    @classmethod
    def read(cls, r: JuteReader) -> MultiRequest:
        ops: list[Request] = []
        while True:
            op_type, done, _err = r.int(), r.bool(), r.int()
            if done:
                break
            reader = _MULTI_OP_READERS.get(op_type)
            if reader is None:
                raise ZkCodecError(f"invalid op type {op_type} inside a multi")
            ops.append(reader(r))
        return cls(ops)

    def write(self, w: JuteWriter) -> None:
        for op in self.ops:
            w.int(op.opcode).bool(False).int(-1)
            op.write(w)
        w.int(-1).bool(True).int(-1)


@dataclass(slots=True)
class SetWatchesRequest(Request):
    relative_zxid: int
    data_watches: list[str]
    exist_watches: list[str]
    child_watches: list[str]
    persistent_watches: list[str] = field(default_factory=list)
    persistent_recursive_watches: list[str] = field(default_factory=list)
    opcode: int = OpCode.SET_WATCHES

    @classmethod
    def read(cls, r: JuteReader) -> SetWatchesRequest:
        return cls(r.long(), r.ustring_vector(), r.ustring_vector(), r.ustring_vector())

    @classmethod
    def read2(cls, r: JuteReader) -> SetWatchesRequest:
        request = cls(r.long(), r.ustring_vector(), r.ustring_vector(), r.ustring_vector(),
                      r.ustring_vector(), r.ustring_vector())
        request.opcode = OpCode.SET_WATCHES2
        return request

    def write(self, w: JuteWriter) -> None:
        w.long(self.relative_zxid).ustring_vector(self.data_watches)
        w.ustring_vector(self.exist_watches).ustring_vector(self.child_watches)
        if self.opcode == OpCode.SET_WATCHES2:
            w.ustring_vector(self.persistent_watches).ustring_vector(self.persistent_recursive_watches)


@dataclass(slots=True)
class AuthRequest(Request):
    type: int
    scheme: str
    auth: bytes
    opcode: int = OpCode.AUTH

    @classmethod
    def read(cls, r: JuteReader) -> AuthRequest:
        auth_type = r.int()
        scheme = r.path()
        auth = r.buffer()
        return cls(auth_type, scheme, b"" if auth is None else auth)

    def write(self, w: JuteWriter) -> None:
        w.int(self.type).ustring(self.scheme).buffer(self.auth)


@dataclass(slots=True)
class PathModeRequest(Request):
    """addWatch (mode), checkWatches and removeWatches (watcher type): a path and an int."""

    path: str
    mode: int
    opcode: int = OpCode.ADD_WATCH

    @classmethod
    def read(cls, r: JuteReader) -> PathModeRequest:
        return cls(r.path(), r.int())

    def write(self, w: JuteWriter) -> None:
        w.ustring(self.path).int(self.mode)


@dataclass(slots=True)
class ReconfigRequest(Request):
    joining: str | None
    leaving: str | None
    new_members: str | None
    config_id: int
    opcode: int = OpCode.RECONFIG

    @classmethod
    def read(cls, r: JuteReader) -> ReconfigRequest:
        return cls(r.ustring(), r.ustring(), r.ustring(), r.long())

    def write(self, w: JuteWriter) -> None:
        w.ustring(self.joining).ustring(self.leaving).ustring(self.new_members).long(self.config_id)


@dataclass(slots=True)
class SaslRequest(Request):
    token: bytes
    opcode: int = OpCode.SASL

    @classmethod
    def read(cls, r: JuteReader) -> SaslRequest:
        return cls(r.buffer() or b"")

    def write(self, w: JuteWriter) -> None:
        w.buffer(self.token)


def _with_opcode(reader: Callable[[JuteReader], Request], opcode: int) -> Callable[[JuteReader], Request]:
    def read(r: JuteReader) -> Request:
        request = reader(r)
        request.opcode = opcode
        return request

    return read


# opcode -> function reading that op's request body.
REQUEST_READERS: dict[int, Callable[[JuteReader], Request]] = {
    OpCode.CREATE: _read_create(OpCode.CREATE),
    OpCode.CREATE2: _read_create(OpCode.CREATE2),
    OpCode.CREATE_CONTAINER: _read_create(OpCode.CREATE_CONTAINER),
    OpCode.CREATE_TTL: _read_create(OpCode.CREATE_TTL),
    OpCode.DELETE: DeleteRequest.read,
    OpCode.DELETE_CONTAINER: _with_opcode(PathRequest.read, OpCode.DELETE_CONTAINER),
    OpCode.EXISTS: _with_opcode(PathWatchRequest.read, OpCode.EXISTS),
    OpCode.GET_DATA: _with_opcode(PathWatchRequest.read, OpCode.GET_DATA),
    OpCode.GET_CHILDREN: _with_opcode(PathWatchRequest.read, OpCode.GET_CHILDREN),
    OpCode.GET_CHILDREN2: _with_opcode(PathWatchRequest.read, OpCode.GET_CHILDREN2),
    OpCode.SET_DATA: SetDataRequest.read,
    OpCode.GET_ACL: _with_opcode(PathRequest.read, OpCode.GET_ACL),
    OpCode.SET_ACL: SetACLRequest.read,
    OpCode.SYNC: _with_opcode(PathRequest.read, OpCode.SYNC),
    OpCode.CHECK: CheckVersionRequest.read,
    OpCode.MULTI: MultiRequest.read,
    OpCode.MULTI_READ: _with_opcode(MultiRequest.read, OpCode.MULTI_READ),
    OpCode.PING: _with_opcode(EmptyRequest.read, OpCode.PING),
    OpCode.CLOSE_SESSION: _with_opcode(EmptyRequest.read, OpCode.CLOSE_SESSION),
    OpCode.WHO_AM_I: _with_opcode(EmptyRequest.read, OpCode.WHO_AM_I),
    OpCode.AUTH: AuthRequest.read,
    OpCode.SASL: SaslRequest.read,
    OpCode.SET_WATCHES: SetWatchesRequest.read,
    OpCode.SET_WATCHES2: SetWatchesRequest.read2,
    OpCode.ADD_WATCH: PathModeRequest.read,
    OpCode.CHECK_WATCHES: _with_opcode(PathModeRequest.read, OpCode.CHECK_WATCHES),
    OpCode.REMOVE_WATCHES: _with_opcode(PathModeRequest.read, OpCode.REMOVE_WATCHES),
    OpCode.GET_EPHEMERALS: _with_opcode(PathRequest.read, OpCode.GET_EPHEMERALS),
    OpCode.GET_ALL_CHILDREN_NUMBER: _with_opcode(PathRequest.read, OpCode.GET_ALL_CHILDREN_NUMBER),
    OpCode.RECONFIG: ReconfigRequest.read,
}

_MULTI_OP_READERS: dict[int, Callable[[JuteReader], Request]] = {op: REQUEST_READERS[op] for op in MULTI_WRITE_OPS | MULTI_READ_OPS}


def decode_request(opcode: int, data: bytes | bytearray | memoryview, offset: int = 0,
                   end: int | None = None) -> Request:
    """Decode the body of a request with `opcode`; trailing bytes are tolerated as ZooKeeper does.

    Raises ZkCodecError for malformed bodies and KeyError-free ZkCodecError for unknown opcodes.
    """
    reader_fn = REQUEST_READERS.get(opcode)
    if reader_fn is None:
        raise ZkCodecError(f"unknown opcode {opcode}")
    return reader_fn(JuteReader(data, offset, end))


def encode_request_body(request: Request) -> bytes:
    w = JuteWriter()
    request.write(w)
    return w.getvalue()


# ----------------------------------------------------------------------------------- responses


@dataclass(slots=True)
class CreateResult:
    """A create inside a multi; `stat` is present for create2/createTTL/createContainer."""

    path: str
    stat: Stat | None = None
    opcode: int = OpCode.CREATE


@dataclass(slots=True)
class SetDataResult:
    stat: Stat
    opcode: int = OpCode.SET_DATA


@dataclass(slots=True)
class DeleteResult:
    opcode: int = OpCode.DELETE


@dataclass(slots=True)
class CheckResult:
    opcode: int = OpCode.CHECK


@dataclass(slots=True)
class ErrorResult:
    err: int
    opcode: int = OpCode.ERROR


@dataclass(slots=True)
class GetDataResult:
    """A getData inside a multiRead."""

    data: bytes | None
    stat: Stat
    opcode: int = OpCode.GET_DATA


@dataclass(slots=True)
class GetChildrenResult:
    children: list[str]
    opcode: int = OpCode.GET_CHILDREN


OpResult = CreateResult | SetDataResult | DeleteResult | CheckResult | ErrorResult | GetDataResult | GetChildrenResult


def write_multi_response(w: JuteWriter, results: list[OpResult]) -> None:
    for result in results:
        if isinstance(result, ErrorResult):
            w.int(OpCode.ERROR).bool(False).int(result.err).int(result.err)
            continue
        w.int(result.opcode).bool(False).int(0)
        if isinstance(result, CreateResult):
            w.ustring(result.path)
            if result.opcode != OpCode.CREATE:
                assert result.stat is not None
                w.stat(result.stat)
        elif isinstance(result, SetDataResult):
            w.stat(result.stat)
        elif isinstance(result, GetDataResult):
            w.buffer(result.data).stat(result.stat)
        elif isinstance(result, GetChildrenResult):
            w.ustring_vector(result.children)
    w.int(-1).bool(True).int(-1)


def read_multi_response(r: JuteReader) -> list[OpResult]:
    results: list[OpResult] = []
    while True:
        op_type, done, err = r.int(), r.bool(), r.int()
        if done:
            return results
        if op_type == OpCode.ERROR:
            results.append(ErrorResult(r.int()))
        elif op_type == OpCode.CREATE:
            results.append(CreateResult(r.path()))
        elif op_type in (OpCode.CREATE2, OpCode.CREATE_TTL, OpCode.CREATE_CONTAINER):
            results.append(CreateResult(r.path(), Stat(*r.stat()), op_type))
        elif op_type == OpCode.SET_DATA:
            results.append(SetDataResult(Stat(*r.stat())))
        elif op_type in (OpCode.DELETE, OpCode.DELETE_CONTAINER):
            results.append(DeleteResult())
        elif op_type == OpCode.CHECK:
            results.append(CheckResult())
        elif op_type == OpCode.GET_DATA:
            results.append(GetDataResult(r.buffer(), Stat(*r.stat())))
        elif op_type == OpCode.GET_CHILDREN:
            results.append(GetChildrenResult(r.ustring_vector()))
        else:
            raise ZkCodecError(f"invalid op type {op_type} in a multi response")
        del err


@dataclass(slots=True)
class WatcherEvent:
    type: int
    state: int
    path: str

    @classmethod
    def read(cls, r: JuteReader) -> WatcherEvent:
        return cls(r.int(), r.int(), r.path())

    def write(self, w: JuteWriter) -> None:
        w.int(self.type).int(self.state).ustring(self.path)
