"""Consumer group offset sync, on the destination's controller broker, every
`consumer.offset.sync.ms`: the source's groups (ListGroups on each source broker, filtered by
`groups`/`groups.exclude`), their committed offsets (OffsetFetch at their coordinator), and for
each group that is absent or empty on the destination (DescribeGroups there) the offsets
`core.group_offsets_to_sync` allows, committed as Kafka's AlterConsumerGroupOffsets does
(OffsetCommit with generation -1 and no member; an active group answers UNKNOWN_MEMBER_ID and
is skipped, MM2's rule). Offsets are the same numbers on both sides: mirrors keep offsets.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from roost.broker.link.core import group_offsets_to_sync
from roost.broker.net.peer import PeerError
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode

if TYPE_CHECKING:
    from roost.broker.link.service import LinkRunner

log = logging.getLogger("roost.broker.link.groups")

MAX_GROUPS = 10_000  # groups looked at per sync


async def _coordinator(request: Any, group: str) -> int | None:
    answer = await request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
    return answer["node_id"] if answer["error_code"] == ErrorCode.NONE else None


async def _committed(request: Any, group: str) -> dict[tuple[str, int], int]:
    answer = await request(ApiKey.OFFSET_FETCH, 7, {"group_id": group, "topics": None, "require_stable": False})
    if answer.get("error_code", 0) != ErrorCode.NONE:
        return {}
    return {(t["name"], p["partition_index"]): p["committed_offset"] for t in answer["topics"]
            for p in t["partitions"] if p["error_code"] == ErrorCode.NONE}


async def sync_groups(runner: LinkRunner) -> int:
    """One sync of every group the link takes; returns how many offsets were committed."""
    service, settings = runner.service, runner.settings
    groups: set[str] = set()
    for node in list(runner.source_brokers):
        try:
            answer = await runner._request(node, ApiKey.LIST_GROUPS, 4, {"states_filter": []}, 10.0)
        except PeerError:
            continue
        groups.update(g["group_id"] for g in answer["groups"] if settings.groups.matches(g["group_id"]))
    committed = 0
    for group in sorted(groups)[:MAX_GROUPS]:
        try:
            node = await _coordinator(lambda *a: runner._any_source(*a), group)
            if node is None:
                continue
            source = await _committed(lambda *a, n=node: runner._request(n, *a, 10.0), group)
            mirrored = {}
            for (topic, index), offset in source.items():
                mirror = settings.mirror_name(topic)
                partition = service.metadata.partition(mirror, index)
                overrides = await service.topic_overrides(mirror) if partition is not None else None
                if partition is None or (overrides or {}).get("roost.mirror.link") != runner.name:
                    continue
                end = await _mirrored_end(service, mirror, index)
                if end is not None:
                    mirrored[(topic, index)] = (mirror, offset, end)
            if not mirrored:
                continue
            committed += await _commit_on_destination(runner, group, mirrored)
        except PeerError as error:
            log.debug("link %s: group %s not synced: %s", runner.name, group, error)
    service.group_syncs += 1
    return committed


async def _mirrored_end(service: Any, topic: str, index: int) -> int | None:
    """What the mirror holds and consumers there can read: its high watermark."""
    partition = service.replicas.partition(topic, index)
    if partition is not None and partition.is_leader:
        return partition.high_watermark
    answer = await service.destination(ApiKey.LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": index, "current_leader_epoch": -1,
                                                   "timestamp": -1}]}]}, leader_of=(topic, index))
    result = answer["topics"][0]["partitions"][0]
    return result["offset"] if result["error_code"] == ErrorCode.NONE else None


async def _commit_on_destination(runner: LinkRunner, group: str,
                                 mirrored: dict[tuple[str, int], tuple[str, int, int]]) -> int:
    service = runner.service
    node = await _coordinator(lambda *a: service.destination(*a), group)
    if node is None:
        return 0

    def there(*args: Any) -> Any:
        return service.destination(*args, node=node)

    described = await there(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations": False})
    entry = described["groups"][0]
    state = "" if entry["error_code"] != ErrorCode.NONE else entry["group_state"]
    current = await _committed(there, group)
    source = {(mirror, index): offset for (_, index), (mirror, offset, _) in mirrored.items()}
    ends = {(mirror, index): end for (_, index), (mirror, _, end) in mirrored.items()}
    dest = {tp: current.get(tp, -1) for tp in source}
    wanted = group_offsets_to_sync(source, dest, state, ends)
    if not wanted:
        return 0
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), offset in sorted(wanted.items()):
        by_topic.setdefault(topic, []).append({"partition_index": index, "committed_offset": offset,
                                               "committed_leader_epoch": -1, "committed_metadata": ""})
    answer = await there(ApiKey.OFFSET_COMMIT, 8, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
    done = 0
    for topic in answer["topics"]:
        for p in topic["partitions"]:
            if p["error_code"] == ErrorCode.NONE:
                done += 1
            elif p["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID:
                log.info("link %s: group %s became active on the destination: not synced", runner.name, group)
    if done:
        log.info("link %s: group %s: %d offsets synced (%s)", runner.name, group, done,
                 {f"{t}-{i}": o for (t, i), o in sorted(wanted.items())})
    return done
