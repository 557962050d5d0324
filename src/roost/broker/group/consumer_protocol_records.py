"""A KIP-848 consumer group as records of `__consumer_offsets`, and back (Kafka's layouts:
`wire/kafka/schemas/consumer_group_records.py`).

Pure: `snapshot` lists every record that describes a group now (key bytes -> value bytes);
the shell appends the `delta` between what it last wrote and the new snapshot (changed records,
and tombstones for records that no longer exist), so the log always holds the latest state of
each key and compaction keeps exactly that. `GroupRecords` replays records read back from the
log (last one per key wins, a tombstone deletes) and rebuilds the groups for a new coordinator.

Each heartbeat's changes go in one batch, appended in the order the coordinator made them, so a
new leader, whose log is a prefix of its predecessor's, loads a state the group really was in:
a partition granted to a member is never in the log before the revocation that freed it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from typing import Any

from roost.broker.group.assignors import TopicPartition
from roost.broker.group.consumer_protocol import (
    ClassicMetadata,
    ConsumerGroup,
    ConsumerGroupCoordinator,
    ConsumerMember,
    MemberState,
)
from roost.wire.kafka.exceptions import KafkaCodecError
from roost.wire.kafka.framing import decode_versioned_struct, encode_versioned_struct
from roost.wire.kafka.primitives import INT16
from roost.wire.kafka.schemas.consumer_group_records import (
    CURRENT_ASSIGNMENT_TYPE,
    GROUP_METADATA_TYPE,
    MEMBER_METADATA_TYPE,
    TARGET_MEMBER_TYPE,
    TARGET_METADATA_TYPE,
)

log = logging.getLogger("roost.broker.group.consumer")

RECORD_TYPES = frozenset({3, 4, 5, 6, 7, 8})  # 4 (partition metadata) is read and ignored
_KEYS = {GROUP_METADATA_TYPE: "ConsumerGroupMetadataKey", MEMBER_METADATA_TYPE: "ConsumerGroupMemberMetadataKey",
         TARGET_METADATA_TYPE: "ConsumerGroupTargetAssignmentMetadataKey",
         TARGET_MEMBER_TYPE: "ConsumerGroupTargetAssignmentMemberKey",
         CURRENT_ASSIGNMENT_TYPE: "ConsumerGroupCurrentMemberAssignmentKey"}
_VALUES = {kind: name.replace("Key", "Value") for kind, name in _KEYS.items()}
_STATES = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1, MemberState.UNRELEASED_PARTITIONS: 2}
_STATES_BY_CODE = {code: state for state, code in _STATES.items()}


def record_type(key: bytes) -> int:
    """The int16 a record key starts with (its type); -1 for a key too short to hold one."""
    return INT16.unpack_from(key, 0)[0] if len(key) >= 2 else -1


def _key(kind: int, group_id: str, member_id: str | None = None) -> bytes:
    body = {"group_id": group_id} if member_id is None else {"group_id": group_id, "member_id": member_id}
    return encode_versioned_struct(_KEYS[kind], kind, body)


def _value(kind: int, body: dict[str, Any]) -> bytes:
    return encode_versioned_struct(_VALUES[kind], 0, body)


def _partitions(partitions: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    by_topic: dict[uuid.UUID, list[int]] = {}
    for topic_id, index in sorted(partitions):
        by_topic.setdefault(topic_id, []).append(index)
    return [{"topic_id": t, "partitions": p} for t, p in by_topic.items()]


def _from_partitions(entries: list[dict[str, Any]]) -> frozenset[TopicPartition]:
    return frozenset((e["topic_id"], index) for e in entries for index in e["partitions"])


def snapshot(group: ConsumerGroup) -> dict[bytes, bytes]:
    """Every record describing the group now, by key."""
    gid = group.group_id
    records = {
        _key(GROUP_METADATA_TYPE, gid): _value(GROUP_METADATA_TYPE, {"epoch": group.group_epoch}),
        _key(TARGET_METADATA_TYPE, gid): _value(TARGET_METADATA_TYPE, {"assignment_epoch": group.assignment_epoch}),
    }
    for member in group.members.values():
        mid = member.member_id
        records[_key(MEMBER_METADATA_TYPE, gid, mid)] = _value(MEMBER_METADATA_TYPE, {
            "instance_id": member.instance_id, "rack_id": member.rack_id, "client_id": member.client_id,
            "client_host": member.client_host, "subscribed_topic_names": list(member.subscribed_names),
            "subscribed_topic_regex": member.subscribed_regex, "rebalance_timeout_ms": member.rebalance_timeout_ms,
            "server_assignor": member.server_assignor, "classic_member_metadata": None if member.classic is None else {
                "session_timeout_ms": member.classic.session_timeout_ms,
                "supported_protocols": [{"name": n, "metadata": m} for n, m in member.classic.protocols]}})
        records[_key(CURRENT_ASSIGNMENT_TYPE, gid, mid)] = _value(CURRENT_ASSIGNMENT_TYPE, {
            "member_epoch": member.member_epoch, "previous_member_epoch": member.previous_epoch,
            "state": _STATES[member.state], "assigned_partitions": _partitions(member.assigned),
            "partitions_pending_revocation": _partitions(member.revoking)})
    for member_id, target in group.target.items():
        records[_key(TARGET_MEMBER_TYPE, gid, member_id)] = _value(
            TARGET_MEMBER_TYPE, {"topic_partitions": _partitions(target)})
    return records


def delta(before: dict[bytes, bytes], after: dict[bytes, bytes]) -> list[tuple[bytes, bytes | None]]:
    """The records that turn `before` into `after`: new or changed values, then tombstones."""
    changed: list[tuple[bytes, bytes | None]] = [(k, v) for k, v in after.items() if before.get(k) != v]
    return changed + [(k, None) for k in before if k not in after]


class GroupRecords:
    """Consumer group records read back from the log, in log order."""

    def __init__(self) -> None:
        self.latest: dict[bytes, bytes] = {}

    def apply(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            self.latest.pop(key, None)
        else:
            self.latest[key] = value

    def groups(self, now: int, coordinator: ConsumerGroupCoordinator) -> dict[str, tuple[ConsumerGroup, dict[bytes, bytes]]]:
        """The groups these records describe, each with the records it was built from; a group
        whose records do not make a consistent group is left out (its members join again)."""
        parsed: dict[str, dict[str, Any]] = {}
        for key, value in self.latest.items():
            kind = record_type(key)
            if kind not in _KEYS:
                continue  # partition metadata (4): recomputed from the broker's own metadata
            try:
                _, k = decode_versioned_struct(_KEYS[kind], key)
                _, v = decode_versioned_struct(_VALUES[kind], value)
            except KafkaCodecError as error:
                log.warning("skipping an unreadable consumer group record: %s", error)
                continue
            entry = parsed.setdefault(k["group_id"], {"records": {}, "members": {}, "current": {}, "target": {}})
            entry["records"][key] = value
            if kind == GROUP_METADATA_TYPE:
                entry["epoch"] = v["epoch"]
            elif kind == TARGET_METADATA_TYPE:
                entry["assignment_epoch"] = v["assignment_epoch"]
            elif kind == MEMBER_METADATA_TYPE:
                entry["members"][k["member_id"]] = v
            elif kind == CURRENT_ASSIGNMENT_TYPE:
                entry["current"][k["member_id"]] = v
            else:
                entry["target"][k["member_id"]] = _from_partitions(v["topic_partitions"])
        found: dict[str, tuple[ConsumerGroup, dict[bytes, bytes]]] = {}
        for group_id, entry in parsed.items():
            if "epoch" not in entry:
                continue  # the group was deleted; what is left are stray records
            group = _build(group_id, entry, now, coordinator)
            if group is not None:
                found[group_id] = (group, entry["records"])
        return found


def _build(group_id: str, entry: dict[str, Any], now: int, coordinator: ConsumerGroupCoordinator) -> ConsumerGroup | None:
    group = ConsumerGroup(group_id, group_epoch=entry["epoch"], assignment_epoch=entry.get("assignment_epoch", 0),
                          assignor=coordinator.config.assignors[0])
    for member_id, meta in entry["members"].items():
        current = entry["current"].get(member_id)
        member = ConsumerMember(
            member_id, meta["instance_id"], meta["rack_id"], meta["client_id"], meta["client_host"],
            rebalance_timeout_ms=meta["rebalance_timeout_ms"], subscribed_names=tuple(meta["subscribed_topic_names"]),
            subscribed_regex=meta["subscribed_topic_regex"], server_assignor=meta["server_assignor"],
            last_heard_ms=now)  # sessions start again with the new coordinator
        classic = meta.get("classic_member_metadata")
        if classic is not None and classic["supported_protocols"]:
            member.classic = ClassicMetadata(classic["session_timeout_ms"], tuple(
                (p["name"], bytes(p["metadata"])) for p in classic["supported_protocols"]))
        if current is not None:
            member.member_epoch, member.previous_epoch = current["member_epoch"], current["previous_member_epoch"]
            member.state = _STATES_BY_CODE.get(current["state"], MemberState.STABLE)
            member.assigned = _from_partitions(current["assigned_partitions"])
            member.revoking = _from_partitions(current["partitions_pending_revocation"])
            if member.revoking:
                member.revocation_deadline_ms = now + member.rebalance_timeout_ms
        group.members[member_id] = member
        if member.instance_id is not None:
            group.static[member.instance_id] = member_id
        for tp in member.assigned | member.revoking:
            group.owners.setdefault(tp, member_id)
    group.target = {m: p for m, p in entry["target"].items() if m in group.members}
    preferred = [m.server_assignor for m in group.members.values() if m.server_assignor]
    if preferred:
        group.assignor = max(sorted(set(preferred)), key=preferred.count)
    try:
        ConsumerGroupCoordinator.check_invariants(group)
    except AssertionError as error:
        log.error("group %s: its records do not make a consistent group (%s); its members join again",
                  group_id, error)
        return None
    return group
