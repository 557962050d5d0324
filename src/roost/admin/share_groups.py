"""Share groups (KIP-932) for `roost share-group`: ListGroups v5 with the `share` type filter,
ShareGroupDescribe and DeleteGroups asked of the brokers over a plain socket with Roost's own
codec (confluent-kafka 2.16's AdminClient has no share-group calls); plaintext listeners only.
"""

from __future__ import annotations

from typing import Any

from roost.admin.errors import AdminError
from roost.admin.target import Target
from roost.admin.transactions import UNANSWERED, ask
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode

LIST_VERSION, DESCRIBE_VERSION, DELETE_VERSION, FIND_COORDINATOR_VERSION, METADATA_VERSION = 5, 1, 2, 3, 12


def _require_plaintext(target: Target) -> None:
    if target.settings.get("security.protocol", "plaintext").lower() != "plaintext":
        raise AdminError("roost share-group speaks to plaintext listeners only")


def _bootstrap(target: Target) -> tuple[str, int]:
    host, _, port = target.bootstrap.split(",")[0].strip().rpartition(":")
    return host, int(port)


def _brokers(target: Target) -> list[tuple[str, int]]:
    host, port = _bootstrap(target)
    answer = ask(host, port, ApiKey.METADATA, METADATA_VERSION,
                 {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
                 target.timeout_s)
    return [(b["host"], b["port"]) for b in answer["brokers"]]


def _coordinator(target: Target, group: str) -> tuple[str, int]:
    host, port = _bootstrap(target)
    found = ask(host, port, ApiKey.FIND_COORDINATOR, FIND_COORDINATOR_VERSION, {"key": group, "key_type": 0},
                target.timeout_s)
    if found["error_code"] != ErrorCode.NONE:
        raise AdminError(f"share group {group}: no coordinator ({ErrorCode(found['error_code']).name})")
    return found["host"], found["port"]


def list_share_groups(target: Target) -> list[dict[str, str]]:
    """Every share group of the cluster (each broker lists the groups it coordinates)."""
    _require_plaintext(target)
    found: dict[str, str] = {}
    try:
        for host, port in _brokers(target):
            answer = ask(host, port, ApiKey.LIST_GROUPS, LIST_VERSION, {"states_filter": [], "types_filter": ["share"]},
                         target.timeout_s)
            for group in answer["groups"]:
                found[group["group_id"]] = group["group_state"]
    except UNANSWERED as error:
        raise AdminError(f"list share groups: no answer ({error})") from None
    return [{"group": g, "state": s.lower()} for g, s in sorted(found.items())]


def describe_share_group(target: Target, group: str) -> dict[str, Any]:
    _require_plaintext(target)
    try:
        host, port = _coordinator(target, group)
        answer = ask(host, port, ApiKey.SHARE_GROUP_DESCRIBE, DESCRIBE_VERSION,
                     {"group_ids": [group], "include_authorized_operations": False}, target.timeout_s)
    except UNANSWERED as error:
        raise AdminError(f"describe share group {group}: no answer ({error})") from None
    (described,) = answer["groups"]
    if described["error_code"] != ErrorCode.NONE:
        raise AdminError(f"describe share group {group}: {ErrorCode(described['error_code']).name}"
                         + (f" ({described['error_message']})" if described.get("error_message") else ""))
    return {
        "group": group, "state": described["group_state"].lower(), "group_epoch": described["group_epoch"],
        "assignment_epoch": described["assignment_epoch"], "assignor": described["assignor_name"],
        "members": [{
            "member": m["member_id"], "client_id": m["client_id"], "host": m["client_host"],
            "member_epoch": m["member_epoch"], "subscribed": ",".join(m["subscribed_topic_names"]),
            "partitions": " ".join(f"{t['topic_name'] or t['topic_id']}:{','.join(map(str, sorted(t['partitions'])))}"
                                   for t in m["assignment"]["topic_partitions"]),
            "assignment": [{"topic": t["topic_name"] or str(t["topic_id"]), "partitions": sorted(t["partitions"])}
                           for t in m["assignment"]["topic_partitions"]],
        } for m in described["members"]],
    }


def delete_share_group(target: Target, group: str) -> ErrorCode:
    _require_plaintext(target)
    try:
        host, port = _coordinator(target, group)
        answer = ask(host, port, ApiKey.DELETE_GROUPS, DELETE_VERSION, {"groups_names": [group]}, target.timeout_s)
    except UNANSWERED as error:
        raise AdminError(f"delete share group {group}: no answer ({error})") from None
    return ErrorCode(answer["results"][0]["error_code"])


GROUP_RESOURCE, DESCRIBE_CONFIGS_VERSION = 32, 3
# Roost's own group config (roost.broker.share.dead_letter names it; admin speaks to the servers
# over the wire only, so the name is repeated here, and a test checks the two agree).
DEAD_LETTER_TOPIC_CONFIG = "roost.share.dead.letter.topic"


def share_group_configs(target: Target, group: str) -> dict[str, str | None]:
    """A group's configs (DescribeConfigs of the GROUP resource, type 32, as kafka-configs.sh
    --entity-type groups asks): the share.* keys and Roost's dead-letter topic."""
    _require_plaintext(target)
    host, port = _bootstrap(target)
    try:
        answer = ask(host, port, ApiKey.DESCRIBE_CONFIGS, DESCRIBE_CONFIGS_VERSION,
                     {"resources": [{"resource_type": GROUP_RESOURCE, "resource_name": group,
                                     "configuration_keys": None}],
                      "include_synonyms": False, "include_documentation": False}, target.timeout_s)
    except UNANSWERED as error:
        raise AdminError(f"configs of share group {group}: no answer ({error})") from None
    (result,) = answer["results"]
    if result["error_code"] != ErrorCode.NONE:
        raise AdminError(f"configs of share group {group}: {ErrorCode(result['error_code']).name}")
    return {entry["name"]: entry["value"] for entry in result["configs"]}


# offsets: DescribeShareGroupOffsets, AlterShareGroupOffsets (kafka-share-groups.sh --describe
# --offsets and --reset-offsets) ----------------------------------------------------------------
DESCRIBE_OFFSETS_VERSION, ALTER_OFFSETS_VERSION, LIST_OFFSETS_VERSION = 1, 0, 7
EARLIEST, LATEST = -2, -1
RESET_STRATEGIES = ("earliest", "latest", "datetime", "offset")


def describe_share_offsets(target: Target, group: str) -> list[dict[str, Any]]:
    """Each share-partition of the group with state: its start offset, leader epoch and lag
    (None where there is none)."""
    _require_plaintext(target)
    try:
        host, port = _coordinator(target, group)
        answer = ask(host, port, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, DESCRIBE_OFFSETS_VERSION,
                     {"groups": [{"group_id": group, "topics": None}]}, target.timeout_s)
    except UNANSWERED as error:
        raise AdminError(f"describe share group {group} offsets: no answer ({error})") from None
    (found,) = answer["groups"]
    if found["error_code"] != ErrorCode.NONE:
        raise AdminError(f"describe share group {group} offsets: {ErrorCode(found['error_code']).name}")
    rows = [{"group": group, "topic": t["topic_name"], "partition": p["partition_index"],
             "leader_epoch": p["leader_epoch"] if p["start_offset"] >= 0 else None,
             "start_offset": p["start_offset"] if p["start_offset"] >= 0 else None,
             "lag": p["lag"] if p["lag"] >= 0 else None}
            for t in found["topics"] for p in t["partitions"]]
    return sorted(rows, key=lambda r: (r["topic"], r["partition"]))


def _topic_leaders(target: Target, topics: list[str]) -> dict[str, dict[int, tuple[str, int]]]:
    """topic -> partition -> its leader's address (UNKNOWN topics raise)."""
    host, port = _bootstrap(target)
    answer = ask(host, port, ApiKey.METADATA, METADATA_VERSION,
                 {"topics": [{"name": t} for t in topics], "allow_auto_topic_creation": False,
                  "include_topic_authorized_operations": False}, target.timeout_s)
    brokers = {b["node_id"]: (b["host"], b["port"]) for b in answer["brokers"]}
    out: dict[str, dict[int, tuple[str, int]]] = {}
    for topic in answer["topics"]:
        if topic["error_code"] != ErrorCode.NONE:
            raise AdminError(f"topic {topic['name']}: {ErrorCode(topic['error_code']).name}")
        out[topic["name"]] = {p["partition_index"]: brokers.get(p["leader_id"], ("", -1)) for p in topic["partitions"]}
    return out


def _list_offsets(target: Target, wanted: dict[tuple[str, int], int],
                  leaders: dict[str, dict[int, tuple[str, int]]]) -> dict[tuple[str, int], int]:
    """ListOffsets at each partition's leader: (topic, partition) -> the offset for its timestamp
    (-2 earliest, -1 latest); a timestamp past every record gives the log end (as Kafka's tool)."""
    by_leader: dict[tuple[str, int], list[tuple[str, int, int]]] = {}
    for (topic, index), stamp in wanted.items():
        by_leader.setdefault(leaders[topic][index], []).append((topic, index, stamp))
    out: dict[tuple[str, int], int] = {}
    for (host, port), parts in by_leader.items():
        if port < 0:
            raise AdminError(f"{parts[0][0]}-{parts[0][1]} has no leader now")
        topics: dict[str, list[dict[str, int]]] = {}
        for topic, index, stamp in parts:
            topics.setdefault(topic, []).append({"partition_index": index, "current_leader_epoch": -1,
                                                 "timestamp": stamp})
        answer = ask(host, port, ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION,
                     {"replica_id": -1, "isolation_level": 0,
                      "topics": [{"name": t, "partitions": p} for t, p in topics.items()]}, target.timeout_s)
        for topic in answer["topics"]:
            for p in topic["partitions"]:
                if p["error_code"] != ErrorCode.NONE:
                    raise AdminError(f"{topic['name']}-{p['partition_index']}: {ErrorCode(p['error_code']).name}")
                out[(topic["name"], p["partition_index"])] = p["offset"]
    missing = [tp for tp, stamp in wanted.items() if stamp >= 0 and out.get(tp, -1) < 0]
    if missing:  # no record at or after the time: the log end
        out.update(_list_offsets(target, dict.fromkeys(missing, LATEST), leaders))
    return out


def parse_topic_partitions(specs: tuple[str, ...], leaders: dict[str, dict[int, tuple[str, int]]]) -> list[tuple[str, int]]:
    """kafka-share-groups.sh's --topic values: `topic` (every partition) or `topic:0,2`."""
    out: list[tuple[str, int]] = []
    for spec in specs:
        topic, _, parts = spec.partition(":")
        known = leaders[topic]
        if not parts:
            out.extend((topic, p) for p in sorted(known))
            continue
        for text in parts.split(","):
            try:
                index = int(text)
            except ValueError:
                raise AdminError(f"--topic {spec}: {text!r} is not a partition number") from None
            if index not in known:
                raise AdminError(f"--topic {spec}: {topic} has no partition {index}")
            out.append((topic, index))
    return list(dict.fromkeys(out))


def reset_share_offsets(target: Target, group: str, topics: tuple[str, ...], strategy: str, value: int | None,
                        execute: bool) -> list[dict[str, Any]]:
    """kafka-share-groups.sh --reset-offsets: the new start offset of each share-partition named
    (`topic[:partitions]`; none named: every one the group has state for), from the strategy
    (earliest, latest, datetime: `value` ms since the epoch, offset: `value` clamped to the log);
    written (AlterShareGroupOffsets) only with `execute`. The group must be empty."""
    assert strategy in RESET_STRATEGIES
    _require_plaintext(target)
    try:
        host, port = _coordinator(target, group)
        described = ask(host, port, ApiKey.SHARE_GROUP_DESCRIBE, DESCRIBE_VERSION,
                        {"group_ids": [group], "include_authorized_operations": False}, target.timeout_s)["groups"][0]
        if described["error_code"] == ErrorCode.NONE and described["group_state"] not in ("Empty", "Dead"):
            raise AdminError(f"Share group '{group}' is not empty: its offsets are reset only while no member "
                             f"is in it (state {described['group_state']}, {len(described['members'])} members)")
        if topics:
            leaders = _topic_leaders(target, sorted({spec.partition(":")[0] for spec in topics}))
            partitions = parse_topic_partitions(topics, leaders)
        else:
            current = describe_share_offsets(target, group)
            leaders = _topic_leaders(target, sorted({r["topic"] for r in current})) if current else {}
            partitions = [(r["topic"], r["partition"]) for r in current]
        if not partitions:
            raise AdminError(f"share group {group}: no share-partitions to reset (name them with --topic)")
        if strategy == "offset":
            assert value is not None
            bounds = _list_offsets(target, dict.fromkeys(partitions, EARLIEST), leaders)
            ends = _list_offsets(target, dict.fromkeys(partitions, LATEST), leaders)
            new = {tp: min(max(value, bounds[tp]), ends[tp]) for tp in partitions}
        else:
            stamp = {"earliest": EARLIEST, "latest": LATEST}.get(strategy, value)
            assert stamp is not None
            new = _list_offsets(target, dict.fromkeys(partitions, stamp), leaders)
        if execute:
            by_topic: dict[str, list[dict[str, int]]] = {}
            for (topic, index) in partitions:
                by_topic.setdefault(topic, []).append({"partition_index": index, "start_offset": new[(topic, index)]})
            answer = ask(host, port, ApiKey.ALTER_SHARE_GROUP_OFFSETS, ALTER_OFFSETS_VERSION,
                         {"group_id": group, "topics": [{"topic_name": t, "partitions": p} for t, p in by_topic.items()]},
                         target.timeout_s)
            if answer["error_code"] != ErrorCode.NONE:
                raise AdminError(f"reset share group {group} offsets: {ErrorCode(answer['error_code']).name}"
                                 + (f" ({answer['error_message']})" if answer.get("error_message") else ""))
            failed = [f"{t['topic_name']}-{p['partition_index']}: {ErrorCode(p['error_code']).name}"
                      for t in answer["responses"] for p in t["partitions"] if p["error_code"] != ErrorCode.NONE]
            if failed:
                raise AdminError(f"reset share group {group} offsets: {', '.join(failed)}")
    except UNANSWERED as error:
        raise AdminError(f"reset share group {group} offsets: no answer ({error})") from None
    return [{"group": group, "topic": t, "partition": p, "new_offset": new[(t, p)]} for t, p in sorted(partitions)]
