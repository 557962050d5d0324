"""Where and how Kafka's ZooKeeper-mode authorizer keeps ACLs (ZkData.scala, AclEntry.java), so a
Roost cluster, Kafka's tools and any ZooKeeper client read and write the same znodes.

- LITERAL patterns: `/kafka-acl/<Type>/<name>`; PREFIXED: `/kafka-acl-extended/prefixed/<Type>/<name>`
  (`<Type>` in PascalCase: Topic, Group, Cluster, TransactionalId, DelegationToken, User).
- Data: `{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
  "operation":"Read","host":"*"}]}`; a pattern without ACLs has no znode.
- After each change, a persistent sequential notification: `/kafka-acl-changes/acl_changes_<seq>`
  holding `TOPIC:orders` for a LITERAL pattern, `/kafka-acl-extended-changes/acl_changes_<seq>`
  holding `{"version":1,"resourceType":"TOPIC","name":"ord","patternType":"PREFIXED"}`.
Pure: encodings only.
"""

from __future__ import annotations

import json
from typing import Any

from roost.broker.security.acl import (
    AccessControlEntry,
    AclError,
    PatternType,
    ResourcePattern,
    ResourceType,
    operation,
    pascal,
    pattern_type,
    permission,
    resource_type,
)

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"

STORED_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID,
                ResourceType.DELEGATION_TOKEN, ResourceType.USER)
ROOTS = {PatternType.LITERAL: LITERAL_ROOT, PatternType.PREFIXED: PREFIXED_ROOT}
CHANGES = {PatternType.LITERAL: LITERAL_CHANGES, PatternType.PREFIXED: EXTENDED_CHANGES}


def type_dir(pattern: PatternType, kind: ResourceType) -> str:
    return f"{ROOTS[pattern]}/{pascal(kind.name)}"


def znode_path(pattern: ResourcePattern) -> str:
    # Names are stored as they are (Kafka does not escape them; topic and group names have no '/').
    return f"{type_dir(pattern.pattern_type, pattern.resource_type)}/{pattern.name}"


def encode_entries(entries: frozenset[AccessControlEntry]) -> bytes:
    acls = [{"principal": e.principal, "permissionType": pascal(e.permission.name),
             "operation": pascal(e.operation.name), "host": e.host}
            for e in sorted(entries, key=lambda e: (e.principal, e.host, e.operation, e.permission))]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_entries(data: bytes) -> frozenset[AccessControlEntry]:
    """The ACLs a znode holds (empty data: none); AclError when it is not Kafka's format."""
    if not data:
        return frozenset()
    try:
        document: Any = json.loads(data)
        return frozenset(
            AccessControlEntry(str(acl["principal"]), str(acl["host"]), operation(str(acl["operation"])),
                               permission(str(acl["permissionType"])))
            for acl in document["acls"])
    except (ValueError, KeyError, TypeError) as error:
        raise AclError(f"not Kafka's ACL format: {error}") from None


def encode_change(pattern: ResourcePattern) -> bytes:
    if pattern.pattern_type is PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    return json.dumps({"version": 1, "resourceType": pattern.resource_type.name, "name": pattern.name,
                       "patternType": pattern.pattern_type.name}, separators=(",", ":")).encode()


def decode_change(pattern: PatternType, data: bytes) -> ResourcePattern:
    """The pattern a notification names; AclError when it is unreadable."""
    try:
        text = data.decode()
        if pattern is PatternType.LITERAL:
            kind, sep, name = text.partition(":")
            if not sep:
                raise AclError(f"literal ACL change {text!r} is not Type:name")
            return ResourcePattern(resource_type(kind), name, PatternType.LITERAL)
        document = json.loads(text)
        return ResourcePattern(resource_type(document["resourceType"]), str(document["name"]),
                               pattern_type(document["patternType"]))
    except (ValueError, KeyError, TypeError) as error:
        raise AclError(f"unreadable ACL change: {error}") from None
