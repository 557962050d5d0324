"""`roost share-group`: share groups (KIP-932) with kafka-share-groups.sh's meanings.

    roost share-group list                     # kafka-share-groups.sh --list
    roost share-group describe email-workers   # --describe --members: members and their partitions
    roost share-group describe email-workers --offsets   # --describe --offsets: start offsets and lag
    roost share-group reset-offsets --group email-workers --topic orders --to-earliest --execute
    roost share-group replay --group email-workers   # its dead letters back to their topics (Roost's own)
    roost share-group delete email-workers     # --delete (the group must have no members)
"""

from __future__ import annotations

from datetime import datetime

import click

from roost.admin.share_groups import (
    delete_share_group,
    describe_share_group,
    describe_share_offsets,
    list_share_groups,
    reset_share_offsets,
)
from roost.admin.share_replay import MAX_LIMIT, replay
from roost.admin.target import Target
from roost.cli.client.admin_output import emit_document
from roost.cli.client.client_options import CliError, emit, format_option, kafka_target_options
from roost.wire.kafka.errors import ErrorCode


@click.group("share-group")
def command() -> None:
    """Share groups (queues, KIP-932): list, describe, delete."""


@command.command("list")
@kafka_target_options
@format_option
def list_groups(target: Target, output_format: str) -> None:
    """List share groups and their states (empty or stable).

    \b
    roost share-group list --format json
    """
    emit(list_share_groups(target), ["group", "state"], output_format)


@command.command("describe")
@click.argument("group")
@click.option("--offsets", is_flag=True, help="Each share-partition's start offset and lag instead "
              "(kafka-share-groups.sh --describe --offsets).")
@kafka_target_options
@format_option
def describe(target: Target, group: str, offsets: bool, output_format: str) -> None:
    """A share group's epochs and members: each member's epoch, subscription and partitions
    (members may share partitions). With --offsets: each share-partition with state, its start
    offset (the first record not yet done), leader epoch and lag (records not yet done).

    \b
    roost share-group describe email-workers
    roost share-group describe email-workers --offsets
    """
    if offsets:
        emit(describe_share_offsets(target, group), ["group", "topic", "partition", "leader_epoch",
                                                     "start_offset", "lag"], output_format)
        return
    found = describe_share_group(target, group)
    found["summary"] = [{k: found[k] for k in ("group", "state", "group_epoch", "assignment_epoch", "assignor")}]
    emit_document(found, [
        ("summary", None, ["group", "state", "group_epoch", "assignment_epoch", "assignor"]),
        ("members", "members", ["member", "client_id", "host", "member_epoch", "subscribed", "partitions"]),
    ], output_format)


@command.command("delete")
@click.argument("groups", metavar="GROUP...", nargs=-1, required=True)
@kafka_target_options
@format_option
def delete(target: Target, groups: tuple[str, ...], output_format: str) -> None:
    """Delete share groups; a group with members is refused (NON_EMPTY_GROUP).

    \b
    roost share-group delete email-workers
    """
    rows = []
    for group in groups:
        code = delete_share_group(target, group)
        if code != ErrorCode.NONE:
            raise CliError(f"delete share group {group}: {code.name}")
        rows.append({"group": group, "result": "deleted"})
    emit(rows, ["group", "result"], output_format)


@command.command("reset-offsets")
@click.option("--group", "group", required=True, help="The share group (it must have no members).")
@click.option("--topic", "topics", multiple=True, metavar="TOPIC[:PARTITIONS]",
              help="A topic, or some of its partitions (orders:0,2); repeatable. Default: every "
                   "share-partition the group has state for.")
@click.option("--to-earliest", "strategy", flag_value="earliest", help="To the log start.")
@click.option("--to-latest", "strategy", flag_value="latest", help="To the log end (skip the backlog).")
@click.option("--to-datetime", "when", metavar="YYYY-MM-DDTHH:mm:SS.sss",
              help="To the first record at or after this time (local time unless it has an offset).")
@click.option("--to-offset", "offset", type=int, help="To this offset (kept within the log).")
@click.option("--dry-run", is_flag=True, help="Show the new offsets only (the default).")
@click.option("--execute", is_flag=True, help="Write the new offsets.")
@kafka_target_options
@format_option
def reset_offsets(target: Target, group: str, topics: tuple[str, ...], strategy: str | None, when: str | None,
                  offset: int | None, dry_run: bool, execute: bool, output_format: str) -> None:
    """Move where a share group's share-partitions start delivering (kafka-share-groups.sh
    --reset-offsets): records from the new start offset on are delivered again (or skipped);
    what was in flight is forgotten. Only while the group is empty; shown, not written, unless
    --execute.

    \b
    roost share-group reset-offsets --group email-workers --topic orders --to-earliest
    roost share-group reset-offsets --group email-workers --topic orders:0 --to-offset 1200 --execute
    roost share-group reset-offsets --group email-workers --to-datetime 2026-01-01T00:00:00.000 --execute
    """
    chosen = [name for name, given in (("--to-earliest", strategy == "earliest"), ("--to-latest", strategy == "latest"),
                                       ("--to-datetime", when is not None), ("--to-offset", offset is not None))
              if given]
    if len(chosen) != 1:
        raise CliError("reset-offsets needs exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset"
                       + (f" (given: {', '.join(chosen)})" if chosen else ""))
    if dry_run and execute:
        raise CliError("--dry-run and --execute exclude each other")
    value: int | None = offset
    if when is not None:
        try:
            value = int(datetime.fromisoformat(when).timestamp() * 1000)
        except ValueError:
            raise CliError(f"--to-datetime {when!r}: not a date and time like 2026-01-31T12:00:00.000") from None
        strategy = "datetime"
    elif offset is not None:
        if offset < 0:
            raise CliError(f"--to-offset {offset}: an offset is 0 or more")
        strategy = "offset"
    assert strategy is not None
    rows = reset_share_offsets(target, group, topics, strategy, value, execute)
    emit(rows, ["group", "topic", "partition", "new_offset"], output_format)


@command.command("replay")
@click.option("--group", "group", required=True, help="The share group whose dead letters are replayed.")
@click.option("--from-dead-letter-topic", "topic", metavar="TOPIC",
              help="The dead-letter topic (default: the group's roost.share.dead.letter.topic).")
@click.option("--limit", type=click.IntRange(1, MAX_LIMIT), default=1000, show_default=True,
              help="At most this many records.")
@click.option("--dry-run", is_flag=True, help="List what would be replayed; produce and remember nothing.")
@kafka_target_options
@format_option
def replay_dead_letters(target: Target, group: str, topic: str | None, limit: int, dry_run: bool,
                        output_format: str) -> None:
    """Produce a share group's dead letters (Roost's dead-letter topic) back to their origin topic
    and partition, with their own key, value and headers. A second replay goes on after the
    first (consumer group roost.replay.GROUP); the dead-letter topic keeps every record.

    \b
    roost share-group replay --group email-workers --dry-run
    roost share-group replay --group email-workers --limit 100
    """
    rows = replay(target, group, topic, limit, dry_run)
    emit(rows, ["origin", "reason", "delivery_count", "dead_letter", "to"], output_format)
