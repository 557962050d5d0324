"""The share-group workload (KIP-932 queues): one idempotent acks=all producer appending values
unique in the run to a one-partition topic, several confluent-kafka ShareConsumers of one share
group (explicit acknowledgement, `commit_sync` after every poll) taking the records, and, at the
end, the share coordinator's start offset for the share-partition. Every operation is recorded
for roost.testing.history.share:

- send: ok with (partition, offset) on a delivery report without error, else unknown;
- share-poll: the records a poll returned, with their delivery counts;
- share-ack: the acknowledgements one commit_sync carried, ok for a partition it answered None
  for; unknown when it answered an error, raised or left the partition out (an error does not
  say the state write did not happen: a leader may have made it durable and then lost its
  leadership before answering);
- share-state: the coordinator's StartOffset (ReadShareGroupStateSummary) after quiescence;
- leader-move (process "observer"): the data partition's leader or leader epoch changed.

Most records are accepted; a few are released (they come back with their delivery count raised)
and a few rejected (archived), chosen from the value so that a replay decides the same.

`where()` says which broker leads the data partition and which is the share-partition's share
coordinator (FindCoordinator key type 2), for a nemesis that kills those two roles.
"""

from __future__ import annotations

import base64
import threading
import time
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import AcknowledgeType, KafkaError, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from roost.admin.transactions import UNANSWERED, ask
from roost.testing.faults.recorder import Recorder
from roost.testing.history.model import OK, UNKNOWN
from roost.wire.kafka import ApiKey

TOPIC = "share-fault-run"
GROUP = "share-fault-run"
LOCK_MS = 5000  # share.record.lock.duration.ms: an unanswered accept that did not happen comes back soon
RELEASE_PER_MILLE = 30  # released while their delivery count is below 3
REJECT_PER_MILLE = 10
QUIET = {"log_level": 2}  # librdkafka: critical only (every kill logs refused connections otherwise)
ACK_TYPES = {AcknowledgeType.ACCEPT: "accept", AcknowledgeType.RELEASE: "release", AcknowledgeType.REJECT: "reject"}


def choose(value: str, delivery_count: int) -> AcknowledgeType:
    """The acknowledgement a consumer gives this delivery (a function of the value: replayable)."""
    roll = zlib.crc32(f"{value}/{delivery_count}".encode()) % 1000
    if roll < REJECT_PER_MILLE and delivery_count == 1:
        return AcknowledgeType.REJECT
    if roll < REJECT_PER_MILLE + RELEASE_PER_MILLE and delivery_count < 3:
        return AcknowledgeType.RELEASE
    return AcknowledgeType.ACCEPT


