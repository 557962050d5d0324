"""The cluster link shell on each destination broker: reads the links' settings from ZooKeeper
(/config/cluster-links/<name>), talks to the source through `KafkaPeer` (the client side of
`wire/kafka` the replica fetchers use, with the link's TLS and SASL), and does what
`roost.broker.link.core` decides:

- every broker fetches, for the mirror partitions it leads, from the source's partition leaders
  (Fetch v12 as a consumer, read_uncommitted) and appends the batches as they are through the
  replica manager's door (origin LINK: same bytes, same offsets, the producer state and the
  aborted-transaction index following them, as on a follower);
- the destination's controller broker creates the mirror topics (same partition count, the
  source's synced configs, `roost.mirror.link` = the link), adds partitions the source grew,
  keeps configs in sync and syncs consumer group offsets (roost.broker.link.groups);
- each broker publishes its mirrors' state to /cluster-links-status/<link>/<broker id>
  (ephemeral JSON) for `roost link describe` and the console, and keeps it for /metrics.

A source that cannot be reached is retried with backoff (the link's state says
SOURCE_UNAVAILABLE); an authorization error fails the partition's mirror with Kafka's error
named (state FAILED) until the link's settings change.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from roost.broker.link.configs import MIRROR_LINK_CONFIG, SOURCE_TOPIC_ID_CONFIG, configs_to_copy
from roost.broker.link.core import (
    Append,
    AskEpoch,
    Failed,
    FetchFrom,
    Hold,
    LinkState,
    PartitionMirror,
    Refresh,
    StartOver,
    Throttle,
    Truncate,
    link_state,
    source_recreated,
)
from roost.broker.link.filters import should_mirror_topic
from roost.broker.link.settings import LINKS_PATH, STATUS_PATH, LinkSettings, LinkSettingsError
from roost.broker.net.peer import KafkaPeer, PeerError
from roost.broker.replica.append import AppendOrigin
from roost.broker.replica.manager import ReplicaManager
from roost.broker.replica.partition import Partition
from roost.clock import now_ms
from roost.config import TOPIC_SETTINGS, ConfigError, parse_topic_configs
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
from roost.zkclient import ZkError

log = logging.getLogger("roost.broker.link")

POLL_S = 2.0  # how often the list of links and their settings are read
STATUS_EVERY_S = 2.0
REQUEST_TIMEOUT_S = 30.0
# Metadata v11 (Kafka 2.8+) carries topic ids: how a deleted and recreated source topic is told apart.
METADATA_VERSION, FETCH_VERSION, EPOCH_VERSION, DESCRIBE_CONFIGS_VERSION = 11, 12, 4, 3
TOPIC_CONFIG_SOURCE = 1  # DescribeConfigs: DYNAMIC_TOPIC_CONFIG (set on the topic itself)
MAX_STATUS_PARTITIONS = 2000  # what one broker's status znode lists (ZooKeeper's 1 MB limit)
BATCH_HEADER = 61
KNOWN_TOPIC_CONFIGS = frozenset(TOPIC_SETTINGS)
PRODUCER_ID_FLOOR_PATH = "/cluster-links-producer-id-floor"  # ids below it came from a source
Key = tuple[str, int]


def whole_batches(records: Any, fetch_offset: int) -> tuple[memoryview, int]:
    """The whole batches of a fetch answer at or after `fetch_offset` (a Kafka source may end an
    answer with a partial batch, and may begin before the fetch offset), and the base offset of
    the first one (-1: none)."""
    view = memoryview(records)
    start, position, first = -1, 0, -1
    while position + 12 <= len(view):
        length = int.from_bytes(view[position + 8:position + 12], "big", signed=True)
        end = position + 12 + length
        if length < BATCH_HEADER - 12 or end > len(view):
            break
        base = int.from_bytes(view[position:position + 8], "big", signed=True)
        last = base + int.from_bytes(view[position + 23:position + 27], "big", signed=True)
        if last >= fetch_offset and start < 0:
            start, first = position, base
        position = end
    if start < 0:
        return view[:0], -1
    return view[start:position], first


@dataclass
class SourcePartition:
    leader: int
    leader_epoch: int


@dataclass
class SourceTopic:
    topic_id: uuid.UUID | None
    partitions: dict[int, SourcePartition] = field(default_factory=dict)

    @property
    def id_text(self) -> str | None:
        """The topic id as Kafka writes it (kafka-topics --describe: base64url, no padding); None
        when the source gives none (older than Metadata v10)."""
        if self.topic_id is None or self.topic_id.int == 0:
            return None
        return base64.urlsafe_b64encode(self.topic_id.bytes).decode().rstrip("=")


class LinkRunner:
    """One link on this broker."""

    def __init__(self, settings: LinkSettings, service: LinkService) -> None:
        self.settings = settings
        self.service = service
        self.name = settings.name
        self.mirrors: dict[Key, PartitionMirror] = {}
        self.source: dict[str, SourceTopic] = {}
        self.source_brokers: dict[int, tuple[str, int]] = {}
        self._peers: dict[int, KafkaPeer] = {}
        self.reachable = False
        self.error: str | None = None
        self.throttle = Throttle(settings["throttle.bytes.per.second"], now_ms())
        self._next_metadata = 0.0
        self._next_configs = 0.0
        self._next_groups = 0.0
        self._next_acls = 0.0
        self._noted: set[str] = set()
        self.acls_synced = 0
        self._metadata_failures = 0
        self._task: asyncio.Task[None] | None = None
        self._conflicts: set[str] = set()
        self._tasks: set[asyncio.Future[Any]] = set()
        self._led: dict[Key, Partition] = {}
        self.bytes_total = 0
        self.records_total = 0

    # lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        for task in list(self._tasks):
            task.cancel()
        for peer in self._peers.values():
            peer.close()
        self._peers.clear()

    def reconfigure(self, settings: LinkSettings) -> None:
        self.settings = settings
        self.throttle = Throttle(settings["throttle.bytes.per.second"], now_ms())
        for peer in self._peers.values():
            peer.close()
        self._peers.clear()
        for mirror in self.mirrors.values():
            mirror.retry()
        self._next_metadata = 0.0

    def note_once(self, message: str) -> None:
        """Log a condition an operator must fix once, not at every sync."""
        if message not in self._noted and len(self._noted) < 100:
            self._noted.add(message)
            log.warning("link %s: %s", self.name, message)

    # the source's brokers ------------------------------------------------------------------------
    def _peer(self, node: int) -> KafkaPeer | None:
        address = self.source_brokers.get(node)
        if node < 0:
            bootstrap = self.settings.bootstrap()
            address = bootstrap[(-node - 1) % len(bootstrap)]
        if address is None:
            return None
        peer = self._peers.get(node)
        if peer is None or (peer.host, peer.port) != address:
            if peer is not None:
                peer.close()
            peer = self._peers[node] = KafkaPeer(node, address[0], address[1], f"roost-link-{self.name}",
                                                 security=self.settings.security())
        return peer

    async def _request(self, node: int, api: ApiKey, version: int, body: dict[str, Any],
                       timeout: float = REQUEST_TIMEOUT_S) -> dict[str, Any]:
        peer = self._peer(node)
        if peer is None:
            raise PeerError(f"source broker {node} has no known address")
        return await peer.request(api, version, body, timeout)

    async def _any_source(self, api: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        """Ask a known source broker, else the bootstrap ones, in turn."""
        nodes = [*self.source_brokers, *(-i - 1 for i in range(len(self.settings.bootstrap())))]
        last: Exception | None = None
        for node in nodes:
            try:
                return await self._request(node, api, version, body, 10.0)
            except (PeerError, LinkSettingsError) as error:
                last = error
        raise PeerError(f"no source broker answered: {last}")

    # the loop ----------------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            try:
                await self._step()
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug: say so, keep the link going after a pause
                log.exception("link %s: unexpected error", self.name)
                await asyncio.sleep(1.0)

    async def _step(self) -> None:
        if self.settings["paused"]:
            # Nothing fetched, synced or created; the mirrors stay read-only (roost link pause).
            self.mirrors.clear()
            await asyncio.sleep(0.5)
            return
        loop_now = time.monotonic()
        if loop_now >= self._next_metadata:
            await self._refresh_metadata()
            if self.service.is_controller():
                await self._reconcile_topics()
        if self.reachable and self.service.is_controller() and loop_now >= self._next_configs:
            self._next_configs = loop_now + self.settings["topic.config.sync.ms"] / 1000
            await self._sync_configs()
        if self.reachable and self.service.is_controller() and self.settings["consumer.offset.sync.enable"] \
                and loop_now >= self._next_groups:
            self._next_groups = loop_now + self.settings["consumer.offset.sync.ms"] / 1000
            from roost.broker.link.groups import sync_groups
            await sync_groups(self)
        if self.reachable and self.service.is_controller() and self.settings["acl.sync.enable"] \
                and loop_now >= self._next_acls:
            self._next_acls = loop_now + self.settings["acl.sync.ms"] / 1000
            from roost.broker.link.acls import sync_acls
            self.acls_synced += await sync_acls(self)
        added = self._track_led_partitions()
        if added and await self.service.reread_settings(self.name):
            # A topic just became a mirror of this link: act on the link's settings as they are
            # now, not as last polled. `roost link failback` pauses the link before it makes the
            # promoted topics mirrors again; a runner still unpaused would ask a source that has
            # not caught up yet and cut what this side had acknowledged. The new mirrors are
            # taken up again at the next step, under the settings just read.
            for key in added:
                del self.mirrors[key]
            return
        await self._round()

    async def _refresh_metadata(self) -> None:
        try:
            answer = await self._any_source(ApiKey.METADATA, METADATA_VERSION, {
                "topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        except (PeerError, LinkSettingsError) as error:
            self._metadata_failures += 1
            if self.reachable or self._metadata_failures == 1:
                log.warning("link %s: cannot reach the source (%s); retrying with backoff", self.name, error)
            self.reachable = False
            self.error = f"source unreachable: {error}"
            self._next_metadata = time.monotonic() + min(10.0, 0.2 * 2 ** min(self._metadata_failures, 6))
            for mirror in self.mirrors.values():
                mirror.unreachable(self.error, now_ms())
            return
        if not self.reachable and self._metadata_failures:
            log.info("link %s: the source answers again after %d failed attempts", self.name, self._metadata_failures)
        self._metadata_failures = 0
        self.reachable, self.error = True, None
        self._next_metadata = time.monotonic() + self.settings["metadata.max.age.ms"] / 1000
        self.source_brokers = {b["node_id"]: (b["host"], b["port"]) for b in answer["brokers"]}
        topics: dict[str, SourceTopic] = {}
        for topic in answer["topics"]:
            name = topic["name"]
            if topic["error_code"] != ErrorCode.NONE or not name or not should_mirror_topic(self.settings.topics, name):
                continue
            found = SourceTopic(topic.get("topic_id"))
            for p in topic["partitions"]:
                found.partitions[p["partition_index"]] = SourcePartition(p["leader_id"], p.get("leader_epoch", -1))
            topics[name] = found
        self.source = topics
        for key, mirror in self.mirrors.items():
            partition = self._led.get(key)
            if partition is not None:
                self._observe(mirror, partition)

    def _observe(self, mirror: PartitionMirror, partition: Partition) -> None:
        """Tell the mirror what the source's metadata says of its partition (leader, topic id)."""
        source = self.source.get(self.settings.source_name(partition.topic) or "")
        part = source.partitions.get(partition.index) if source else None
        if source is None or part is None:
            return
        recorded = str(partition.configs.get(SOURCE_TOPIC_ID_CONFIG) or "")
        action = mirror.source_moved(part.leader, part.leader_epoch, source.id_text, recorded)
        if isinstance(action, Failed):
            log.error("link %s: %s-%d: %s", self.name, partition.topic, partition.index, action.reason)

    # the controller's work: topics and configs ---------------------------------------------------
    async def _reconcile_topics(self) -> None:
        service = self.service
        for name, source in self.source.items():
            mirror = self.settings.mirror_name(name)
            count = len(source.partitions)
            if count == 0:
                continue
            info = service.metadata.get(mirror)
            if info is None:
                if not self.settings["auto.create.mirror.topics.enable"]:
                    continue
                configs = {MIRROR_LINK_CONFIG: self.name, **await self._source_configs(name)}
                if source.id_text is not None:
                    configs[SOURCE_TOPIC_ID_CONFIG] = source.id_text
                replication = self.settings["replication.factor"]
                if replication < 0:
                    replication = int(service.config["default.replication.factor"])
                replication = max(1, min(replication, len(service.metadata.brokers) or 1))
                log.info("link %s: creating mirror topic %s (%d partitions, replication %d)", self.name, mirror,
                         count, replication)
                with contextlib.suppress(Exception):
                    result = service.topics.create_topic(mirror, count, configs, replication)
                    if asyncio.iscoroutine(result):
                        # Not awaited to the end: the topic's leaders come with the next rounds.
                        self._background(result)
                continue
            overrides = await service.topic_overrides(mirror)
            if (overrides or {}).get(MIRROR_LINK_CONFIG) != self.name:
                if mirror not in self._conflicts:
                    self._conflicts.add(mirror)
                    log.info("link %s: %s exists on the destination and is not its mirror: left alone", self.name,
                             mirror)
                continue
            if source_recreated(str(overrides.get(SOURCE_TOPIC_ID_CONFIG) or ""), source.id_text):
                continue  # the mirror copies a deleted topic: nothing of the new one is taken (its leaders say so)
            if not overrides.get(SOURCE_TOPIC_ID_CONFIG) and source.id_text is not None:
                # A mirror made before topic ids were recorded (or through a failback's
                # roost.mirror.link): record which source topic it copies.
                log.info("link %s: %s mirrors source topic id %s", self.name, mirror, source.id_text)
                with contextlib.suppress(Exception):
                    recorded = parse_topic_configs({**{k: str(v).lower() if isinstance(v, bool) else str(v)
                                                       for k, v in overrides.items()},
                                                    SOURCE_TOPIC_ID_CONFIG: source.id_text}, f"link {self.name}")
                    result = service.topics.set_topic_configs(mirror, recorded)
                    if asyncio.iscoroutine(result):
                        await result
            if info.partitions < count:
                log.info("link %s: %s grew to %d partitions on the source", self.name, mirror, count)
                with contextlib.suppress(Exception):
                    result = service.topics.add_partitions(mirror, count)
                    if asyncio.iscoroutine(result):
                        self._background(result)

    def _background(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _source_configs(self, topic: str) -> dict[str, str]:
        try:
            answer = await self._any_source(ApiKey.DESCRIBE_CONFIGS, DESCRIBE_CONFIGS_VERSION, {
                "resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": None}],
                "include_synonyms": False, "include_documentation": False})
        except PeerError:
            return {}
        result = answer["results"][0]
        if result["error_code"] != ErrorCode.NONE:
            return {}
        source = {c["name"]: (c["value"], c.get("config_source", -1) != TOPIC_CONFIG_SOURCE) for c in result["configs"]}
        wanted = configs_to_copy(source, self.settings.config_exclude, KNOWN_TOPIC_CONFIGS)
        usable = {}
        for name, value in wanted.items():  # only what this destination can parse
            try:
                parse_topic_configs({name: value}, f"link {self.name}")
            except ConfigError:
                continue
            usable[name] = value
        return usable

    async def _sync_configs(self) -> None:
        for name in self.source:
            mirror = self.settings.mirror_name(name)
            overrides = await self.service.topic_overrides(mirror)
            if overrides is None or overrides.get(MIRROR_LINK_CONFIG) != self.name:
                continue
            if source_recreated(str(overrides.get(SOURCE_TOPIC_ID_CONFIG) or ""), self.source[name].id_text):
                continue
            wanted = await self._source_configs(name)
            current = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in overrides.items()}
            kept = {k: v for k, v in current.items() if k not in wanted and self.settings.config_exclude.matches(k)}
            new = {**kept, **wanted, MIRROR_LINK_CONFIG: self.name}
            if current.get(SOURCE_TOPIC_ID_CONFIG):
                new[SOURCE_TOPIC_ID_CONFIG] = current[SOURCE_TOPIC_ID_CONFIG]
            if new != current:
                log.info("link %s: %s configs follow the source: %s", self.name, mirror, wanted)
                parsed = parse_topic_configs(new, f"link {self.name}")
                result = self.service.topics.set_topic_configs(mirror, parsed)
                if asyncio.iscoroutine(result):
                    await result

    # the mirrors this broker leads ---------------------------------------------------------------
    def _track_led_partitions(self) -> list[Key]:
        """Follow the mirrors this broker leads; those new since the last step."""
        led = self._led_mirrors()
        for key in list(self.mirrors):
            if key not in led:
                del self.mirrors[key]  # promoted, moved away, or deleted: this broker stops mirroring it
        added = []
        for key in led:
            if key not in self.mirrors:
                self._observe(self.mirrors.setdefault(key, PartitionMirror(*key)), led[key])
                added.append(key)
        self._led = led
        return added

    async def _round(self) -> None:
        now = now_ms()
        wait = self.throttle.wait_ms(now)
        if wait:
            await asyncio.sleep(min(wait, 1000) / 1000)
            return
        asks: dict[int, list[tuple[PartitionMirror, Partition, int]]] = {}
        fetches: dict[int, list[tuple[PartitionMirror, Partition, int]]] = {}
        soonest = now + 500
        for key, mirror in self.mirrors.items():
            partition = self._led[key]
            step = mirror.next_step(partition.log_end_offset, partition.log.leader_epochs.latest_epoch, now)
            if isinstance(step, Hold):
                soonest = min(soonest, step.until_ms)
            elif isinstance(step, AskEpoch):
                asks.setdefault(mirror.source_leader, []).append((mirror, partition, step.epoch))
            elif isinstance(step, FetchFrom):
                fetches.setdefault(mirror.source_leader, []).append((mirror, partition, step.offset))
        if not asks and not fetches:
            await asyncio.sleep(max(0.01, min(soonest - now, 500) / 1000))
            return
        jobs = [self._ask(leader, items) for leader, items in asks.items()]
        jobs += [self._fetch(leader, items) for leader, items in fetches.items()]
        await asyncio.gather(*jobs)

    def _still_ours(self, partition: Partition, epoch: int, end: int) -> bool:
        return partition.is_leader and partition.mirror_link == self.name and partition.leader_epoch == epoch \
            and partition.log_end_offset == end

    async def _ask(self, leader: int, items: list[tuple[PartitionMirror, Partition, int]]) -> None:
        topics: dict[str, list[dict[str, Any]]] = {}
        marks = []
        for mirror, partition, epoch in items:
            source_topic = self.settings.source_name(partition.topic) or partition.topic
            topics.setdefault(source_topic, []).append({
                "partition": partition.index, "current_leader_epoch": mirror.source_leader_epoch,
                "leader_epoch": epoch})
            marks.append((partition.leader_epoch, partition.log_end_offset))
        body = {"replica_id": -1, "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]}
        try:
            answer = await self._request(leader, ApiKey.OFFSET_FOR_LEADER_EPOCH, EPOCH_VERSION, body)
        except (PeerError, LinkSettingsError) as error:
            self._unreachable(items, error)
            return
        results = {(t["topic"], p["partition"]): p for t in answer["topics"] for p in t["partitions"]}
        for (mirror, partition, _), (epoch, end) in zip(items, marks, strict=True):
            result = results.get((self.settings.source_name(partition.topic) or partition.topic, partition.index))
            if result is None or not self._still_ours(partition, epoch, end):
                continue
            action = mirror.on_epoch_answer(result["error_code"], result.get("leader_epoch", -1), result["end_offset"],
                                            partition.log.leader_epochs, partition.log_end_offset, now_ms())
            self._act(mirror, partition, action, None, 0)

    async def _fetch(self, leader: int, items: list[tuple[PartitionMirror, Partition, int]]) -> None:
        settings = self.settings
        topics: dict[str, list[dict[str, Any]]] = {}
        marks = []
        partition_max = self.throttle.fetch_max_bytes(settings["max.partition.fetch.bytes"])
        for mirror, partition, offset in items:
            source_topic = settings.source_name(partition.topic) or partition.topic
            topics.setdefault(source_topic, []).append({
                "partition": partition.index, "current_leader_epoch": mirror.source_leader_epoch,
                "fetch_offset": offset, "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": partition_max})
            marks.append((partition.leader_epoch, partition.log_end_offset))
        body = {"replica_id": -1, "max_wait_ms": settings["fetch.max.wait.ms"], "min_bytes": 1,
                "max_bytes": self.throttle.fetch_max_bytes(settings["fetch.max.bytes"]), "isolation_level": 0,
                "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": [], "rack_id": ""}
        try:
            answer = await self._request(leader, ApiKey.FETCH, FETCH_VERSION, body,
                                         REQUEST_TIMEOUT_S + settings["fetch.max.wait.ms"] / 1000)
        except (PeerError, LinkSettingsError) as error:
            self._unreachable(items, error)
            return
        results = {(t["topic"], p["partition_index"]): p for t in answer["responses"] for p in t["partitions"]}
        for (mirror, partition, offset), (epoch, end) in zip(items, marks, strict=True):
            result = results.get((settings.source_name(partition.topic) or partition.topic, partition.index))
            if result is None or not self._still_ours(partition, epoch, end):
                continue
            records = result.get("records")
            batches, first = whole_batches(records, offset) if records else (memoryview(b""), -1)
            action = mirror.on_fetch_answer(result["error_code"], result["high_watermark"], result["log_start_offset"],
                                            len(batches) > 0, partition.log_end_offset, now_ms())
            await self._act_async(mirror, partition, action, batches, first)

    def _unreachable(self, items: list[tuple[PartitionMirror, Partition, int]], error: Exception) -> None:
        for mirror, _, _ in items:
            mirror.unreachable(f"source leader unreachable: {error}", now_ms())
        self._next_metadata = min(self._next_metadata, time.monotonic() + 0.5)

    def _act(self, mirror: PartitionMirror, partition: Partition, action: Any, batches: memoryview | None,
             first: int) -> None:
        replicas = self.service.replicas
        if isinstance(action, Truncate):
            log.info("link %s: %s-%d diverged from the source: truncating from %d to %d", self.name,
                     partition.topic, partition.index, partition.log_end_offset, action.offset)
            replicas.truncate_mirror(partition, action.offset)
            mirror.mirrored_end = partition.log_end_offset
        elif isinstance(action, StartOver):
            log.warning("link %s: %s-%d: the source's log starts at %d, past ours (%d): starting over there",
                        self.name, partition.topic, partition.index, action.offset, partition.log_end_offset)
            replicas.restart_mirror_at(partition, action.offset)
            mirror.mirrored_end = partition.log_end_offset
        elif isinstance(action, Refresh):
            self._next_metadata = min(self._next_metadata, time.monotonic())
        elif isinstance(action, Failed):
            log.error("link %s: %s-%d: %s", self.name, partition.topic, partition.index, action.reason)

    async def _act_async(self, mirror: PartitionMirror, partition: Partition, action: Any, batches: memoryview,
                         first: int) -> None:
        if not isinstance(action, Append):
            self._act(mirror, partition, action, batches, first)
            return
        if first < partition.log_end_offset:
            if partition.log_end_offset == partition.log_start_offset:
                # The source's log starts inside a batch (DeleteRecords): begin the mirror at it.
                self.service.replicas.restart_mirror_at(partition, first)
            else:
                mirror.error = f"the source answered from {first}, before our end {partition.log_end_offset}"
                mirror.validated = False
                return
        size = len(batches)
        appending = self.service.replicas.append([((partition.topic, partition.index), bytearray(batches))], 1,
                                                 AppendOrigin.LINK, REQUEST_TIMEOUT_S, link=self.name)
        if appending.done is not None:
            await appending.done
        outcome = appending.outcomes[0]
        if outcome.error != ErrorCode.NONE:
            mirror.error = f"append: {ErrorCode(outcome.error).name}: {outcome.message or ''}".strip()
            mirror.unreachable(mirror.error, now_ms())
            log.warning("link %s: %s-%d: %s", self.name, partition.topic, partition.index, mirror.error)
            return
        self.throttle.spend(size, now_ms())
        self.bytes_total += size
        self.records_total += outcome.appended_records
        self.service.saw_producer_ids(batches)
        mirror.appended(partition.log_end_offset, now_ms(), outcome.appended_records, size)

    # what is reported ----------------------------------------------------------------------------
    def state(self) -> LinkState:
        return link_state(self.reachable, list(self.mirrors.values()), self.settings["paused"])

    def status(self) -> dict[str, Any]:
        now = now_ms()
        partitions = []
        for (topic, index), m in sorted(self.mirrors.items())[:MAX_STATUS_PARTITIONS]:
            led = self._led.get((topic, index))
            partitions.append({"open_transactions": len(led.log.producer_state.ongoing) if led is not None else 0,"topic": topic, "partition": index, "source_leader": m.source_leader,
                               "mirrored_end": m.mirrored_end, "source_high_watermark": m.source_high_watermark,
                               "lag_records": m.lag_records(), "lag_ms": m.lag_ms(now), "error": m.error,
                               "failed": m.failed,  # stopped until an operator acts (the console's state)
                               "truncations": m.truncations[-3:]})
        return {"link": self.name, "state": self.state().value, "error": self.error, "time_ms": now,
                "acls_synced": self.acls_synced,
                "bytes": self.bytes_total, "records": self.records_total, "partitions": partitions,
                "leading": self.leading()}

    def leading(self) -> list[dict[str, Any]]:
        """The mirrors of this link this broker leads, paused or not, with their log end and high
        watermark: a leader listed here refuses produces, so once its high watermark reaches its log
        end every record it will ever acknowledge is below that end (what `roost link failback`
        waits for before it hands the records over; the high watermark alone misses a record
        appended and not yet replicated, acknowledged later)."""
        led = sorted(self._led_mirrors().values(), key=lambda p: (p.topic, p.index))[:MAX_STATUS_PARTITIONS]
        return [{"topic": p.topic, "partition": p.index, "leader_epoch": p.leader_epoch,
                 "log_end": p.log_end_offset, "high_watermark": p.high_watermark} for p in led]

    def _led_mirrors(self) -> dict[Key, Partition]:
        """The partitions this broker leads that are mirrors of this link (paused or not)."""
        return {(p.topic, p.index): p for p in self.service.replicas.hosted()
                if p.is_leader and p.mirror_link == self.name}


class LinkService:
    """The links of this destination broker."""

    def __init__(self, broker_id: int, zk: Any, replicas: ReplicaManager, metadata: Any, topics: Any,
                 config: Any, topic_overrides: Callable[[str], Any], peers: Any) -> None:
        self.broker_id = broker_id
        self.peers = peers  # this cluster's brokers (the group offset sync's requests)
        self.zk = zk
        self.replicas = replicas
        self.metadata = metadata
        self.topics = topics
        self.config = config
        self.topic_overrides = topic_overrides
        self.runners: dict[str, LinkRunner] = {}
        self._raw: dict[str, bytes] = {}
        self._task: asyncio.Task[None] | None = None
        self._published: dict[str, str] = {}
        self.group_syncs = 0
        self.producer_ids: Any = None  # the broker's producer id allocator (raise_floor)
        self.producer_id_floor = 0

    async def destination(self, api: ApiKey, version: int, body: dict[str, Any], node: int | None = None,
                          leader_of: Key | None = None) -> dict[str, Any]:
        """A request to a broker of this (the destination) cluster: `node`, the leader of
        `leader_of`, or this broker."""
        if leader_of is not None:
            info = self.metadata.partition(*leader_of)
            node = info.leader if info is not None else None
        node = self.broker_id if node is None else node
        endpoint = self.metadata.endpoint(node)
        if endpoint is None:
            raise PeerError(f"destination broker {node} has no known address")
        return await self.peers.get(node, endpoint.host, endpoint.port).request(api, version, body, 10.0)

    def saw_producer_ids(self, batches: memoryview) -> None:
        """Mirrored batches carry the source's producer ids: this cluster must never hand out
        those ids itself (a producer of a promoted topic would collide with the mirrored
        producer's sequences), so its allocator's floor moves past every one seen."""
        position, highest = 0, -1
        while position + BATCH_HEADER <= len(batches):
            length = int.from_bytes(batches[position + 8:position + 12], "big", signed=True)
            highest = max(highest, int.from_bytes(batches[position + 43:position + 51], "big", signed=True))
            position += 12 + length
        if highest >= self.producer_id_floor:
            self.producer_id_floor = highest + 1
            if self.producer_ids is not None:
                self.producer_ids.raise_floor(self.producer_id_floor)

    async def _share_producer_id_floor(self) -> None:
        """The floor goes through ZooKeeper to every broker of this cluster (each allocates ids)."""
        try:
            data, stat = await self.zk.get(PRODUCER_ID_FLOOR_PATH)
            stored, version = int(data or b"0"), stat.version
        except ZkError:
            stored, version = 0, None
        if stored > self.producer_id_floor:
            self.producer_id_floor = stored
            if self.producer_ids is not None:
                self.producer_ids.raise_floor(stored)
        elif self.producer_id_floor > stored:
            with contextlib.suppress(ZkError):
                if version is None:
                    await self.zk.create(PRODUCER_ID_FLOOR_PATH, str(self.producer_id_floor).encode())
                else:
                    await self.zk.set(PRODUCER_ID_FLOOR_PATH, str(self.producer_id_floor).encode(), version)

    def is_controller(self) -> bool:
        return self.metadata.controller_id == self.broker_id

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        for runner in list(self.runners.values()):
            await runner.stop()
        self.runners.clear()

    async def _run(self) -> None:
        next_status = 0.0
        while True:
            try:
                await self._poll()
                await self._share_producer_id_floor()
                if time.monotonic() >= next_status:
                    next_status = time.monotonic() + STATUS_EVERY_S
                    await self._publish()
            except asyncio.CancelledError:
                raise
            except ZkError as error:
                log.debug("cluster links: ZooKeeper: %r", error)
            except Exception:
                log.exception("cluster links: unexpected error")
            await asyncio.sleep(POLL_S if not self.runners else min(POLL_S, STATUS_EVERY_S))

    async def _poll(self) -> None:
        try:
            names = set(await self.zk.get_children(LINKS_PATH))
        except ZkError:
            names = set()
        for name in list(self.runners):
            if name not in names:
                log.info("cluster link %s deleted: its mirror topics stay, read-only until promoted", name)
                await self.runners.pop(name).stop()
                self._raw.pop(name, None)
                with contextlib.suppress(ZkError):
                    await self.zk.delete(f"{STATUS_PATH}/{name}/{self.broker_id}")
        for name in sorted(names):
            try:
                data, _ = await self.zk.get(f"{LINKS_PATH}/{name}")
            except ZkError:
                continue
            self._apply(name, data)

    def _apply(self, name: str, data: bytes) -> bool:
        """Start link `name` or give its runner new settings; whether they changed."""
        if self._raw.get(name) == data:
            return False
        self._raw[name] = data
        try:
            settings = LinkSettings.decode(name, data)
            settings.security()  # TLS files and secret references resolve here
        except LinkSettingsError as error:
            log.error("cluster link %s cannot be used: %s", name, error)
            return True
        runner = self.runners.get(name)
        if runner is None:
            log.info("cluster link %s: mirroring from %s", name, settings["bootstrap.servers"])
            runner = self.runners[name] = LinkRunner(settings, self)
            runner.start()
        else:
            log.info("cluster link %s: settings changed", name)
            runner.reconfigure(settings)
        return True

    async def reread_settings(self, name: str) -> bool:
        """Read link `name`'s settings now (after a sync, so that this keeper holds every write
        made before); whether they changed. A link that cannot be read counts as changed: its
        runner waits for the next poll rather than acting on what it last saw."""
        path = f"{LINKS_PATH}/{name}"
        try:
            await self.zk.sync(path)
            data, _ = await self.zk.get(path)
        except ZkError as error:
            log.debug("cluster link %s: settings not read again: %r", name, error)
            return True
        return self._apply(name, data)

    async def _publish(self) -> None:
        for name, runner in self.runners.items():
            document = json.dumps(runner.status(), sort_keys=True)
            path = f"{STATUS_PATH}/{name}/{self.broker_id}"
            data = document.encode()
            try:
                if await self.zk.exists(path) is None:
                    await self.zk.ensure_path(f"{STATUS_PATH}/{name}")
                    await self.zk.create(path, data, ephemeral=True)
                else:
                    await self.zk.set(path, data)
            except ZkError as error:
                log.debug("link %s: status not published: %r", name, error)

    def snapshot(self) -> list[dict[str, Any]]:
        """Every link's status on this broker (for /metrics)."""
        return [runner.status() for runner in self.runners.values()]
