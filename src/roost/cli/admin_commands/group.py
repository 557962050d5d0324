"""`roost group`: list, describe (with lag), seek and delete consumer groups on any
Kafka-protocol cluster (the grammar follows rpk's `group` commands; `seek` plans first, like
kafka-consumer-groups --reset-offsets, and changes nothing without --execute).

    roost group list
    roost group describe billing                    # members, offsets, lag per partition and topic
    roost group seek billing --to start             # prints the plan only
    roost group seek billing --to @2026-11-24T09:00 --topics orders --execute
    roost group seek billing --to -100 --execute    # 100 back from the committed offset
    roost group delete billing
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, ConsumerGroupDescription, OffsetSpec

from roost.admin.consumer_groups import describe_consumer_group
from roost.admin.errors import SeekTargetError
from roost.admin.kafka_client import (
    DELETE_GROUPS_KEY,
    await_result,
    fetch_metadata,
    list_offsets,
    open_admin,
    require_api,
    topic_partitions,
)
from roost.admin.seek import Partition, parse_seek_target, plan_seek
from roost.admin.target import Target
from roost.cli.client.admin_output import emit_document, report_each
from roost.cli.client.client_options import CliError, emit, format_option, kafka_target_options


def describe_group(admin: AdminClient, target: Target, group: str) -> ConsumerGroupDescription:
    (future,) = admin.describe_consumer_groups([group], request_timeout=target.timeout_s).values()
    return await_result(future, target, f"describe group {group}")


def committed_offsets(admin: AdminClient, target: Target, group: str) -> dict[Partition, int]:
    """The group's committed offsets (partitions without one are left out)."""
    (future,) = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                  request_timeout=target.timeout_s).values()
    answer = await_result(future, target, f"offsets of group {group}")
    return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions or [] if tp.offset >= 0}


def state_name(description: ConsumerGroupDescription) -> str:
    state = description.state
    return str(getattr(state, "name", state)).lower()


def is_unknown(description: ConsumerGroupDescription, committed: dict[Partition, int]) -> bool:
    """A group the coordinator knows nothing of: dead (or unknown), no members, no offsets."""
    return state_name(description) in ("dead", "unknown") and not description.members and not committed


