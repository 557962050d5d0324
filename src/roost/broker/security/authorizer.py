"""The authorizer's decision, Kafka's AclAuthorizer algorithm as a pure core (no I/O).

`authorize(principal, host, operation, resource type, name)`:
1. a super user (`super.users`) may do anything;
2. the candidate ACLs are those on the LITERAL name, on LITERAL `*`, and on every PREFIXED pattern
   that starts the name;
3. with no candidates, the answer is `allow.everyone.if.no.acl.found` (default false);
4. an entry applies if its principal is the caller's or `User:*`, its host the caller's address
   or `*`, and its operation the one asked for or ALL;
5. an applicable DENY refuses (DENY beats ALLOW);
6. else an applicable ALLOW grants; DESCRIBE is also granted by an ALLOW of READ, WRITE, DELETE or
   ALTER, DESCRIBE_CONFIGS by an ALLOW of ALTER_CONFIGS (implication never extends a DENY).

The ACLs are fed in by a store (`acl_store.py`: ZooKeeper or a local file) through `replace`.
Answers are cached per (principal, host, operation, resource) so a produce or fetch on a busy
connection costs one dict lookup; any change to the ACLs empties the cache, and so does growth
past `CACHE_LIMIT` entries (a bound on memory when names are many).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from roost.broker.security.acl import (
    IMPLIED_BY,
    WILDCARD,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from roost.principal import KafkaPrincipal

CACHE_LIMIT = 100_000
WILDCARD_USER = "User:*"

class Authorizer:
    def __init__(self, super_users: frozenset[str] = frozenset(), allow_if_no_acl: bool = False) -> None:
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        # PREFIXED patterns by resource type: prefix -> entries (looked through on a cache miss).
        self._prefixed: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {}
        self._cache: dict[tuple[KafkaPrincipal, str, AclOperation, ResourceType, str], bool] = {}
        self.version = 0  # grows by one per change: a reader's way to see that the ACLs moved

    # the store's side ---------------------------------------------------------------------------
    def replace(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """The ACLs on `pattern` are now `entries` (none: the pattern has no ACLs)."""
        kept = frozenset(entries)
        if kept:
            self._acls[pattern] = kept
        else:
            self._acls.pop(pattern, None)
        if pattern.pattern_type is PatternType.PREFIXED:
            by_prefix = self._prefixed.setdefault(pattern.resource_type, {})
            if kept:
                by_prefix[pattern.name] = kept
            else:
                by_prefix.pop(pattern.name, None)
        self._cache.clear()
        self.version += 1

    def entries(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        return self._acls.get(pattern, frozenset())

    def patterns(self) -> list[ResourcePattern]:
        return list(self._acls)

    def bindings(self) -> Iterator[AclBinding]:
        for pattern, entries in self._acls.items():
            for entry in entries:
                yield AclBinding(pattern, entry)

    # the decision ---------------------------------------------------------------------------------
    def authorize(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        key = (principal, host, operation, resource_type, name)
        answer = self._cache.get(key)
        if answer is None:
            answer = self._decide(str(principal), host, operation, resource_type, name)
            if len(self._cache) >= CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = answer
        return answer

    def _candidates(self, resource_type: ResourceType, name: str) -> list[frozenset[AccessControlEntry]]:
        found = []
        literal = self._acls.get(ResourcePattern(resource_type, name, PatternType.LITERAL))
        if literal:
            found.append(literal)
        if name != WILDCARD:
            wildcard = self._acls.get(ResourcePattern(resource_type, WILDCARD, PatternType.LITERAL))
            if wildcard:
                found.append(wildcard)
        for prefix, entries in self._prefixed.get(resource_type, {}).items():
            if name.startswith(prefix):
                found.append(entries)
        return found

    def _decide(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                name: str) -> bool:
        if principal in self.super_users:
            return True
        candidates = self._candidates(resource_type, name)
        if not candidates:
            return self.allow_if_no_acl
        granting = IMPLIED_BY.get(operation, frozenset({operation}))
        allowed = False
        for entries in candidates:
            for entry in entries:
                if entry.principal != principal and entry.principal != WILDCARD_USER:
                    continue
                if entry.host != host and entry.host != WILDCARD:
                    continue
                if entry.permission is AclPermissionType.DENY:
                    if entry.operation is operation or entry.operation is AclOperation.ALL:
                        return False
                elif entry.operation in granting or entry.operation is AclOperation.ALL:
                    allowed = True
        return allowed

    def authorize_any(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """Whether the principal may do `operation` on some resource of the type (KIP-679, used by
        InitProducerId without a transactional id: WRITE on any topic). Each pattern holding an
        ALLOW for the principal is tried as a resource name, so a DENY covering it counts."""
        if str(principal) in self.super_users:
            return True
        patterns = [p for p in self._acls if p.resource_type is resource_type]
        if not patterns:
            return self.allow_if_no_acl
        return any(self.authorize(principal, host, operation, resource_type, pattern.name) for pattern in patterns)
