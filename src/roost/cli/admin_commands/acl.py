"""`roost acl`: create, list and delete ACLs on any Kafka-protocol cluster whose brokers run an
authorizer, with the meanings of Kafka's `kafka-acls.sh` flags.

    roost acl create --allow-principal User:alice --operation Read --operation Describe --topic orders
    roost acl create --allow-principal User:bob --producer --topic orders          # Write, Describe, Create
    roost acl create --allow-principal User:carol --consumer --topic orders --group billing
    roost acl create --deny-principal User:mallory --operation All --topic sales- --resource-pattern-type prefixed
    roost acl create --allow-principal User:ops --operation Alter --cluster
    roost acl list --topic orders                   # the ACLs on that exact pattern
    roost acl list --topic orders --resource-pattern-type match    # every ACL that applies to it
    roost acl list --principal User:alice
    roost acl delete --topic orders --allow-principal User:alice --operation Read

As in kafka-acls: `--allow-host`/`--deny-host` default to `*`; list and delete match every pattern
type unless `--resource-pattern-type` says otherwise (create: literal); delete without
`--operation` or a principal removes every ACL on the named resources.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from roost.admin.kafka_client import await_result, open_admin
from roost.admin.target import Target
from roost.cli.client.client_options import CliError, emit, format_option, kafka_target_options

CLUSTER_NAME = "kafka-cluster"
PATTERN_TYPES = ("literal", "prefixed", "any", "match")
COLUMNS = ["principal", "permission", "operation", "host", "resource_type", "name", "pattern"]


@dataclass(frozen=True)
class Resource:
    kind: ResourceType
    name: str


def _operation(text: str) -> AclOperation:
    from roost.broker.security import acl as kafka_acl  # here: `roost --help` imports no broker code
    try:
        return AclOperation[kafka_acl.operation(text).name]
    except (kafka_acl.AclError, KeyError):
        raise click.BadParameter(f"unknown operation {text!r} (Read, Write, Create, Delete, Alter, Describe, "
                                 "ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All)",
                                 param_hint="--operation") from None


def _principal(text: str, option: str) -> str:
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise click.BadParameter(f"{text!r} is not of the form Type:name (e.g. User:alice)", param_hint=option)
    return text


def resources_of(topics: tuple[str, ...], groups: tuple[str, ...], cluster: bool,
                 transactional_ids: tuple[str, ...]) -> list[Resource]:
    return ([Resource(ResourceType.TOPIC, t) for t in topics] + [Resource(ResourceType.GROUP, g) for g in groups]
            + ([Resource(ResourceType.BROKER, CLUSTER_NAME)] if cluster else [])
            + [Resource(ResourceType.TRANSACTIONAL_ID, t) for t in transactional_ids])


def operations_for(resource: Resource, operations: list[AclOperation], producer: bool, consumer: bool,
                   idempotent: bool) -> list[AclOperation]:
    """The operations on `resource`: the named ones, plus what kafka-acls' --producer
    (Write, Describe, Create on topics; IdempotentWrite on the cluster with --idempotent) and
    --consumer (Read, Describe on topics; Read on groups) add."""
    wanted = list(operations)
    if producer and resource.kind is ResourceType.TOPIC:
        wanted += [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE]
    if producer and resource.kind is ResourceType.TRANSACTIONAL_ID:
        wanted += [AclOperation.WRITE, AclOperation.DESCRIBE]
    if producer and idempotent and resource.kind is ResourceType.BROKER:
        wanted += [AclOperation.IDEMPOTENT_WRITE]
    if consumer and resource.kind is ResourceType.TOPIC:
        wanted += [AclOperation.READ, AclOperation.DESCRIBE]
    if consumer and resource.kind is ResourceType.GROUP:
        wanted += [AclOperation.READ]
    return list(dict.fromkeys(wanted))


def row(binding: AclBinding) -> dict[str, Any]:
    return {"principal": binding.principal, "permission": binding.permission_type.name,
            "operation": binding.operation.name, "host": binding.host,
            "resource_type": "CLUSTER" if binding.restype is ResourceType.BROKER else binding.restype.name,
            "name": binding.name, "pattern": binding.resource_pattern_type.name}


def resource_options(command: Any) -> Any:
    for option in reversed((
        click.option("--topic", "topics", multiple=True, metavar="NAME", help="a topic (repeatable; '*': all)"),
        click.option("--group", "groups", multiple=True, metavar="NAME", help="a consumer group (repeatable)"),
        click.option("--cluster", is_flag=True, help="the cluster resource (kafka-cluster)"),
        click.option("--transactional-id", "transactional_ids", multiple=True, metavar="ID",
                     help="a transactional id (repeatable)"),
        click.option("--resource-pattern-type", "pattern", type=click.Choice(PATTERN_TYPES, case_sensitive=False),
                     default=None, help="how names match: literal, prefixed (create); also any, match (list, delete)"),
    )):
        command = option(command)
    return command


def entry_options(command: Any) -> Any:
    for option in reversed((
        click.option("--allow-principal", "allow", multiple=True, metavar="Type:name",
                     help="principal the ACL allows (repeatable; User:* for everyone)"),
        click.option("--deny-principal", "deny", multiple=True, metavar="Type:name",
                     help="principal the ACL denies (repeatable)"),
        click.option("--allow-host", "allow_hosts", multiple=True, metavar="IP",
                     help="hosts the allow applies from (default *)"),
        click.option("--deny-host", "deny_hosts", multiple=True, metavar="IP",
                     help="hosts the deny applies from (default *)"),
        click.option("--operation", "operations", multiple=True, metavar="OP",
                     help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                          "AlterConfigs, IdempotentWrite, All (repeatable)"),
    )):
        command = option(command)
    return command


@click.group("acl")
def command() -> None:
    """ACLs: create, list, delete (kafka-acls' flags)."""


@command.command("create")
@resource_options
@entry_options
@click.option("--producer", is_flag=True, help="the producer's operations (Write, Describe, Create on topics)")
@click.option("--consumer", is_flag=True, help="the consumer's operations (Read, Describe on topics; Read on groups)")
@click.option("--idempotent", is_flag=True, help="with --producer: IdempotentWrite on the cluster")
@kafka_target_options
@format_option
def create(target: Target, topics: tuple[str, ...], groups: tuple[str, ...], cluster: bool,
           transactional_ids: tuple[str, ...], pattern: str | None, allow: tuple[str, ...], deny: tuple[str, ...],
           allow_hosts: tuple[str, ...], deny_hosts: tuple[str, ...], operations: tuple[str, ...],
           producer: bool, consumer: bool, idempotent: bool, output_format: str) -> None:
    """Add ACLs: each principal, host and operation on each named resource."""
    if producer and idempotent:
        cluster = True
    resources = resources_of(topics, groups, cluster, transactional_ids)
    if not resources:
        raise CliError("name a resource: --topic, --group, --cluster or --transactional-id")
    if not allow and not deny:
        raise CliError("name a principal: --allow-principal or --deny-principal")
    if pattern not in (None, "literal", "prefixed"):
        raise CliError("create takes --resource-pattern-type literal or prefixed")
    pattern_type = ResourcePatternType.PREFIXED if pattern == "prefixed" else ResourcePatternType.LITERAL
    named = [_operation(op) for op in operations]
    bindings = []
    for resource in resources:
        wanted = operations_for(resource, named, producer, consumer, idempotent)
        for principals, hosts, permission, option in ((allow, allow_hosts, AclPermissionType.ALLOW, "--allow-principal"),
                                                      (deny, deny_hosts, AclPermissionType.DENY, "--deny-principal")):
            for principal in principals:
                for host in hosts or ("*",):
                    bindings += [AclBinding(resource.kind, resource.name, pattern_type, _principal(principal, option),
                                            host, op, permission) for op in wanted]
    if not bindings:
        raise CliError("no operation: give --operation (or --producer / --consumer where they apply)")
    admin = open_admin(target)
    futures = admin.create_acls(bindings, request_timeout=target.timeout_s)
    for binding, future in futures.items():
        await_result(future, target, f"create ACL {row(binding)['principal']} {binding.operation.name} "
                                      f"{binding.restype.name}:{binding.name}")
    emit([row(b) for b in bindings], COLUMNS, output_format)


def filters_of(target_resources: list[Resource], pattern: str | None, principals: list[str], hosts: list[str],
               operations: list[AclOperation], permission: AclPermissionType) -> list[AclBindingFilter]:
    pattern_type = ResourcePatternType[(pattern or "any").upper()]
    resources: list[tuple[ResourceType, str | None]] = \
        [(r.kind, r.name) for r in target_resources] or [(ResourceType.ANY, None)]
    return [AclBindingFilter(kind, name, pattern_type, principal, host, op, permission)
            for kind, name in resources for principal in (principals or [None]) for host in (hosts or [None])
            for op in (operations or [AclOperation.ANY])]


@command.command("list")
@resource_options
@click.option("--principal", "principals", multiple=True, metavar="Type:name", help="only this principal's ACLs")
@kafka_target_options
@format_option
def list_acls(target: Target, topics: tuple[str, ...], groups: tuple[str, ...], cluster: bool,
              transactional_ids: tuple[str, ...], pattern: str | None, principals: tuple[str, ...],
              output_format: str) -> None:
    """List ACLs (all of them, or those on the named resources)."""
    admin = open_admin(target)
    found: dict[AclBinding, None] = {}
    for acl_filter in filters_of(resources_of(topics, groups, cluster, transactional_ids), pattern,
                                 [_principal(p, "--principal") for p in principals], [], [],
                                 AclPermissionType.ANY):
        for binding in await_result(admin.describe_acls(acl_filter, request_timeout=target.timeout_s),
                                    target, "list ACLs"):
            found[binding] = None
    rows = sorted((row(b) for b in found), key=lambda r: (r["resource_type"], r["name"], r["principal"],
                                                          r["operation"]))
    emit(rows, COLUMNS, output_format)


@command.command("delete")
@resource_options
@entry_options
@kafka_target_options
@format_option
def delete(target: Target, topics: tuple[str, ...], groups: tuple[str, ...], cluster: bool,
           transactional_ids: tuple[str, ...], pattern: str | None, allow: tuple[str, ...], deny: tuple[str, ...],
           allow_hosts: tuple[str, ...], deny_hosts: tuple[str, ...], operations: tuple[str, ...],
           output_format: str) -> None:
    """Remove the ACLs on the named resources that match the principals, hosts and operations given."""
    resources = resources_of(topics, groups, cluster, transactional_ids)
    if not resources:
        raise CliError("name a resource: --topic, --group, --cluster or --transactional-id")
    named = [_operation(op) for op in operations]
    filters: list[AclBindingFilter] = []
    if not allow and not deny:
        filters = filters_of(resources, pattern, [], [], named, AclPermissionType.ANY)
    for principals, hosts, permission in ((allow, allow_hosts, AclPermissionType.ALLOW),
                                          (deny, deny_hosts, AclPermissionType.DENY)):
        if principals:
            filters += filters_of(resources, pattern, list(principals), list(hosts), named, permission)
    admin = open_admin(target)
    removed: dict[AclBinding, None] = {}
    for future in admin.delete_acls(filters, request_timeout=target.timeout_s).values():
        for binding in await_result(future, target, "delete ACLs"):
            removed[binding] = None
    emit([row(b) for b in removed], COLUMNS, output_format)
