"""The `_schemas` topic through the Kafka protocol (confluent-kafka), and the writer's election.

- The topic: one partition, `cleanup.policy=compact`, replication factor min(live brokers, 3),
  created at start when missing (as Confluent's KafkaStore does; more than one partition refuses
  to start).
- Replay: a consumer assigned partition 0 from the beginning, in its own thread, hands batches of
  (offset, key, value) to the event loop, which applies them to the RegistryState in order.
- Writes: an idempotent producer with acks=all; `write` returns once the replay has applied the
  produced offsets (read-your-writes), `sync` once it has applied everything below the partition's
  high watermark (every acknowledged write).
- Election: like Confluent's registry, through Kafka group membership. Confluent uses its own
  group protocol type (`sr`); confluent-kafka's consumer cannot speak one, so each node joins the
  ordinary consumer group `schema.registry.group.id` subscribed to `_schemas` (paused: it never
  fetches) with its URL as client.id, and the member assigned partition 0 is the writer. The
  others find the writer's URL in DescribeGroups (the member holding `_schemas`/0). A dead
  writer's membership ends after session.timeout.ms and the group hands the partition on.
  Correctness does not rest on the election: a write counts only once read back, and the replay
  refuses a record that rebinds an id or a version (store.py), so even two writers at once
  cannot hand out one id twice; a new writer reads to the high watermark before it writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import threading
import time
import uuid
import warnings
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from roost.registry import errors
from roost.registry.store import RegistryState

log = logging.getLogger("roost.registry.store")

REPLAY_BATCH = 500
POLL_S = 0.2
DESCRIBE_EVERY_S = 1.0
DESCRIBE_TIMEOUT_S = 5.0
WATERMARK_TIMEOUT_S = 3.0  # one ListOffsets; a dead leader costs this much before the refresh
RETRY_BACKOFF_S = 0.2
STOP_DEADLINE_S = 10.0
CLIENT_ID_PREFIX = "roost-schema-registry "
MAX_ASSIGNED_TOPICS = 10_000


class KafkaLog:
    def __init__(self, state: RegistryState, bootstrap: str, client_settings: dict[str, str], topic: str,
                 group_id: str, own_url: str, eligible: bool = True, session_timeout_ms: int = 6000,
                 write_timeout_s: float = 30.0, replication_factor: int = 3) -> None:
        self.state = state
        self.topic = topic
        self.group_id = group_id
        self.own_url = own_url
        self.eligible = eligible
        self.write_timeout_s = write_timeout_s
        self.session_timeout_ms = session_timeout_ms
        self.replication_factor = replication_factor
        self.base = {"bootstrap.servers": bootstrap, **client_settings}
        self.loop: asyncio.AbstractEventLoop | None = None
        self.applied = asyncio.Condition()
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.writer = False
        self.known_writer: str | None = None
        self.producer: Producer | None = None
        self.reader: Consumer | None = None
        self.watermarks: Consumer | None = None
        self.on_apply: list[Callable[[], None]] = []

    # ---- start and stop ----

    async def start(self, start_timeout_s: float = 60.0) -> None:
        self.loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._ensure_topic, start_timeout_s)
        self.producer = Producer({**self.base, "acks": "all", "enable.idempotence": True, "linger.ms": 0,
                                  # a record that cannot land fails when the write stops waiting for it
                                  "message.timeout.ms": max(1000, int(self.write_timeout_s * 1000)),
                                  "client.id": CLIENT_ID_PREFIX + "writer " + self.own_url})
        self.reader = Consumer({**self.base, "group.id": f"roost-schema-registry-reader-{uuid.uuid4()}",
                                "enable.auto.commit": False, "enable.auto.offset.store": False,
                                "auto.offset.reset": "earliest", "fetch.wait.max.ms": 50,
                                "client.id": CLIENT_ID_PREFIX + "reader " + self.own_url})
        self.reader.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        # Watermarks through a client of their own: the reader's thread sits in consume()
        self.watermarks = Consumer({**self.base, "group.id": f"roost-schema-registry-watermarks-{uuid.uuid4()}",
                                    "enable.auto.commit": False,
                                    "client.id": CLIENT_ID_PREFIX + "watermarks " + self.own_url})
        self._thread(self._replay, "schema-registry-replay")
        self._thread(self._poll_producer, "schema-registry-producer")
        if self.eligible:
            self._thread(self._elect, "schema-registry-election")
        self._thread(self._watch_writer, "schema-registry-writer-watch")
        # The topic may be new: a node that did not create it learns of its partition a moment
        # later, and until then the watermark query fails (_UNKNOWN_PARTITION), then is retried.
        high = await asyncio.to_thread(self._high_watermark, start_timeout_s)
        if high > 0:
            async with self.applied:
                await asyncio.wait_for(self.applied.wait_for(lambda: self.state.applied_offset >= high - 1),
                                       start_timeout_s)

    def _thread(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    async def stop(self, deadline_s: float = STOP_DEADLINE_S) -> None:
        """Stop the threads and close the clients, giving up after `deadline_s`: a close that
        hangs (a group coordinator that no longer answers) must not hang the broker or a test.
        The closing runs in a daemon thread, so a process exiting does not wait for it either."""
        self.stopping.set()
        closing = threading.Thread(target=self._close, args=(time.monotonic() + deadline_s,),
                                   name="schema-registry-close", daemon=True)
        closing.start()
        await asyncio.to_thread(closing.join, deadline_s)
        if closing.is_alive():
            log.warning("schema registry: its Kafka clients did not close within %.0f s; left behind", deadline_s)

    def _close(self, deadline: float) -> None:
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if self.producer is not None:
            self.producer.flush(max(0.0, deadline - time.monotonic()))
        for consumer in (self.reader, self.watermarks):
            if consumer is not None:
                consumer.close()

    def _ensure_topic(self, timeout_s: float) -> None:
        admin = AdminClient({**self.base, "client.id": CLIENT_ID_PREFIX + "admin " + self.own_url})
        deadline = time.monotonic() + timeout_s
        few_brokers_until = time.monotonic() + min(30.0, timeout_s / 2)
        while True:
            try:
                metadata = admin.list_topics(timeout=10)
                found = metadata.topics.get(self.topic)
                if found is not None and found.error is None:
                    if len(found.partitions) != 1:
                        raise errors.store_error(f"topic {self.topic} has {len(found.partitions)} partitions; "
                                                 "the registry needs exactly 1")
                    return
                if len(metadata.brokers) < self.replication_factor and time.monotonic() < few_brokers_until:
                    time.sleep(1)  # brokers still starting: a topic made now would stay under-replicated
                    continue
                replicas = max(1, min(self.replication_factor, len(metadata.brokers)))
                if replicas < self.replication_factor:
                    log.warning("creating %s with replication factor %d: only %d brokers are up (wanted %d)",
                                self.topic, replicas, len(metadata.brokers), self.replication_factor)
                future = admin.create_topics([NewTopic(self.topic, 1, replicas, config={
                    "cleanup.policy": "compact", "min.insync.replicas": str(min(2, replicas))})])[self.topic]
                future.result(timeout=30)
                return
            except KafkaException as error:
                code = error.args[0].code() if error.args else None
                if code == KafkaError.TOPIC_ALREADY_EXISTS:
                    return
                if time.monotonic() > deadline:
                    raise
                log.info("waiting for the cluster to create %s: %s", self.topic, error)
                time.sleep(1)

    # ---- replay ----

    def _replay(self) -> None:
        assert self.reader is not None and self.loop is not None
        while not self.stopping.is_set():
            try:
                # poll returns at the first record; consume(n, t) would wait out t for n of them
                first = self.reader.poll(POLL_S)
                messages = [first, *self.reader.consume(REPLAY_BATCH, 0)] if first is not None else []
            except (KafkaException, RuntimeError) as error:
                log.warning("replay of %s: %s", self.topic, error)
                time.sleep(POLL_S)
                continue
            batch = [(m.offset(), m.key(), m.value()) for m in messages if m.error() is None]
            if batch:
                self.loop.call_soon_threadsafe(lambda b=batch: asyncio.ensure_future(self._apply(b)))

    async def _apply(self, batch: list[tuple[int, bytes | None, bytes | None]]) -> None:
        for offset, key, value in batch:
            if offset <= self.state.applied_offset:
                continue
            why = self.state.apply(offset, key, value)
            if why is not None:
                log.warning("%s offset %d refused: %s", self.topic, offset, why)
        for callback in self.on_apply:
            callback()
        async with self.applied:
            self.applied.notify_all()

    async def wait_applied(self, offset: int) -> None:
        async with self.applied:
            await asyncio.wait_for(self.applied.wait_for(lambda: self.state.applied_offset >= offset),
                                   self.write_timeout_s)

    # ---- writes ----

    def _poll_producer(self) -> None:
        assert self.producer is not None
        while not self.stopping.is_set():
            self.producer.poll(POLL_S)

    async def write(self, records: list[tuple[bytes, bytes | None]]) -> None:
        assert self.producer is not None and self.loop is not None
        loop = self.loop
        futures: list[asyncio.Future[int]] = []
        for key, value in records:
            future: asyncio.Future[int] = loop.create_future()

            def delivered(error: Any, message: Any, future: asyncio.Future[int] = future) -> None:
                def settle() -> None:
                    if future.done():
                        return
                    if error is not None:
                        future.set_exception(errors.store_error(str(error)))
                    else:
                        future.set_result(message.offset())
                loop.call_soon_threadsafe(settle)

            self.producer.produce(self.topic, value=value, key=key, partition=0, on_delivery=delivered)
            futures.append(future)
        offsets = await asyncio.wait_for(asyncio.gather(*futures), self.write_timeout_s)
        await self.wait_applied(max(offsets))

    async def sync(self) -> None:
        high = await asyncio.to_thread(self._high_watermark, self.write_timeout_s)
        if high > 0:
            await self.wait_applied(high - 1)

    def _high_watermark(self, budget_s: float) -> int:
        """The partition's high watermark, asked of its leader, within `budget_s` (then 50002).

        The watermark client never fetches, so librdkafka refreshes no metadata for it: after
        the partition's leader died it kept asking the dead broker until metadata.max.age.ms
        (15 min), each query timing out (the 3-broker failover test's 90 s of 500s). So each
        failed query is followed by a Metadata request of its own, which relearns the leader.
        """
        assert self.watermarks is not None
        partition = TopicPartition(self.topic, 0)
        deadline = time.monotonic() + budget_s
        while True:
            left = deadline - time.monotonic()
            try:
                return int(self.watermarks.get_watermark_offsets(
                    partition, max(0.5, min(WATERMARK_TIMEOUT_S, left)), False)[1])
            except KafkaException as error:
                if time.monotonic() >= deadline or self.stopping.is_set():
                    raise errors.store_timeout(f"the high watermark of {self.topic}: {error}") from None
                log.info("high watermark of %s: %s; refreshing its leader", self.topic, error)
                with contextlib.suppress(KafkaException):
                    self.watermarks.list_topics(self.topic, timeout=max(0.5, min(WATERMARK_TIMEOUT_S, left)))
                time.sleep(min(RETRY_BACKOFF_S, max(0.0, deadline - time.monotonic())))

    # ---- election ----

    def _elect(self) -> None:
        member = Consumer({**self.base, "group.id": self.group_id, "client.id": CLIENT_ID_PREFIX + self.own_url,
                           "enable.auto.commit": False, "session.timeout.ms": self.session_timeout_ms,
                           "heartbeat.interval.ms": max(200, self.session_timeout_ms // 6),
                           "partition.assignment.strategy": "range", "auto.offset.reset": "latest"})

        def assigned(consumer: Any, partitions: list[TopicPartition]) -> None:
            with contextlib.suppress(KafkaException):
                consumer.pause(partitions)
            self.writer = any(p.partition == 0 for p in partitions)
            if self.writer:
                log.info("this node (%s) is the schema registry's writer", self.own_url)

        def revoked(consumer: Any, partitions: list[TopicPartition]) -> None:
            if self.writer:
                log.info("this node (%s) is no longer the writer", self.own_url)
            self.writer = False

        member.subscribe([self.topic], on_assign=assigned, on_revoke=revoked, on_lost=revoked)
        try:
            while not self.stopping.is_set():
                member.poll(POLL_S)
        finally:
            self.writer = False
            member.close()  # leaves the group at once: the next writer need not wait for a timeout

    def _watch_writer(self) -> None:
        """Every DESCRIBE_EVERY_S, the writer's URL from the group's description.

        Through librdkafka's legacy list_groups (DescribeGroups sent to each broker), not the
        AdminClient's describe_consumer_groups: under load that one's coordinator lookup hit an
        assertion in librdkafka (rd_kafka_enq_once_del_source_return: eonce->refcnt > 0), which
        aborts the whole process; the 3-broker test saw a registry vanish so, twice in ten runs
        at load 20-30."""
        admin = AdminClient({**self.base, "client.id": CLIENT_ID_PREFIX + "watch " + self.own_url})
        while not self.stopping.wait(DESCRIBE_EVERY_S):
            if self.writer:
                self.known_writer = self.own_url
                continue
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    groups = admin.list_groups(self.group_id, timeout=DESCRIBE_TIMEOUT_S)
            except Exception as error:
                log.debug("describing %s: %s", self.group_id, error)
                continue
            described = [g for g in groups if g.id == self.group_id and g.error is None]
            if not described:
                continue  # no broker answered as the group's coordinator this time: keep the last view
            # confluent-kafka's stubs give GroupMember's fields as None; they are a str and bytes.
            members: list[tuple[str, bytes | None]] = [(str(m.client_id), m.assignment)
                                                       for g in described for m in g.members]
            self.known_writer = writer_of(members, self.topic)

    def is_writer(self) -> bool:
        return self.writer

    def writer_url(self) -> str | None:
        return self.own_url if self.writer else self.known_writer


def writer_of(members: list[tuple[str, bytes | None]], topic: str) -> str | None:
    """The URL of the member (client id, raw assignment) assigned `topic`'s partition 0."""
    for client_id, raw in members:
        if client_id.startswith(CLIENT_ID_PREFIX) and 0 in assigned_partitions(raw or b"").get(topic, []):
            return client_id[len(CLIENT_ID_PREFIX):]
    return None


def assigned_partitions(raw: bytes) -> dict[str, list[int]]:
    """A consumer-protocol assignment (version int16, [topic string, [partition int32]], user
    data bytes), as DescribeGroups returns it; {} for anything malformed."""
    try:
        at = 2
        (topics,) = struct.unpack_from(">i", raw, at)
        at += 4
        if not 0 <= topics <= MAX_ASSIGNED_TOPICS:
            return {}
        found: dict[str, list[int]] = {}
        for _ in range(topics):
            (length,) = struct.unpack_from(">h", raw, at)
            at += 2
            if length < 0 or at + length > len(raw):
                return {}
            name = raw[at:at + length].decode()
            at += length
            (count,) = struct.unpack_from(">i", raw, at)
            at += 4
            if not 0 <= count <= (len(raw) - at) // 4:
                return {}
            found[name] = list(struct.unpack_from(f">{count}i", raw, at))
            at += 4 * count
        return found
    except (struct.error, UnicodeDecodeError):
        return {}
