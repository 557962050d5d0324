"""How `roost zk` reads and prints ZooKeeper things the way zkCli does: Stat blocks, ACLs
(`scheme:id:perms,...`), watch events and error lines."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from kazoo import exceptions as kz
from kazoo.security import ACL, Id

from roost.cli.client.client_options import CliError

# zkCli prints permissions in this order (ZKUtil.getPermString), with these bits (ZooDefs.Perms).
PERMISSION_BITS = {"c": 4, "d": 8, "r": 1, "w": 2, "a": 16}
EVENT_NAMES = {1: "NodeCreated", 2: "NodeDeleted", 3: "NodeDataChanged", 4: "NodeChildrenChanged",
               5: "DataWatchRemoved", 6: "ChildWatchRemoved", 7: "PersistentWatchRemoved"}
KAZOO_EVENT_NAMES = {"CREATED": "NodeCreated", "DELETED": "NodeDeleted", "CHANGED": "NodeDataChanged",
                     "CHILD": "NodeChildrenChanged", "NONE": "None"}


def java_date(millis: int) -> str:
    """Java's Date.toString(): `Tue Nov 24 10:32:35 UTC 2026`, in local time."""
    return time.strftime("%a %b %d %H:%M:%S %Z %Y", time.localtime(millis / 1000))


def stat_lines(stat: Any) -> list[str]:
    """A Stat as zkCli's StatPrinter prints it."""
    return [
        f"cZxid = {stat.czxid:#x}",
        f"ctime = {java_date(stat.ctime)}",
        f"mZxid = {stat.mzxid:#x}",
        f"mtime = {java_date(stat.mtime)}",
        f"pZxid = {stat.pzxid:#x}",
        f"cversion = {stat.cversion}",
        f"dataVersion = {stat.version}",
        f"aclVersion = {stat.aversion}",
        f"ephemeralOwner = {stat.ephemeralOwner & 0xFFFFFFFFFFFFFFFF:#x}",
        f"dataLength = {stat.dataLength}",
        f"numChildren = {stat.numChildren}",
    ]


def node_kind(owner: int) -> str:
    """What a Stat's ephemeralOwner tells: ephemeral or persistent (servers report containers
    and TTL nodes as persistent, with owner 0)."""
    return "ephemeral" if owner else "persistent"


def permission_string(perms: int) -> str:
    return "".join(letter for letter, bit in PERMISSION_BITS.items() if perms & bit)


def parse_acl(text: str) -> list[ACL]:
    """zkCli's ACL syntax: `scheme:id:perms[,scheme:id:perms...]`; the id may hold colons
    (`digest:user:hash:rw`), the permissions are letters of `cdrwa`."""
    acl = []
    for entry in text.split(","):
        scheme, sep, rest = entry.partition(":")
        ident, sep2, perms = rest.rpartition(":")
        if not (sep and sep2 and scheme):  # an empty id is fine: `auth::cdrwa`
            raise CliError(f"bad ACL {entry!r}: expected scheme:id:perm (e.g. world:anyone:cdrwa)")
        unknown = sorted(set(perms) - PERMISSION_BITS.keys())
        if unknown or not perms:
            raise CliError(f"bad ACL {entry!r}: permissions are letters of cdrwa, got {perms!r}")
        acl.append(ACL(sum(PERMISSION_BITS[p] for p in set(perms)), Id(scheme, ident)))
    return acl


def acl_text(acl: ACL) -> str:
    """One ACL entry in the syntax `parse_acl` reads."""
    return f"{acl.id.scheme}:{acl.id.id}:{permission_string(acl.perms)}"


def acl_lines(acls: Sequence[ACL]) -> list[str]:
    """ACLs as zkCli's getAcl prints them."""
    lines = []
    for acl in acls:
        lines += [f"'{acl.id.scheme},'{acl.id.id}", f": {permission_string(acl.perms)}"]
    return lines


def event_line(event_type: int | str, path: str, state: str = "SyncConnected") -> str:
    """A watch event as zkCli prints it (an int type from the wire or a kazoo EventType name)."""
    name = EVENT_NAMES.get(event_type, str(event_type)) if isinstance(event_type, int) \
        else KAZOO_EVENT_NAMES.get(event_type, event_type)
    return f"WatchedEvent state:{state} type:{name} path:{path}"


# zkCli's words for the errors a znode command meets.
_MESSAGES: list[tuple[type[BaseException], str]] = [
    (kz.NoNodeError, "Node does not exist: {path}"),
    (kz.NodeExistsError, "Node already exists: {path}"),
    (kz.NotEmptyError, "Node not empty: {path}"),
    (kz.BadVersionError, "version No is not valid : {path}"),
    (kz.NoAuthError, "Insufficient permission : {path}"),
    (kz.InvalidACLError, "Acl is not valid : {path}"),
    (kz.NoChildrenForEphemeralsError, "Ephemerals cannot have children: {path}"),
    (kz.UnimplementedError, "KeeperErrorCode = Unimplemented for {path} (not supported by this server)"),
    (kz.BadArgumentsError, "KeeperErrorCode = BadArguments for {path}"),
    (kz.NewConfigNoQuorumError, "KeeperErrorCode = NewConfigNoQuorum for {path} (the new members "
                                "could not form a quorum; nothing changed)"),
    (kz.ReconfigInProcessError, "KeeperErrorCode = ReconfigInProgress for {path} (another change is under way)"),
    (kz.ReconfigDisabledError, "KeeperErrorCode = ReconfigDisabled for {path} (the server's reconfigEnabled is off)"),
    (kz.AuthFailedError, "Authentication failed (the session is unusable): {path}"),
    (kz.SessionExpiredError, "Session expired: {path}"),
    (kz.ConnectionLoss, "Connection lost: {path}"),
]


def error_for(error: BaseException, path: str) -> CliError:
    """A one-line error naming `path` and what was wrong."""
    for kind, message in _MESSAGES:
        if isinstance(error, kind):
            return CliError(message.format(path=path))
    return CliError(f"{type(error).__name__} for {path}: {error}".rstrip(": "))
