"""`roost link`: cluster links, defined on the destination cluster (docs/cluster-links.md).

    roost link create eu --zookeeper dest-zk:2181 --source-bootstrap eu1:9092 -c topics=prefix:orders
    roost link list --zookeeper dest-zk:2181
    roost link describe eu --zookeeper dest-zk:2181            # state, per-partition lag (records, ms)
    roost link promote eu --topic orders -b dest:9092 --zookeeper dest-zk:2181   # waits for lag 0 and no open txn, then promotes
    roost link failover eu --all -b dest:9092 --zookeeper dest-zk:2181          # the source is gone: promote now
    roost link pause eu --zookeeper dest-zk:2181 ; roost link resume eu --zookeeper dest-zk:2181
    roost link failback eu --all -b dest:9092 --zookeeper dest-zk:2181 --source-zookeeper eu-zk:2181
    roost link delete eu --zookeeper dest-zk:2181

Settings live in ZooKeeper at /config/cluster-links/<name> (as Kafka's dynamic configs); every
destination broker reads them. Promotion removes the topic's `roost.mirror.link` config through
IncrementalAlterConfigs, so it is the same as `kafka-configs --alter --delete-config
roost.mirror.link`; the lag at promotion (the records not mirrored, lost if the source is gone)
is printed from the brokers' last published status.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import click

from roost.admin.kafka_client import await_result, open_admin
from roost.admin.target import Target
from roost.broker.link.configs import MIRROR_LINK_CONFIG
from roost.broker.link.core import topics_to_promote
from roost.broker.link.settings import (
    LINKS_PATH,
    SECRETS,
    STATUS_PATH,
    SYNCED_ACLS_PATH,
    LinkSettings,
    LinkSettingsError,
    link_path,
)
from roost.cli.client.client_options import (
    CliError,
    emit,
    format_option,
    kafka_target_options,
    parse_settings,
)

ZK_OPTION = click.option("--zookeeper", envvar="ROOST_ZOOKEEPER", default=None, metavar="HOST:PORT[,...]",
                         help="the destination cluster's ZooKeeper (env ROOST_ZOOKEEPER)")


def _zk(target_zk: str, timeout: float) -> Any:
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    client = KazooClient(hosts=target_zk, timeout=timeout)
    try:
        client.start(timeout=timeout)
    except KazooTimeoutError:
        raise CliError(f"cannot reach ZooKeeper at {target_zk} within {timeout:g}s") from None
    return client


class _Session:
    def __init__(self, zookeeper: str | None, target: Target) -> None:
        self.client = _zk(zookeeper or target.zookeeper, target.timeout_s)

    def __enter__(self) -> Any:
        return self.client

    def __exit__(self, *exc: object) -> None:
        self.client.stop()
        self.client.close()


def _settings(client: Any, name: str) -> LinkSettings:
    from kazoo.exceptions import NoNodeError

    try:
        data, _ = client.get(link_path(name))
    except NoNodeError:
        raise CliError(f"no cluster link {name!r}") from None
    try:
        return LinkSettings.decode(name, data)
    except LinkSettingsError as error:
        raise CliError(str(error)) from None


def _status(client: Any, name: str) -> list[dict[str, Any]]:
    from kazoo.exceptions import NoNodeError

    found = []
    try:
        brokers = client.get_children(f"{STATUS_PATH}/{name}")
    except NoNodeError:
        return []
    for broker in sorted(brokers):
        try:
            data, _ = client.get(f"{STATUS_PATH}/{name}/{broker}")
            entry = json.loads(data.decode())
        except (NoNodeError, ValueError):
            continue
        entry["broker"] = int(broker)
        found.append(entry)
    return found


def _state(statuses: list[dict[str, Any]]) -> str:
    states = {s["state"] for s in statuses}
    for state in ("FAILED", "SOURCE_UNAVAILABLE", "ACTIVE"):
        if state in states:
            return state
    return "NO_BROKER_REPORTING"


@click.group("link")
def command() -> None:
    """Cluster links: mirror a source cluster's topics with the same offsets, promote on failover."""


