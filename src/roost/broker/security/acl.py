"""Kafka's ACL vocabulary: resource types, pattern types, operations, permissions, bindings and
binding filters, with Kafka's numeric codes (the wire) and text forms (ZooKeeper, the CLI).

Pure data: no I/O, nothing about who is asking. `authorizer.py` decides with these.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name
WILDCARD = "*"  # a LITERAL name, principal or host matching every one


class AclError(ValueError):
    """A binding or filter Kafka would refuse (INVALID_REQUEST); the message says why."""


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# Denials' error codes per resource type (Kafka's *_AUTHORIZATION_FAILED).
DENIAL_CODES: dict[ResourceType, int] = {
    ResourceType.TOPIC: 29, ResourceType.GROUP: 30, ResourceType.CLUSTER: 31,
    ResourceType.TRANSACTIONAL_ID: 53, ResourceType.DELEGATION_TOKEN: 65,
}

# The operations each resource type has (Kafka's docs, "Operations and Resources on Protocols").
VALID_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                                   AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                                   AclOperation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}),
    ResourceType.CLUSTER: frozenset({AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                                     AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                                     AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}

# An ALLOW of the key grants these too (Kafka: allow-only implication; a DENY implies nothing).
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}


def pascal(name: str) -> str:
    """`TRANSACTIONAL_ID` -> `TransactionalId`: Kafka's text form in ZooKeeper and kafka-acls."""
    return "".join(part.capitalize() for part in name.split("_"))


def _from_text(enum: type[IntEnum], text: str) -> IntEnum:
    """An enum member from Kafka's PascalCase or UPPER_SNAKE text (case-insensitive)."""
    wanted = text.replace("_", "").replace("-", "").lower()
    for member in enum:
        if member.name.replace("_", "").lower() == wanted:
            return member
    raise AclError(f"unknown {enum.__name__} {text!r}")


def resource_type(text: str) -> ResourceType:
    return ResourceType(_from_text(ResourceType, text))


def operation(text: str) -> AclOperation:
    return AclOperation(_from_text(AclOperation, text))


def permission(text: str) -> AclPermissionType:
    return AclPermissionType(_from_text(AclPermissionType, text))


def pattern_type(text: str) -> PatternType:
    return PatternType(_from_text(PatternType, text))


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """What an ACL is on: a resource type, a name, and how the name matches (LITERAL or PREFIXED)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def check(self) -> None:
        """AclError unless Kafka would store this pattern."""
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise AclError(f"resource type {self.resource_type.name} is only for filters")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise AclError(f"pattern type {self.pattern_type.name} is only for filters")
        if not self.name:
            raise AclError("the resource name must not be empty")
        if self.resource_type is ResourceType.CLUSTER and self.name != CLUSTER_NAME:
            raise AclError(f"the cluster resource is named {CLUSTER_NAME!r}, not {self.name!r}")
        if self.pattern_type is PatternType.PREFIXED and self.name == WILDCARD:
            raise AclError("a PREFIXED pattern cannot be '*' (use LITERAL '*' for every name)")

    def covers(self, name: str) -> bool:
        """Whether this pattern applies to the resource `name` (of the same type)."""
        if self.pattern_type is PatternType.LITERAL:
            return self.name == name or self.name == WILDCARD
        return name.startswith(self.name)


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who may (or may not) do what from where: `User:alice`, `*` or an IP, an operation, ALLOW/DENY."""

    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def check(self, resource: ResourceType) -> None:
        principal_type, sep, name = self.principal.partition(":")
        if not sep or not principal_type or not name:
            raise AclError(f"principal {self.principal!r} is not of the form Type:name (e.g. User:alice)")
        if not self.host:
            raise AclError("the host must not be empty ('*' for every host)")
        if self.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise AclError(f"operation {self.operation.name} is only for filters")
        if self.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise AclError(f"permission {self.permission.name} is only for filters")
        if self.operation is not AclOperation.ALL and self.operation not in VALID_OPERATIONS.get(resource, ()):
            raise AclError(f"operation {self.operation.name} does not apply to {resource.name} resources")


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def check(self) -> None:
        self.pattern.check()
        self.entry.check(self.pattern.resource_type)


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """DescribeAcls / DeleteAcls filter: None name/principal/host and ANY type, pattern, operation
    and permission match everything; pattern MATCH means every pattern that applies to `name`."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def check(self) -> None:
        for value, what in ((self.resource_type, "resource type"), (self.pattern_type, "pattern type"),
                            (self.operation, "operation"), (self.permission, "permission")):
            if value == 0:
                raise AclError(f"the filter's {what} is UNKNOWN")

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type is not ResourceType.ANY and pattern.resource_type is not self.resource_type:
            return False
        if self.pattern_type is PatternType.MATCH:
            return self.name is None or pattern.covers(self.name)
        if self.pattern_type is not PatternType.ANY and pattern.pattern_type is not self.pattern_type:
            return False
        return self.name is None or pattern.name == self.name

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or entry.principal == self.principal)
                and (self.host is None or entry.host == self.host)
                and (self.operation is AclOperation.ANY or entry.operation is self.operation)
                and (self.permission is AclPermissionType.ANY or entry.permission is self.permission))

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)
