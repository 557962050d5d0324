"""A keyed acks=all stream from one client library at its defaults, with actions at set moments:
what the failover benchmarks (failover_bench.py, cut_failover_bench.py) send while they kill or
cut a broker. Records every acknowledgement's time and value per partition and counts failures.

The libraries: confluent-kafka (librdkafka; with enable.idempotence, as the failover issue
measured), kafka-python and aiokafka, each otherwise at its defaults (`extra` adds settings:
librdkafka names, or the library's keyword arguments).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

KEYS = 60


@dataclass
class Stream:
    """What one stream recorded: per partition the acknowledgement times and the values acknowledged."""

    partitions: int
    acked: dict[int, list[float]] = field(default_factory=dict)
    values: dict[int, set[bytes]] = field(default_factory=dict)
    failed: int = 0
    ended_at: float = 0.0  # when the stream's last send was acknowledged or failed
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.acked = {p: [] for p in range(self.partitions)}
        self.values = {p: set() for p in range(self.partitions)}

    def ack(self, partition: int, value: bytes) -> None:
        with self.lock:
            self.acked[partition].append(time.monotonic())
            self.values[partition].add(value)

    def fail(self) -> None:
        with self.lock:
            self.failed += 1

    def longest_silence(self, partitions: set[int], since: float) -> float:
        """The longest gap between acknowledgements on any of `partitions`, from `since` to the
        stream's end (a partition that never answered again is silent until then)."""
        longest = 0.0
        for p in partitions:
            around = [since, *sorted(t for t in self.acked[p] if t > since), self.ended_at]
            longest = max(longest, *(b - a for a, b in itertools.pairwise(around)))
        return longest


@dataclass
class Plan:
    """Records to send at `rate` per second for `seconds`, values unique from `first` on, and
    actions to run at offsets (seconds from the start), in order."""

    topic: str
    rate: int
    seconds: float
    first: int = 0
    actions: list[tuple[float, Callable[[], None]]] = field(default_factory=list)

    def records(self) -> list[tuple[float, bytes, bytes]]:
        total = int(self.rate * self.seconds)
        return [(n / self.rate, f"k{n % KEYS}".encode(), f"{self.first + n}".encode()) for n in range(total)]

    def due(self, elapsed: float, done: int) -> list[Callable[[], None]]:
        """The actions due by `elapsed` that have not run (the first `done` have)."""
        return [action for at, action in self.actions[done:] if at <= elapsed]


def paced(plan: Plan, wait: Callable[[float], object]) -> Iterator[tuple[bytes, bytes]]:
    """The plan's (key, value) pairs, each at its moment (`wait(seconds)` passes the time between:
    a client's own poll where it has one), the plan's actions run when due."""
    start = time.monotonic()
    done = 0
    for at, key, value in plan.records():
        for action in plan.due(at, done):
            action()
            done += 1
        delay = start + at - time.monotonic()
        if delay > 0:
            wait(delay)
        yield key, value


def stream_confluent(bootstrap: str, plan: Plan, stream: Stream, extra: dict[str, str]) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, **extra})

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            stream.fail()
        else:
            stream.ack(msg.partition(), msg.value())  # type: ignore[attr-defined]

    for key, value in paced(plan, producer.poll):
        producer.produce(plan.topic, value, key, on_delivery=delivered)
        producer.poll(0)
    producer.flush(120)
    stream.ended_at = time.monotonic()


def python_client_settings(extra: dict[str, str]) -> dict[str, object]:
    """Settings given as NAME=VALUE text, typed for kafka-python's and aiokafka's keyword arguments."""
    def typed(value: str) -> object:
        if value.lstrip("-").isdigit():
            return int(value)
        return {"true": True, "false": False}.get(value.lower(), value)
    return {name: typed(value) for name, value in extra.items()}


def stream_kafka_python(bootstrap: str, plan: Plan, stream: Stream, extra: dict[str, str]) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **python_client_settings(extra))
    for key, value in paced(plan, time.sleep):
        future = producer.send(plan.topic, value, key)
        future.add_callback(lambda meta, v=value: stream.ack(meta.partition, v))
        future.add_errback(lambda _error: stream.fail())
    producer.flush(120)
    stream.ended_at = time.monotonic()
    producer.close(5)


def stream_aiokafka(bootstrap: str, plan: Plan, stream: Stream, extra: dict[str, str]) -> None:
    async def run() -> None:
        from aiokafka import AIOKafkaProducer
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", **python_client_settings(extra))
        await producer.start()
        pending: list[asyncio.Future[object]] = []

        def done_sending(future: asyncio.Future[object], value: bytes) -> None:
            if future.exception() is not None:
                stream.fail()
            else:
                stream.ack(future.result().partition, value)  # type: ignore[attr-defined]

        try:
            start = time.monotonic()
            done = 0
            for at, key, value in plan.records():
                for action in plan.due(at, done):
                    await asyncio.to_thread(action)
                    done += 1
                delay = start + at - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                future = await producer.send(plan.topic, value, key)
                future.add_done_callback(lambda f, v=value: done_sending(f, v))
                pending.append(future)
            await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), 120)
            stream.ended_at = time.monotonic()
        finally:
            await producer.stop()
    asyncio.run(run())


STREAMS: dict[str, Callable[[str, Plan, Stream, dict[str, str]], None]] = {
    "confluent-kafka": stream_confluent, "kafka-python": stream_kafka_python, "aiokafka": stream_aiokafka}
