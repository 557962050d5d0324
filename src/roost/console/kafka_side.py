"""The console's view of the Kafka side of the cluster, through confluent-kafka's AdminClient and
Producer. Every method blocks (librdkafka futures), so the web layer runs them in a thread
executor; each waits at most the settings' request timeout.

Broker up/down: the brokers DescribeCluster names are up; a broker seen before (or named as a
replica) that it no longer names is down.

Metadata (every topic and partition: at 1,000 topics about 20 ms of the broker's and the console's
time, at 10,000 ten times that) is kept for METADATA_CACHE_S. The list pages (the overview, the
topic list), which refresh themselves every few seconds, take one up to METADATA_STALE_S old and
have a fresher one asked for in the background, so their answers do not wait on it; every other
caller waits for a fresh one, and a change made through the console waits until Metadata shows it.
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ClusterMetadata,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from roost.admin.errors import AdminError
from roost.admin.health import unhealthy_partitions
from roost.admin.kafka_client import is_internal
from roost.admin.seek import SeekTarget, plan_seek
from roost.admin.share_groups import (
    DEAD_LETTER_TOPIC_CONFIG,
    describe_share_group,
    list_share_groups,
    share_group_configs,
)
from roost.admin.target import Target
from roost.admin.transactions import describe_state, list_transactions
from roost.console.errors import ConsoleError, bad_request, not_found
from roost.console.settings import ConsoleSettings
from roost.console.share_view import MAX_METRICS_BYTES, leader_figures, merge_figures, share_group_view

# librdkafka's own log lines (connection refused while a broker is down, ...) are dropped.
_SILENT = logging.getLogger("roost.console.librdkafka")
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False

METADATA_CACHE_S = 1.0
METADATA_STALE_S = 5.0
METADATA_SETTLE_S = 5.0
METADATA_SETTLE_ANSWERS = 4
CONTROLLER_ATTEMPTS = 5
CONTROLLER_RETRY_S = 0.5  # the topic list at 10,000 topics reuses one Metadata answer for this long
_UNREACHABLE = {KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN}

Partition = tuple[str, int]
# Kafka's state names of a transaction that has begun and is not complete.
OPEN_TXN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")


def client_config(settings: ConsoleSettings) -> dict[str, Any]:
    timeout_ms = int(settings.request_timeout_s * 1000)
    # The configured client settings (the principal the console acts as) after the defaults;
    # the logger stays ours, so librdkafka's lines never reach the console's log.
    return {"bootstrap.servers": settings.bootstrap, "socket.timeout.ms": timeout_ms,
            "socket.connection.setup.timeout.ms": timeout_ms, "client.id": "roost-console",
            **settings.client_settings, "logger": _SILENT}


@dataclass
class PartitionCounts:
    unhealthy: list[dict[str, Any]]  # roost.admin.health.unhealthy_partitions
    topics: int
    partitions: int = 0
    led: dict[int, int] = field(default_factory=dict)  # broker id -> partitions it leads
    replicas: dict[int, int] = field(default_factory=dict)  # broker id -> replicas it holds


class KafkaSide:
    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        self.timeout = settings.request_timeout_s
        self._admin: AdminClient | None = None  # made at the first request: an idle console opens no connection
        self._producer: Producer | None = None
        self._lock = threading.Lock()
        self._metadata: tuple[float, ClusterMetadata] | None = None  # (when it was asked for, the answer)
        self._refreshing = False  # a background Metadata request is under way (one at a time)
        self._counts: tuple[ClusterMetadata, PartitionCounts] | None = None  # of the Metadata answer held
        self.seen_brokers: dict[int, str] = {}  # every broker ever seen up: id -> address

    # plumbing -----------------------------------------------------------------------------------
    @property
    def admin(self) -> AdminClient:
        with self._lock:
            if self._admin is None:
                self._admin = AdminClient(client_config(self.settings))
            return self._admin

    def result(self, future: concurrent.futures.Future[Any], what: str) -> Any:
        try:
            return future.result(timeout=self.timeout)
        except concurrent.futures.TimeoutError:
            raise ConsoleError(504, f"{what}: no answer from the cluster within {self.timeout:g}s") from None
        except KafkaException as error:
            raise kafka_error(error, what) from None

    def to_controller(self, send: Callable[[], concurrent.futures.Future[Any]], what: str) -> Any:
        """A request only the controller takes (create, delete, add partitions), sent again a
        bounded number of times when the broker librdkafka chose says it is not the controller
        (the controller moved and the client's Metadata is behind)."""
        for attempt in range(1, CONTROLLER_ATTEMPTS + 1):
            try:
                return send().result(timeout=self.timeout)
            except concurrent.futures.TimeoutError:
                raise ConsoleError(504, f"{what}: no answer from the cluster within {self.timeout:g}s") from None
            except KafkaException as error:
                inner = error.args[0] if error.args else None
                if not (isinstance(inner, KafkaError) and inner.code() == KafkaError.NOT_CONTROLLER) \
                        or attempt == CONTROLLER_ATTEMPTS:
                    raise kafka_error(error, what) from None
            self.metadata(fresh=True)  # learns the new controller
            time.sleep(CONTROLLER_RETRY_S)
        raise AssertionError("unreachable")

    def metadata(self, fresh: bool = False, stale_ok: bool = False) -> ClusterMetadata:
        """The cluster's Metadata: asked for now when `fresh`, else up to METADATA_CACHE_S old; with
        `stale_ok` (a list page), up to METADATA_STALE_S old while a fresher one is asked for."""
        with self._lock:
            cached = self._metadata
            age = math.inf if cached is None else time.monotonic() - cached[0]
            if cached is not None and not fresh and age < METADATA_CACHE_S:
                return cached[1]
            if cached is not None and not fresh and stale_ok and age < METADATA_STALE_S:
                if not self._refreshing:
                    self._refreshing = True
                    threading.Thread(target=self._refresh_metadata, name="roost-console-metadata", daemon=True).start()
                return cached[1]
        return self._ask_metadata()

    def _ask_metadata(self) -> ClusterMetadata:
        asked = time.monotonic()
        try:
            answer = self.admin.list_topics(timeout=self.timeout)
        except KafkaException as error:
            raise kafka_error(error, "metadata") from None
        with self._lock:  # an answer never replaces one to a later question (it could miss a change)
            if self._metadata is None or self._metadata[0] < asked:
                self._metadata = (asked, answer)
        return answer

    def _refresh_metadata(self) -> None:
        try:
            self._ask_metadata()
        except ConsoleError:  # the list pages ask themselves once theirs is METADATA_STALE_S old, and show why
            pass
        finally:
            with self._lock:
                self._refreshing = False

    def await_metadata(self, shows: Callable[[ClusterMetadata], bool]) -> None:
        """After a change the controller accepted, wait (bounded) until the Metadata the console
        reads shows it: the next page then lists what was just created or deleted. Each answer
        comes from whichever broker librdkafka asks, and brokers learn of a change one by one, so
        several answers in a row must show it."""
        deadline = time.monotonic() + METADATA_SETTLE_S
        in_a_row = 0
        while in_a_row < METADATA_SETTLE_ANSWERS and time.monotonic() < deadline:
            in_a_row = in_a_row + 1 if shows(self.metadata(fresh=True)) else 0
            if in_a_row < METADATA_SETTLE_ANSWERS:
                time.sleep(0.05)

    def producer(self) -> Producer:
        with self._lock:
            if self._producer is None:
                self._producer = Producer({**client_config(self.settings), "linger.ms": 0,
                                           "message.timeout.ms": int(self.timeout * 1000)})
            return self._producer

    def offsets(self, partitions: list[Partition], spec: OffsetSpec, batch: int | None = None,
                committed_only: bool = False) -> dict[Partition, int | None]:
        """The offset `spec` names for each partition; None where a partition cannot answer.
        `batch`: ask for at most this many partitions at a time. A broker answers one
        connection's requests in order, so the pages' requests on the same client wait behind
        one batch, not behind the whole cluster's ListOffsets (100 ms at 1,000 partitions).
        `committed_only`: as a read_committed consumer sees them (latest = the last stable offset)."""
        isolation = IsolationLevel.READ_COMMITTED if committed_only else IsolationLevel.READ_UNCOMMITTED
        assert batch is None or batch > 0
        found: dict[Partition, int | None] = {}
        step = batch or max(1, len(partitions))
        for begin in range(0, len(partitions), step):
            futures = self.admin.list_offsets({TopicPartition(t, p): spec for t, p in partitions[begin:begin + step]},
                                              request_timeout=self.timeout, isolation_level=isolation)
            for tp, future in futures.items():
                try:
                    found[(tp.topic, tp.partition)] = future.result(timeout=self.timeout).offset
                except (KafkaException, concurrent.futures.TimeoutError):
                    found[(tp.topic, tp.partition)] = None
        return found

    # overview -----------------------------------------------------------------------------------
    def partition_counts(self, metadata: ClusterMetadata) -> PartitionCounts:
        """The overview's figures that Metadata alone decides, worked out once per Metadata answer
        (the list pages reuse one for seconds; at 1,000 partitions this is 3 ms of the console's CPU)."""
        with self._lock:
            held = self._counts
        if held is not None and held[0] is metadata:
            return held[1]
        counts = PartitionCounts(unhealthy=unhealthy_partitions(metadata), topics=len(metadata.topics))
        for topic in metadata.topics.values():
            for partition in topic.partitions.values():
                counts.partitions += 1
                if partition.leader >= 0:
                    counts.led[partition.leader] = counts.led.get(partition.leader, 0) + 1
                for broker in partition.replicas:
                    counts.replicas[broker] = counts.replicas.get(broker, 0) + 1
        with self._lock:
            self._counts = (metadata, counts)
        return counts

    def brokers(self) -> tuple[list[dict[str, Any]], int | None, ClusterMetadata]:
        described = self.result(self.admin.describe_cluster(request_timeout=self.timeout), "describe cluster")
        metadata = self.metadata(stale_ok=True)
        counts = self.partition_counts(metadata)
        led, replicas, named = counts.led, counts.replicas, set(counts.replicas)
        up = {node.id: node for node in described.nodes}
        for node in described.nodes:
            self.seen_brokers[node.id] = f"{node.host}:{node.port}"
        rows = []
        for broker_id in sorted(set(up) | set(self.seen_brokers) | named):
            node = up.get(broker_id)
            rows.append({"id": broker_id, "address": self.seen_brokers.get(broker_id),
                         "rack": node.rack if node is not None else None, "up": node is not None,
                         "leader_partitions": led.get(broker_id, 0), "replicas": replicas.get(broker_id, 0)})
        controller = described.controller.id if described.controller is not None else None
        return rows, controller, metadata

    def overview(self) -> dict[str, Any]:
        rows, controller, metadata = self.brokers()
        counts = self.partition_counts(metadata)
        unhealthy = counts.unhealthy
        return {"brokers": rows, "controller": controller,
                "topics": counts.topics,
                "partitions": counts.partitions,
                "under_replicated": [p for p in unhealthy if "under-replicated" in p["problem"]],
                "offline": [p for p in unhealthy if "offline" in p["problem"]]}

    # topics -------------------------------------------------------------------------------------
    def topic_page(self, search: str, page: int, size: int, internal: bool) -> dict[str, Any]:
        """One page of the topic list, sorted by name; `search` is a case-insensitive substring."""
        metadata = self.metadata(stale_ok=True)
        needle = search.lower()
        names = sorted(name for name in metadata.topics
                       if (internal or not is_internal(name)) and needle in name.lower())
        pages = max(1, -(-len(names) // size))
        page = min(max(page, 1), pages)
        rows = []
        for name in names[(page - 1) * size: page * size]:
            partitions = metadata.topics[name].partitions.values()
            rows.append({"name": name, "partitions": len(partitions),
                         "replication": max((len(p.replicas) for p in partitions), default=0),
                         "under_replicated": sum(1 for p in partitions if len(p.isrs) < len(p.replicas)),
                         "offline": sum(1 for p in partitions if p.leader < 0),
                         "internal": is_internal(name)})
        return {"topics": rows, "total": len(names), "page": page, "pages": pages, "size": size}

    def topic(self, name: str) -> dict[str, Any]:
        metadata = self.metadata(fresh=True)
        found = metadata.topics.get(name)
        if found is None or (found.error is not None and not found.partitions):
            raise not_found(f"topic {name}")
        keys = [(name, index) for index in sorted(found.partitions)]
        starts = self.offsets(keys, OffsetSpec.earliest())
        ends = self.offsets(keys, OffsetSpec.latest())
        stable = self.offsets(keys, OffsetSpec.latest(), committed_only=True)
        partitions = []
        for index in sorted(found.partitions):
            p = found.partitions[index]
            start, end = starts[(name, index)], ends[(name, index)]
            partitions.append({"partition": index, "leader": p.leader, "replicas": list(p.replicas),
                               "isr": list(p.isrs), "start_offset": start, "end_offset": end,
                               "last_stable_offset": stable[(name, index)],
                               "messages": end - start if start is not None and end is not None else None,
                               "under_replicated": len(p.isrs) < len(p.replicas), "offline": p.leader < 0})
        return {"name": name, "internal": is_internal(name), "partitions": partitions,
                "configs": self.topic_configs(name)}

    def topic_configs(self, name: str) -> list[dict[str, Any]]:
        futures = self.admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)],
                                              request_timeout=self.timeout)
        (future,) = futures.values()
        entries: dict[str, ConfigEntry] = self.result(future, f"configs of {name}")
        return [{"name": entry.name, "value": None if entry.is_sensitive else entry.value,
                 "default": entry.is_default, "read_only": entry.is_read_only,
                 "source": str(getattr(entry.source, "name", entry.source)).lower()}
                for entry in sorted(entries.values(), key=lambda e: e.name)]

    def create_topic(self, name: str, partitions: int, replication: int | None, configs: dict[str, str]) -> None:
        if not name:
            raise bad_request("a topic needs a name")
        new = NewTopic(name, partitions, replication if replication else -1, config=configs)
        self.to_controller(lambda: self.admin.create_topics([new], request_timeout=self.timeout,
                                                           operation_timeout=self.timeout)[name],
                           f"create topic {name}")
        self.await_metadata(lambda found: name in found.topics and bool(found.topics[name].partitions))

    def add_partitions(self, name: str, total: int) -> None:
        self.to_controller(lambda: self.admin.create_partitions([NewPartitions(name, total)],
                                                               request_timeout=self.timeout,
                                                               operation_timeout=self.timeout)[name],
                           f"add partitions to {name}")
        self.await_metadata(lambda found: name in found.topics and len(found.topics[name].partitions) >= total)

    def alter_configs(self, name: str, to_set: dict[str, str], to_delete: list[str]) -> None:
        entries = [ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
                   for key, value in to_set.items()]
        entries += [ConfigEntry(key, "", incremental_operation=AlterConfigOpType.DELETE) for key in to_delete]
        if not entries:
            raise bad_request("nothing to change")
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        (future,) = self.admin.incremental_alter_configs([resource], request_timeout=self.timeout).values()
        self.result(future, f"alter configs of {name}")

    def delete_topic(self, name: str) -> None:
        self.to_controller(lambda: self.admin.delete_topics([name], request_timeout=self.timeout,
                                                           operation_timeout=self.timeout)[name],
                           f"delete topic {name}")
        self.await_metadata(lambda found: name not in found.topics)

    def produce(self, topic: str, partition: int | None, key: bytes | None, value: bytes | None,
                headers: list[tuple[str, bytes]]) -> dict[str, Any]:
        delivered: list[Any] = []

        def on_delivery(error: KafkaError | None, message: Any) -> None:
            delivered.append((error, message))

        producer = self.producer()
        extra = {} if partition is None else {"partition": partition}
        try:
            producer.produce(topic, value=value, key=key, headers=headers or None, on_delivery=on_delivery, **extra)
        except (KafkaException, BufferError) as error:
            raise ConsoleError(502, f"produce to {topic}: {error}") from None
        producer.flush(self.timeout)
        if not delivered:
            raise ConsoleError(504, f"produce to {topic}: not acknowledged within {self.timeout:g}s")
        error, message = delivered[0]
        if error is not None:
            raise ConsoleError(502, f"produce to {topic}: {error.str()}")
        return {"topic": topic, "partition": message.partition(), "offset": message.offset()}

    # groups -------------------------------------------------------------------------------------
    def groups(self) -> list[dict[str, Any]]:
        answer = self.result(self.admin.list_consumer_groups(request_timeout=self.timeout), "list groups")
        rows = [{"group": g.group_id, "state": str(getattr(g.state, "name", g.state)).lower(),
                 "simple": g.is_simple_consumer_group} for g in answer.valid]
        return sorted(rows, key=lambda r: r["group"])

    def describe_group(self, group: str) -> Any:
        (future,) = self.admin.describe_consumer_groups([group], request_timeout=self.timeout).values()
        return self.result(future, f"describe group {group}")

    def committed(self, group: str) -> dict[Partition, int]:
        (future,) = self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                           request_timeout=self.timeout).values()
        answer = self.result(future, f"offsets of group {group}")
        return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions or [] if tp.offset >= 0}

    def group(self, group: str) -> dict[str, Any]:
        description = self.describe_group(group)
        committed = self.committed(group)
        state = str(getattr(description.state, "name", description.state)).lower()
        if state in ("dead", "unknown") and not description.members and not committed:
            raise not_found(f"group {group}")
        members = []
        owner: dict[Partition, str] = {}
        for member in description.members:
            assigned = sorted((tp.topic, tp.partition) for tp in member.assignment.topic_partitions or [])
            for key in assigned:
                owner[key] = member.client_id
            members.append({"member_id": member.member_id, "client_id": member.client_id, "host": member.host,
                            "assignment": [{"topic": t, "partition": p} for t, p in assigned]})
        keys = sorted(set(committed) | set(owner))
        ends = self.offsets(keys, OffsetSpec.latest())
        offsets = []
        for key in keys:
            end, current = ends.get(key), committed.get(key)
            lag = end - current if end is not None and current is not None else None
            offsets.append({"topic": key[0], "partition": key[1], "committed": current, "end_offset": end,
                            "lag": lag, "client_id": owner.get(key)})
        return {"group": group, "state": state, "protocol": description.partition_assignor,
                "coordinator": description.coordinator.id if description.coordinator else None,
                "members": members, "offsets": offsets,
                "total_lag": sum(row["lag"] or 0 for row in offsets)}

    def reset_plan(self, group: str, to: SeekTarget, topics: list[str] | None) -> list[dict[str, Any]]:
        """Each partition's current and new offset (roost group seek's plan). Refuses a group with
        live members: a running consumer would overwrite the new offsets at its next commit."""
        description = self.describe_group(group)
        if description.members:
            raise ConsoleError(409, f"group {group} has {len(description.members)} live member(s): stop its "
                                    "consumers first; only an empty group's offsets can be reset")
        committed = self.committed(group)
        metadata = self.metadata(fresh=True)
        chosen = topics if topics else sorted({topic for topic, _ in committed})
        unknown = [t for t in chosen if t not in metadata.topics]
        if unknown:
            raise not_found(f"topic {', '.join(unknown)}")
        if not chosen:
            raise bad_request(f"group {group} has no committed offsets: name the topics to reset")
        keys = [(t, p) for t in chosen for p in sorted(metadata.topics[t].partitions)]
        starts = self.offsets(keys, OffsetSpec.earliest())
        ends = self.offsets(keys, OffsetSpec.latest())
        missing = [f"{t}[{p}]" for t, p in keys if starts[(t, p)] is None or ends[(t, p)] is None]
        if missing:
            raise ConsoleError(503, f"offsets unavailable for {', '.join(missing)} (offline?)")
        at_time = self.offsets(keys, OffsetSpec.for_timestamp(to.value)) if to.kind == "time" else {}
        return plan_seek(to, keys, committed, starts, ends, at_time)  # type: ignore[arg-type]

    def reset_apply(self, group: str, plan: list[dict[str, Any]]) -> None:
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(row["topic"], row["partition"], row["new"]) for row in plan])
        (future,) = self.admin.alter_consumer_group_offsets([request], request_timeout=self.timeout).values()
        answer = self.result(future, f"commit offsets of group {group}")
        failed = [tp for tp in answer.topic_partitions or [] if tp.error is not None]
        if failed:
            raise ConsoleError(502, "; ".join(f"{tp.topic}[{tp.partition}]: {tp.error.str()}" for tp in failed))

    # transactions ---------------------------------------------------------------------------
    def transactions(self) -> list[dict[str, Any]]:
        """The transactions not yet complete (Ongoing, Prepare*), as their coordinators describe
        them: ListTransactions of every broker, then DescribeTransactions of each (roost.admin)."""
        target = Target(self.settings.bootstrap, dict(self.settings.client_settings), timeout_s=self.timeout)
        now = int(time.time() * 1000)
        found = []
        try:
            for listed in list_transactions(target, list(OPEN_TXN_STATES)):
                described = describe_state(target, listed["transactional_id"])
                if described is None or described["state"] not in OPEN_TXN_STATES:
                    continue  # finished between the two questions
                start = described["start_time_ms"]
                found.append({**described, "age_ms": now - start if start > 0 else None})
        except AdminError as error:
            raise ConsoleError(502, f"transactions: {error.message}") from None
        return found

    # share groups ---------------------------------------------------------------------------
    def admin_target(self) -> Target:
        return Target(self.settings.bootstrap, dict(self.settings.client_settings), timeout_s=self.timeout)

    def share_groups(self) -> list[dict[str, Any]]:
        try:
            return list_share_groups(self.admin_target())
        except AdminError as error:
            raise ConsoleError(502, error.message) from None

    def broker_metrics(self) -> tuple[list[str], list[str]]:
        """Each configured broker's /metrics text, and a line for each that did not answer."""
        texts, problems = [], []
        for url in self.settings.broker_metrics:
            try:
                with urllib.request.urlopen(url, timeout=self.timeout) as answer:
                    texts.append(answer.read(MAX_METRICS_BYTES).decode("utf-8", "replace"))
            except (OSError, urllib.error.URLError, ValueError) as error:
                problems.append(f"{url}: {getattr(error, 'reason', error)}")
        return texts, problems

    def share_group(self, group: str) -> dict[str, Any]:
        target = self.admin_target()
        try:
            described = describe_share_group(target, group)
            configs = share_group_configs(target, group)
        except AdminError as error:
            status = 404 if "GROUP_ID_NOT_FOUND" in error.message else 502
            raise ConsoleError(status, error.message) from None
        texts, problems = self.broker_metrics()
        figures = merge_figures(leader_figures(text, group) for text in texts)
        keys = sorted({(a["topic"], p) for m in described["members"] for a in m["assignment"] for p in a["partitions"]}
                      | {(t, p) for g, t, p in figures if g == group})
        ends = self.offsets(keys, OffsetSpec.latest()) if keys else {}
        return share_group_view(described, figures, ends, configs.get(DEAD_LETTER_TOPIC_CONFIG) or None, problems,
                                bool(self.settings.broker_metrics))

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(1.0)


def kafka_error(error: KafkaException, what: str) -> ConsoleError:
    inner = error.args[0] if error.args else error
    if isinstance(inner, KafkaError):
        if inner.code() in _UNREACHABLE:
            return ConsoleError(503, f"{what}: cannot reach the cluster ({inner.str()})")
        status = 409 if inner.code() == KafkaError.TOPIC_ALREADY_EXISTS else \
            404 if inner.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.GROUP_ID_NOT_FOUND) else 400
        return ConsoleError(status, f"{what}: {inner.str()}")
    return ConsoleError(500, f"{what}: {error}")
