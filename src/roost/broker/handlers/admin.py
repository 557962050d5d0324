"""Admin requests: CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs, InitProducerId.

Any broker of a cluster serves the topic changes (they are writes to ZooKeeper that the
controller carries out, as Kafka's AdminZkClient wrote them): a client whose Metadata still names
the previous controller is served all the same, as Kafka's forwarding (KIP-590) serves it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from roost.broker.admin.config_alterations import (
    ConfigRules,
    RefusedChange,
    broker_rules,
    incremental_overrides,
    replaced_overrides,
    topic_rules,
)
from roost.broker.admin.dynamic_configs import DynamicBrokerConfigs
from roost.broker.metadata.cache import MetadataCache
from roost.broker.metadata.catalog import INTERNAL_TOPICS, topic_name_problem
from roost.broker.net.request import Request
from roost.broker.share.group_configs import (
    GroupConfigStore,
    InvalidGroupConfig,
    described_entries,
    validate_share_group_configs,
)
from roost.broker.share.group_configs import incremental as incremental_group_configs
from roost.broker.txn.producer_ids import ProducerIdAllocator, ZkProducerIdAllocator
from roost.config import (
    BROKER_SETTINGS,
    DYNAMIC_BROKER_SETTINGS,
    SETTINGS_BY_NAME,
    TOPIC_SETTINGS,
    BrokerConfig,
    ConfigError,
    Setting,
    parse_topic_configs,
)
from roost.wire.kafka.errors import ErrorCode

log = logging.getLogger("roost.broker.admin")

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
RESOURCE_GROUP = 32
SOURCE_GROUP_CONFIG = 8  # Kafka's ConfigSource.GROUP_CONFIG
SOURCE_TOPIC_CONFIG = 1
SOURCE_DYNAMIC_BROKER_CONFIG = 2
SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = 3
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5
CONFIG_TYPE = {bool: 1, str: 2, int: 5, float: 6}
CONFIG_TYPE_INT = 3
CONFIG_TYPE_LIST = 7
# Topic configs with no broker setting behind them in Kafka (its ConfigDef lists them for topics
# only): DescribeConfigs names no broker synonym for them.
THROTTLED_REPLICAS = frozenset({"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"})
TOPIC_ONLY_CONFIGS = frozenset({*THROTTLED_REPLICAS, "remote.storage.enable", "remote.log.copy.disable",
                                "remote.log.delete.on.disable"})
KAFKA_LIST_SETTINGS = frozenset({"cleanup.policy", "log.cleanup.policy", *THROTTLED_REPLICAS})
# Settings Kafka declares INT (the others of Python type int are LONG): DescribeConfigs v3 reports
# the type Kafka's ConfigDef gives (found by the differential against Kafka 3.9, issue 29).
KAFKA_INT_SETTINGS = frozenset({
    "max.message.bytes", "segment.bytes", "index.interval.bytes", "min.insync.replicas", "segment.index.bytes",
    "message.max.bytes", "log.segment.bytes", "log.index.interval.bytes", "log.index.size.max.bytes",
    "num.partitions", "default.replication.factor", "broker.id", "group.initial.rebalance.delay.ms",
    "group.min.session.timeout.ms", "group.max.session.timeout.ms", "log.retention.hours", "log.roll.hours",
    "replica.fetch.max.bytes", "socket.request.max.bytes",
    *(f"compression.{codec}.level" for codec in ("gzip", "lz4", "zstd")),
})
MAX_PARTITIONS = 10_000


class TopicManager(Protocol):
    """Who carries out topic changes: the single broker itself (at once: None), or the cluster
    through ZooKeeper and the controller (an awaitable of the outcome)."""

    @property
    def catalog(self) -> Any: ...

    def live_broker_ids(self) -> list[int]: ...

    def create_topic(self, name: str, partitions: int, configs: dict[str, Any], replication: int = 1,
                     assignment: dict[int, list[int]] | None = None) -> Awaitable[ErrorCode] | None: ...

    def delete_topic(self, name: str) -> Awaitable[ErrorCode] | None: ...

    def add_partitions(self, name: str, total: int,
                       assignment: dict[int, list[int]] | None = None) -> Awaitable[ErrorCode] | None: ...

    def topic_overrides(self, name: str) -> dict[str, Any] | Awaitable[dict[str, Any] | None] | None:
        """The topic's own configs (None: no such topic)."""

    def set_topic_configs(self, name: str, overrides: dict[str, Any]) -> Awaitable[ErrorCode] | None:
        """Make `overrides` the topic's whole set of configs, persisted and applied to its logs."""


