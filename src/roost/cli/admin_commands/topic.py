"""`roost topic`: list, create, describe, alter the configs of, grow, trim and delete topics on
any Kafka-protocol cluster (the grammar follows rpk's `topic` commands).

    roost topic list [-r REGEX] [--internal] [--under-replicated|--under-min-isr|--offline]
    roost topic create orders -p 6 -r 3 -c retention.ms=86400000 [--if-not-exists]
    roost topic describe orders [--under-replicated|--under-min-isr|--offline] [--format json]
    roost topic alter-config orders --set retention.ms=1000 --delete cleanup.policy
    roost topic add-partitions orders -n 2          # adds 2 partitions (not: grows to 2)
    roost topic trim orders -p 0 -o 100             # DeleteRecords: drop offsets below 100
    roost topic delete orders payments
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import click
from confluent_kafka import TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ClusterMetadata,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from roost.admin.kafka_client import (
    await_result,
    fetch_metadata,
    is_internal,
    list_offsets,
    open_admin,
    topic_partitions,
)
from roost.admin.replica_sizes import replica_sizes
from roost.admin.target import Target
from roost.cli.client.admin_output import compile_regex, emit_document, report_each
from roost.cli.client.client_options import (
    CliError,
    emit,
    format_option,
    kafka_target_options,
    parse_settings,
)

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class PartitionHealth:
    """What the health filters look at in one partition."""

    leader: int
    replicas: int
    isr: int
    min_isr: int

    @property
    def offline(self) -> bool:
        return self.leader < 0

    @property
    def under_replicated(self) -> bool:
        return self.isr < self.replicas

    @property
    def under_min_isr(self) -> bool:
        return self.isr < self.min_isr

    def flags(self) -> list[str]:
        return [name for name, on in (("offline", self.offline), ("under-replicated", self.under_replicated),
                                      ("under-min-isr", self.under_min_isr)) if on]


def health_filter_options(command: F) -> F:
    """Adds --under-replicated, --under-min-isr and --offline (as `health`: the flags chosen)."""
    decorated: Any = command
    for flag, what in (("offline", "whose leader is unavailable"),
                       ("under-min-isr", "whose ISR is smaller than the topic's min.insync.replicas"),
                       ("under-replicated", "whose ISR is smaller than its replica set")):
        decorated = click.option(f"--{flag}", "health", flag_value=flag, multiple=True,
                                 help=f"only partitions {what}")(decorated)
    return decorated


def require_topics(metadata: ClusterMetadata, names: Sequence[str]) -> None:
    unknown = [name for name in names if name not in metadata.topics]
    if unknown:
        raise CliError(f"unknown topic{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}")


def topic_configs(admin: AdminClient, target: Target, topic: str) -> dict[str, ConfigEntry]:
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)], request_timeout=target.timeout_s)
    (future,) = futures.values()
    return dict(await_result(future, target, f"configs of {topic}"))


def config_source(source: int | ConfigSource) -> str:
    """`DYNAMIC_TOPIC_CONFIG` as `dynamic-topic`, the way kafka-configs names sources."""
    try:
        name = ConfigSource(source).name
    except ValueError:
        return str(source)
    return name.removesuffix("_CONFIG").lower().replace("_", "-")


def min_insync(admin: AdminClient, target: Target, topics: Sequence[str]) -> dict[str, int]:
    """Each topic's min.insync.replicas, asked in one DescribeConfigs."""
    if not topics:
        return {}
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in topics],
                                     request_timeout=target.timeout_s)
    found = {}
    for resource, future in futures.items():
        entry = await_result(future, target, f"configs of {resource.name}").get("min.insync.replicas")
        found[resource.name] = int(entry.value) if entry is not None and entry.value is not None else 1
    return found


def partition_health(metadata: ClusterMetadata, topic: str, min_isr: int) -> dict[int, PartitionHealth]:
    return {index: PartitionHealth(p.leader, len(p.replicas), len(p.isrs), min_isr)
            for index, p in metadata.topics[topic].partitions.items()}


def matches(health: PartitionHealth, wanted: Sequence[str]) -> bool:
    """True when no filter is chosen, or the partition has one of the chosen conditions."""
    return not wanted or any(flag in health.flags() for flag in wanted)


@click.group("topic")
def command() -> None:
    """Topics: list, create, describe, alter-config, add-partitions, trim, delete."""


