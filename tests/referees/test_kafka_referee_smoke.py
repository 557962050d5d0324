"""The Apache Kafka starters work: each referee starts, takes a topic, a produce and a fetch from a
real client, and stops; Kafka 3.9 also runs on Roost's keeper, as Roost's brokers do."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support import kafka_referee as kr
from tests.support.cluster import write_toml
from tests.support.procs import free_ports, start_roost, wait_for


def _round_trip(bootstrap: str, topic: str, replication: int = 1) -> list[bytes]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, replication)])[topic].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for n in range(10):
        producer.produce(topic, f"m{n}".encode(), partition=n % 2)
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        def all_read() -> bool:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got.append(message.value())
            return len(got) >= 10
        wait_for(all_read, 90, interval=0, what=f"10 messages from {topic}")
    finally:
        consumer.close()
    return sorted(got)


def test_kafka39_zookeeper_mode(kafka39: kr.KafkaCluster) -> None:
    assert kafka39.version == kr.KAFKA_3 and kafka39.zookeeper
    assert _round_trip(kafka39.bootstrap, "smoke39") == sorted(f"m{n}".encode() for n in range(10))
    assert "started (kafka.server.KafkaServer)" in (kafka39.nodes[1].directory / "server.log").read_text()


def test_kafka4_kraft(kafka4: kr.KafkaCluster) -> None:
    assert kafka4.version == kr.KAFKA_4 and not kafka4.zookeeper and kafka4.cluster_id
    assert _round_trip(kafka4.bootstrap, "smoke4") == sorted(f"m{n}".encode() for n in range(10))


def test_kafka39_three_brokers_on_roost_keeper(tmp_path: Path) -> None:
    kr.require(kr.KAFKA_3)
    (port,) = free_ports(1)
    config = tmp_path / "keeper.toml"
    write_toml(config, {"tickTime": 500, "dataDir": str(tmp_path / "keeper"), "clientPort": port,
                        "clientPortAddress": "127.0.0.1"})
    keeper = start_roost(["keeper", "--config", str(config)], expect=("keeper",))
    try:
        with kr.kafka_zk(tmp_path / "kafka", brokers=3, zookeeper=keeper.address("keeper")) as kafka:
            assert len(kafka.nodes) == 3
            assert _round_trip(kafka.bootstrap, "smoke3", replication=3) == sorted(f"m{n}".encode() for n in range(10))
            processes = [node.process for node in kafka.nodes.values()]
        assert all(process is not None and not process.running() for process in processes)
    finally:
        keeper.stop()