@dataclass(frozen=True)
class AdminContext:
    """What the admin handlers may use."""

    broker_id: int
    config: BrokerConfig
    topics: TopicManager
    metadata: MetadataCache
    producer_ids: ProducerIdAllocator | ZkProducerIdAllocator
    broker_configs: DynamicBrokerConfigs | None = None
    # The listener settings in force when the config leaves them empty (roost up derives them
    # from --host and --kafka-port; port 0 becomes the bound one): name -> PLAINTEXT://host:port.
    listeners: Callable[[], dict[str, str]] | None = None
    group_configs: GroupConfigStore | None = None  # the GROUP resource (share group configs)


def handle_create_topics(ctx: AdminContext, request: Request) -> Any:
    body = request.body
    names = [topic["name"] for topic in body["topics"]]
    duplicated = {name for name in names if names.count(name) > 1}
    results = []
    pending: list[tuple[dict[str, Any], Awaitable[ErrorCode]]] = []
    for topic in body["topics"]:
        name = topic["name"]
        if name in duplicated:
            results.append(_topic_error(name, ErrorCode.INVALID_REQUEST, "topic named twice in one request"))
            continue
        result, work = _create_one(ctx, topic, body.get("validate_only", False), request.header.client_id)
        results.append(result)
        if inspect.isawaitable(work):
            pending.append((result, work))
    response = {"throttle_time_ms": 0, "topics": results}
    return _finish(response, pending, body.get("timeout_ms", 60000)) if pending else response


async def _finish(response: dict[str, Any], pending: list[tuple[dict[str, Any], Awaitable[ErrorCode]]],
                  timeout_ms: int) -> dict[str, Any]:
    """Wait for the cluster to carry out each change, and put its outcome into the entry that
    reports it. The changes run side by side under one deadline, the request's timeout (Kafka's
    is the whole request's): one after the other, a batch of 200 topics paid 200 ZooKeeper writes
    and controller rounds in a row, and each topic had the full timeout to itself."""
    tasks = [(entry, asyncio.ensure_future(work)) for entry, work in pending]
    try:
        _done, late = await asyncio.wait([task for _, task in tasks], timeout=max(0.001, timeout_ms / 1000))
    except asyncio.CancelledError:
        for _, task in tasks:  # the request itself was dropped (say its connection closed)
            task.cancel()
        raise
    for task in late:
        task.cancel()
    failures = [error for _, task in tasks if task not in late and (error := task.exception()) is not None]
    if failures:
        raise failures[0]  # as before: an unexpected error fails the request (each one retrieved)
    for entry, task in tasks:
        code = ErrorCode.REQUEST_TIMED_OUT if task in late else task.result()
        if code != ErrorCode.NONE:
            entry["error_code"] = code
            entry["error_message"] = entry.get("error_message") or ErrorCode(code).name
    return response


def _topic_error(name: str, code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"name": name, "error_code": code, "error_message": message,
            "num_partitions": -1, "replication_factor": -1, "configs": None}


