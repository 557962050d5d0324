"""End-to-end latency at a steady rate: one producer sends 100 B messages one at a time (linger 0)
at `rate` per second, each stamped with its send time; one consumer in this process, assigned the
partition from offset 0, notes how long each took to come back. Shared by broker_bench,
cluster_bench and vs_kafka so that their figures mean the same thing.

Producer and consumer share this process: the switch interval is shortened so that handing the
GIL over (5 ms by default) does not show up in the tail as if it were the broker's.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

STAMP_BYTES = 20
PAYLOAD_PADDING = b"x" * 80


@dataclass(frozen=True)
class Hooks:
    """Called around the paced sends: `started` just before the first, `ended` once every message
    came back (or the wait gave up), before the clients close; for CPU and syscall counters. Each
    is given the producer (to poll it for fresh statistics)."""

    started: Callable[[Producer], None] = lambda producer: None
    ended: Callable[[Producer], None] = lambda producer: None


def paced_latencies(bootstrap: str, topic: str, rate: int, seconds: float, *, acks: str = "all",
                    producer_config: Mapping[str, Any] | None = None,
                    consumer_config: Mapping[str, Any] | None = None, hooks: Hooks = Hooks(),
                    wait_s: float = 30.0) -> list[float]:
    """The latencies in ms, sorted, of the messages that came back (at most rate * seconds)."""
    sys.setswitchinterval(0.0002)
    expected = int(rate * seconds)
    latencies: list[float] = []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{topic}", "fetch.wait.max.ms": 500,
                         "fetch.error.backoff.ms": 10, **(consumer_config or {})})
    consumer.assign([TopicPartition(topic, 0, 0)])
    stop = threading.Event()

    def consume() -> None:
        deadline = time.monotonic() + seconds + 2 * wait_s
        while not stop.is_set() and time.monotonic() < deadline:
            # poll() hands over each message as it arrives; consume(n, t) would wait to fill n.
            msg = consumer.poll(0.1)
            if msg is not None and not msg.error() and len(latencies) < expected:
                latencies.append(time.time_ns() / 1e6 - float(msg.value()[:STAMP_BYTES].decode()))

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": acks, **(producer_config or {})})
    producer.list_topics(topic, timeout=30)
    time.sleep(1.0)  # let the consumer's first fetch be waiting
    hooks.started(producer)
    start = time.perf_counter()
    for n in range(expected):
        delay = start + n / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        producer.produce(topic, f"{time.time_ns() / 1e6:<{STAMP_BYTES}.6f}".encode() + PAYLOAD_PADDING)
        producer.poll(0)
    producer.flush(wait_s)
    deadline = time.monotonic() + wait_s
    while len(latencies) < expected and time.monotonic() < deadline:
        time.sleep(0.01)
    hooks.ended(producer)
    stop.set()
    thread.join(wait_s)
    consumer.close()
    return sorted(latencies)
