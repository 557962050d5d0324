"""Test helpers for ACLs: write them straight into ZooKeeper as any ZooKeeper client could (Kafka's
znodes and change notifications, through kazoo), and wait for a broker to obey them."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

ANONYMOUS = "User:ANONYMOUS"
TYPE_DIRS = ("Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User")
ROOTS = {"LITERAL": "/kafka-acl", "PREFIXED": "/kafka-acl-extended/prefixed"}


class ZkAcls:
    """ACLs written with kazoo, each write followed by Kafka's change notification."""

    def __init__(self, connect: str) -> None:
        self.zk = KazooClient(hosts=connect, timeout=10.0)
        self.zk.start(timeout=15)

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()

    def _notify(self, pattern: str, kind: str, name: str) -> None:
        if pattern == "LITERAL":
            self.zk.create("/kafka-acl-changes/acl_changes_", f"{kind.upper()}:{name}".encode(),
                           sequence=True, makepath=True)
        else:
            data = {"version": 1, "resourceType": kind.upper(), "name": name, "patternType": pattern}
            self.zk.create("/kafka-acl-extended-changes/acl_changes_", json.dumps(data).encode(),
                           sequence=True, makepath=True)

    def set(self, kind: str, name: str, acls: list[dict[str, str]], pattern: str = "LITERAL") -> None:
        path = f"{ROOTS[pattern]}/{kind}/{name}"
        if acls:
            data = json.dumps({"version": 1, "acls": acls}).encode()
            if self.zk.exists(path):
                self.zk.set(path, data)
            else:
                self.zk.create(path, data, makepath=True)
        elif self.zk.exists(path):
            self.zk.delete(path)
        self._notify(pattern, {"TransactionalId": "TRANSACTIONAL_ID"}.get(kind, kind), name)

    def grant(self, kind: str, name: str, *operations: str, principal: str = ANONYMOUS,
              permission: str = "Allow", pattern: str = "LITERAL", host: str = "*") -> None:
        path = f"{ROOTS[pattern]}/{kind}/{name}"
        try:
            current = json.loads(self.zk.get(path)[0])["acls"]
        except NoNodeError:
            current = []
        added = [{"principal": principal, "permissionType": permission, "operation": op, "host": host}
                 for op in operations]
        self.set(kind, name, current + [a for a in added if a not in current], pattern)

    def clear(self) -> None:
        """Every ACL gone."""
        for pattern, root in ROOTS.items():
            for kind in TYPE_DIRS:
                try:
                    names = self.zk.get_children(f"{root}/{kind}")
                except NoNodeError:
                    continue
                for name in names:
                    self.set(kind, name, [], pattern)


def eventually(check: Callable[[], Any], timeout: float = 5.0, what: str = "condition") -> Any:
    """Poll `check` until it returns something true (bounded); the last value otherwise fails."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s (last: {value!r})")
        time.sleep(0.02)
