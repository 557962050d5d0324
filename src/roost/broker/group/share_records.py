"""A share group as records of `__consumer_offsets`, and back (Kafka's layouts:
`wire/kafka/schemas/share_group_records.py`).

As `consumer_records.py` does for consumer groups: `snapshot` lists every record describing the
group now; the shell appends the `delta` from what it last wrote; `ShareGroupRecords` replays
what a new coordinator reads back and rebuilds the groups, so members keep their ids and epochs
across a coordinator failover (their heartbeats go on without rejoining).
"""

from __future__ import annotations

import logging
from typing import Any

from roost.broker.group.consumer_protocol_records import record_type
from roost.broker.group.share_group import ShareGroup, ShareMember, by_topic
from roost.wire.kafka.exceptions import KafkaCodecError
from roost.wire.kafka.framing import decode_versioned_struct, encode_struct, encode_versioned_struct
from roost.wire.kafka.primitives import INT16
from roost.wire.kafka.schemas.share_group_records import (
    SHARE_CURRENT_ASSIGNMENT_TYPE,
    SHARE_GROUP_METADATA_TYPE,
    SHARE_MEMBER_METADATA_TYPE,
    SHARE_STATE_PARTITION_METADATA_TYPE,
    SHARE_TARGET_METADATA_TYPE,
)

log = logging.getLogger("roost.broker.group.share")

SHARE_RECORD_TYPES = frozenset(range(10, 16))  # 13 is read and ignored
_KEYS = {SHARE_MEMBER_METADATA_TYPE: "ShareGroupMemberMetadataKey", SHARE_GROUP_METADATA_TYPE: "ShareGroupMetadataKey",
         SHARE_TARGET_METADATA_TYPE: "ShareGroupTargetAssignmentMetadataKey",
         SHARE_CURRENT_ASSIGNMENT_TYPE: "ShareGroupCurrentMemberAssignmentKey",
         SHARE_STATE_PARTITION_METADATA_TYPE: "ShareGroupStatePartitionMetadataKey"}
_VALUES = {kind: name.replace("Key", "Value") for kind, name in _KEYS.items()}


def _key(kind: int, group_id: str, member_id: str | None = None) -> bytes:
    body = {"group_id": group_id} if member_id is None else {"group_id": group_id, "member_id": member_id}
    # The record type, then the key's struct at its only version (decode reads it as that version).
    return INT16.pack(kind) + encode_struct(_KEYS[kind], 0, body)


def _value(kind: int, body: dict[str, Any]) -> bytes:
    return encode_versioned_struct(_VALUES[kind], 0, body)


def snapshot(group: ShareGroup) -> dict[bytes, bytes]:
    """Every record describing the share group now, by key."""
    gid = group.group_id
    records = {
        _key(SHARE_GROUP_METADATA_TYPE, gid): _value(SHARE_GROUP_METADATA_TYPE,
                                                     {"epoch": group.group_epoch, "metadata_hash": 0}),
        _key(SHARE_TARGET_METADATA_TYPE, gid): _value(SHARE_TARGET_METADATA_TYPE,
                                                      {"assignment_epoch": group.assignment_epoch}),
    }
    if group.initialized:
        records[_key(SHARE_STATE_PARTITION_METADATA_TYPE, gid)] = _value(SHARE_STATE_PARTITION_METADATA_TYPE, {
            "initializing_topics": [], "deleting_topics": [],
            "initialized_topics": [{"topic_id": t, "topic_name": name, "partitions": sorted(parts)}
                                   for t, (name, parts) in sorted(group.initialized.items())]})
    for member in group.members.values():
        mid = member.member_id
        records[_key(SHARE_MEMBER_METADATA_TYPE, gid, mid)] = _value(SHARE_MEMBER_METADATA_TYPE, {
            "rack_id": member.rack_id, "client_id": member.client_id, "client_host": member.client_host,
            "subscribed_topic_names": list(member.subscribed_names)})
        records[_key(SHARE_CURRENT_ASSIGNMENT_TYPE, gid, mid)] = _value(SHARE_CURRENT_ASSIGNMENT_TYPE, {
            "member_epoch": member.member_epoch, "previous_member_epoch": member.previous_epoch, "state": 0,
            "assigned_partitions": [{"topic_id": t, "partitions": p} for t, p in by_topic(member.assigned)]})
    return records


class ShareGroupRecords:
    """Share group records read back from the log, in log order (last value per key wins)."""

    def __init__(self) -> None:
        self.latest: dict[bytes, bytes] = {}

    def apply(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            self.latest.pop(key, None)
        else:
            self.latest[key] = value

    def groups(self, now: int) -> dict[str, tuple[ShareGroup, dict[bytes, bytes]]]:
        parsed: dict[str, dict[str, Any]] = {}
        for key, value in self.latest.items():
            kind = record_type(key)
            if kind not in _KEYS:
                continue
            try:
                _, k = decode_versioned_struct(_KEYS[kind], key)
                _, v = decode_versioned_struct(_VALUES[kind], value)
            except KafkaCodecError as error:
                log.warning("skipping an unreadable share group record: %s", error)
                continue
            entry = parsed.setdefault(k["group_id"], {"records": {}, "members": {}, "current": {}})
            entry["records"][key] = value
            if kind == SHARE_GROUP_METADATA_TYPE:
                entry["epoch"] = v["epoch"]
            elif kind == SHARE_TARGET_METADATA_TYPE:
                entry["assignment_epoch"] = v["assignment_epoch"]
            elif kind == SHARE_MEMBER_METADATA_TYPE:
                entry["members"][k["member_id"]] = v
            elif kind == SHARE_STATE_PARTITION_METADATA_TYPE:
                entry["initialized"] = {t["topic_id"]: (t["topic_name"], frozenset(t["partitions"]))
                                        for t in v["initialized_topics"]}
            else:
                entry["current"][k["member_id"]] = v
        found: dict[str, tuple[ShareGroup, dict[bytes, bytes]]] = {}
        for group_id, entry in parsed.items():
            if "epoch" not in entry:
                continue  # deleted: what is left are stray records
            group = ShareGroup(group_id, group_epoch=entry["epoch"],
                               assignment_epoch=entry.get("assignment_epoch", 0),
                               initialized=entry.get("initialized", {}))
            for member_id, meta in entry["members"].items():
                member = ShareMember(member_id, meta["rack_id"], meta["client_id"], meta["client_host"],
                                     tuple(meta["subscribed_topic_names"]), last_heard_ms=now)
                current = entry["current"].get(member_id)
                if current is not None:
                    member.member_epoch = current["member_epoch"]
                    member.previous_epoch = current["previous_member_epoch"]
                    member.assigned = frozenset((t["topic_id"], p) for t in current["assigned_partitions"]
                                                for p in t["partitions"])
                group.members[member_id] = member
                group.target[member_id] = member.assigned
            # The subscribed topics are looked up again on the next heartbeat: if they changed
            # meanwhile, the epoch goes up and the assignment is recomputed then.
            found[group_id] = (group, entry["records"])
        return found
