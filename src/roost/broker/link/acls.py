"""ACL sync (`acl.sync.enable`, every `acl.sync.ms`), on the destination's controller broker:
the source's topic ACLs (DescribeAcls there, as the link's principal: DESCRIBE on the CLUSTER)
for the topics the link mirrors, created on the destination (CreateAcls, as this broker), and
removed there once removed on the source (DeleteAcls).

Which ACLs (`acl_changes`, pure): TOPIC resources with a LITERAL pattern whose topic passes the
link's topic filter, renamed to the mirror's name; MM2's rule (facts A5), except that every
operation is copied, WRITE and ALL included. MM2 drops ALLOW WRITE because its remote topics are
its own; a mirror refuses client writes by being a mirror, and the WRITE grants are what the
producers need on the destination the moment it is promoted (a failover must not wait for ACLs).
PREFIXED and other resources' ACLs (groups, the cluster) are not copied.

Removals: the link records in ZooKeeper (`/cluster-links-acls/<link>`) the ACLs it created, and
removes from the destination only those: one of them that the source no longer has (or whose
topic the filter no longer takes) is deleted; an ACL the destination's administrators made is
never touched, even when the source has the same one. Nothing is removed while the source does
not answer (a lost source keeps its grants on the promoted side). A side without an authorizer
(SECURITY_DISABLED) is skipped, with one log line.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from roost.broker.link.filters import NameFilter, should_mirror_topic
from roost.broker.link.settings import SYNCED_ACLS_PATH
from roost.broker.net.peer import PeerError
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
from roost.zkclient import NoNodeError, ZkError

if TYPE_CHECKING:
    from roost.broker.link.service import LinkRunner

log = logging.getLogger("roost.broker.link.acls")

TOPIC, LITERAL, ANY = 2, 3, 1  # ResourceType.TOPIC, PatternType.LITERAL, ANY (operation, permission, pattern)
ACLS_VERSION = 2
MAX_ACLS = 10_000  # ACLs created per sync


class Binding(NamedTuple):
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True)
class AclChanges:
    create: list[Binding]  # the source's, renamed, that the destination lacks
    delete: list[Binding]  # created by the link before, gone from the source (or the filter)


def acl_changes(source: Iterable[Binding], destination: Iterable[Binding], synced: Iterable[Binding],
                topics: NameFilter, mirror_name: Callable[[str], str]) -> AclChanges:
    """What one sync does on the destination: create each source TOPIC/LITERAL ACL of a mirrored
    topic, renamed to its mirror, that the destination does not have yet; delete each ACL the
    link created before (`synced`) that is still there and no longer wanted."""
    have = set(destination)
    wanted: set[Binding] = set()
    for acl in source:
        if acl.resource_type != TOPIC or acl.pattern_type != LITERAL:
            continue
        if not should_mirror_topic(topics, acl.resource_name):
            continue
        wanted.add(acl._replace(resource_name=mirror_name(acl.resource_name)))
    return AclChanges(sorted(wanted - have), sorted((set(synced) & have) - wanted))


def synced_after(synced: Iterable[Binding], destination: Iterable[Binding], created: Iterable[Binding],
                 deleted: Iterable[Binding]) -> list[Binding]:
    """The link's own ACLs after a sync: those it had that are still on the destination and were
    not deleted, and those it created now."""
    gone = set(deleted)
    return sorted((set(synced) & set(destination)) - gone | set(created))


def _bindings(answer: dict[str, Any]) -> list[Binding]:
    return [Binding(r["resource_type"], r["resource_name"], r["pattern_type"], a["principal"], a["host"],
                    a["operation"], a["permission_type"]) for r in answer["resources"] for a in r["acls"]]


TOPIC_LITERAL_FILTER = {"resource_type_filter": TOPIC, "resource_name_filter": None, "pattern_type_filter": LITERAL,
                        "principal_filter": None, "host_filter": None, "operation": ANY, "permission_type": ANY}


def _encode(bindings: Iterable[Binding]) -> bytes:
    return json.dumps([list(b) for b in bindings]).encode()


def _decode(data: bytes) -> list[Binding]:
    try:
        return [Binding(*entry) for entry in json.loads(data or b"[]")]
    except (ValueError, TypeError):
        log.warning("the record of a link's synced ACLs is unreadable: starting it again (none removed)")
        return []


def _filter(binding: Binding) -> dict[str, Any]:
    """A DeleteAcls filter matching exactly this one ACL."""
    return {"resource_type_filter": binding.resource_type, "resource_name_filter": binding.resource_name,
            "pattern_type_filter": binding.pattern_type, "principal_filter": binding.principal,
            "host_filter": binding.host, "operation": binding.operation, "permission_type": binding.permission_type}


async def _recorded(runner: LinkRunner) -> list[Binding]:
    try:
        data, _ = await runner.service.zk.get(f"{SYNCED_ACLS_PATH}/{runner.name}")
    except NoNodeError:
        return []
    return _decode(data)


async def _record(runner: LinkRunner, bindings: list[Binding]) -> None:
    path = f"{SYNCED_ACLS_PATH}/{runner.name}"
    zk = runner.service.zk
    if await zk.exists(path) is None:
        await zk.ensure_path(SYNCED_ACLS_PATH)
        await zk.create(path, _encode(bindings))
    else:
        await zk.set(path, _encode(bindings))


async def sync_acls(runner: LinkRunner) -> int:
    """One ACL sync; returns how many ACLs were created or removed on the destination."""
    try:
        source = await runner._any_source(ApiKey.DESCRIBE_ACLS, ACLS_VERSION, TOPIC_LITERAL_FILTER)
        if source["error_code"] != ErrorCode.NONE:
            runner.note_once(f"acl sync: the source answers {ErrorCode(source['error_code']).name}: "
                             f"{source.get('error_message') or ''} (needs DESCRIBE on the source's CLUSTER)")
            return 0
        here = await runner.service.destination(ApiKey.DESCRIBE_ACLS, ACLS_VERSION, TOPIC_LITERAL_FILTER)
        if here["error_code"] != ErrorCode.NONE:
            runner.note_once(f"acl sync: the destination answers {ErrorCode(here['error_code']).name}")
            return 0
        synced = await _recorded(runner)
    except (PeerError, ZkError) as error:
        log.debug("link %s: acl sync skipped: %s", runner.name, error)
        return 0
    destination = _bindings(here)
    changes = acl_changes(_bindings(source), destination, synced, runner.settings.topics, runner.settings.mirror_name)
    created = await _create(runner, changes.create[:MAX_ACLS]) if changes.create else []
    deleted = await _delete(runner, changes.delete[:MAX_ACLS]) if changes.delete else []
    if created or deleted or set(synced) - set(destination):
        await _record(runner, synced_after(synced, destination, created, deleted))
    return len(created) + len(deleted)


async def _create(runner: LinkRunner, wanted: list[Binding]) -> list[Binding]:
    answer = await runner.service.destination(ApiKey.CREATE_ACLS, ACLS_VERSION, {"creations": [
        {"resource_type": b.resource_type, "resource_name": b.resource_name, "resource_pattern_type": b.pattern_type,
         "principal": b.principal, "host": b.host, "operation": b.operation, "permission_type": b.permission_type}
        for b in wanted]})
    created = [b for b, r in zip(wanted, answer["results"], strict=True) if r["error_code"] == ErrorCode.NONE]
    failed = [r for r in answer["results"] if r["error_code"] != ErrorCode.NONE]
    if failed:
        runner.note_once(f"acl sync: {len(failed)} ACLs not created: {failed[0].get('error_message') or ''}")
    if created:
        log.info("link %s: %d ACLs synced to the destination (%s)", runner.name, len(created),
                 ", ".join(f"{b.principal} {b.operation} {b.resource_name}" for b in created[:5]))
    return created


async def _delete(runner: LinkRunner, unwanted: list[Binding]) -> list[Binding]:
    answer = await runner.service.destination(ApiKey.DELETE_ACLS, ACLS_VERSION,
                                              {"filters": [_filter(b) for b in unwanted]})
    deleted = [b for b, r in zip(unwanted, answer["filter_results"], strict=True) if r["error_code"] == ErrorCode.NONE]
    failed = [r for r in answer["filter_results"] if r["error_code"] != ErrorCode.NONE]
    if failed:
        runner.note_once(f"acl sync: {len(failed)} ACLs not removed: {failed[0].get('error_message') or ''}")
    if deleted:
        log.info("link %s: %d ACLs removed from the destination, gone from the source (%s)", runner.name,
                 len(deleted), ", ".join(f"{b.principal} {b.operation} {b.resource_name}" for b in deleted[:5]))
    return deleted
