"""Compacted topics: __consumer_offsets and a user topic are cleaned; the latest value per key
(and so every committed offset) survives cleaning and a restart."""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.conftest import StartBroker
from tests.support.procs import wait_for

CLEANER = ["--log.cleaner.backoff.ms", "200", "--offsets.topic.num.partitions", "1",
           "--offsets.topic.segment.bytes", "4096"]


def test_committed_offsets_survive_cleaning_and_restart(start_broker: StartBroker) -> None:
    broker = start_broker(*CLEANER)
    bootstrap = broker.address("kafka")
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(10):
        producer.produce("compacted-offsets-src", f"{n}".encode(), partition=0)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "many-commits", "enable.auto.commit": False})
    for n in range(1, 400):  # the same key committed over and over: only the last one matters
        consumer.commit(offsets=[TopicPartition("compacted-offsets-src", 0, n)], asynchronous=False)
    consumer.close()
    wait_for(lambda: "cleaned __consumer_offsets-0" in broker.text(), timeout=60,
             what="the cleaner to compact __consumer_offsets")
    broker.stop()

    again = start_broker(*CLEANER)
    probe = Consumer({"bootstrap.servers": again.address("kafka"), "group.id": "many-commits"})
    try:
        committed = probe.committed([TopicPartition("compacted-offsets-src", 0)], timeout=30)
        assert committed[0].offset == 399
    finally:
        probe.close()


def test_user_topic_with_cleanup_policy_compact(start_broker: StartBroker) -> None:
    broker = start_broker("--log.cleaner.backoff.ms", "200")
    bootstrap = broker.address("kafka")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("table", num_partitions=1, replication_factor=1, config={
        "cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.1",
    })])["table"].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for version in range(30):
        for key in range(5):
            producer.produce("table", f"v{version}".encode(), f"k{key}".encode(), partition=0)
        producer.flush(10)
    producer.produce("table", None, b"k0", partition=0)  # a tombstone: k0 is deleted
    assert producer.flush(10) == 0
    wait_for(lambda: "cleaned table-0" in broker.text(), timeout=60, what="the cleaner to compact the topic")

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "table-reader", "enable.partition.eof": True})
    consumer.assign([TopicPartition("table", 0, 0)])
    latest: dict[bytes, bytes | None] = {}
    records = 0
    offsets: list[int] = []
    while True:
        msg = consumer.poll(10)
        assert msg is not None, "no end of partition"
        if msg.error():
            assert msg.error().code() == KafkaError._PARTITION_EOF
            break
        records += 1
        offsets.append(msg.offset())
        latest[msg.key()] = msg.value()
    consumer.close()
    assert latest == {b"k0": None, b"k1": b"v29", b"k2": b"v29", b"k3": b"v29", b"k4": b"v29"}
    assert records < 151, "nothing was compacted away"
    assert offsets == sorted(offsets) and offsets[-1] == 150  # offsets keep their values, with gaps


def _read_all(bootstrap: str, topic: str) -> list[tuple[bytes, bytes | None]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    records: list[tuple[bytes, bytes | None]] = []
    try:
        for _ in range(10_000):  # bounded: one poll per record, and the end
            msg = consumer.poll(10)
            assert msg is not None, "no end of partition"
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF
                break
            records.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    return records


def test_min_compaction_lag_keeps_recent_records_as_written(start_broker: StartBroker) -> None:
    """Two compacted topics written alike; the one with min.compaction.lag.ms of an hour keeps
    every record while the cleaner compacts the other."""
    broker = start_broker("--log.cleaner.backoff.ms", "200")
    bootstrap = broker.address("kafka")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.1"}
    futures = admin.create_topics([NewTopic("lag-none", 1, 1, config=configs),
                                   NewTopic("lag-hour", 1, 1, config={**configs, "min.compaction.lag.ms": "3600000"})])
    for future in futures.values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for version in range(30):
        for key in range(5):
            for topic in ("lag-none", "lag-hour"):
                producer.produce(topic, f"v{version}".encode(), f"k{key}".encode(), partition=0)
        producer.flush(10)
    wait_for(lambda: "cleaned lag-none-0" in broker.text(), timeout=60, what="the cleaner to compact lag-none")
    assert len(_read_all(bootstrap, "lag-none")) < 150
    assert "cleaned lag-hour-0" not in broker.text()
    assert _read_all(bootstrap, "lag-hour") == [(f"k{k}".encode(), f"v{v}".encode()) for v in range(30) for k in range(5)]
