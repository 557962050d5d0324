"""ACL sync (`acl.sync.enable`, every `acl.sync.ms`), on the destination's controller broker:
the source's topic ACLs (DescribeAcls there, as the link's principal: DESCRIBE on the CLUSTER)
for the topics the link mirrors, created on the destination (CreateAcls, as this broker).

Which ACLs (`acls_to_sync`, pure): TOPIC resources with a LITERAL pattern whose topic passes the
link's topic filter, renamed to the mirror's name; MM2's rule (facts A5), except that every
operation is copied, WRITE and ALL included. MM2 drops ALLOW WRITE because its remote topics are
its own; a mirror refuses client writes by being a mirror, and the WRITE grants are what the
producers need on the destination the moment it is promoted (a failover must not wait for ACLs).
PREFIXED and other resources' ACLs (groups, the cluster) are not copied. The sync only adds: an
ACL removed on the source stays on the destination until removed there (the link does not know
which destination ACLs are its own). A side without an authorizer (SECURITY_DISABLED) is skipped,
with one log line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from roost.broker.link.filters import NameFilter, should_mirror_topic
from roost.broker.net.peer import PeerError
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode

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


def acls_to_sync(source: Iterable[Binding], destination: Iterable[Binding], topics: NameFilter,
                 mirror_name: Callable[[str], str]) -> list[Binding]:
    """The destination ACLs to create: each source TOPIC/LITERAL ACL of a mirrored topic, renamed
    to its mirror, that the destination does not have yet."""
    have = set(destination)
    wanted: list[Binding] = []
    for acl in source:
        if acl.resource_type != TOPIC or acl.pattern_type != LITERAL:
            continue
        if not should_mirror_topic(topics, acl.resource_name):
            continue
        renamed = acl._replace(resource_name=mirror_name(acl.resource_name))
        if renamed not in have and renamed not in wanted:
            wanted.append(renamed)
    return sorted(wanted)


def _bindings(answer: dict[str, Any]) -> list[Binding]:
    return [Binding(r["resource_type"], r["resource_name"], r["pattern_type"], a["principal"], a["host"],
                    a["operation"], a["permission_type"]) for r in answer["resources"] for a in r["acls"]]


TOPIC_LITERAL_FILTER = {"resource_type_filter": TOPIC, "resource_name_filter": None, "pattern_type_filter": LITERAL,
                        "principal_filter": None, "host_filter": None, "operation": ANY, "permission_type": ANY}


async def sync_acls(runner: LinkRunner) -> int:
    """One ACL sync; returns how many ACLs were created on the destination."""
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
    except PeerError as error:
        log.debug("link %s: acl sync skipped: %s", runner.name, error)
        return 0
    wanted = acls_to_sync(_bindings(source), _bindings(here), runner.settings.topics, runner.settings.mirror_name)
    if not wanted:
        return 0
    wanted = wanted[:MAX_ACLS]
    answer = await runner.service.destination(ApiKey.CREATE_ACLS, ACLS_VERSION, {"creations": [
        {"resource_type": b.resource_type, "resource_name": b.resource_name, "resource_pattern_type": b.pattern_type,
         "principal": b.principal, "host": b.host, "operation": b.operation, "permission_type": b.permission_type}
        for b in wanted]})
    created = sum(1 for r in answer["results"] if r["error_code"] == ErrorCode.NONE)
    failed = [r for r in answer["results"] if r["error_code"] != ErrorCode.NONE]
    if failed:
        runner.note_once(f"acl sync: {len(failed)} ACLs not created: {failed[0].get('error_message') or ''}")
    if created:
        log.info("link %s: %d ACLs synced to the destination (%s)", runner.name, created,
                 ", ".join(f"{b.principal} {b.operation} {b.resource_name}" for b in wanted[:5]))
    return created