@command.command("create")
@click.argument("name")
@click.option("--source-bootstrap", required=True, metavar="HOST:PORT[,...]", help="the source cluster's brokers")
@click.option("-c", "--config", "configs", multiple=True, metavar="KEY=VALUE",
              help="a link setting (repeatable; docs/cluster-links.md lists them)")
@click.option("--config-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="link settings as key=value lines")
@ZK_OPTION
@kafka_target_options
def create(name: str, source_bootstrap: str, configs: tuple[str, ...], config_file: Path | None,
           zookeeper: str | None, target: Target) -> None:
    """Create link NAME on the destination: its brokers start mirroring at once."""
    from kazoo.exceptions import NodeExistsError

    raw: dict[str, Any] = {}
    if config_file is not None:
        lines = [line.strip() for line in config_file.read_text().splitlines()]
        raw.update(parse_settings([line for line in lines if line and not line.startswith("#")], "--config-file"))
    raw.update(parse_settings(configs, "-c"))
    raw["bootstrap.servers"] = source_bootstrap
    try:
        settings = LinkSettings.parse(name, raw)
    except LinkSettingsError as error:
        raise CliError(str(error)) from None
    with _Session(zookeeper, target) as client:
        client.ensure_path(LINKS_PATH)
        try:
            client.create(link_path(name), settings.encode())
        except NodeExistsError:
            raise CliError(f"cluster link {name!r} exists (delete it first to change its source)") from None
    click.echo(f"created cluster link {name} from {source_bootstrap}")


@command.command("list")
@ZK_OPTION
@format_option
@kafka_target_options
def list_links(zookeeper: str | None, output_format: str, target: Target) -> None:
    """The links of the destination cluster and their state."""
    from kazoo.exceptions import NoNodeError

    rows = []
    with _Session(zookeeper, target) as client:
        try:
            names = sorted(client.get_children(LINKS_PATH))
        except NoNodeError:
            names = []
        for name in names:
            settings = _settings(client, name)
            statuses = _status(client, name)
            rows.append({"link": name, "source": settings["bootstrap.servers"], "state": _state(statuses),
                         "mirrors": sum(len(s["partitions"]) for s in statuses)})
    emit(rows, ["link", "source", "state", "mirrors"], output_format)


@command.command("describe")
@click.argument("name")
@ZK_OPTION
@format_option
@kafka_target_options
def describe(name: str, zookeeper: str | None, output_format: str, target: Target) -> None:
    """Link NAME: its settings, state, and each mirror partition's lag."""
    with _Session(zookeeper, target) as client:
        settings = _settings(client, name)
        statuses = _status(client, name)
    rows = []
    for status in statuses:
        for p in status["partitions"]:
            rows.append({"topic": p["topic"], "partition": p["partition"], "broker": status["broker"],
                         "mirrored_end": p["mirrored_end"], "source_high_watermark": p["source_high_watermark"],
                         "lag_records": p["lag_records"], "lag_ms": p["lag_ms"],
                         "open_transactions": p.get("open_transactions", 0), "error": p["error"] or "",
                         "truncations": p.get("truncations", [])})
    rows.sort(key=lambda r: (r["topic"], r["partition"]))
    # The mirrors each broker leads (read-only there): their log end and high watermark, which
    # failback waits on; a leader whose high watermark is below its log end still replicates.
    leading = sorted(({"topic": p["topic"], "partition": p["partition"], "broker": status["broker"],
                       "leader_epoch": p["leader_epoch"], "log_end": p["log_end"],
                       "high_watermark": p["high_watermark"]}
                      for status in statuses for p in status.get("leading", [])),
                     key=lambda r: (r["topic"], r["partition"]))
    if output_format != "text":
        shown = {k: ("(hidden)" if k in SECRETS and v else v) for k, v in settings.values.items()}
        click.echo(json.dumps({"link": name, "state": _state(statuses), "settings": shown,
                               "errors": [s["error"] for s in statuses if s.get("error")],
                               "acls_synced": sum(s.get("acls_synced", 0) for s in statuses), "partitions": rows,
                               "leading": leading}, indent=2))
        return
    click.echo(f"link {name}: {_state(statuses)}, source {settings['bootstrap.servers']} "
               f"({settings['security.protocol']})")
    for status in statuses:
        if status.get("error"):
            click.echo(f"  broker {status['broker']}: {status['error']}")
    emit(rows, ["topic", "partition", "broker", "mirrored_end", "source_high_watermark", "lag_records", "lag_ms",
                "open_transactions", "error"], output_format)
    if leading:
        emit(leading, ["topic", "partition", "broker", "leader_epoch", "log_end", "high_watermark"], output_format,
             title="mirror leaders (read-only here)")


@command.command("delete")
@click.argument("name")
@ZK_OPTION
@kafka_target_options
def delete(name: str, zookeeper: str | None, target: Target) -> None:
    """Delete link NAME: mirroring stops; its mirror topics stay, read-only until promoted."""
    from kazoo.exceptions import NoNodeError

    with _Session(zookeeper, target) as client:
        try:
            client.delete(link_path(name))
        except NoNodeError:
            raise CliError(f"no cluster link {name!r}") from None
        # The ACLs it synced stay; a later link of the same name must not take them for its own.
        with contextlib.suppress(NoNodeError):
            client.delete(f"{SYNCED_ACLS_PATH}/{name}")
    click.echo(f"deleted cluster link {name}; its mirror topics stay read-only until promoted")


def _mirror_topics(target: Target, name: str) -> dict[str, str]:
    from confluent_kafka.admin import ConfigResource

    admin = open_admin(target)
    metadata = admin.list_topics(timeout=target.timeout_s)
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in metadata.topics if not t.startswith("__")]
    if not resources:
        return {}
    found = {}
    for resource, future in admin.describe_configs(resources, request_timeout=target.timeout_s).items():
        configs = await_result(future, target, f"configs of {resource.name}")
        entry = configs.get(MIRROR_LINK_CONFIG)
        if entry is not None and entry.value:
            found[resource.name] = entry.value
    return found


