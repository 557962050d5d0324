"""A topic's compression.type, as Kafka applies it: the leader stores every produced batch in the
topic's codec (recompressing the others at the topic's compression.<codec>.level) and `producer`
keeps the producer's. Real clients (confluent-kafka) produce and consume; the stored codecs are
read back by Fetch, byte for byte as the broker holds them."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from tests.support.kafka_wire import stored_batch_codecs, stored_batch_headers
from tests.support.procs import RoostProcess

COUNT = 300


def create(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1, config=configs)])[topic] \
        .result(timeout=30)


def produce(bootstrap: str, topic: str, codec: str, start: int, count: int = COUNT,
            extra: dict[str, object] | None = None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20,
                         "enable.idempotence": True, **(extra or {})})
    failures: list[str] = []
    for n in range(start, start + count):
        producer.produce(topic, value=f"value-{n}-".encode() * 8, key=f"k{n % 5}".encode(),
                         headers=[("n", str(n).encode())],
                         on_delivery=lambda error, _m: failures.append(str(error)) if error else None)
    assert producer.flush(60) == 0
    assert not failures, failures[:3]


def consume_all(bootstrap: str, topic: str, expected: int) -> list[tuple[bytes, bytes, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: list[tuple[bytes, bytes, bytes]] = []
    try:
        for _ in range(600):  # bounded: 600 polls of at most 0.1 s
            if len(seen) >= expected:
                break
            message = consumer.poll(0.1)
            if message is None:
                continue
            assert message.error() is None, message.error()
            (name, number), = message.headers()
            assert name == "n"
            seen.append((message.key(), message.value(), number))
    finally:
        consumer.close()
    return seen


def expected_records(start: int, count: int = COUNT) -> list[tuple[bytes, bytes, bytes]]:
    return [(f"k{n % 5}".encode(), f"value-{n}-".encode() * 8, str(n).encode()) for n in range(start, start + count)]


@pytest.mark.parametrize(("topic_codec", "producer_codec", "stored"), [
    ("gzip", "lz4", "gzip"), ("zstd", "none", "zstd"), ("lz4", "snappy", "lz4"),
    ("snappy", "gzip", "snappy"), ("uncompressed", "zstd", "none"), ("producer", "lz4", "lz4"),
])
def test_batches_are_stored_in_the_topics_codec_and_read_back_intact(
        shared_broker: RoostProcess, topic_codec: str, producer_codec: str, stored: str) -> None:
    bootstrap = shared_broker.address("kafka")
    topic = f"codec-{topic_codec}-from-{producer_codec}"
    create(bootstrap, topic, {"compression.type": topic_codec})
    produce(bootstrap, topic, producer_codec, 0)
    assert stored_batch_codecs(bootstrap, topic, 1) == {stored}
    assert consume_all(bootstrap, topic, COUNT) == expected_records(0)


def test_a_changed_compression_type_applies_to_later_batches_only(shared_broker: RoostProcess) -> None:
    bootstrap = shared_broker.address("kafka")
    topic = "codec-changed-live"
    create(bootstrap, topic, {})
    produce(bootstrap, topic, "lz4", 0)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("compression.type", "zstd", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)
    described = admin.describe_configs([ConfigResource("topic", topic)])
    (entries,) = [future.result(timeout=30) for future in described.values()]
    assert entries["compression.type"].value == "zstd"
    # Brokers apply a changed topic config as its ZooKeeper notification arrives: bounded wait.
    for attempt in range(40):
        produce(bootstrap, topic, "lz4", COUNT * (attempt + 1), count=10)
        if stored_batch_headers(bootstrap, topic, 0)[-1].compression == 4:
            break
    codecs = [header.compression for header in stored_batch_headers(bootstrap, topic, 0)]
    assert codecs[0] == 3 and codecs[-1] == 4, codecs  # lz4 as sent, then zstd


def test_the_topics_level_is_used(shared_broker: RoostProcess) -> None:
    bootstrap = shared_broker.address("kafka")
    sizes = {}
    for level in ("1", "19"):
        topic = f"codec-zstd-level-{level}"
        create(bootstrap, topic, {"compression.type": "zstd", "compression.zstd.level": level})
        produce(bootstrap, topic, "none", 0, extra={"batch.size": 1_000_000, "linger.ms": 200})
        sizes[level] = sum(header.size for header in stored_batch_headers(bootstrap, topic, 0))
        assert len(consume_all(bootstrap, topic, COUNT)) == COUNT
    assert sizes["19"] < sizes["1"], sizes


def test_an_unknown_codec_or_level_is_refused(shared_broker: RoostProcess) -> None:
    admin = AdminClient({"bootstrap.servers": shared_broker.address("kafka")})
    for name, configs in (("codec-bad", {"compression.type": "brotli"}),
                          ("codec-bad-level", {"compression.type": "gzip", "compression.gzip.level": "10"})):
        future = admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1, config=configs)])[name]
        with pytest.raises(KafkaException) as refused:
            future.result(timeout=30)
        assert refused.value.args[0].name() == "INVALID_CONFIG"
