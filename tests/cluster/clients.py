"""Producers and group consumers of the three Python client libraries, behind one small interface,
for the failover tests: keyed messages from tests.support.workload, acknowledgements recorded with
their time, and consumers that keep reading until every acknowledged message has come by.

Each client runs with its library's defaults for retries and timeouts; only idempotence (and with
it acks=all) is asked for, as the tests' subject is "no acknowledged message lost, none twice".
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer

from tests.support.workload import Message, Received


@dataclass
class Acks:
    """What the producer was told, by message number.

    No lock: the delivery callbacks (librdkafka's run inside poll/flush on the test's own thread)
    only store one dict item each, a single operation under the GIL, and readers take a copy
    (`dict.copy`, also one C call). A lock taken in a callback could be left held when
    pytest-timeout's SIGALRM handler raises inside that callback, and the next callback would then
    wait for it for ever: the hang this replaced (issue 23)."""

    ok: dict[int, tuple[float, int, int]] = field(default_factory=dict)  # n -> (time, partition, offset)
    failed: dict[int, str] = field(default_factory=dict)

    def success(self, n: int, partition: int, offset: int) -> None:
        self.ok[n] = (time.monotonic(), partition, offset)

    def failure(self, n: int, error: str) -> None:
        self.failed[n] = error

    def first_after(self, moment: float, partitions: set[int]) -> dict[int, float]:
        """Per partition, seconds from `moment` to the first acknowledgement after it."""
        firsts: dict[int, float] = {}
        for stamp, partition, _ in self.ok.copy().values():
            if partition in partitions and stamp > moment:
                firsts[partition] = min(firsts.get(partition, float("inf")), stamp - moment)
        return firsts


def n_of(value: bytes) -> int:
    return int(json.loads(value)["n"])


class ConfluentProducer:
    def __init__(self, bootstrap: str, acks: Acks) -> None:
        self.acks = acks
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})

    def send(self, topic: str, message: Message, n: int) -> None:
        def report(error: Any, msg: Any) -> None:
            if error is None:
                self.acks.success(n, msg.partition(), msg.offset())
            else:
                self.acks.failure(n, str(error))

        while True:
            try:
                self.producer.produce(topic, message.value, message.key, on_delivery=report)
                break
            except BufferError:
                self.producer.poll(0.05)
        self.producer.poll(0)

    def close(self) -> None:
        assert self.producer.flush(150) == 0, "messages left undelivered"


class KafkaPythonProducer:
    def __init__(self, bootstrap: str, acks: Acks) -> None:
        from kafka import KafkaProducer

        self.acks = acks
        self.producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), enable_idempotence=True, acks="all",
                                      linger_ms=5)

    def send(self, topic: str, message: Message, n: int) -> None:
        future = self.producer.send(topic, value=message.value, key=message.key)
        future.add_callback(lambda meta: self.acks.success(n, meta.partition, meta.offset))
        future.add_errback(lambda error: self.acks.failure(n, repr(error)))

    def close(self) -> None:
        self.producer.flush(150)
        self.producer.close(30)


class AiokafkaProducer:
    """aiokafka on its own event loop thread."""

    def __init__(self, bootstrap: str, acks: Acks) -> None:
        from aiokafka import AIOKafkaProducer

        self.acks = acks
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def create() -> Any:
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=5)
            await producer.start()
            return producer

        self.producer = self._run(create())
        self.pending: list[Any] = []

    def _run(self, coroutine: Any, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def send(self, topic: str, message: Message, n: int) -> None:
        async def send() -> None:
            future = await self.producer.send(topic, value=message.value, key=message.key)

            def done(f: asyncio.Future[Any]) -> None:
                if f.exception() is None:
                    meta = f.result()
                    self.acks.success(n, meta.partition, meta.offset)
                else:
                    self.acks.failure(n, repr(f.exception()))

            future.add_done_callback(done)
            self.pending.append(future)

        self._run(send())

    def close(self) -> None:
        async def finish() -> None:
            await asyncio.gather(*self.pending, return_exceptions=True)
            await self.producer.stop()

        try:
            self._run(finish(), timeout=180)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


PRODUCERS: dict[str, Callable[[str, Acks], Any]] = {
    "confluent": ConfluentProducer, "kafka-python": KafkaPythonProducer, "aiokafka": AiokafkaProducer}


class GroupMember(threading.Thread):
    """One consumer of a group (confluent-kafka, kafka-python or aiokafka), reading until told to
    stop; what it received is kept in order; offsets are committed as it goes."""

    def __init__(self, library: str, bootstrap: str, group: str, topic: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.library, self.bootstrap, self.group, self.topic, self.stop = library, bootstrap, group, topic, stop
        self.received: list[Received] = []
        self.errors: list[str] = []
        self.committed: list[dict[int, int]] = []  # what each successful commit stored

    def run(self) -> None:
        try:
            {"confluent": self._confluent, "kafka-python": self._kafka_python, "aiokafka": self._aiokafka}[
                self.library]()
        except Exception as error:
            self.errors.append(repr(error))

    def _keep(self, batch: list[Received]) -> None:
        self.received.extend(batch)

    def _confluent(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        consumer.subscribe([self.topic])
        try:
            while not self.stop.is_set():
                batch = []
                for msg in consumer.consume(500, 0.2):
                    if msg.error():
                        if msg.error().code() != KafkaError._PARTITION_EOF and not msg.error().retriable():
                            self.errors.append(str(msg.error()))
                        continue
                    batch.append(Received(msg.key(), msg.value(), msg.partition(), msg.offset()))
                self._keep(batch)
                if batch:
                    try:
                        stored = consumer.commit(asynchronous=False)
                        self.committed.append({tp.partition: tp.offset for tp in stored or []
                                               if tp.error is None and tp.offset >= 0})
                    except Exception:
                        pass  # a commit during a rebalance or a coordinator move: the next one covers it
        finally:
            consumer.close()

    def _kafka_python(self) -> None:
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(self.topic, group_id=self.group, bootstrap_servers=self.bootstrap.split(","),
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 heartbeat_interval_ms=500, session_timeout_ms=6000)
        try:
            while not self.stop.is_set():
                batch = [Received(r.key, r.value, r.partition, r.offset)
                         for records in consumer.poll(timeout_ms=200, max_records=500).values() for r in records]
                self._keep(batch)
                if batch:
                    try:
                        consumer.commit()
                    except Exception:
                        pass
        finally:
            consumer.close(autocommit=False)

    def _aiokafka(self) -> None:
        from aiokafka import AIOKafkaConsumer

        async def consume() -> None:
            consumer = AIOKafkaConsumer(self.topic, group_id=self.group, bootstrap_servers=self.bootstrap,
                                        auto_offset_reset="earliest", enable_auto_commit=False,
                                        heartbeat_interval_ms=500, session_timeout_ms=6000)
            await consumer.start()
            try:
                while not self.stop.is_set():
                    batches = await consumer.getmany(timeout_ms=200, max_records=500)
                    batch = [Received(r.key, r.value, r.partition, r.offset)
                             for records in batches.values() for r in records]
                    self._keep(batch)
                    if batch:
                        try:
                            await consumer.commit()
                        except Exception:
                            pass
            finally:
                await consumer.stop()

        asyncio.run(consume())
