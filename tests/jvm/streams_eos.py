"""A Kafka Streams application (tests/jvm/java/roost/jvm/WordCountApp.java: re-key by word through
a repartition topic, count in a state store with a changelog, exactly_once_v2) run against a Roost
cluster while brokers are killed with SIGKILL, and its output checked for exactly-once: read
read_committed, each word's counts must be 1, 2, ..., n in order, with n the number of input
records of that word. A count seen twice is a duplicate (a transaction's output exposed twice, or
state restored behind its output); a count missing is a loss.

Shared by tests/jvm/test_streams.py (one kill, in CI) and scripts/streams_eos.py (longer runs,
more kills).
"""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.jvm.programs import JavaProcess
from tests.support.cluster import LocalCluster
from tests.support.procs import wait_for

PARTITIONS = 3


@dataclass
class Outcome:
    expected: dict[str, int]  # word -> input records with that word
    counts: dict[str, list[int]] = field(default_factory=dict)  # word -> the counts read, in order
    killed: list[int] = field(default_factory=list)

    def problems(self) -> list[str]:
        """What breaks exactly-once: each word's counts must be exactly 1..n."""
        found = []
        for word, n in sorted(self.expected.items()):
            seen = self.counts.get(word, [])
            if seen != list(range(1, n + 1)):
                duplicates = len(seen) - len(set(seen))
                missing = sorted(set(range(1, n + 1)) - set(seen))
                found.append(f"{word}: {len(seen)} counts for {n} records, last {seen[-1:]}, "
                             f"{duplicates} repeated, missing {missing[:5]}")
        return found


class OutputReader:
    """The app's output, read read_committed from the start, kept as each word's counts in order."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"eos-reader-{uuid.uuid4().hex[:6]}",
                                  "isolation.level": "read_committed", "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest"})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        self.counts: dict[str, list[int]] = {}
        self.total = 0

    def poll(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for message in self.consumer.consume(500, 0.2):
                if message.error():
                    continue  # a broker coming and going: librdkafka reconnects
                (count,) = struct.unpack(">q", message.value())
                self.counts.setdefault(message.key().decode(), []).append(count)
                self.total += 1

    def close(self) -> None:
        self.consumer.close()


def ends(bootstrap: str, topics: list[str], isolation: str) -> dict[str, int]:
    """Each partition's end: the high watermark, or for read_committed the last stable offset."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-ends", "isolation.level": isolation})
    try:
        return {f"{topic}-{p}": consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for topic in topics for p in range(PARTITIONS)}
    finally:
        consumer.close()


def diagnosis(cluster: LocalCluster, app_id: str) -> str:
    """Where the output stands when it stalls: each partition's high watermark beside its last
    stable offset (an LSO behind is a transaction left open), and the partitions' leaders."""
    topics = [f"{app_id}-out", f"{app_id}-word-counts-changelog", f"{app_id}-by-word-repartition"]
    bootstrap = cluster.running_bootstrap()
    high, stable = ends(bootstrap, topics, "read_uncommitted"), ends(bootstrap, topics, "read_committed")
    lines = [f"{name}: high watermark {high[name]}, last stable offset {stable[name]}" for name in high]
    lines += [f"{topic} leaders/replicas/isr: {cluster.partitions(topic)}" for topic in topics]
    return "\n".join(lines)


def produce(bootstrap: str, topic: str, start: int, count: int, words: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "message.timeout.ms": 120_000})
    for i in range(start, start + count):
        producer.produce(topic, f"w{i % words}".encode(), key=f"u{i}".encode())
        producer.poll(0)
    assert producer.flush(150) == 0, "input records not delivered"


def run(cluster: LocalCluster, classes: Path, workdir: Path, *, records: int, words: int, kills: int,
        app_id: str, settle_timeout: float = 180.0,
        log: Callable[[str], None] = lambda _: None) -> Outcome:
    """Feed `records` words to a fresh WordCountApp in `kills` + 1 chunks, killing (kill -9) one
    broker after each chunk but the last and restarting it after the next chunk; then read the
    output until every count came (or `settle_timeout`) and return what was read."""
    source, sink = f"{app_id}-in", f"{app_id}-out"
    admin = cluster.admin()
    for future in admin.create_topics([NewTopic(source, PARTITIONS, 3), NewTopic(sink, PARTITIONS, 3)]).values():
        future.result(30)
    for topic in (source, sink):
        cluster.wait_for_isr(topic)
    expected: dict[str, int] = {}
    for i in range(records):
        expected[f"w{i % words}"] = expected.get(f"w{i % words}", 0) + 1
    outcome = Outcome(expected)
    app = JavaProcess(classes, "roost.jvm.WordCountApp",
                      [cluster.bootstrap, app_id, source, sink, str(workdir / "state")], workdir / f"{app_id}.log")
    reader = OutputReader(cluster.bootstrap, sink)
    try:
        wait_for(lambda: "STATE RUNNING" in app.text() or not app.running, 120, interval=0.3,
                 what="the Streams app running")
        assert app.running, f"the Streams app ended:\n{app.tail()}"
        chunk = records // (kills + 1)
        starts = [n * chunk for n in range(kills + 1)]
        down: int | None = None
        for n, start in enumerate(starts):
            count = records - start if n == kills else chunk
            produce(cluster.running_bootstrap(), source, start, count, words)
            log(f"chunk {n}: {count} records from {start}")
            if down is not None:
                cluster.restart(down)
                log(f"broker {down} restarted")
                down = None
            if n < kills:
                # Mid-stream: once some of this chunk's output is committed, kill a broker that
                # leads an output partition (so its transactions' markers and the app's
                # fetches both move).
                try:
                    wait_for(lambda s=start: (reader.poll(0.5), reader.total > s)[1], 90,
                             what="output of this chunk committed before the kill")
                except AssertionError:
                    log(f"output stalled at {reader.total}:\n{diagnosis(cluster, app_id)}\n{app.tail(30)}")
                    raise
                victim = cluster.partitions(sink)[n % PARTITIONS][0]
                cluster.kill(victim)
                outcome.killed.append(victim)
                down = victim
                log(f"killed broker {victim} with {reader.total} output records read")
        deadline = time.monotonic() + settle_timeout
        while reader.total < records and time.monotonic() < deadline and app.running:
            reader.poll(1.0)
        reader.poll(2.0)  # anything past the expected end would be a duplicate: look for it
        outcome.counts = reader.counts
        log(f"read {reader.total} output records for {records} input records")
        if reader.total < records:
            log(f"output stalled at {reader.total}:\n{diagnosis(cluster, app_id)}\nthe app's last lines:\n"
                f"{app.tail(40)}")
        return outcome
    finally:
        reader.close()
        app.stop()