def _create_one(ctx: AdminContext, topic: dict[str, Any], validate_only: bool,
                client: str | None) -> tuple[dict[str, Any], Awaitable[ErrorCode] | None]:
    name = topic["name"]
    problem = topic_name_problem(name)
    if problem is not None:
        return _topic_error(name, ErrorCode.INVALID_TOPIC_EXCEPTION, problem), None
    if name in ctx.topics.catalog:
        return _topic_error(name, ErrorCode.TOPIC_ALREADY_EXISTS, f"topic '{name}' already exists"), None
    assignments = topic.get("assignments") or []
    partitions = topic["num_partitions"]
    replication = topic["replication_factor"]
    live = ctx.topics.live_broker_ids()
    assignment: dict[int, list[int]] | None = None
    if assignments:
        if partitions != -1 or replication != -1:
            return _topic_error(name, ErrorCode.INVALID_REQUEST,
                                "give either assignments or partitions and replication factor"), None
        assignment = {a["partition_index"]: list(a["broker_ids"]) for a in assignments}
        partitions = len(assignments)
        replication = len(assignments[0]["broker_ids"])
        problem = _assignment_problem(assignment, 0, live)
        if problem is not None:
            return _topic_error(name, ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem), None
    if partitions == -1:
        partitions = ctx.config["num.partitions"]
    if replication == -1:
        replication = ctx.config["default.replication.factor"]
    if not 1 <= partitions <= MAX_PARTITIONS:
        return _topic_error(name, ErrorCode.INVALID_PARTITIONS,
                            f"number of partitions must be between 1 and {MAX_PARTITIONS}"), None
    if replication < 1:
        return _topic_error(name, ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor must be >= 1"), None
    if replication > len(live):
        return _topic_error(name, ErrorCode.INVALID_REPLICATION_FACTOR,
                            f"replication factor {replication} larger than available brokers {len(live)}"), None
    try:
        overrides = parse_topic_configs({c["name"]: c["value"] for c in topic.get("configs") or []},
                                        f"topic '{name}'")
    except ConfigError as error:
        return _topic_error(name, ErrorCode.INVALID_CONFIG, str(error)), None
    work: Any = None
    if not validate_only:
        work = ctx.topics.create_topic(name, partitions, overrides, replication, assignment)
        log.info("client %s created topic %s (%d partitions, replication factor %d)", client, name,
                 partitions, replication)
    info_configs = dict(ctx.config.topic_defaults())
    info_configs.update(overrides)
    return {"name": name, "error_code": ErrorCode.NONE, "error_message": None,
            "num_partitions": partitions, "replication_factor": replication,
            "configs": [{"name": key, "value": _render(value), "read_only": False,
                         "config_source": SOURCE_TOPIC_CONFIG if key in overrides else SOURCE_DEFAULT_CONFIG,
                         "is_sensitive": False} for key, value in sorted(info_configs.items())]}, work


def _assignment_problem(assignment: dict[int, list[int]], first: int, live: list[int]) -> str | None:
    """Kafka's checks of an explicit assignment: partitions first..n-1, equal replica counts,
    no broker twice in a partition, only live brokers."""
    if sorted(assignment) != list(range(first, first + len(assignment))):
        return f"partitions must be numbered {first}..{first + len(assignment) - 1}, got {sorted(assignment)}"
    sizes = {len(replicas) for replicas in assignment.values()}
    if len(sizes) != 1 or 0 in sizes:
        return "every partition needs the same, non-zero number of replicas"
    for index, replicas in sorted(assignment.items()):
        if len(set(replicas)) != len(replicas):
            return f"partition {index} names a broker twice: {replicas}"
    unknown = {b for replicas in assignment.values() for b in replicas} - set(live)
    if unknown:
        return f"unknown or offline brokers {sorted(unknown)}"
    return None


def handle_delete_topics(ctx: AdminContext, request: Request) -> Any:
    body, header = request.body, request.header
    responses = []
    pending: list[tuple[dict[str, Any], Awaitable[ErrorCode]]] = []
    for name in body["topic_names"]:
        code, message = ErrorCode.NONE, None
        work = None
        if not ctx.config["delete.topic.enable"]:
            code, message = ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false"
        elif name not in ctx.topics.catalog:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif name in INTERNAL_TOPICS:
            code, message = ErrorCode.INVALID_TOPIC_EXCEPTION, f"{name} is internal"
        else:
            work = ctx.topics.delete_topic(name)
            log.info("client %s deleted topic %s", header.client_id, name)
        entry = {"name": name, "error_code": code, "error_message": message}
        responses.append(entry)
        if inspect.isawaitable(work):
            pending.append((entry, work))
    response = {"throttle_time_ms": 0, "responses": responses}
    return _finish(response, pending, body.get("timeout_ms", 60000)) if pending else response


def handle_create_partitions(ctx: AdminContext, request: Request) -> Any:
    body = request.body
    results = []
    pending: list[tuple[dict[str, Any], Awaitable[ErrorCode]]] = []
    for topic in body["topics"]:
        name = topic["name"]
        info = ctx.topics.catalog.get(name)
        code, message = ErrorCode.NONE, None
        work = None
        if info is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif info.is_internal:
            code, message = ErrorCode.INVALID_TOPIC_EXCEPTION, f"{name} is internal"
        elif topic["count"] <= info.partitions:
            code = ErrorCode.INVALID_PARTITIONS
            message = f"topic has {info.partitions} partitions; the new count must be larger"
        elif topic["count"] > MAX_PARTITIONS:
            code, message = ErrorCode.INVALID_PARTITIONS, f"at most {MAX_PARTITIONS} partitions"
        else:
            assignment = None
            if topic.get("assignments"):
                assignment = {info.partitions + i: list(a["broker_ids"]) for i, a in enumerate(topic["assignments"])}
                problem = _assignment_problem(assignment, info.partitions, ctx.topics.live_broker_ids())
                if len(assignment) != topic["count"] - info.partitions:
                    problem = f"{len(assignment)} assignments for {topic['count'] - info.partitions} new partitions"
                if problem is not None:
                    code, message = ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem
            if code == ErrorCode.NONE and not body.get("validate_only", False):
                work = ctx.topics.add_partitions(name, topic["count"], assignment)
        entry = {"name": name, "error_code": code, "error_message": message}
        results.append(entry)
        if inspect.isawaitable(work):
            pending.append((entry, work))
    response = {"throttle_time_ms": 0, "results": results}
    return _finish(response, pending, body.get("timeout_ms", 60000)) if pending else response


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _config_entry(name: str, value: Any, source: int, setting: Setting | None, documentation: bool,
                  synonyms: list[dict[str, Any]], read_only: bool) -> dict[str, Any]:
    sensitive = setting is not None and setting.sensitive
    if sensitive:  # Kafka's rule: a secret's value is never sent, only that it is one
        value = None
        synonyms = [{**synonym, "value": None} for synonym in synonyms]
    return {"name": name, "value": None if sensitive else _render(value), "read_only": read_only,
            "is_default": source == SOURCE_DEFAULT_CONFIG, "config_source": source, "is_sensitive": sensitive,
            "synonyms": synonyms, "config_type": _config_type(name, setting),
            "documentation": setting.help if (documentation and setting) else None}


def _config_type(name: str, setting: Setting | None) -> int:
    if setting is None:
        return CONFIG_TYPE[str]
    if setting.kind is int and name in KAFKA_INT_SETTINGS:
        return CONFIG_TYPE_INT
    if name in KAFKA_LIST_SETTINGS:
        return CONFIG_TYPE_LIST
    return CONFIG_TYPE.get(setting.kind, CONFIG_TYPE[str])


def _broker_source(config: BrokerConfig, setting: Setting) -> int:
    """Where a broker setting's value comes from: a dynamic layer, the file or flags, or the default."""
    if setting.name in config.dynamic.this_broker:
        return SOURCE_DYNAMIC_BROKER_CONFIG
    if setting.name in config.dynamic.cluster_default:
        return SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG
    if setting.name in config.given or config.values[setting.name] != setting.default:
        return SOURCE_STATIC_BROKER_CONFIG
    return SOURCE_DEFAULT_CONFIG


def handle_describe_configs(ctx: AdminContext, request: Request) -> Any:
    """Topic configs come from the topic manager: at once from a lone broker's catalog, from
    ZooKeeper in a cluster (then the answer waits for them)."""
    names = [r["resource_name"] for r in request.body["resources"] if r["resource_type"] == RESOURCE_TOPIC]
    found = {name: ctx.topics.topic_overrides(name) for name in names}
    if not any(inspect.isawaitable(v) for v in found.values()):
        return _describe_configs(ctx, request, found)

    async def gather() -> dict[str, Any]:
        resolved = {name: (await value) if inspect.isawaitable(value) else value for name, value in found.items()}
        return _describe_configs(ctx, request, resolved)

    return gather()


def _describe_configs(ctx: AdminContext, request: Request, overrides: dict[str, Any]) -> dict[str, Any]:
    body = request.body
    include_synonyms = body.get("include_synonyms", False)
    documentation = body.get("include_documentation", False)
    results = []
    for resource in body["resources"]:
        kind, name = resource["resource_type"], resource["resource_name"]
        wanted = resource["configuration_keys"]
        entries: list[dict[str, Any]] = []
        code, message = ErrorCode.NONE, None
        if kind == RESOURCE_TOPIC:
            topic_configs = overrides.get(name)
            if topic_configs is None:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                for key, setting in sorted(TOPIC_SETTINGS.items()):
                    broker_value = ctx.config[setting.name]
                    broker_source = _broker_source(ctx.config, setting)
                    synonyms = [] if key in TOPIC_ONLY_CONFIGS else \
                        [{"name": setting.name, "value": _render(broker_value), "source": broker_source}]
                    if key in topic_configs:
                        value, source = topic_configs[key], SOURCE_TOPIC_CONFIG
                        synonyms.insert(0, {"name": key, "value": _render(value), "source": source})
                    else:
                        value, source = broker_value, broker_source
                    # Every topic config can be changed (AlterConfigs): none is read-only.
                    entries.append(_config_entry(key, value, source, setting, documentation,
                                                 synonyms if include_synonyms else [], read_only=False))
        elif kind == RESOURCE_BROKER:
            if name not in ("", str(ctx.broker_id)):
                code, message = ErrorCode.INVALID_REQUEST, f"this is broker {ctx.broker_id}"
            elif name == "":
                # The cluster-wide default resource (kafka-configs --entity-default): only what
                # its dynamic layer sets, as Kafka answers.
                for key, value in sorted(ctx.config.dynamic.cluster_default.items()):
                    source = SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG
                    synonyms = [{"name": key, "value": _render(value), "source": source}]
                    entries.append(_config_entry(key, value, source, SETTINGS_BY_NAME[key], documentation,
                                                 synonyms if include_synonyms else [], read_only=False))
            else:
                derived = ctx.listeners() if ctx.listeners is not None else {}
                for setting in BROKER_SETTINGS:
                    value = ctx.config[setting.name]
                    source = _broker_source(ctx.config, setting)
                    if value == "" and setting.name in derived:  # the address in force, from the flags
                        value, source = derived[setting.name], SOURCE_STATIC_BROKER_CONFIG
                    shown = None if setting.sensitive else _render(value)
                    synonyms = [{"name": setting.name, "value": shown, "source": source}]
                    entries.append(_config_entry(setting.name, value, source, SETTINGS_BY_NAME[setting.name],
                                                 documentation, synonyms if include_synonyms else [],
                                                 read_only=setting.name not in DYNAMIC_BROKER_SETTINGS))
        elif kind == RESOURCE_GROUP and ctx.group_configs is not None:
            own = ctx.group_configs.configs(name)
            for key, value, is_own in described_entries(own, ctx.config):
                source = SOURCE_GROUP_CONFIG if is_own else SOURCE_DEFAULT_CONFIG
                synonyms = [{"name": key, "value": value, "source": source}] if include_synonyms else []
                entries.append(_config_entry(key, value, source, None, documentation, synonyms, read_only=False))
        else:
            code, message = ErrorCode.INVALID_REQUEST, f"resource type {kind} is not supported"
        if wanted is not None:
            entries = [e for e in entries if e["name"] in wanted]
        results.append({"error_code": code, "error_message": message, "resource_type": kind,
                        "resource_name": name, "configs": entries})
    return {"throttle_time_ms": 0, "results": results}


def handle_alter_configs(ctx: AdminContext, request: Request) -> Any:
    """AlterConfigs: each topic's overrides become exactly the entries given."""
    return _alter_configs(ctx, request, incremental=False)


def handle_incremental_alter_configs(ctx: AdminContext, request: Request) -> Any:
    """IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on each topic's overrides."""
    return _alter_configs(ctx, request, incremental=True)


def _alter_configs(ctx: AdminContext, request: Request, incremental: bool) -> Any:
    """Both requests read each topic's current overrides (from ZooKeeper in a cluster, so the
    answer may have to wait), check the new set as CreateTopics would, and unless validate_only
    hand it to the topic manager, which persists it and has every replica apply it."""
    names = {r["resource_name"] for r in request.body["resources"] if r["resource_type"] == RESOURCE_TOPIC}
    found = {name: ctx.topics.topic_overrides(name) for name in names}
    if not any(inspect.isawaitable(v) for v in found.values()):
        return _alter_resolved(ctx, request, incremental, found)

    async def gather() -> dict[str, Any]:
        resolved = {name: (await value) if inspect.isawaitable(value) else value for name, value in found.items()}
        answer = _alter_resolved(ctx, request, incremental, resolved)
        return (await answer) if inspect.isawaitable(answer) else answer

    return gather()


def _new_configs(resource: dict[str, Any], incremental: bool, rules: ConfigRules, current: dict[str, Any],
                 defaults: dict[str, Any]) -> dict[str, Any]:
    if incremental:
        return incremental_overrides(rules, current, defaults,
                                     [(c["name"], c["config_operation"], c["value"]) for c in resource["configs"]])
    return replaced_overrides(rules, [(c["name"], c["value"]) for c in resource["configs"]])


def _alter_resolved(ctx: AdminContext, request: Request, incremental: bool,
                    overrides: dict[str, dict[str, Any] | None]) -> Any:
    body = request.body
    validate_only = body.get("validate_only", False)
    keys = [(r["resource_type"], r["resource_name"]) for r in body["resources"]]
    results = []
    pending: list[tuple[dict[str, Any], Awaitable[ErrorCode]]] = []
    for resource in body["resources"]:
        kind, name = resource["resource_type"], resource["resource_name"]
        entry: dict[str, Any] = {"error_code": ErrorCode.NONE, "error_message": None,
                                 "resource_type": kind, "resource_name": name}
        results.append(entry)
        work: Any = None
        if keys.count((kind, name)) > 1:
            entry["error_code"], entry["error_message"] = ErrorCode.INVALID_REQUEST, "resource named twice"
        elif kind == RESOURCE_TOPIC:
            current = overrides.get(name)
            if current is None:
                entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                entry["error_message"] = f"topic '{name}' does not exist"
                continue
            try:
                new = _new_configs(resource, incremental, topic_rules(name), current, ctx.config.topic_defaults())
            except RefusedChange as refused:
                entry["error_code"], entry["error_message"] = refused.code, refused.message
                continue
            if not validate_only:
                work = ctx.topics.set_topic_configs(name, new)
                log.info("client %s set the configs of topic %s to %s", request.header.client_id, name, new)
        elif kind == RESOURCE_BROKER:
            dynamic = ctx.broker_configs
            entity = dynamic.entity_for(name) if dynamic is not None else None
            if dynamic is None or entity is None:
                entry["error_code"] = ErrorCode.INVALID_REQUEST
                entry["error_message"] = f"this is broker {ctx.broker_id}: send broker {name}'s configs to it"
                continue
            try:
                new = _new_configs(resource, incremental, broker_rules(f"broker {name or entity}"),
                                   dynamic.layer(entity), dynamic.below(entity))
            except RefusedChange as refused:
                entry["error_code"], entry["error_message"] = refused.code, refused.message
                continue
            if not validate_only:
                work = dynamic.set(entity, new)
                log.info("client %s set the dynamic broker configs %s to %s", request.header.client_id, entity, new)
        elif kind == RESOURCE_GROUP and incremental and ctx.group_configs is not None:
            store = ctx.group_configs
            try:
                new_group = validate_share_group_configs(incremental_group_configs(store.configs(name), [
                    (c["name"], c["config_operation"], c["value"]) for c in resource["configs"]]), ctx.config)
            except InvalidGroupConfig as refused_group:
                entry["error_code"], entry["error_message"] = ErrorCode.INVALID_CONFIG, str(refused_group)
                continue
            if not name:
                entry["error_code"], entry["error_message"] = ErrorCode.INVALID_REQUEST, "a group needs a name"
                continue
            if not validate_only:
                work = store.set(name, new_group)
                log.info("client %s set the configs of group %s to %s", request.header.client_id, name, new_group)
                if isinstance(work, ErrorCode):
                    entry["error_code"] = work
                    work = None
        elif kind == RESOURCE_BROKER_LOGGER:
            entry["error_code"] = ErrorCode.INVALID_REQUEST
            entry["error_message"] = "broker loggers cannot be configured through the Kafka protocol here"
        else:
            entry["error_code"] = ErrorCode.INVALID_REQUEST
            entry["error_message"] = f"resource type {kind} is not supported"
        if inspect.isawaitable(work):
            pending.append((entry, work))
    response = {"throttle_time_ms": 0, "responses": results}
    return _finish(response, pending, 30000) if pending else response


def handle_init_producer_id(ctx: AdminContext, request: Request) -> Any:
    """An idempotent producer's id (a transactional one's comes from the transaction coordinator)."""
    body, header = request.body, request.header
    assert body.get("transactional_id") is None, "transactional producers are the coordinator's"
    existing, epoch = body.get("producer_id", -1), body.get("producer_epoch", -1)
    if existing >= 0 and 0 <= epoch < 32766:
        # KIP-360: an idempotent producer that lost track of its sequences bumps its epoch.
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": existing,
                "producer_epoch": epoch + 1}
    allocated = ctx.producer_ids.allocate()
    if not inspect.isawaitable(allocated):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": allocated, "producer_epoch": 0}

    async def after_reserving() -> dict[str, Any]:
        try:
            producer_id = await allocated
        except Exception as error:  # ZooKeeper unreachable: the client retries
            log.warning("no producer id for client %s: %r", header.client_id, error)
            return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    "producer_id": -1, "producer_epoch": -1}
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": producer_id, "producer_epoch": 0}

    return after_reserving()
