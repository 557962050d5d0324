"""Kafka helpers shared by the node and the cluster fixtures: create and delete topics, produce,
consume. They use confluent-kafka, imported only when a helper is first called, so that the
plugin loads (and the fixtures give addresses) without it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from roost.client_settings import FAILOVER_SETTINGS

Value = bytes | str | None
KeyValue = tuple[Value, Value]

ADMIN_TIMEOUT_S = 30.0


class MissingClientError(RuntimeError):
    """confluent-kafka, which the helpers use, is not installed."""


def confluent() -> ModuleType:
    """The confluent_kafka module, or a clear error saying how to get it."""
    try:
        import confluent_kafka
        import confluent_kafka.admin  # a submodule: imported for confluent_kafka.admin to exist
    except ImportError as error:
        raise MissingClientError("roost.testing's helpers (create_topic, produce, consume) use confluent-kafka: "
                                 "pip install confluent-kafka") from error
    return confluent_kafka


@dataclass(frozen=True)
class Record:
    """A record as produced (with the offset it was given) or as consumed."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp: int | None = None


def _encoded(item: Value) -> bytes | None:
    return item.encode() if isinstance(item, str) else item


def _as_pair(item: Value | KeyValue) -> tuple[bytes | None, bytes | None]:
    """A plain value has no key; a (key, value) pair has one."""
    if isinstance(item, tuple):
        key, value = item
        return _encoded(key), _encoded(value)
    return None, _encoded(item)


