"""The ZooKeeper requests `roost zk` needs that kazoo 2.11 does not offer: container and TTL
creates, persistent watches (addWatch), getEphemerals, getAllChildrenNumber and whoami (all ZooKeeper 3.6+).

Each is a request object in kazoo's own shape (`type`, `serialize()`, `deserialize()`), sent
through `KazooClient._call`, so that it shares the client's session, connection and error
mapping (a reply's error code raises the same kazoo exception as a built-in call would).
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from kazoo.protocol.serialization import Create2, int_struct, read_string, write_string
from kazoo.protocol.states import ZnodeStat
from kazoo.security import ACL

from roost.wire.zk.constants import OpCode

LONG = struct.Struct("!q")

# addWatch modes (ZooDefs.AddWatchModes)
ADD_WATCH_MODES = {"PERSISTENT": 0, "PERSISTENT_RECURSIVE": 1}
# CreateMode flags for the extended create opcodes
CONTAINER_FLAGS = 4
TTL_FLAGS = {False: 5, True: 6}  # PERSISTENT_WITH_TTL, PERSISTENT_SEQUENTIAL_WITH_TTL


class CreateContainer(Create2):
    """A container node: the server deletes it once its last child is gone."""

    type = int(OpCode.CREATE_CONTAINER)


class CreateTTL(NamedTuple):
    """A persistent node the server deletes when it was not modified for `ttl` ms and has no
    children (the server needs `extendedTypesEnabled`)."""

    path: str
    data: bytes | None
    acl: list[ACL]
    flags: int
    ttl: int
    type = int(OpCode.CREATE_TTL)

    def serialize(self) -> bytes:
        return bytes(Create2(self.path, self.data, self.acl, self.flags).serialize()) + LONG.pack(self.ttl)

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> tuple[str, ZnodeStat]:
        return Create2.deserialize(buffer, offset)


class AddWatch(NamedTuple):
    path: str
    mode: int
    type = int(OpCode.ADD_WATCH)

    def serialize(self) -> bytes:
        return bytes(write_string(self.path)) + int_struct.pack(self.mode)

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> bool:
        return True


def _read_strings(buffer: bytes, offset: int) -> tuple[list[str], int]:
    count = int_struct.unpack_from(buffer, offset)[0]
    offset += int_struct.size
    items = []
    for _ in range(max(count, 0)):
        item, offset = read_string(buffer, offset)
        items.append(item)
    return items, offset


class GetEphemerals(NamedTuple):
    """The session's ephemeral nodes whose path starts with `prefix`."""

    prefix: str
    type = int(OpCode.GET_EPHEMERALS)

    def serialize(self) -> bytes:
        return bytes(write_string(self.prefix))

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> list[str]:
        return _read_strings(buffer, offset)[0]


class GetAllChildrenNumber(NamedTuple):
    """How many nodes are under `path` (all depths, `path` itself not counted)."""

    path: str
    type = int(OpCode.GET_ALL_CHILDREN_NUMBER)

    def serialize(self) -> bytes:
        return bytes(write_string(self.path))

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> int:
        return int(int_struct.unpack_from(buffer, offset)[0])


class WhoAmI:
    """The session's authenticated identities, as (scheme, user) pairs. (Not an empty tuple:
    kazoo skips the reply of a request that is falsy.)"""

    type = int(OpCode.WHO_AM_I)

    def serialize(self) -> bytes:
        return b""

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> list[tuple[str, str]]:
        count = int_struct.unpack_from(buffer, offset)[0]
        offset += int_struct.size
        found = []
        for _ in range(max(count, 0)):
            scheme, offset = read_string(buffer, offset)
            user, offset = read_string(buffer, offset)
            found.append((scheme, user))
        return found


def call(client: Any, request: Any, timeout: float) -> Any:
    """Send `request` on kazoo `client`'s session and wait (at most `timeout` s) for its reply."""
    result = client.handler.async_result()
    client._call(request, result)
    return result.get(timeout=timeout)
