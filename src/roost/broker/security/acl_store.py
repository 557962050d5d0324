"""Where the authorizer's ACLs live: ZooKeeper for a broker in a cluster (Kafka's znodes, see
`acl_znodes.py`, so every broker and any ZooKeeper client agree), a local file for a lone broker.

Both stores feed the pure `Authorizer` with `replace(pattern, entries)`, and both answer
CreateAcls / DeleteAcls through `add` and `remove`.

ZooKeeper: at start every ACL znode is read; afterwards each broker watches the two change
directories and re-reads just the pattern a new notification names (Kafka's
ZkNodeChangeNotificationListener), so an ACL written by any broker, by Kafka's tools or by a
plain ZooKeeper client that also writes the notification reaches every broker within a watch's
round trip. Writes are compare-and-set on the znode's version, retried a bounded number of times.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from roost.broker.security import acl_znodes as znodes
from roost.broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    PatternType,
    ResourcePattern,
)
from roost.broker.security.authorizer import Authorizer
from roost.broker.zk.change_notifications import EXPIRY_MS, ChangeNotificationListener
from roost.log.files import atomic_write
from roost.zkclient import BadVersionError, NodeExistsError, NoNodeError, ZkClient, ZkError

log = logging.getLogger("roost.broker.acl")

WRITE_ATTEMPTS = 20  # compare-and-set retries when other brokers write the same pattern at once

Change = Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]]


class AclStore(Protocol):
    authorizer: Authorizer

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def update(self, pattern: ResourcePattern, change: Change) -> frozenset[AccessControlEntry]: ...


async def add_bindings(store: AclStore, bindings: list[AclBinding]) -> None:
    """Add `bindings` (each already checked), one write per pattern."""
    by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for binding in bindings:
        by_pattern.setdefault(binding.pattern, set()).add(binding.entry)
    for pattern, entries in by_pattern.items():
        await store.update(pattern, lambda current, new=frozenset(entries): current | new)


async def remove_matching(store: AclStore, acl_filter: AclBindingFilter) -> list[AclBinding]:
    """Delete every ACL the filter matches; the ones deleted."""
    removed: list[AclBinding] = []
    for pattern in store.authorizer.patterns():
        if not acl_filter.matches_pattern(pattern):
            continue
        gone: set[AccessControlEntry] = set()

        def without(current: frozenset[AccessControlEntry], gone: set[AccessControlEntry] = gone
                    ) -> frozenset[AccessControlEntry]:
            gone.clear()
            gone.update(e for e in current if acl_filter.matches_entry(e))
            return current - gone

        await store.update(pattern, without)
        removed.extend(AclBinding(pattern, entry) for entry in gone)
    return removed


class LocalAclStore:
    """A lone broker's ACLs, in one JSON file (`meta/acls.json`) in Kafka's znode format per pattern."""

    def __init__(self, authorizer: Authorizer, path: Path) -> None:
        self.authorizer = authorizer
        self.path = path

    async def start(self) -> None:
        if not self.path.exists():
            return
        document = json.loads(self.path.read_text())
        for key, acls in document.items():
            pattern_name, kind, name = key.split("/", 2)
            pattern = ResourcePattern(znodes.resource_type(kind), name, znodes.pattern_type(pattern_name))
            self.authorizer.replace(pattern, znodes.decode_entries(json.dumps(acls).encode()))

    async def stop(self) -> None:
        pass

    async def update(self, pattern: ResourcePattern, change: Change) -> frozenset[AccessControlEntry]:
        new = change(self.authorizer.entries(pattern))
        self.authorizer.replace(pattern, new)
        document = {
            f"{p.pattern_type.name}/{znodes.pascal(p.resource_type.name)}/{p.name}":
                json.loads(znodes.encode_entries(self.authorizer.entries(p)))
            for p in self.authorizer.patterns()}
        atomic_write(self.path, json.dumps(document, indent=1, sort_keys=True).encode())
        return new


class ZkAclStore:
    def __init__(self, authorizer: Authorizer, zk: ZkClient, expiry_ms: int = EXPIRY_MS) -> None:
        self.authorizer = authorizer
        self.zk = zk
        self.expiry_ms = expiry_ms
        self._listeners = [_change_listener(self, kind) for kind in (PatternType.LITERAL, PatternType.PREFIXED)]

    async def start(self) -> None:
        for path in (znodes.LITERAL_ROOT, znodes.PREFIXED_ROOT, znodes.LITERAL_CHANGES, znodes.EXTENDED_CHANGES):
            await self.zk.ensure_path(path)
        # Watches first, then the full read: a change made in between is read twice, never missed.
        for listener in self._listeners:
            await listener.arm()
        loaded = 0
        for kind in (PatternType.LITERAL, PatternType.PREFIXED):
            for resource in znodes.STORED_TYPES:
                try:
                    names = await self.zk.get_children(znodes.type_dir(kind, resource))
                except NoNodeError:
                    continue
                for name in names:
                    await self.reload(ResourcePattern(resource, name, kind))
                    loaded += 1
        for listener in self._listeners:
            listener.listen()
        log.info("authorizer: %d ACL patterns loaded from ZooKeeper", loaded)

    async def stop(self) -> None:
        for listener in self._listeners:
            await listener.stop()

    async def reload(self, pattern: ResourcePattern) -> None:
        try:
            data, _ = await self.zk.get(znodes.znode_path(pattern))
        except NoNodeError:
            data = b""
        try:
            entries = znodes.decode_entries(data)
        except AclError as error:
            log.warning("ignoring the ACLs of %s: %s", znodes.znode_path(pattern), error)
            entries = frozenset()
        self.authorizer.replace(pattern, entries)

    async def update(self, pattern: ResourcePattern, change: Change) -> frozenset[AccessControlEntry]:
        path = znodes.znode_path(pattern)
        for _ in range(WRITE_ATTEMPTS):
            try:
                data, stat = await self.zk.get(path)
            except NoNodeError:
                new = change(frozenset())
                if not new:
                    self.authorizer.replace(pattern, new)
                    return new
                try:
                    await self.zk.create(path, znodes.encode_entries(new), makepath=True)
                except NodeExistsError:
                    continue
                break
            current = znodes.decode_entries(data)
            new = change(current)
            if new == current:
                self.authorizer.replace(pattern, new)
                return new
            try:
                if new:
                    await self.zk.set(path, znodes.encode_entries(new), stat.version)
                else:
                    await self.zk.delete(path, stat.version)
            except (BadVersionError, NoNodeError):
                continue
            break
        else:
            raise ZkError(f"{path} kept changing under {WRITE_ATTEMPTS} attempts to write it")
        await self.zk.create(f"{znodes.CHANGES[pattern.pattern_type]}/{znodes.CHANGE_PREFIX}",
                             znodes.encode_change(pattern), sequential=True, makepath=True)
        self.authorizer.replace(pattern, new)  # this broker at once; the others by the notification
        return new


def _change_listener(store: ZkAclStore, kind: PatternType) -> ChangeNotificationListener:
    """One change directory's watch: each new notification makes the store re-read its pattern."""
    async def told(child: str, data: bytes) -> None:
        try:
            await store.reload(znodes.decode_change(kind, data))
        except AclError as error:
            log.warning("ignoring ACL change %s: %s", child, error)

    return ChangeNotificationListener(store.zk, znodes.CHANGES[kind], znodes.CHANGE_PREFIX, told, "ACL change",
                                      store.expiry_ms)