class KafkaHelpers:
    """Helpers over `bootstrap` (a comma-separated list of HOST:PORT), the subclass's address."""

    bootstrap: str

    # clients ------------------------------------------------------------------------------------
    def client_config(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A confluent-kafka config reaching this cluster, with Roost's failover settings, plus `extra`
        (Kafka's dotted names)."""
        return {"bootstrap.servers": self.bootstrap, **FAILOVER_SETTINGS, **(extra or {})}

    def admin(self) -> Any:
        """A confluent-kafka AdminClient, made once and kept (its requests' futures fail when
        their client is destroyed)."""
        client = self.__dict__.get("_admin")
        if client is None:
            client = self.__dict__["_admin"] = confluent().admin.AdminClient(self.client_config())
        return client

    def close_clients(self) -> None:
        """Drop the kept AdminClient (librdkafka destroys it), so that it stops reconnecting to
        servers that are gone."""
        self.__dict__.pop("_admin", None)

    def producer(self, config: Mapping[str, Any] | None = None) -> Any:
        """A confluent-kafka Producer (acks=all unless `config` says otherwise)."""
        return confluent().Producer(self.client_config({"acks": "all", **(config or {})}))

    def consumer(self, config: Mapping[str, Any] | None = None) -> Any:
        """A confluent-kafka Consumer in a fresh group, reading from the earliest offset."""
        return confluent().Consumer(self.client_config({
            "group.id": f"roost-testing-{uuid.uuid4().hex[:12]}", "auto.offset.reset": "earliest",
            "enable.auto.commit": False, **(config or {})}))

    def share_consumer(self, group: str | None = None, config: Mapping[str, Any] | None = None,
                       auto_offset_reset: str = "earliest") -> Any:
        """A confluent-kafka ShareConsumer (KIP-932) in share group `group` (a fresh one by
        default), whose `share.auto.offset.reset` group config is set first (earliest by default:
        a test's records produced before the consumer joined are delivered)."""
        group_id = group or f"roost-testing-share-{uuid.uuid4().hex[:12]}"
        admin = confluent().admin
        resource = admin.ConfigResource(admin.ResourceType.GROUP, group_id, incremental_configs=[
            admin.ConfigEntry("share.auto.offset.reset", auto_offset_reset,
                              incremental_operation=admin.AlterConfigOpType.SET)])
        for future in self.admin().incremental_alter_configs([resource]).values():
            future.result(ADMIN_TIMEOUT_S)
        return confluent().ShareConsumer(self.client_config({"group.id": group_id, **(config or {})}))

    # topics -------------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, config: Mapping[str, str | int] | None = None,
                     replication_factor: int | None = None, timeout: float = ADMIN_TIMEOUT_S) -> str:
        """Create topic `name` and wait until every partition has a leader; returns `name`.
        `replication_factor` None takes the cluster's default.replication.factor."""
        kafka = confluent()
        new_topic = kafka.admin.NewTopic(
            name, num_partitions=partitions, replication_factor=-1 if replication_factor is None else replication_factor,
            config={key: str(value) for key, value in (config or {}).items()})
        futures = self.admin().create_topics([new_topic], operation_timeout=timeout, request_timeout=timeout)
        futures[name].result(timeout)
        self.wait_for_leaders(name, partitions, timeout)
        return name

    def delete_topic(self, name: str, timeout: float = ADMIN_TIMEOUT_S) -> None:
        futures = self.admin().delete_topics([name], operation_timeout=timeout, request_timeout=timeout)
        futures[name].result(timeout)

    def partitions(self, topic: str, timeout: float = 10.0) -> dict[int, tuple[int, list[int], list[int]]]:
        """partition -> (leader, replicas, in-sync replicas), as Metadata tells it; {} when the
        topic is unknown. Lists every topic, so that asking never auto-creates one."""
        found = self.admin().list_topics(timeout=timeout).topics.get(topic)
        if found is None or found.error is not None:
            return {}
        return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in found.partitions.values()}

    def wait_for_leaders(self, topic: str, partitions: int | None = None, timeout: float = ADMIN_TIMEOUT_S,
                         in_sync: bool = False) -> dict[int, tuple[int, list[int], list[int]]]:
        """Wait until `topic` has (`partitions`, when given) partitions each with a leader, and with
        `in_sync` every replica in sync; returns what Metadata then says."""
        kafka = confluent()
        deadline = time.monotonic() + timeout
        seen: dict[int, tuple[int, list[int], list[int]]] = {}
        while True:
            try:
                seen = self.partitions(topic)
            except kafka.KafkaException:
                seen = {}  # a broker coming or going; ask again
            if seen and (partitions is None or len(seen) == partitions) and all(
                    leader >= 0 and (not in_sync or set(isr) == set(replicas))
                    for leader, replicas, isr in seen.values()):
                return seen
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {topic!r} not ready (leaders{', in sync' if in_sync else ''}) "
                                   f"after {timeout:.0f} s; Metadata says {seen}")
            time.sleep(0.05)

    # records ------------------------------------------------------------------------------------
    def produce(self, topic: str, values_or_pairs: Iterable[Value | KeyValue], *, partition: int | None = None,
                headers: Mapping[str, bytes | str] | None = None, config: Mapping[str, Any] | None = None,
                timeout: float = 30.0) -> list[Record]:
        """Produce each item (a value, or a (key, value) pair; str is UTF-8 encoded) with acks=all,
        wait for every acknowledgement, and return the records with the offsets they were given,
        in the order given. Raises if any is refused or unacknowledged after `timeout` seconds."""
        kafka = confluent()
        producer = self.producer(config)
        delivered: dict[int, Record] = {}
        failures: list[str] = []

        def report(index: int) -> Any:
            def on_delivery(error: Any, message: Any) -> None:
                if error is not None:
                    failures.append(f"record {index}: {error}")
                    return
                delivered[index] = Record(message.topic(), message.partition(), message.offset(), message.key(),
                                          message.value(), list(message.headers() or []),
                                          message.timestamp()[1])
            return on_delivery

        extra: dict[str, Any] = {} if partition is None else {"partition": partition}
        if headers:
            extra["headers"] = [(name, _encoded(value)) for name, value in headers.items()]
        count = 0
        for count, item in enumerate(values_or_pairs, start=1):
            key, value = _as_pair(item)
            while True:
                try:
                    producer.produce(topic, value, key, on_delivery=report(count - 1), **extra)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.1)
        left = producer.flush(timeout)
        if failures:
            raise kafka.KafkaException(f"produce to {topic!r}: {len(failures)} of {count} refused; "
                                       f"first: {failures[0]}")
        if left:
            raise TimeoutError(f"produce to {topic!r}: {left} of {count} records unacknowledged after {timeout} s")
        return [delivered[index] for index in range(count)]

    def consume(self, topic: str, n: int, timeout: float = 10.0, *,
                config: Mapping[str, Any] | None = None) -> list[Record]:
        """Read the first `n` records of `topic` from the beginning of every partition (assigned,
        not subscribed: no group rebalance to wait for, and nothing skipped by a late join).
        Returns them in (partition, offset) order; raises TimeoutError, saying how many came,
        if fewer than `n` arrive within `timeout` seconds."""
        kafka = confluent()
        partitions = self.wait_for_leaders(topic, timeout=timeout)
        consumer = self.consumer(config)
        records: list[Record] = []
        try:
            consumer.assign([kafka.TopicPartition(topic, p, kafka.OFFSET_BEGINNING) for p in sorted(partitions)])
            deadline = time.monotonic() + timeout
            while len(records) < n:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"consume from {topic!r}: {len(records)} of {n} records after {timeout} s")
                message = consumer.poll(min(remaining, 0.5))
                if message is None:
                    continue
                error = message.error()
                if error is not None:
                    if error.code() == kafka.KafkaError._PARTITION_EOF:
                        continue
                    raise kafka.KafkaException(error)
                records.append(Record(message.topic(), message.partition(), message.offset(), message.key(),
                                      message.value(), list(message.headers() or []), message.timestamp()[1]))
        finally:
            consumer.close()
        return sorted(records, key=lambda record: (record.partition, record.offset))
