"""confluent-kafka (librdkafka) and kcat against a real `roost up`: every codec, a group of three,
exactly-once delivery across the group, order per key, and resumption from committed offsets."""

from __future__ import annotations

import subprocess

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.scenario import CODECS, PARTITIONS, PER_CODEC, exactly_once_with_resume
from tests.support.groups import ClientOps
from tests.support.kafka_wire import stored_batch_codecs
from tests.support.procs import RoostProcess
from tests.support.workload import Received, messages


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    futures[name].result(timeout=30)


def produce(bootstrap: str, topic: str, codec: str, count: int, start: int, **extra: object) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                         **extra})
    failures: list[str] = []
    delivered = 0

    def on_delivery(error: KafkaError | None, _msg: object) -> None:
        nonlocal delivered
        if error is not None:
            failures.append(str(error))
        else:
            delivered += 1

    for message in messages(count, codec, start=start):
        while True:
            try:
                producer.produce(topic, message.value, message.key, headers=message.headers,
                                 on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
    remaining = producer.flush(60)
    assert remaining == 0, f"{remaining} messages not delivered"
    assert not failures, failures[:5]
    assert delivered == count


def commit_consumed(consumer: Consumer) -> None:
    """Commit the positions of what this consumer received (none since its last assignment: no-op)."""
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as error:
        if error.args[0].code() != KafkaError._NO_OFFSET:
            raise


def commit_consumed_unless_closing(consumer: Consumer) -> None:
    """The revocation callback's commit. During close() librdkafka may already have torn down the
    coordinator's connection (_DESTROY); that commit only repeats the one the harness made after
    the member's last poll, and the resume half of the test fails if a position was not stored."""
    try:
        commit_consumed(consumer)
    except KafkaException as error:
        if error.args[0].code() != KafkaError._DESTROY:
            raise


def confluent_ops(bootstrap: str, group: str, topic: str) -> ClientOps:
    def make() -> Consumer:
        consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
        })
        # An exception here is raised again from consume(), where the harness records it.
        consumer.subscribe([topic], on_revoke=lambda c, _partitions: commit_consumed_unless_closing(c))
        return consumer

    def poll(consumer: Consumer) -> list[Received]:
        out = []
        for msg in consumer.consume(500, 0.2):
            if msg.error():
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(str(msg.error()))
                continue
            out.append(Received(msg.key(), msg.value(), msg.partition(), msg.offset(),
                                tuple(msg.headers() or ())))
        return out

    return ClientOps(make, poll, commit_consumed, lambda c: c.close())


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = probe.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        probe.close()
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0}


@pytest.mark.slow
def test_every_codec_exactly_once_across_a_group_and_resume_from_commits(shared_broker: RoostProcess) -> None:
    bootstrap = shared_broker.address("kafka")
    topic, group = "cf-events", "cf-group"
    create_topic(bootstrap, topic, PARTITIONS)
    exactly_once_with_resume(
        lambda codec, count, start: produce(bootstrap, topic, codec, count, start),
        confluent_ops(bootstrap, group, topic),
        lambda: committed_offsets(bootstrap, group, topic, PARTITIONS),
        lambda: stored_batch_codecs(bootstrap, topic, PARTITIONS),
    )
    # kcat (Debian's, librdkafka 2.0) writes to and reads from the same topic.
    kcat_round_trip(bootstrap, topic, already=len(CODECS) * PER_CODEC)


def kcat_round_trip(bootstrap: str, topic: str, already: int) -> None:
    """kcat produces 1000 keyed messages to `topic` (holding `already` others) and reads it all back."""
    lines = "".join(f"kcat{n % 7}:kcat-value-{n}\n" for n in range(1000))
    produced = subprocess.run(["kcat", "-b", bootstrap, "-P", "-t", topic, "-K:", "-z", "snappy"],
                              input=lines, text=True, capture_output=True, timeout=60)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(["kcat", "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
                               "-f", "%k|%s|%p|%o\\n"], text=True, capture_output=True, timeout=120)
    assert consumed.returncode == 0, consumed.stderr
    rows = [line.split("|") for line in consumed.stdout.splitlines() if line]
    assert len(rows) == already + 1000
    ours = [(key, int(value.removeprefix("kcat-value-")), partition) for key, value, partition, _ in rows
            if value.startswith("kcat-value-")]
    assert sorted(n for _, n, _ in ours) == list(range(1000))
    by_key: dict[str, list[int]] = {}
    partitions: dict[str, set[str]] = {}
    for key, n, partition in ours:
        by_key.setdefault(key, []).append(n)
        partitions.setdefault(key, set()).add(partition)
    for key, values in by_key.items():
        assert len(partitions[key]) == 1
        assert values == sorted(values), f"{key} out of order"


@pytest.mark.slow
def test_kcat_reads_what_confluent_wrote_in_a_group(shared_broker: RoostProcess) -> None:
    bootstrap = shared_broker.address("kafka")
    topic = "kcat-group-events"
    create_topic(bootstrap, topic, 3)
    produce(bootstrap, topic, "lz4", 3000, 0)
    consumed = subprocess.run(["kcat", "-b", bootstrap, "-G", "kcat-group", topic, "-o", "beginning",
                               "-c", "3000", "-f", "%s\\n", "-X", "auto.offset.reset=earliest"],
                              text=True, capture_output=True, timeout=90)
    assert consumed.returncode == 0, consumed.stderr
    assert len(consumed.stdout.splitlines()) == 3000
