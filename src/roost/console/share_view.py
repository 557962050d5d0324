"""A share group's page (KIP-932 queues), put together from three sources, none of which has it all:

- ShareGroupDescribe (API 77, from the group coordinator): the members, their epochs and the
  partitions each is assigned (members may share a partition);
- the share-partitions' leaders, which alone hold the in-flight state (in memory): their
  start offset (SPSO), the records in the in-flight window, those acquired now and the unfinished
  records by delivery count. Kafka offers no API that answers these, so the console reads the
  leaders' Prometheus `/metrics` (the gauges broker_metrics.py exports under
  `kafka_server_sharepartitionmetrics_*` and `roost_share_partition_*`), from the brokers named
  with `roost console --broker-metrics URL`;
- ListOffsets: each partition's end offset, from which the start-offset lag (end - SPSO: the
  records the group has not yet finished with or not yet reached) follows.

The pure part (`leader_figures`, `share_group_view`) is tested alone; KafkaSide fetches."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

# The gauges of a share-partition, as broker_metrics.py names them.
IN_FLIGHT = "kafka_server_sharepartitionmetrics_inflightmessagecount"
ACQUIRED = "roost_share_partition_acquired_records"
START_OFFSET = "roost_share_partition_start_offset"
BY_DELIVERY_COUNT = "roost_share_partition_records_by_delivery_count"
MAX_METRICS_BYTES = 16 * 1024 * 1024  # one broker's /metrics read at most (a bound, not a size expected)

Key = tuple[str, str, int]  # (group, topic, partition)


@dataclass
class LeaderFigures:
    """What a share-partition's leader says of it."""

    start_offset: int | None = None
    in_flight: int | None = None
    acquired: int | None = None
    by_delivery_count: dict[int, int] = field(default_factory=dict)


def leader_figures(metrics_text: str, group: str | None = None) -> dict[Key, LeaderFigures]:
    """The share-partitions' figures in one broker's /metrics text (of `group` only, if named).
    A broker lists only the share-partitions it leads and has loaded."""
    found: dict[Key, LeaderFigures] = {}
    for family in text_string_to_metric_families(metrics_text):
        if family.name not in (IN_FLIGHT, ACQUIRED, START_OFFSET, BY_DELIVERY_COUNT):
            continue
        for sample in family.samples:
            labels = sample.labels
            if group is not None and labels.get("group") != group:
                continue
            try:
                key = (labels["group"], labels["topic"], int(labels["partition"]))
            except (KeyError, ValueError):
                continue  # not a share-partition's sample: nothing to show
            figures = found.setdefault(key, LeaderFigures())
            value = int(sample.value)
            if family.name == IN_FLIGHT:
                figures.in_flight = value
            elif family.name == ACQUIRED:
                figures.acquired = value
            elif family.name == START_OFFSET:
                figures.start_offset = value
            elif "delivery_count" in labels and labels["delivery_count"].isdigit():
                figures.by_delivery_count[int(labels["delivery_count"])] = value
    return found


def merge_figures(answers: Iterable[dict[Key, LeaderFigures]]) -> dict[Key, LeaderFigures]:
    """Several brokers' figures: a partition's leader is the one that has it loaded. While its
    leadership moves, two may list it for a moment: the one with the later start offset wins (a
    start offset never goes back)."""
    merged: dict[Key, LeaderFigures] = {}
    for answer in answers:
        for key, figures in answer.items():
            held = merged.get(key)
            if held is None or (figures.start_offset or -1) > (held.start_offset or -1):
                merged[key] = figures
    return merged


def share_group_view(described: Mapping[str, Any], figures: Mapping[Key, LeaderFigures],
                     end_offsets: Mapping[tuple[str, int], int | None], dead_letter_topic: str | None,
                     metrics_problems: list[str], metrics_configured: bool) -> dict[str, Any]:
    """The page's answer: the group, its members, and one row per share-partition (each assigned
    to a member, or with state on a leader) with its figures; None where a figure is unknown."""
    group = described["group"]
    holders: dict[tuple[str, int], list[str]] = {}
    members = []
    for member in described["members"]:
        assigned = [(a["topic"], p) for a in member["assignment"] for p in a["partitions"]]
        for key in assigned:
            holders.setdefault(key, []).append(member["client_id"] or member["member"])
        members.append({"member_id": member["member"], "client_id": member["client_id"], "host": member["host"],
                        "member_epoch": member["member_epoch"], "subscribed": member["subscribed"],
                        "assignment": [{"topic": t, "partition": p} for t, p in sorted(assigned)]})
    keys = sorted(set(holders) | {(t, p) for g, t, p in figures if g == group})
    partitions = []
    totals: dict[int, int] = {}
    for topic, index in keys:
        leader = figures.get((group, topic, index), LeaderFigures())
        end = end_offsets.get((topic, index))
        start = leader.start_offset
        for count, records in leader.by_delivery_count.items():
            totals[count] = totals.get(count, 0) + records
        partitions.append({
            "topic": topic, "partition": index, "members": sorted(holders.get((topic, index), [])),
            "start_offset": start, "end_offset": end,
            "lag": max(0, end - start) if end is not None and start is not None and start >= 0 else None,
            "in_flight": leader.in_flight, "acquired": leader.acquired,
            "delivery_counts": [{"delivery_count": c, "records": r} for c, r in sorted(leader.by_delivery_count.items())],
        })
    known = [row["lag"] for row in partitions if row["lag"] is not None]
    return {"group": group, "state": described["state"], "group_epoch": described["group_epoch"],
            "assignment_epoch": described["assignment_epoch"], "assignor": described["assignor"],
            "members": members, "partitions": partitions, "dead_letter_topic": dead_letter_topic,
            "total_lag": sum(known) if known else None,
            "delivery_counts": [{"delivery_count": c, "records": r} for c, r in sorted(totals.items())],
            "metrics": {"configured": metrics_configured, "problems": metrics_problems}}