@command.command("list")
@click.option("-r", "--regex", metavar="REGEX", help="only topics whose name matches REGEX (re.search)")
@click.option("-i", "--internal", is_flag=True, help="include internal topics (__consumer_offsets, ...)")
@health_filter_options
@kafka_target_options
@format_option
def list_topics(target: Target, regex: str | None, internal: bool, health: tuple[str, ...],
                output_format: str) -> None:
    """List topics: name, partitions, replication factor.

    \b
    roost topic list -r '^orders' --format json
    roost topic list --under-replicated       # topics with an under-replicated partition
    """
    pattern = compile_regex(regex)
    admin = open_admin(target)
    metadata = fetch_metadata(admin, target)
    names = [name for name in sorted(metadata.topics)
             if (internal or not is_internal(name)) and (pattern is None or pattern.search(name))]
    min_isr = min_insync(admin, target, names) if "under-min-isr" in health else {}
    rows = []
    for name in names:
        partitions = metadata.topics[name].partitions
        row: dict[str, Any] = {"name": name, "partitions": len(partitions),
                               "replicas": max((len(p.replicas) for p in partitions.values()), default=0)}
        if health:
            states = partition_health(metadata, name, min_isr.get(name, 0))
            unhealthy = sorted(index for index, state in states.items() if matches(state, health))
            if not unhealthy:
                continue
            row["unhealthy_partitions"] = unhealthy
        rows.append(row)
    emit(rows, ["name", "partitions", "replicas", *(["unhealthy_partitions"] if health else [])], output_format)


@command.command("create")
@click.argument("names", metavar="NAME...", nargs=-1, required=True)
@click.option("-p", "--partitions", type=click.IntRange(min=1), default=None,
              help="partitions  [default: the broker's num.partitions]")
@click.option("-r", "--replicas", type=click.IntRange(min=1), default=None,
              help="replication factor  [default: the broker's default.replication.factor]")
@click.option("-c", "--config", "configs", multiple=True, metavar="KEY=VALUE", help="a topic config (repeatable)")
@click.option("--if-not-exists", is_flag=True, help="succeed when the topic already exists")
@kafka_target_options
@format_option
def create_topics(target: Target, names: tuple[str, ...], partitions: int | None, replicas: int | None,
                  configs: tuple[str, ...], if_not_exists: bool, output_format: str) -> None:
    """Create topics.

    \b
    roost topic create orders -p 6 -r 3 -c retention.ms=86400000 -c cleanup.policy=compact
    """
    # Bad arguments are refused here, before any round trip (as kafka-topics: both at least 1);
    # leaving one out asks for the broker's default (-1 in CreateTopics).
    settings = parse_settings(configs, "-c")
    partitions, replicas = partitions or -1, replicas or -1
    admin = open_admin(target)
    fetch_metadata(admin, target)  # fails fast (within --timeout) on an unreachable cluster
    futures = admin.create_topics([NewTopic(name, partitions, replicas, config=settings) for name in names],
                                  request_timeout=target.timeout_s, operation_timeout=target.timeout_s)
    report_each(futures, target, "topic", "create", "created", output_format,
                settled=lambda message: "exists" if if_not_exists and "already exists" in message.lower() else None)


@command.command("describe")
@click.argument("name")
@health_filter_options
@kafka_target_options
@format_option
def describe_topic(target: Target, name: str, health: tuple[str, ...], output_format: str) -> None:
    """Describe a topic: per partition its leader, replicas, ISR, log start and end offsets (the end
    is the high watermark), the size in bytes of the leader's log and health; then the topic's configs.

    \b
    roost topic describe orders
    roost topic describe orders --under-replicated --format yaml
    """
    admin = open_admin(target)
    metadata = fetch_metadata(admin, target)
    require_topics(metadata, [name])
    configs = topic_configs(admin, target, name)
    min_isr_entry = configs.get("min.insync.replicas")
    min_isr = int(min_isr_entry.value) if min_isr_entry is not None and min_isr_entry.value is not None else 1
    partitions = topic_partitions(metadata, [name])
    # Not strict: an offline partition has no offsets to tell, and describe is how one finds it.
    starts = list_offsets(admin, target, partitions, OffsetSpec.earliest(), strict=False)
    ends = list_offsets(admin, target, partitions, OffsetSpec.latest(), strict=False)
    brokers = [(b.id, b.host, b.port) for b in metadata.brokers.values()]
    sizes = replica_sizes(target, brokers, name, [index for _, index in partitions])
    rows = []
    for topic, index in partitions:
        meta = metadata.topics[topic].partitions[index]
        state = PartitionHealth(meta.leader, len(meta.replicas), len(meta.isrs), min_isr)
        if not matches(state, health):
            continue
        rows.append({"partition": index, "leader": meta.leader, "replicas": list(meta.replicas),
                     "isr": list(meta.isrs), "log_start_offset": starts[(topic, index)],
                     "log_end_offset": ends[(topic, index)], "size": sizes.get((meta.leader, index)),
                     "health": ",".join(state.flags()) or "ok"})
    config_rows = [{"name": entry.name, "value": entry.value, "source": config_source(entry.source)}
                   for entry in sorted(configs.values(), key=lambda e: e.name)]
    document = {"topic": name, "partitions": rows, "configs": config_rows}
    emit_document(document, [
        ("partitions", f"{name}: partitions", ["partition", "leader", "replicas", "isr", "log_start_offset",
                                                "log_end_offset", "size", "health"]),
        ("configs", f"{name}: configs", ["name", "value", "source"]),
    ], output_format)