def assignment_text(partitions: Iterable[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return " ".join(f"{topic}:{','.join(map(str, sorted(ps)))}" for topic, ps in sorted(by_topic.items()))


def protocol_name(group_type: object) -> str:
    """ListGroups v5's group type as the CLI shows it: classic or consumer (KIP-848)."""
    name = str(getattr(group_type, "name", group_type)).lower()
    return "consumer" if name == "consumer" else "classic"


@click.group("group")
def command() -> None:
    """Consumer groups: list, describe with lag, seek, delete."""


@command.command("list")
@kafka_target_options
@format_option
def list_groups(target: Target, output_format: str) -> None:
    """List consumer groups, their states and protocols (classic, or consumer for KIP-848).

    \b
    roost group list --format json
    """
    admin = open_admin(target)
    fetch_metadata(admin, target)
    answer = await_result(admin.list_consumer_groups(request_timeout=target.timeout_s), target, "list groups")
    rows = [{"group": g.group_id, "state": str(getattr(g.state, "name", g.state)).lower(),
             "protocol": protocol_name(g.type), "simple": g.is_simple_consumer_group}
            for g in sorted(answer.valid, key=lambda g: g.group_id)]
    emit(rows, ["group", "state", "protocol"], output_format)


@command.command("describe")
@click.argument("group")
@kafka_target_options
@format_option
def describe(target: Target, group: str, output_format: str) -> None:
    """Describe a group: its protocol (classic, or consumer for KIP-848 groups, with their group
    and assignment epochs), state, members (client id, host, assignment; for consumer groups the
    member epoch and target assignment too), and per partition the committed offset, the log end
    offset and the lag; then the lag per topic.

    \b
    roost group describe billing
    roost group describe billing --format yaml
    """
    admin = open_admin(target)
    fetch_metadata(admin, target)
    description = describe_group(admin, target, group)
    committed = committed_offsets(admin, target, group)
    if is_unknown(description, committed):
        raise CliError(f"unknown group: {group}")
    modern = describe_consumer_group(target, group) if protocol_name(description.type) == "consumer" else None
    protocol = "consumer" if modern is not None else protocol_name(description.type)
    owner: dict[Partition, str] = {}
    members = []
    for member in description.members:
        assigned = list(member.assignment.topic_partitions) if member.assignment else []
        for tp in assigned:
            owner[(tp.topic, tp.partition)] = member.client_id
        row = {"member_id": member.member_id, "client_id": member.client_id, "host": member.host,
               "instance_id": member.group_instance_id, "assignment": assignment_text(assigned)}
        if modern is not None:
            known = modern["members"].get(member.member_id, {})
            row.update(member_epoch=known.get("member_epoch"), target=known.get("target"))
        members.append(row)
    partitions = sorted(set(committed) | set(owner))
    # Not strict: a committed topic may since have been deleted, or a partition be offline.
    ends = list_offsets(admin, target, partitions, OffsetSpec.latest(), strict=False)
    offsets, lag_by_topic = [], {}
    for topic, index in partitions:
        current = committed.get((topic, index))
        end = ends[(topic, index)]
        lag = max(end - current, 0) if current is not None and end is not None and end >= 0 else None
        offsets.append({"topic": topic, "partition": index, "committed": current, "log_end_offset": end,
                        "lag": lag, "client_id": owner.get((topic, index))})
        summary = lag_by_topic.setdefault(topic, {"topic": topic, "partitions": 0, "lag": 0})
        summary["partitions"] += 1
        summary["lag"] += lag or 0
    coordinator = description.coordinator
    epochs = {"group_epoch": modern["group_epoch"], "assignment_epoch": modern["assignment_epoch"]} if modern else {}
    document: dict[str, Any] = {
        "group": group, "protocol": protocol, **epochs, "state": state_name(description),
        "coordinator": f"{coordinator.id} ({coordinator.host}:{coordinator.port})" if coordinator else None,
        "assignor": description.partition_assignor or None,
        "summary": [{"group": group, "protocol": protocol, "state": state_name(description),
                     "group_epoch": epochs.get("group_epoch", ""), "members": len(members),
                     "total_lag": sum(s["lag"] for s in lag_by_topic.values())}],
        "members": members, "offsets": offsets, "lag_by_topic": list(lag_by_topic.values()),
    }
    emit_document(document, [
        ("summary", None, ["group", "protocol", "state", "group_epoch", "members", "total_lag"]),
        ("members", "members", ["client_id", "host", "assignment", "member_id"]
         + (["member_epoch", "target"] if modern else [])),
        ("offsets", "offsets", ["topic", "partition", "committed", "log_end_offset", "lag", "client_id"]),
        ("lag_by_topic", "lag by topic", ["topic", "partitions", "lag"]),
    ], output_format)


@command.command("seek")
@click.argument("group")
@click.option("--to", "to_text", required=True, metavar="start|end|OFFSET|@TIME|+N|-N",
              help="where to move: the log start or end, an offset, the first offset at or after a "
                   "time (@1732438800, @1732438800000, @-2h, @2026-11-24T09:00), or a shift from the "
                   "committed offset")
@click.option("--topics", metavar="T1,T2", help="only these topics (default: those the group has offsets for)")
@click.option("--execute", is_flag=True, help="commit the new offsets (without it: print the plan only)")
@kafka_target_options
@format_option
def seek(target: Target, group: str, to_text: str, topics: str | None, execute: bool, output_format: str) -> None:
    """Move a group's committed offsets. Prints the plan (partition, current, new) and changes
    nothing unless --execute. Refuses a group with live members: stop its consumers first.

    \b
    roost group seek billing --to end
    roost group seek billing --to @-1h --topics orders,refunds --execute
    """
    try:
        to = parse_seek_target(to_text)
    except SeekTargetError as error:
        raise click.BadParameter(error.message, param_hint="--to") from None
    chosen_topics = [t for t in (topics or "").split(",") if t] if topics is not None else None
    if chosen_topics == []:
        raise click.BadParameter("expected topic names separated by commas", param_hint="--topics")
    admin = open_admin(target)
    metadata = fetch_metadata(admin, target)
    description = describe_group(admin, target, group)
    if description.members:
        raise CliError(f"group {group} has {len(description.members)} live member(s) (state "
                       f"{state_name(description)}): stop its consumers before seeking; only an empty group's "
                       f"offsets can be changed")
    committed = committed_offsets(admin, target, group)
    if chosen_topics is None:
        if is_unknown(description, committed):
            raise CliError(f"unknown group: {group} (name --topics to give a new group offsets)")
        chosen_topics = sorted({topic for topic, _ in committed})
    unknown = [t for t in chosen_topics if t not in metadata.topics]
    if unknown:
        raise CliError(f"unknown topic{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}")
    partitions = topic_partitions(metadata, chosen_topics)
    starts = list_offsets(admin, target, partitions, OffsetSpec.earliest())
    ends = list_offsets(admin, target, partitions, OffsetSpec.latest())
    at_time = (list_offsets(admin, target, partitions, OffsetSpec.for_timestamp(to.value))
               if to.kind == "time" else {})
    plan = plan_seek(to, partitions, committed, starts, ends, at_time)
    emit(plan, ["topic", "partition", "current", "new"], output_format)
    if not execute:
        click.echo("dry run: nothing changed; add --execute to commit these offsets", err=True)
        return
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(r["topic"], r["partition"], r["new"]) for r in plan])
    (future,) = admin.alter_consumer_group_offsets([request], request_timeout=target.timeout_s).values()
    answer = await_result(future, target, f"commit offsets of group {group}")
    failed = [tp for tp in answer.topic_partitions or [] if tp.error is not None]
    if failed:
        raise CliError(f"commit offsets of group {group}: " + ", ".join(
            f"{tp.topic}[{tp.partition}]: {tp.error.str()}" for tp in failed))
    click.echo(f"committed {len(plan)} offset(s) for group {group}", err=True)


@command.command("delete")
@click.argument("groups", metavar="GROUP...", nargs=-1, required=True)
@kafka_target_options
@format_option
def delete(target: Target, groups: tuple[str, ...], output_format: str) -> None:
    """Delete groups (they must have no live members) and their committed offsets.

    \b
    roost group delete billing old-billing
    """
    admin = open_admin(target)
    fetch_metadata(admin, target)
    for group in groups:
        if is_unknown(describe_group(admin, target, group), committed_offsets(admin, target, group)):
            raise CliError(f"unknown group: {group}")
    require_api(target, DELETE_GROUPS_KEY, "DeleteGroups", "delete groups")
    futures = admin.delete_consumer_groups(list(groups), request_timeout=target.timeout_s)
    report_each(futures, target, "group", "delete group", "deleted", output_format)
