"""The pause of unaffected partitions while a member joins: KIP-848's consumer protocol against the
classic protocol, in one run against one `roost up --no-keeper` broker.

For each protocol: a topic of 6 partitions gets a steady stream (RATE records/s, round-robin);
two confluent-kafka members of a fresh group share it; then a third joins. For the two members
already there, the partitions they keep throughout (the "unaffected" ones) are watched: the
longest gap between two deliveries of their records from the join until every member consumes
again plus 2 s, against the longest gap before the join (the stream's own rhythm). Also the time
from the third member's subscribe to its first record. Classic members use librdkafka's default
assignors (range,roundrobin: eager, every partition is revoked at a rebalance) and the
cooperative-sticky assignor; consumer-protocol members use the broker's `uniform` assignor.
The second member starts 250 ms after the first. Each run is repeated with the application doing
some work in its revocation callback (a flush, a commit: --revoke-ms), which an eager rebalance
makes every member do for every partition before anyone gets its new assignment.
Broker heartbeat interval for consumer-protocol members: 500 ms (classic: heartbeat.interval.ms
500, session 6 s) so both protocols react at the same pace. Prints figures with their conditions
and the broker's CPU seconds; never asserts.

    .venv/bin/python bench/consumer_protocol_bench.py
    .venv/bin/python bench/consumer_protocol_bench.py --rounds 3 --rate 3000
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import statistics
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from broker_bench import running_broker as lone_broker
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from process_cpu import cpu_seconds

PARTITIONS = 6
SETTLE_LIMIT_S = 60
PROTOCOLS: dict[str, dict[str, Any]] = {
    "consumer (KIP-848)": {"group.protocol": "consumer"},
    "classic, eager": {"group.protocol": "classic", "session.timeout.ms": 6000, "heartbeat.interval.ms": 500},
    "classic, cooperative-sticky": {"group.protocol": "classic", "session.timeout.ms": 6000,
                                    "heartbeat.interval.ms": 500, "partition.assignment.strategy": "cooperative-sticky"},
}


@contextmanager
def running_broker() -> Iterator[tuple[int, str]]:
    with lone_broker("--group.initial.rebalance.delay.ms", "500", "--group.min.session.timeout.ms", "1000",
                     "--group.consumer.heartbeat.interval.ms", "500") as broker:
        yield broker.popen.pid, broker.bootstrap


class Stream(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic, self.rate = topic, rate
        self.stop = threading.Event()

    def run(self) -> None:
        started, sent = time.monotonic(), 0
        while not self.stop.is_set() and time.monotonic() - started < 300:
            due = int((time.monotonic() - started) * self.rate)
            while sent < due:
                self.producer.produce(self.topic, b"x" * 100, partition=sent % PARTITIONS)
                sent += 1
            self.producer.poll(0)
            time.sleep(0.005)
        self.producer.flush(30)


class Member(threading.Thread):
    def __init__(self, bootstrap: str, group: str, topic: str, extra: dict[str, Any], revoke_s: float) -> None:
        super().__init__(daemon=True)
        self.revoke_s = revoke_s  # the application's work when partitions are taken away (flush, commit)
        self.config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "latest",
                       "enable.auto.commit": True, **extra}
        self.topic = topic
        self.stop = threading.Event()
        self.deliveries: dict[int, list[float]] = {}
        self.subscribed_at = 0.0
        self.first_record_at: float | None = None
        self.owned: set[int] = set()
        self.events: list[tuple[str, float, set[int]]] = []  # assignments and revocations

    def run(self) -> None:
        consumer = Consumer(self.config)

        def on_assign(c: Consumer, partitions: list[TopicPartition]) -> None:
            self.owned |= {p.partition for p in partitions}
            self.events.append(("assign", time.monotonic(), {p.partition for p in partitions}))

        def on_revoke(c: Consumer, partitions: list[TopicPartition]) -> None:
            self.owned -= {p.partition for p in partitions}
            self.events.append(("revoke", time.monotonic(), {p.partition for p in partitions}))
            if partitions:
                time.sleep(self.revoke_s)

        self.subscribed_at = time.monotonic()
        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        deadline = time.monotonic() + 300
        try:
            while not self.stop.is_set() and time.monotonic() < deadline:
                for msg in consumer.consume(500, 0.05):
                    if msg.error():
                        if msg.error().code() != KafkaError._PARTITION_EOF:
                            print("  consumer error:", msg.error())
                        continue
                    now = time.monotonic()
                    self.first_record_at = self.first_record_at or now
                    self.deliveries.setdefault(msg.partition(), []).append(now)
        finally:
            consumer.close()


def longest_gap(times: list[float], start: float, end: float) -> float:
    inside = [t for t in times if start <= t <= end]
    points = [start, *inside, end]
    return max(b - a for a, b in itertools.pairwise(points))


def wait_until(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + SETTLE_LIMIT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def one_join(bootstrap: str, label: str, extra: dict[str, Any], rate: int, revoke_s: float) -> dict[str, float]:
    topic, group = f"join-{uuid.uuid4().hex[:6]}", f"join-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    stream = Stream(bootstrap, topic, rate)
    first, second, third = (Member(bootstrap, group, topic, extra, revoke_s) for _ in range(3))
    stream.start()
    first.start()
    # Out of step by half a heartbeat interval, as members that did not start together are: in
    # step, both classic members learn of the rebalance at once and the eager pause hides.
    time.sleep(0.25)
    second.start()
    try:
        wait_until(lambda: sorted(len(m.owned) for m in (first, second)) == [3, 3]
                   and all(p in m.deliveries for m in (first, second) for p in m.owned), f"{label}: two members")
        time.sleep(3)
        before = {id(m): set(m.owned) for m in (first, second)}
        joined_at = time.monotonic()
        third.start()
        wait_until(lambda: third.first_record_at is not None and sorted(
            len(m.owned) for m in (first, second, third)) == [2, 2, 2], f"{label}: three members")
        settled_at = time.monotonic()
        time.sleep(2)
        end = time.monotonic()
        steady, during = [], []
        revoked = sum(len(p) for m in (first, second) for kind, t, p in m.events if kind == "revoke" and t >= joined_at)
        for member in (first, second):
            kept = before[id(member)] & member.owned
            for partition in kept:
                times = member.deliveries.get(partition, [])
                steady.append(longest_gap(times, joined_at - 3, joined_at))
                during.append(longest_gap(times, joined_at, end))
        return {"steady_gap_s": max(steady), "join_gap_s": max(during), "join_s": settled_at - joined_at,
                "third_first_record_s": (third.first_record_at or end) - third.subscribed_at,
                "unaffected": len(steady), "revoked": revoked}
    finally:
        for thread in (stream, first, second, third):
            thread.stop.set()
        for thread in (stream, first, second, third):
            if thread.ident is not None:
                thread.join(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="joins measured per protocol")
    parser.add_argument("--rate", type=int, default=2000, help="records per second of the stream")
    parser.add_argument("--revoke-ms", type=int, nargs="+", default=[0, 200],
                        help="the application's work in its revocation callback (each value a run)")
    args = parser.parse_args()
    with running_broker() as (pid, bootstrap):
        print(f"roost up --no-keeper on {platform.machine()} ({os.cpu_count()} cores, shared: noisy), "
              f"Python {platform.python_version()}, confluent-kafka/librdkafka "
              f"{__import__('confluent_kafka').libversion()[0]}")
        print(f"{PARTITIONS} partitions, {args.rate} records/s of 100 bytes, 2 members then a 3rd joins; "
              f"{args.rounds} joins per protocol; medians (max)")
        cpu_before = cpu_seconds(pid)
        for revoke_ms in args.revoke_ms:
            print(f"-- revocation callback work: {revoke_ms} ms")
            for label, extra in PROTOCOLS.items():
                results = [one_join(bootstrap, label, extra, args.rate, revoke_ms / 1000) for _ in range(args.rounds)]

                def show(key: str, results: list[dict[str, float]] = results) -> str:
                    values = [r[key] for r in results]
                    return f"{statistics.median(values):5.2f} s ({max(values):.2f})"

                kept = min(r["unaffected"] for r in results)
                revoked = max(r["revoked"] for r in results)
                print(f"{label:28} partitions revoked from the 2 members: {revoked}; longest gap of the {kept} "
                      f"they keep: steady {show('steady_gap_s')}, during the join {show('join_gap_s')}; "
                      f"join until all consume {show('join_s')}")
        print(f"broker CPU over the run: {cpu_seconds(pid) - cpu_before:.1f} s")


if __name__ == "__main__":
    main()