@command.command("alter-config")
@click.argument("name")
@click.option("--set", "to_set", multiple=True, metavar="KEY=VALUE", help="set a config (repeatable)")
@click.option("--delete", "to_delete", multiple=True, metavar="KEY",
              help="remove a config, back to the default (repeatable)")
@kafka_target_options
def alter_config(target: Target, name: str, to_set: tuple[str, ...], to_delete: tuple[str, ...]) -> None:
    """Change a topic's configs (IncrementalAlterConfigs).

    \b
    roost topic alter-config orders --set retention.ms=1000 --delete cleanup.policy
    """
    settings = parse_settings(to_set, "--set")
    if not settings and not to_delete:
        raise click.UsageError("nothing to change: give --set KEY=VALUE or --delete KEY")
    both = set(settings) & set(to_delete)
    if both:
        raise click.UsageError(f"both set and deleted: {', '.join(sorted(both))}")
    admin = open_admin(target)
    require_topics(fetch_metadata(admin, target), [name])
    entries = [ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) for key, value in settings.items()]
    entries += [ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE) for key in to_delete]
    futures = admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)],
                                              request_timeout=target.timeout_s)
    (future,) = futures.values()
    await_result(future, target, f"alter configs of {name}")
    click.echo(f"altered {name}: " + ", ".join([*(f"{k}={v}" for k, v in settings.items()),
                                               *(f"-{k}" for k in to_delete)]))


@command.command("add-partitions")
@click.argument("name")
@click.option("-n", "--num", "added", type=click.IntRange(min=1), required=True,
              help="how many partitions to ADD (not the new total)")
@kafka_target_options
def add_partitions(target: Target, name: str, added: int) -> None:
    """Add partitions to a topic (-n is how many to add, as in rpk).

    \b
    roost topic add-partitions orders -n 2      # 6 partitions become 8
    """
    admin = open_admin(target)
    metadata = fetch_metadata(admin, target)
    require_topics(metadata, [name])
    before = len(metadata.topics[name].partitions)
    futures = admin.create_partitions([NewPartitions(name, before + added)], request_timeout=target.timeout_s,
                                      operation_timeout=target.timeout_s)
    (future,) = futures.values()
    await_result(future, target, f"add partitions to {name}")
    click.echo(f"{name}: {before} -> {before + added} partitions")


def parse_trim_offset(value: str) -> int:
    if value == "end":
        return -1  # DeleteRecords: up to the high watermark
    try:
        offset = int(value)
    except ValueError:
        offset = -2
    if offset < 0:
        raise click.BadParameter(f"expected an offset >= 0 or 'end', got {value!r}", param_hint="-o")
    return offset


@command.command("trim")
@click.argument("name")
@click.option("-p", "--partition", "partitions", type=click.IntRange(min=0), multiple=True,
              help="partition to trim (repeatable; default: every partition)")
@click.option("-o", "--offset", "offset_text", required=True, metavar="OFFSET|end",
              help="delete the records below this offset ('end': all of them)")
@kafka_target_options
@format_option
def trim(target: Target, name: str, partitions: tuple[int, ...], offset_text: str, output_format: str) -> None:
    """Delete the records below an offset (DeleteRecords); prints each partition's new log start.

    \b
    roost topic trim orders -p 0 -o 100
    roost topic trim orders -o end            # empty every partition
    """
    offset = parse_trim_offset(offset_text)
    admin = open_admin(target)
    metadata = fetch_metadata(admin, target)
    require_topics(metadata, [name])
    known = set(metadata.topics[name].partitions)
    chosen = sorted(set(partitions)) if partitions else sorted(known)
    missing = [p for p in chosen if p not in known]
    if missing:
        raise CliError(f"{name} has no partition {', '.join(map(str, missing))} (it has {len(known)})")
    futures = admin.delete_records([TopicPartition(name, p, offset) for p in chosen],
                                   request_timeout=target.timeout_s, operation_timeout=target.timeout_s)
    rows = []
    for tp, future in sorted(futures.items(), key=lambda item: item[0].partition):
        result = await_result(future, target, f"trim {name}[{tp.partition}]")
        rows.append({"partition": tp.partition, "log_start_offset": getattr(result, "low_watermark", result)})
    emit(rows, ["partition", "log_start_offset"], output_format)


@command.command("delete")
@click.argument("names", metavar="NAME...", nargs=-1, required=True)
@kafka_target_options
@format_option
def delete_topics(target: Target, names: tuple[str, ...], output_format: str) -> None:
    """Delete topics.

    \b
    roost topic delete orders payments
    """
    admin = open_admin(target)
    require_topics(fetch_metadata(admin, target), names)
    futures = admin.delete_topics(list(names), request_timeout=target.timeout_s, operation_timeout=target.timeout_s)
    report_each(futures, target, "topic", "delete", "deleted", output_format)