@dataclass
class ShareWorkload:
    bootstrap: str
    recorder: Recorder
    consumers: int = 3
    rate: float = 100.0  # records/s offered by the producer
    stop_producer: threading.Event = field(default_factory=threading.Event)
    stop_consumers: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    topic_id: uuid.UUID | None = None
    acked_sends: int = 0
    ended: set[int] = field(default_factory=set)  # offsets whose accept/reject was answered ok

    # setup ----------------------------------------------------------------------------------------
    def setup(self, timeout: float = 60.0) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})
        deadline = time.monotonic() + timeout
        while True:
            try:
                admin.create_topics([NewTopic(TOPIC, 1, 3)], operation_timeout=20)[TOPIC].result(30)
                break
            except KafkaException as error:
                if error.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    break
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        resource = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("share.record.lock.duration.ms", str(LOCK_MS), incremental_operation=AlterConfigOpType.SET)])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(30)
        while time.monotonic() < deadline:
            found = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
            if found and found.error is None and found.partitions and all(
                    p.leader >= 0 and len(p.isrs) == 3 for p in found.partitions.values()):
                self.topic_id = self._topic_id()
                return
            time.sleep(0.5)
        raise RuntimeError(f"{TOPIC} never got a leader and a full ISR")

    def _hosts(self) -> list[tuple[str, int]]:
        out = []
        for address in self.bootstrap.split(","):
            host, _, port = address.strip().rpartition(":")
            out.append((host, int(port)))
        return out

    def _ask(self, api: ApiKey, version: int, body: dict[str, Any], host: tuple[str, int] | None = None
             ) -> dict[str, Any] | None:
        for target in [host] if host else self._hosts():
            try:
                return ask(target[0], target[1], api, version, body, 5.0)
            except UNANSWERED:
                continue
        return None

    def _metadata(self) -> dict[str, Any] | None:
        return self._ask(ApiKey.METADATA, 12, {"topics": [{"name": TOPIC, "topic_id": uuid.UUID(int=0)}],
                                               "allow_auto_topic_creation": False,
                                               "include_topic_authorized_operations": False})

    def _topic_id(self) -> uuid.UUID:
        answer = self._metadata()
        assert answer is not None, "no broker answered Metadata"
        return answer["topics"][0]["topic_id"]

    def coordinator_key(self) -> str:
        assert self.topic_id is not None
        return f"{GROUP}:{base64.urlsafe_b64encode(self.topic_id.bytes).decode().rstrip('=')}:0"

    def where(self) -> tuple[int | None, tuple[int, str, int] | None]:
        """(the data partition's leader, the share coordinator (node, host, port)), None where
        nobody answers or there is none now."""
        leader = None
        answer = self._metadata()
        if answer is not None and answer["topics"] and answer["topics"][0]["partitions"]:
            leader = answer["topics"][0]["partitions"][0]["leader_id"]
            leader = leader if leader >= 0 else None
        found = self._ask(ApiKey.FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": [self.coordinator_key()]})
        coordinator = None
        if found is not None:
            entry = found["coordinators"][0]
            if entry["error_code"] == 0:
                coordinator = (entry["node_id"], entry["host"], entry["port"])
        return leader, coordinator

    def start_offset(self) -> int | None:
        """The share coordinator's StartOffset for the share-partition (None: no answer now)."""
        _leader, coordinator = self.where()
        if coordinator is None or self.topic_id is None:
            return None
        answer = self._ask(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1, {"group_id": GROUP, "topics": [{
            "topic_id": self.topic_id, "partitions": [{"partition": 0, "leader_epoch": -1}]}]},
            (coordinator[1], coordinator[2]))
        if answer is None:
            return None
        result = answer["results"][0]["partitions"][0]
        return result["start_offset"] if result["error_code"] == 0 else None

    # running --------------------------------------------------------------------------------------
    def start(self) -> None:
        self.setup()
        self._spawn(self._watch, "observer")
        for i in range(self.consumers):
            self._spawn(self._consume, f"c{i}")
        self._spawn(self._produce, "p0")

    def _watch(self, name: str) -> None:
        """Record every change of the data partition's leader or leader epoch that Metadata shows
        (kills move it, and so does the preferred-leader election that moves it back after a
        restart): f "leader-move", from when the old one was last seen to when the new one was
        first seen. A new leader rebuilds the share-partition from the share coordinator, so
        delivery counts may repeat across it; the checker needs to know when."""
        rec = self.recorder
        seen: tuple[int, int] | None = None
        last_seen = rec.t()
        while not self.stop_consumers.is_set():
            answer = self._metadata()
            t = rec.t()
            if answer is not None and answer["topics"] and answer["topics"][0]["partitions"]:
                found = answer["topics"][0]["partitions"][0]
                now = (found["leader_id"], found["leader_epoch"])
                if seen is not None and now != seen:
                    rec.record(name, "leader-move", last_seen, t, OK, None,
                               {"from": seen, "to": now})
                seen, last_seen = now, t
            self.stop_consumers.wait(0.3)

    def _spawn(self, target: Any, name: str) -> None:
        def guard() -> None:
            try:
                target(name)
            except Exception as error:
                self.errors.append(f"{name}: {error!r}")
        thread = threading.Thread(target=guard, name=f"share-{name}", daemon=True)
        thread.start()
        self.threads.append(thread)

    def _produce(self, name: str) -> None:
        rec = self.recorder
        invoked: dict[str, float] = {}
        reported: set[str] = set()

        def report(error: Any, message: Any) -> None:
            value = message.value().decode()
            reported.add(value)
            if error is None:
                self.acked_sends += 1
                rec.record(name, "send", invoked[value], rec.t(), OK, None, value, (0, message.offset()))
            else:
                rec.record(name, "send", invoked[value], rec.t(), UNKNOWN, None, value)

        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 5, "batch.num.messages": 20, "message.timeout.ms": 20000,
                             "request.timeout.ms": 5000, **QUIET})
        n = 0
        while not self.stop_producer.is_set():
            n += 1
            value = f"{name}-{n}"
            invoked[value] = rec.t()
            for _attempt in range(200):  # bounded: a full queue drains within a message timeout
                try:
                    producer.produce(TOPIC, value.encode(), on_delivery=report)
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
            self.stop_producer.wait(1.0 / self.rate)
        producer.flush(30)
        for value, invoke in invoked.items():
            if value not in reported:
                rec.record(name, "send", invoke, rec.t(), UNKNOWN, None, value)

    def _consume(self, name: str) -> None:
        rec = self.recorder
        consumer = ShareConsumer({"bootstrap.servers": self.bootstrap, "group.id": GROUP,
                                  "share.acknowledgement.mode": "explicit", "max.poll.records": 50,
                                  "socket.timeout.ms": 10000, **QUIET})
        consumer.subscribe([TOPIC])
        try:
            while not self.stop_consumers.is_set():
                invoke = rec.t()
                try:
                    messages: list[Any] = list(consumer.poll(0.5) or [])
                except KafkaException:
                    continue  # the cluster moving: poll again
                delivered: list[tuple[int, int, str, int]] = []
                acks: list[tuple[int, int, str, int]] = []
                for message in messages:
                    if message.error() is not None:
                        continue
                    partition, offset, count = message.partition(), message.offset(), message.delivery_count()
                    assert partition is not None and offset is not None and count is not None, message
                    value = (message.value() or b"").decode()
                    delivered.append((partition, offset, value, count))
                    kind = choose(value, count)
                    consumer.acknowledge(message, kind)
                    acks.append((partition, offset, ACK_TYPES[kind], count))
                if not delivered:
                    continue
                rec.record(name, "share-poll", invoke, rec.t(), OK, None, None, tuple(delivered))
                self._commit(consumer, name, acks)
        finally:
            try:
                consumer.close()
            except KafkaException:
                pass

    def _commit(self, consumer: ShareConsumer, name: str, acks: list[tuple[int, int, str, int]]) -> None:
        rec = self.recorder
        invoke = rec.t()
        try:
            answers = consumer.commit_sync(15)
        except KafkaException:
            answers = None
        done = rec.t()
        answered = {tp.partition: error for tp, error in (answers or {}).items() if tp.topic == TOPIC}
        for partition in {a[0] for a in acks}:
            mine = tuple(a for a in acks if a[0] == partition)
            ok = partition in answered and answered[partition] is None
            rec.record(name, "share-ack", invoke, done, OK if ok else UNKNOWN, GROUP, mine)
            if ok:
                self.ended.update(a[1] for a in mine if a[2] != "release")

    # the end --------------------------------------------------------------------------------------
    def stop_producing(self, timeout: float) -> None:
        self.stop_producer.set()
        self.threads[-1].join(timeout)  # the producer is the last thread started

    def quiesce(self, timeout: float) -> bool:
        """Let the consumers work until the share coordinator's start offset passes every record
        the producer wrote (or `timeout`); then stop them and record the start offset."""
        rec = self.recorder
        deadline = time.monotonic() + timeout
        end = self._end_offset(deadline)
        start = None
        while time.monotonic() < deadline:
            start = self.start_offset()
            if start is not None and end is not None and start >= end:
                break
            time.sleep(0.5)
        self.stop_consumers.set()
        for thread in self.threads[:-1]:
            thread.join(30)
        invoke = rec.t()
        for _ in range(20):  # bounded: the coordinator answered a moment ago
            start = self.start_offset()
            if start is not None:
                rec.record("final", "share-state", invoke, rec.t(), OK, GROUP, None, ((0, start),))
                break
            time.sleep(0.5)
        return start is not None and end is not None and start >= end

    def _end_offset(self, deadline: float) -> int | None:
        """The data partition's high watermark (ListOffsets latest)."""
        while time.monotonic() < deadline:
            answer = self._metadata()
            leader = None
            if answer is not None:
                leader_id = answer["topics"][0]["partitions"][0]["leader_id"]
                leader = next(((b["host"], b["port"]) for b in answer["brokers"] if b["node_id"] == leader_id), None)
            if leader is not None:
                offsets = self._ask(ApiKey.LIST_OFFSETS, 4, {"replica_id": -1, "isolation_level": 0, "topics": [{
                    "name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                   "timestamp": -1}]}]}, leader)
                if offsets is not None:
                    found = offsets["topics"][0]["partitions"][0]
                    if found["error_code"] == 0:
                        return int(found["offset"])
            time.sleep(0.5)
        return None
