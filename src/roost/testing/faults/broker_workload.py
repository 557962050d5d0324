"""The broker workload (Jepsen's Kafka shape): idempotent acks=all producers appending values
unique in the whole run to keyed partitions; a consumer with assign() reading everything; group
consumers committing what they read; a final drain of every partition. Every operation recorded.

Outcomes: a delivery report without error is ok with (partition, offset); any error (a message
timeout, a retriable error given up on) is unknown — the record may have been written.

The producers run with `enable.gapless.guarantee=true`. Without it, librdkafka (2.16) bumps its
idempotent epoch when a message's fate is unknown and re-sends the messages it thinks unwritten
under the new epoch from sequence 0 (librdkafka issue #4953): if the broker had written them,
they are in the log twice, and every broker (Kafka's too) must accept them, since a new epoch
starts a new sequence. That is the client's at-least-once, which this workload must not blame on
the brokers. With the guarantee, librdkafka raises a fatal error instead; the workload records the
failed messages as unknown and carries on with a new producer (a new producer id), never sending
a message twice, so any duplicate in the log is the brokers' doing.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from roost.testing.faults.recorder import Recorder
from roost.testing.history.model import OK, UNKNOWN

TOPIC = "fault-run"
PARTITIONS = 3
KEYS = 12
ISOLATION = {"isolation": "read_committed"}  # librdkafka's default


@dataclass
class BrokerWorkload:
    bootstrap: str
    recorder: Recorder
    producers: int = 2
    group_consumers: int = 2
    rate_per_producer: float = 50.0
    stop: threading.Event = field(default_factory=threading.Event)
    stop_consumers: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # Per producer: value -> (invocation, key), and the values whose delivery was reported.
    _invoked: dict[str, dict[str, tuple[float, str]]] = field(default_factory=dict)
    _reported: dict[str, set[str]] = field(default_factory=dict)
    replaced_producers: int = 0  # producers given up after a fatal error (see the module docstring)

    def setup(self, timeout: float = 60.0) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        deadline = time.monotonic() + timeout
        while True:
            futures = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)], operation_timeout=20)
            try:
                futures[TOPIC].result(30)
                break
            except KafkaException as error:
                if error.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    break
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        while time.monotonic() < deadline:  # every partition led
            found = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
            if found and found.error is None and len(found.partitions) == PARTITIONS and all(
                    p.leader >= 0 and len(p.isrs) == 3 for p in found.partitions.values()):
                return
            time.sleep(0.5)
        raise RuntimeError(f"{TOPIC} never got a leader and a full ISR for every partition")

    def start(self) -> None:
        self.setup()
        targets = [(self._produce, f"p{i}") for i in range(self.producers)]
        targets.append((self._assigned, "assign"))
        targets += [(self._group, f"g{i}") for i in range(self.group_consumers)]
        for target, name in targets:
            thread = threading.Thread(target=self._guard, args=(target, name), name=f"broker-{name}", daemon=True)
            thread.start()
            self.threads.append(thread)

    def _guard(self, target: Any, name: str) -> None:
        try:
            target(name)
        except Exception as error:
            self.errors.append(f"{name}: {error!r}")

    def stop_producing(self, timeout: float) -> None:
        """Stop the producers; what a producer still flushing has not heard of is unknown."""
        self.stop.set()
        for thread in self.threads[: self.producers]:
            thread.join(timeout)
        for name in list(self._invoked):
            self._settle(name)

    def stop_consuming(self, timeout: float) -> None:
        self.stop_consumers.set()
        for thread in self.threads[self.producers:]:
            thread.join(timeout)

    # producers -------------------------------------------------------------------------------
    def _produce(self, name: str) -> None:
        rec = self.recorder
        fatal = threading.Event()

        def on_error(error: KafkaError) -> None:
            if error.fatal():
                fatal.set()

        def new_producer() -> Producer:
            fatal.clear()
            return Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                             "enable.gapless.guarantee": True, "error_cb": on_error,
                             "linger.ms": 5, "message.timeout.ms": 15000, "request.timeout.ms": 5000})

        producer = new_producer()
        invoked: dict[str, tuple[float, str]] = self._invoked.setdefault(name, {})
        reported: set[str] = self._reported.setdefault(name, set())

        def report(error: Any, message: Any) -> None:  # runs inside poll/flush: a list append only
            value = message.value().decode()
            invoke, key = invoked[value]
            reported.add(value)
            if error is None:
                rec.record(name, "send", invoke, rec.t(), OK, key, value, (message.partition(), message.offset()))
            else:
                rec.record(name, "send", invoke, rec.t(), UNKNOWN, key, value)

        n = 0
        interval = 1.0 / self.rate_per_producer
        while not self.stop.is_set():
            n += 1
            value, key = f"{name}-{n}", f"k{n % KEYS}"
            invoked[value] = (rec.t(), key)
            for _attempt in range(1000):  # bounded: a full queue drains in at most a message timeout
                if fatal.is_set():
                    # Its messages in flight are reported failed (unknown); what it never
                    # reports is settled as unknown at the end. This value was not handed over.
                    producer.flush(5)
                    producer = new_producer()
                    self.replaced_producers += 1
                try:
                    producer.produce(TOPIC, value.encode(), key.encode(), on_delivery=report)
                    break
                except BufferError:
                    producer.poll(0.1)
                except KafkaException as error:
                    if not error.args[0].fatal():
                        raise
                    fatal.set()
            producer.poll(0)
            self.stop.wait(interval)
        producer.flush(30)
        self._settle(name)

    def _settle(self, name: str) -> None:
        """Sends never reported are unknown (once: a settled value counts as reported)."""
        rec = self.recorder
        reported = self._reported[name]
        for value, (invoke, key) in list(self._invoked[name].items()):
            if value not in reported:
                reported.add(value)
                rec.record(name, "send", invoke, rec.t(), UNKNOWN, key, value)

    # consumers -------------------------------------------------------------------------------
    def _consumer(self, group: str, extra: dict[str, Any] | None = None) -> Consumer:
        return Consumer({"bootstrap.servers": self.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 10000,
                         "heartbeat.interval.ms": 1000, "enable.partition.eof": False, **(extra or {})})

    def _poll(self, consumer: Consumer, name: str) -> list[tuple[int, int, str]]:
        rec = self.recorder
        invoke = rec.t()
        records = []
        for message in consumer.consume(200, 0.5):
            if message.error():
                continue
            records.append((message.partition(), message.offset(), message.value().decode()))
        if records:
            rec.record(name, "poll", invoke, rec.t(), OK, None, ISOLATION, tuple(records))
        return records

    def _assigned(self, name: str) -> None:
        rec = self.recorder
        consumer = self._consumer(f"fault-run-{name}")
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        rec.record(name, "assign", rec.t(), rec.t(), OK, None, tuple(range(PARTITIONS)))
        try:
            while not self.stop_consumers.is_set():
                self._poll(consumer, name)
        finally:
            consumer.close()

    def _group(self, name: str) -> None:
        rec = self.recorder
        group = "fault-run-group"
        consumer = self._consumer(group)

        def assigned(_: Any, partitions: list[TopicPartition]) -> None:
            rec.record(name, "rebalance", rec.t(), rec.t(), OK, None, tuple(p.partition for p in partitions))

        consumer.subscribe([TOPIC], on_assign=assigned, on_revoke=assigned)
        try:
            while not self.stop_consumers.is_set():
                if not self._poll(consumer, name):
                    continue
                invoke = rec.t()
                try:
                    stored = consumer.commit(asynchronous=False) or []
                    offsets = tuple((tp.partition, tp.offset) for tp in stored if tp.error is None and tp.offset >= 0)
                    rec.record(name, "commit", invoke, rec.t(), OK, group, offsets)
                except KafkaException:
                    rec.record(name, "commit", invoke, rec.t(), UNKNOWN, group, ())
        finally:
            consumer.close()

    def drain(self, timeout: float = 90.0) -> bool:
        """Read every partition from the start to its end (as the brokers say it is now)."""
        rec = self.recorder
        consumer = self._consumer("fault-run-final")
        deadline = time.monotonic() + timeout
        try:
            ends = {}
            for p in range(PARTITIONS):
                while True:
                    try:
                        ends[p] = consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
                        break
                    except KafkaException:
                        if time.monotonic() > deadline:
                            return False
                        time.sleep(0.5)
            consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
            rec.record("final", "assign", rec.t(), rec.t(), OK, None, tuple(range(PARTITIONS)))
            read_to = {p: -1 for p in range(PARTITIONS)}
            while any(read_to[p] < ends[p] - 1 for p in ends) and time.monotonic() < deadline:
                for partition, offset, _ in self._poll(consumer, "final"):
                    read_to[partition] = max(read_to[partition], offset)
            return all(read_to[p] >= ends[p] - 1 for p in ends)
        finally:
            consumer.close()