def _lags(client: Any, name: str) -> dict[str, dict[int, int]]:
    lags: dict[str, dict[int, int]] = {}
    for status in _status(client, name):
        for p in status["partitions"]:
            lags.setdefault(p["topic"], {})[p["partition"]] = p["lag_records"]
    return lags


def _open_transactions(client: Any, name: str, topics: list[str]) -> int:
    """The source transactions open on these mirrors, as their leaders last published."""
    return sum(p.get("open_transactions", 0) for status in _status(client, name) for p in status["partitions"]
               if p["topic"] in topics)


def _promote(name: str, topics: tuple[str, ...], prefix: str | None, all_topics: bool, zookeeper: str | None,
             target: Target, wait: bool) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    if sum((bool(topics), prefix is not None, all_topics)) != 1:
        raise CliError("name the topics: --topic T (repeatable), --prefix P, or --all")
    chosen = topics_to_promote(_mirror_topics(target, name), name, list(topics) or None, prefix)
    if not chosen:
        raise CliError(f"no mirror topic of link {name!r} matches")
    with _Session(zookeeper, target) as client:
        lags = _lags(client, name)
        deadline = time.monotonic() + target.timeout_s
        # A planned cutover also waits (within the same --timeout) for the source's open
        # transactions to end on the mirror: their markers come once their producers commit or
        # abort; one still open at promotion is aborted here, whatever the source decides.
        while wait and time.monotonic() < deadline and (
                any(lag != 0 for t in chosen for lag in lags.get(t, {0: -1}).values())
                or _open_transactions(client, name, chosen)):
            time.sleep(0.5)
            lags = _lags(client, name)
    admin = open_admin(target)
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t, incremental_configs=[
        ConfigEntry(MIRROR_LINK_CONFIG, "", incremental_operation=AlterConfigOpType.DELETE)]) for t in chosen]
    with _Session(zookeeper, target) as client:
        details = _mirror_status(client, name)
    rows = []
    for resource, future in admin.incremental_alter_configs(resources, request_timeout=target.timeout_s).items():
        await_result(future, target, f"promoting {resource.name}")
        per_partition = lags.get(resource.name, {})
        known = [lag for lag in per_partition.values() if lag >= 0]
        mine = [p for (t, _), p in details.items() if t == resource.name]
        silent = any(p["error"] for p in mine)  # the source did not answer: its records lag is stale
        lag = sum(known) if known else "unknown"
        rows.append({"topic": resource.name,
                     "lag_at_promotion": f">= {lag} (source not answering)" if silent else lag,
                     "lag_age_s": round(max((p["lag_ms"] for p in mine), default=-1) / 1000, 1),
                     "partitions": len(per_partition) or "?",
                     # The source's transactions the mirror held open: the brokers abort them.
                     "open_transactions_aborted": sum(p.get("open_transactions", 0) for p in mine)})
    emit(rows, ["topic", "lag_at_promotion", "lag_age_s", "partitions", "open_transactions_aborted"], "text",
         title="promoted (writable now; the lag is what was not mirrored; lag_age_s bounds the age of the "
               "oldest record not mirrored; transactions open on the mirror are aborted)")


