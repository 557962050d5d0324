"""A failed log directory in a replicated cluster (Kafka's ZooKeeper mode): the broker takes the
directory offline and writes /log_dir_event_notification; the controller asks it (LeaderAndIsr,
answered KAFKA_STORAGE_ERROR for the replicas there), moves their leaders to in-sync replicas on
other brokers and drops them from the ISR. A producer streaming to the partition whose leader's
directory fails carries on, and every acknowledged record is there afterwards; the broker's other
directory keeps its replicas in sync."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from kafka import KafkaAdminClient

from tests.support.cluster import LocalCluster
from tests.support.procs import wait_for

TOPIC = "fragile"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    found = LocalCluster.start(tmp_path, brokers=2, log_dirs=2)
    try:
        yield found
    finally:
        found.close()


def replica_dirs(cluster: LocalCluster, broker: int) -> dict[int, str]:
    """partition of TOPIC -> the log directory holding its replica on `broker`."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.running_bootstrap().split(","), request_timeout_ms=30000)
    try:
        (answer,) = admin.describe_log_dirs(brokers=[broker])
    finally:
        admin.close()
    return {p["partition_index"]: entry["log_dir"] for entry in answer["log_dirs"] for t in entry["topics"]
            if t["name"] == TOPIC for p in t["partitions"] if not p["is_future_key"]}


def test_a_failed_directory_moves_its_leaders_and_loses_no_acknowledged_record(cluster: LocalCluster) -> None:
    # Small segments: appends soon need a new segment file, which the failed disk cannot make.
    configs = {"segment.bytes": "4000", "min.insync.replicas": "1"}
    admin = cluster.admin()
    for future in admin.create_topics([NewTopic(TOPIC, 2, 2, config=configs)]).values():
        future.result(30)
    cluster.wait_for_isr(TOPIC)
    led = cluster.led_partitions(TOPIC)
    leader = next(b for b, parts in led.items() if parts)
    target = min(led[leader])
    # A replica shows in DescribeLogDirs once its log is open, which may come after the ISR
    # in ZooKeeper says it is in sync (seen once in a full run: an answer with neither).
    dirs = wait_for(lambda: (found := replica_dirs(cluster, leader)) and set(found) == {0, 1} and found, 30,
                    interval=0.5, what=f"broker {leader} to list both replicas of {TOPIC}")
    assert set(dirs) == {0, 1} and dirs[0] != dirs[1], dirs  # one replica per directory
    other_partition = 1 - target
    other_broker = next(b for b in cluster.brokers if b != leader)

    acked: list[tuple[int, bytes]] = []
    failed: list[Any] = []
    producer = Producer({"bootstrap.servers": cluster.running_bootstrap(), "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "batch.size": 1000})  # batches well below segment.bytes

    def delivered(error: Any, message: Any) -> None:
        (failed.append(error) if error is not None else acked.append((message.offset(), message.value())))

    def send(count: int, start: int) -> None:
        for n in range(start, start + count):
            producer.produce(TOPIC, f"{n:06d}".encode().ljust(150, b"."), partition=target, on_delivery=delivered)
            producer.poll(0.01)

    send(30, 0)
    assert producer.flush(30) == 0
    # The leader's disk holding the target partition fails: its logs directory is replaced by a file.
    failed_dir = Path(dirs[target])
    shutil.rmtree(failed_dir / "logs")
    (failed_dir / "logs").write_bytes(b"not a directory")
    send(200, 30)
    assert producer.flush(60) == 0
    assert failed == []

    def moved() -> bool:
        partitions = cluster.partitions(TOPIC)
        new_leader, _replicas, isr = partitions[target]
        return new_leader == other_broker and leader not in isr
    wait_for(moved, 60, interval=0.2, what="the partition's leader to move off the failed directory")
    # The broker's other directory serves on: its replica stays in sync.
    assert leader in cluster.partitions(TOPIC)[other_partition][2]
    metadata = cluster.metadata(TOPIC).topics[TOPIC].partitions[target]
    assert leader in list(metadata.replicas)
    cluster.wait_for_output(leader, "failed and is now offline")
    # The controller learned it from the broker's LeaderAndIsr answer.
    assert any(f"the replica on broker {leader} is offline" in cluster.broker_output(b) for b in cluster.brokers)

    consumer = Consumer({"bootstrap.servers": cluster.running_bootstrap(), "group.id": "unused",
                         "enable.auto.commit": False})
    try:
        end = consumer.get_watermark_offsets(TopicPartition(TOPIC, target), timeout=30)[1]
        consumer.assign([TopicPartition(TOPIC, target, 0)])
        stored: dict[int, bytes] = {}
        for _ in range(600):  # bounded polls of up to 0.1 s
            if len(stored) >= end:
                break
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                stored[message.offset()] = message.value()
    finally:
        consumer.close()
    assert len(acked) == 230
    assert all(stored.get(offset) == value for offset, value in acked)
