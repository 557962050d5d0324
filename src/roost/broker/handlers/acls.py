"""CreateAcls, DescribeAcls and DeleteAcls: the authorizer's ACLs as Kafka's AdminClient sees
them. Who may call them (ALTER / DESCRIBE on the cluster) is checked before, with every other
API's rule (`handlers/api_rules.py`); without an authorizer they answer SECURITY_DISABLED."""

from __future__ import annotations

from typing import Any

from roost.broker.net.request import Request
from roost.broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from roost.broker.security.acl_store import AclStore, add_bindings, remove_matching
from roost.wire.kafka.errors import ErrorCode

DISABLED = "no authorizer is configured on the broker (authorizer.class.name)"


def _enum(kind: type, value: int) -> Any:
    try:
        return kind(value)
    except ValueError:
        raise AclError(f"unknown {kind.__name__} code {value}") from None


def binding_of(creation: dict[str, Any], version: int) -> AclBinding:
    """A CreateAcls creation as a checked binding; AclError when Kafka would refuse it."""
    resource = _enum(ResourceType, creation["resource_type"])
    if resource is ResourceType.USER and version < 3:
        raise AclError("USER resources need CreateAcls v3")
    binding = AclBinding(
        ResourcePattern(resource, creation["resource_name"], _enum(PatternType, creation["resource_pattern_type"])),
        AccessControlEntry(creation["principal"], creation["host"], _enum(AclOperation, creation["operation"]),
                           _enum(AclPermissionType, creation["permission_type"])))
    binding.check()
    return binding


def filter_of(body: dict[str, Any]) -> AclBindingFilter:
    acl_filter = AclBindingFilter(
        _enum(ResourceType, body["resource_type_filter"]), body["resource_name_filter"],
        _enum(PatternType, body["pattern_type_filter"]), body["principal_filter"], body["host_filter"],
        _enum(AclOperation, body["operation"]), _enum(AclPermissionType, body["permission_type"]))
    acl_filter.check()
    return acl_filter


class AclsApi:
    def __init__(self, store: AclStore | None) -> None:
        self._store = store  # None: no authorizer

    async def handle_create(self, request: Request) -> dict[str, Any]:
        creations = request.body["creations"]
        if self._store is None:
            return {"throttle_time_ms": 0, "results": [
                {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": DISABLED} for _ in creations]}
        results: list[dict[str, Any]] = []
        valid: list[AclBinding] = []
        for creation in creations:
            try:
                valid.append(binding_of(creation, request.version))
                results.append({"error_code": ErrorCode.NONE, "error_message": None})
            except AclError as error:
                results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(error)})
        try:
            await add_bindings(self._store, valid)
        except Exception as error:  # ZooKeeper unreachable: every valid creation failed
            for result in results:
                if result["error_code"] == ErrorCode.NONE:
                    result.update(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=f"storing failed: {error}")
        return {"throttle_time_ms": 0, "results": results}

    def handle_describe(self, request: Request) -> dict[str, Any]:
        if self._store is None:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.SECURITY_DISABLED, "error_message": DISABLED,
                    "resources": []}
        try:
            acl_filter = filter_of(request.body)
        except AclError as error:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "error_message": str(error),
                    "resources": []}
        by_pattern: dict[ResourcePattern, list[dict[str, Any]]] = {}
        for binding in self._store.authorizer.bindings():
            if acl_filter.matches(binding):
                entry = binding.entry
                by_pattern.setdefault(binding.pattern, []).append(
                    {"principal": entry.principal, "host": entry.host, "operation": entry.operation,
                     "permission_type": entry.permission})
        resources = [{"resource_type": p.resource_type, "resource_name": p.name, "pattern_type": p.pattern_type,
                      "acls": acls} for p, acls in by_pattern.items()]
        if request.version == 0:  # v0 knows LITERAL patterns only
            resources = [r for r in resources if r["pattern_type"] == PatternType.LITERAL]
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "resources": resources}

    async def handle_delete(self, request: Request) -> dict[str, Any]:
        filters = request.body["filters"]
        if self._store is None:
            return {"throttle_time_ms": 0, "filter_results": [
                {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": DISABLED, "matching_acls": []}
                for _ in filters]}
        results = []
        for body in filters:
            try:
                removed = await remove_matching(self._store, filter_of(body))
            except AclError as error:
                results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(error),
                                "matching_acls": []})
                continue
            except Exception as error:  # ZooKeeper unreachable
                results.append({"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "error_message": f"{error}",
                                "matching_acls": []})
                continue
            results.append({"error_code": ErrorCode.NONE, "error_message": None, "matching_acls": [
                {"error_code": ErrorCode.NONE, "error_message": None,
                 "resource_type": b.pattern.resource_type, "resource_name": b.pattern.name,
                 "pattern_type": b.pattern.pattern_type, "principal": b.entry.principal, "host": b.entry.host,
                 "operation": b.entry.operation, "permission_type": b.entry.permission} for b in removed]})
        return {"throttle_time_ms": 0, "filter_results": results}