@command.command("promote")
@click.argument("name")
@click.option("--topic", "topics", multiple=True, help="a mirror topic (repeatable)")
@click.option("--prefix", default=None, help="every mirror topic starting so")
@click.option("--all", "all_topics", is_flag=True, help="every mirror topic of the link")
@ZK_OPTION
@kafka_target_options
def promote(name: str, topics: tuple[str, ...], prefix: str | None, all_topics: bool, zookeeper: str | None,
            target: Target) -> None:
    """Planned cutover: wait (up to --timeout) until the mirrors hold all the source had and no
    source transaction is open on them, stop mirroring and make them writable, offsets kept."""
    _promote(name, topics, prefix, all_topics, zookeeper, target, wait=True)


@command.command("failover")
@click.argument("name")
@click.option("--topic", "topics", multiple=True, help="a mirror topic (repeatable)")
@click.option("--prefix", default=None, help="every mirror topic starting so")
@click.option("--all", "all_topics", is_flag=True, help="every mirror topic of the link")
@ZK_OPTION
@kafka_target_options
def failover(name: str, topics: tuple[str, ...], prefix: str | None, all_topics: bool, zookeeper: str | None,
             target: Target) -> None:
    """The source is gone: make the mirrors writable now; the lag printed is the data lost."""
    _promote(name, topics, prefix, all_topics, zookeeper, target, wait=False)


# -- pause, resume ------------------------------------------------------------------------------
def _set_paused(client: Any, name: str, paused: bool) -> None:
    settings = _settings(client, name)
    raw = {**{k: v for k, v in settings.values.items()}, "paused": paused}
    client.set(link_path(name), LinkSettings.parse(name, raw).encode())


@command.command("pause")
@click.argument("name")
@ZK_OPTION
@kafka_target_options
def pause(name: str, zookeeper: str | None, target: Target) -> None:
    """Pause link NAME: nothing is fetched or synced; its mirrors stay read-only (state PAUSED)."""
    with _Session(zookeeper, target) as client:
        _set_paused(client, name, True)
    click.echo(f"paused cluster link {name}")


@command.command("resume")
@click.argument("name")
@ZK_OPTION
@kafka_target_options
def resume(name: str, zookeeper: str | None, target: Target) -> None:
    """Resume link NAME: its mirrors check their logs against the source's epochs and fetch again."""
    with _Session(zookeeper, target) as client:
        _set_paused(client, name, False)
    click.echo(f"resumed cluster link {name}")


# -- failback -----------------------------------------------------------------------------------
def _partitions_of(target: Target, topics: list[str]) -> dict[str, int]:
    admin = open_admin(target)
    metadata = admin.list_topics(timeout=target.timeout_s)
    return {t: len(metadata.topics[t].partitions) for t in topics if t in metadata.topics}


