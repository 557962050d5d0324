"""Idempotent producers: the clients' own, and a batch re-sent byte for byte on the wire."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, Producer
from kafka import KafkaProducer

from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import build_batch
from tests.support.kafka_wire import WireClient
from tests.support.procs import RoostProcess

PRODUCE, LIST_OFFSETS, METADATA, INIT_PRODUCER_ID = 0, 2, 3, 22


def read_all(bootstrap: str, topic: str, expected: int, timeout: float = 60.0) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}",
                         "auto.offset.reset": "earliest", "enable.partition.eof": False})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        # Read until the expected count, then a little longer so duplicates would show.
        quiet_until = None
        while time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.2):
                if msg.error() and msg.error().code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(str(msg.error()))
                if not msg.error():
                    values.append(msg.value())
            if len(values) >= expected and quiet_until is None:
                quiet_until = time.monotonic() + 1.0
            if quiet_until is not None and time.monotonic() > quiet_until:
                break
    finally:
        consumer.close()
    return values


def test_kafka_python_default_producer_is_idempotent(broker: RoostProcess) -> None:
    bootstrap = broker.address("kafka")
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=2)
    assert producer.config["enable_idempotence"]
    futures = [producer.send("kp-idem", value=f"m{n}".encode(), key=str(n % 10).encode()) for n in range(5000)]
    producer.flush(60)
    assert all(f.get(timeout=30) for f in futures)
    producer.close(10)
    values = read_all(bootstrap, "kp-idem", 5000)
    assert sorted(values) == sorted(f"m{n}".encode() for n in range(5000))


def test_confluent_idempotent_producer(broker: RoostProcess) -> None:
    bootstrap = broker.address("kafka")
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2})
    errors: list[str] = []
    for n in range(5000):
        producer.produce("cf-idem", f"m{n}".encode(), str(n % 10).encode(),
                         on_delivery=lambda e, _m: errors.append(str(e)) if e else None)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]
    values = read_all(bootstrap, "cf-idem", 5000)
    assert sorted(values) == sorted(f"m{n}".encode() for n in range(5000))


def produce_batch(client: WireClient, topic: str, batch: bytes) -> dict:
    response = client.request(PRODUCE, 7, {
        "transactional_id": None, "acks": -1, "timeout_ms": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    })
    return response["responses"][0]["partition_responses"][0]


def latest_offset(client: WireClient, topic: str) -> int:
    response = client.request(LIST_OFFSETS, 2, {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    })
    return response["topics"][0]["partitions"][0]["offset"]


def test_a_batch_resent_on_the_wire_is_not_appended_twice(broker: RoostProcess) -> None:
    client = WireClient(broker.address("kafka"))
    try:
        topic = "wire-idem"
        metadata = client.request(METADATA, 8, {"topics": [{"name": topic}], "allow_auto_topic_creation": True,
                                                "include_cluster_authorized_operations": False,
                                                "include_topic_authorized_operations": False})
        assert metadata["topics"][0]["error_code"] == 0
        init = client.request(INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 60000})
        assert init["error_code"] == 0
        pid, epoch = init["producer_id"], init["producer_epoch"]
        now = int(time.time() * 1000)

        def batch(first_seq: int, count: int) -> bytes:
            return build_batch([(b"k", f"v{first_seq + i}".encode()) for i in range(count)], timestamp_ms=now,
                               producer_id=pid, producer_epoch=epoch, base_sequence=first_seq)

        first = batch(0, 3)
        answer = produce_batch(client, topic, first)
        assert (answer["error_code"], answer["base_offset"]) == (0, 0)
        again = produce_batch(client, topic, first)  # the same bytes, as a retry would send them
        assert (again["error_code"], again["base_offset"]) == (0, 0)
        assert latest_offset(client, topic) == 3

        gap = produce_batch(client, topic, batch(5, 2))  # sequence 3 and 4 never came
        assert gap["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert latest_offset(client, topic) == 3

        follow = produce_batch(client, topic, batch(3, 2))
        assert (follow["error_code"], follow["base_offset"]) == (0, 3)
        assert latest_offset(client, topic) == 5

        # A new epoch starts again at sequence 0; the old epoch is fenced from then on.
        newer = build_batch([(b"k", b"new")], timestamp_ms=now, producer_id=pid, producer_epoch=epoch + 1,
                            base_sequence=0)
        assert produce_batch(client, topic, newer)["error_code"] == 0
        assert produce_batch(client, topic, batch(5, 1))["error_code"] == ErrorCode.INVALID_PRODUCER_EPOCH
        assert latest_offset(client, topic) == 6
    finally:
        client.close()
