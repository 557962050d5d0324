"""The operations a multi carries (create, set, delete, check), as plain records, and their
translation to wire requests and back.

`ZkClient.multi([Check("/controller_epoch", 4), SetData("/brokers/topics/t/partitions/0/state",
data, 7)])` runs them all or none; on success it returns one result per op: the created path
(str) for Create, the new Stat for SetData, None for Delete and Check.
"""

from __future__ import annotations

from dataclasses import dataclass

from roost.wire.zk.constants import CreateMode
from roost.wire.zk.records import (
    ACL,
    CheckResult,
    CheckVersionRequest,
    CreateRequest,
    CreateResult,
    DeleteRequest,
    DeleteResult,
    OpResult,
    Request,
    SetDataRequest,
    SetDataResult,
    Stat,
)
from roost.zkclient.connect_string import ConnectString
from roost.zkclient.errors import ZkError


@dataclass(frozen=True, slots=True)
class Create:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False
    acl: tuple[ACL, ...] | None = None  # None: the client's default ACL


@dataclass(frozen=True, slots=True)
class SetData:
    path: str
    data: bytes
    version: int = -1  # -1: any version


@dataclass(frozen=True, slots=True)
class Delete:
    path: str
    version: int = -1


@dataclass(frozen=True, slots=True)
class Check:
    path: str
    version: int


Op = Create | SetData | Delete | Check
OpOutcome = str | Stat | None


def create_flags(ephemeral: bool, sequential: bool) -> int:
    if ephemeral:
        return CreateMode.EPHEMERAL_SEQUENTIAL if sequential else CreateMode.EPHEMERAL
    return CreateMode.PERSISTENT_SEQUENTIAL if sequential else CreateMode.PERSISTENT


def to_request(op: Op, chroot: ConnectString, default_acl: tuple[ACL, ...]) -> Request:
    if isinstance(op, Create):
        acl = list(op.acl if op.acl is not None else default_acl)
        return CreateRequest(chroot.to_server(op.path, op.sequential), _bytes(op.data), acl,
                             create_flags(op.ephemeral, op.sequential))
    if isinstance(op, SetData):
        return SetDataRequest(chroot.to_server(op.path), _bytes(op.data), op.version)
    if isinstance(op, Delete):
        return DeleteRequest(chroot.to_server(op.path), op.version)
    if isinstance(op, Check):
        return CheckVersionRequest(chroot.to_server(op.path), op.version)
    raise TypeError(f"not a multi operation: {op!r}")


def describe(op: Op) -> str:
    if isinstance(op, Create):
        kind = ("ephemeral " if op.ephemeral else "") + ("sequential " if op.sequential else "")
        return f"create {kind}{op.path}"
    if isinstance(op, SetData):
        return f"set {op.path} at version {op.version}"
    if isinstance(op, Delete):
        return f"delete {op.path} at version {op.version}"
    return f"check {op.path} at version {op.version}"


def outcome(result: OpResult, chroot: ConnectString) -> OpOutcome:
    """The caller's view of one successful op's result."""
    if isinstance(result, CreateResult):
        return chroot.to_client(result.path) or result.path
    if isinstance(result, SetDataResult):
        return result.stat
    if isinstance(result, DeleteResult | CheckResult):
        return None
    raise ZkError(f"unexpected result in a multi reply: {result!r}")


def _bytes(data: bytes) -> bytes:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"znode data must be bytes, not {type(data).__name__}")
    return bytes(data)