def _high_watermarks(target: Target, partitions: dict[str, int]) -> dict[tuple[str, int], int]:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    # read_uncommitted: the high watermark itself (librdkafka's default, read_committed, answers the
    # last stable offset, which an open transaction holds back and is not what the sides compare).
    consumer = Consumer(target.client_config(**{"group.id": "roost-link-failback", "enable.auto.commit": False,
                                                "isolation.level": "read_uncommitted"}))
    try:
        found = {}
        for topic, count in partitions.items():
            for index in range(count):
                try:
                    _, high = consumer.get_watermark_offsets(TopicPartition(topic, index), timeout=target.timeout_s)
                except KafkaException as error:
                    raise CliError(f"high watermark of {topic}-{index} at {target.bootstrap}: {error}") from None
                found[(topic, index)] = high
        return found
    finally:
        consumer.close()


def _mirror_status(client: Any, link: str) -> dict[tuple[str, int], dict[str, Any]]:
    return {(p["topic"], p["partition"]): p for status in _status(client, link) for p in status["partitions"]}


def _wait(what: str, timeout_s: float, check: Any) -> Any:
    """Poll `check` until it returns something true, at most `timeout_s` (a bounded wait)."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() >= deadline:
            raise CliError(f"failback: {what} did not happen within {timeout_s:g}s (raise --catch-up-timeout)")
        time.sleep(0.5)


def _frozen_ends(client: Any, link: str, target: Target, partitions: dict[str, int]) -> dict[tuple[str, int], int]:
    """The partitions whose current leader is read-only (a mirror of `link`) and has replicated
    everything it appended, with that log end: the last offset this side will ever acknowledge.

    Each broker applies the read-only setting from ZooKeeper on its own and says so in its link
    status (`leading`). A high watermark read from outside is not enough: a record appended just
    before the switch and not yet replicated (a follower slow or stopped) is acknowledged once it
    is, above the high watermark read before; handed over without it, it would be lost."""
    admin = open_admin(target)
    metadata = admin.list_topics(timeout=target.timeout_s)
    leaders = {(t, i): metadata.topics[t].partitions[i].leader for t in partitions if t in metadata.topics
               for i in metadata.topics[t].partitions}
    reported = {(p["topic"], p["partition"], status["broker"]): p
                for status in _status(client, link) for p in status.get("leading", [])}
    # Read after the statuses: a status written before the switch (a broker that cannot publish)
    # lists a log end below the high watermark seen now, and is not taken.
    highs = _high_watermarks(target, partitions)
    found = {}
    for (topic, index), leader in leaders.items():
        entry = reported.get((topic, index, leader))
        if entry is not None and entry["high_watermark"] == entry["log_end"] >= highs[(topic, index)]:
            found[(topic, index)] = entry["log_end"]
    return found


def _set_mirror_link(target: Target, topics: list[str], link: str | None, what: str) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    operation = AlterConfigOpType.SET if link else AlterConfigOpType.DELETE
    admin = open_admin(target)
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t, incremental_configs=[
        ConfigEntry(MIRROR_LINK_CONFIG, link or "", incremental_operation=operation)]) for t in topics]
    for resource, future in admin.incremental_alter_configs(resources, request_timeout=target.timeout_s).items():
        await_result(future, target, f"{what} {resource.name}")


@command.command("failback")
@click.argument("name")
@click.option("--topic", "topics", multiple=True, help="a promoted topic (repeatable)")
@click.option("--prefix", default=None, help="every promoted topic starting so")
@click.option("--all", "all_topics", is_flag=True, help="every topic of the link's filter that both clusters have")
@click.option("--source-zookeeper", required=True, metavar="HOST:PORT[,...]", help="the old source's ZooKeeper")
@click.option("--source-bootstrap", default=None, metavar="HOST:PORT[,...]",
              help="the old source's brokers (default: the link's bootstrap.servers)")
@click.option("--reverse-link", default=None, help="the link created on the old source (default NAME-reverse)")
@click.option("--reverse-bootstrap", default=None, metavar="HOST:PORT[,...]",
              help="this cluster's brokers as the old source reaches them (default: -b): another listener, "
                   "a gateway between the regions")
@click.option("-c", "--config", "configs", multiple=True, metavar="KEY=VALUE",
              help="a setting of the reverse link (how the old source reaches this cluster: security, ...)")
@click.option("--reverse-only", is_flag=True,
              help="stop once the old source mirrors this cluster (roles reversed), without switching back")
@click.option("--catch-up-timeout", type=float, default=300.0, show_default=True,
              help="seconds to wait for the old source to catch up")
@ZK_OPTION
@kafka_target_options
def failback(name: str, topics: tuple[str, ...], prefix: str | None, all_topics: bool, source_zookeeper: str,
             source_bootstrap: str | None, reverse_link: str | None, reverse_bootstrap: str | None,
             configs: tuple[str, ...], reverse_only: bool,
             catch_up_timeout: float, zookeeper: str | None, target: Target) -> None:
    """After `failover`: the old source (back again) mirrors this cluster, cutting what it took
    that this side never got, catches up, and becomes the source again.

    1. the chosen topics on the old source become mirrors of a reverse link (read-only there);
       each truncates its divergent suffix by leader epochs and fetches what this side wrote;
    2. (unless --reverse-only) this side's topics turn read-only again (link NAME paused), the
       old source takes the last records, is promoted, and link NAME mirrors it again: the
       original roles, offsets kept, nothing copied from zero.
    """
    from kazoo.exceptions import NodeExistsError

    if sum((bool(topics), prefix is not None, all_topics)) != 1:
        raise CliError("name the topics: --topic T (repeatable), --prefix P, or --all")
    reverse = reverse_link or f"{name}-reverse"
    with _Session(zookeeper, target) as client:
        forward = _settings(client, name)
    if forward["cluster.link.prefix"]:
        raise CliError("failback of a link with cluster.link.prefix is not supported (the names differ per side)")
    old_source = dataclasses.replace(target, bootstrap=source_bootstrap or forward["bootstrap.servers"],
                                     zookeeper=source_zookeeper)
    from roost.broker.link.filters import should_mirror_topic

    mirrors = _mirror_topics(target, name)
    here = _partitions_of(target, [t for t in open_admin(target).list_topics(timeout=target.timeout_s).topics
                                   if not t.startswith("__") and t not in mirrors])
    there = _partitions_of(old_source, list(here))
    candidates = sorted(t for t in here if t in there and should_mirror_topic(forward.topics, t))
    if topics:
        missing = sorted(set(topics) - set(candidates))
        if missing:
            raise CliError(f"not promoted topics both clusters hold: {', '.join(missing)}")
        chosen = sorted(set(topics))
    else:
        chosen = [t for t in candidates if prefix is None or t.startswith(prefix)]
    if not chosen:
        raise CliError(f"no promoted topic of link {name!r} matches")
    for topic in chosen:
        if here[topic] != there[topic]:
            raise CliError(f"{topic} has {here[topic]} partitions here and {there[topic]} on the old source")
    wanted = {(t, i) for t in chosen for i in range(here[t])}

    # 1. Reverse: the old source mirrors this side.
    raw = parse_settings(configs, "-c")
    raw.setdefault("topics", ", ".join(f"literal:{t}" for t in chosen))
    raw["bootstrap.servers"] = reverse_bootstrap or target.bootstrap
    try:
        reverse_settings = LinkSettings.parse(reverse, raw)
    except LinkSettingsError as error:
        raise CliError(str(error)) from None
    _set_mirror_link(old_source, chosen, reverse, "making read-only on the old source:")
    with _Session(source_zookeeper, old_source) as source_zk:
        source_zk.ensure_path(LINKS_PATH)
        try:
            source_zk.create(link_path(reverse), reverse_settings.encode())
        except NodeExistsError:
            if _settings(source_zk, reverse)["bootstrap.servers"] != raw["bootstrap.servers"]:
                raise CliError(f"the old source has a link {reverse!r} from elsewhere: name another "
                               "with --reverse-link") from None
        click.echo(f"reverse link {reverse} on the old source mirrors {', '.join(chosen)} from {raw['bootstrap.servers']}")

        def caught_up() -> dict[tuple[str, int], dict[str, Any]] | None:
            found = _mirror_status(source_zk, reverse)
            ready = wanted <= set(found) and all(
                found[tp]["lag_records"] == 0 and not found[tp]["error"] for tp in wanted)
            return found if ready else None
        status = _wait("the old source catching up", catch_up_timeout, caught_up)
        rows = []
        for topic, index in sorted(wanted):
            cuts = status[(topic, index)].get("truncations") or []
            dropped = sum(start - end for start, end in cuts)
            rows.append({"topic": topic, "partition": index, "truncated": dropped,
                         "cuts": "; ".join(f"{start} -> {end}" for start, end in cuts) or "-",
                         "mirrored_end": status[(topic, index)]["mirrored_end"]})
        emit(rows, ["topic", "partition", "truncated", "cuts", "mirrored_end"], "text",
             title="the old source's divergent suffix, cut (records it took that this side never got)")
        if reverse_only:
            click.echo(f"roles reversed: the old source mirrors this cluster through {reverse}; "
                       f"run `roost link failback {name} ...` again without --reverse-only to switch back")
            return

        # 2. Switch back: this side read-only, the old source takes the last records, then is promoted.
        frozen: dict[tuple[str, int], int] = {}
        with _Session(zookeeper, target) as client:
            _set_paused(client, name, True)
            _set_mirror_link(target, chosen, name, "making read-only here:")
            click.echo(f"{', '.join(chosen)} read-only here (link {name} paused); waiting for the old source")

            def settled() -> dict[tuple[str, int], int] | None:
                frozen.clear()
                try:
                    frozen.update(_frozen_ends(client, name, target, {t: here[t] for t in chosen}))
                except CliError:  # an election here (OFFSET_NOT_AVAILABLE, ...): ask again
                    return None
                return dict(frozen) if wanted <= set(frozen) else None
            try:
                ends = _wait("this side's leaders refusing produces with every record replicated", catch_up_timeout,
                             settled)
            except CliError as error:
                waiting = ", ".join(f"{t}-{i}" for t, i in sorted(wanted - set(frozen)))
                raise CliError(f"{error}; still waiting for {waiting} (a leader not yet read-only, or a follower "
                               f"behind); link {name} stays paused and {', '.join(chosen)} read-only on both sides: "
                               "resume by hand") from None

        seen: dict[str, Any] = {}

        def holds_all() -> bool:
            found = seen["status"] = _mirror_status(source_zk, reverse)
            if not all(tp in found and found[tp]["mirrored_end"] >= ends[tp] for tp in wanted):
                return False
            try:
                seen["old source"] = _high_watermarks(old_source, {t: there[t] for t in chosen})
            except CliError as error:  # an election there (OFFSET_NOT_AVAILABLE, ...): ask again
                seen["old source error"] = str(error)
                return False
            return seen["old source"] == ends
        try:
            _wait("the old source holding this side's last records", catch_up_timeout, holds_all)
        except CliError as error:
            mirrored = {f"{t}-{i}": (p["mirrored_end"], p["error"]) for (t, i), p in seen.get("status", {}).items()}
            raise CliError(f"{error}; this side's ends {sorted(ends.items())}, the old source's mirrors "
                           f"{mirrored}, its high watermarks {sorted(seen.get('old source', {}).items())} "
                           f"{seen.get('old source error', '')}; "
                           f"link {name} stays paused and {', '.join(chosen)} read-only on both sides: "
                           "resume by hand") from None
        source_zk.delete(link_path(reverse))
    _set_mirror_link(old_source, chosen, None, "promoting on the old source:")
    with _Session(zookeeper, target) as client:
        _set_paused(client, name, False)

        def mirroring() -> bool:
            found = _mirror_status(client, name)
            return all(tp in found and found[tp]["lag_records"] == 0 and not found[tp]["error"] for tp in wanted)
        _wait(f"link {name} mirroring the old source again", catch_up_timeout, mirroring)
        lost = [(tp, cut) for tp, p in _mirror_status(client, name).items() if tp in wanted
                for cut in p.get("truncations") or [] if cut[1] < ends[tp]]
    if lost:
        raise CliError(f"link {name} cut records this side had acknowledged while switching: {lost}")
    click.echo(f"failed back: the old source serves {', '.join(chosen)} at offsets {sorted(ends.items())}; "
               f"link {name} mirrors it again")
