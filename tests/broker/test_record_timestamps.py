"""KIP-937's bounds on produced timestamps: a CreateTime record stamped more than
`message.timestamp.before.max.ms` before the broker's clock, or `after.max.ms` after it, is
refused with INVALID_TIMESTAMP (and nothing of its batch is appended); the deprecated
`difference.max.ms` stands for a bound left at its default; a LogAppendTime topic is not
checked, since the broker stamps its records. confluent-kafka produces with explicit timestamps;
a raw Produce v9 shows the answer's record_errors."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import Record, build_batch
from tests.support.kafka_wire import WireClient
from tests.support.procs import RoostProcess

HOUR_MS = 3_600_000


def create(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1, config=configs)])[topic] \
        .result(timeout=30)


def produce_at(bootstrap: str, topic: str, stamps: list[int]) -> list[KafkaError | None]:
    """Each record sent alone (linger 0, no retries of a refusal), its delivery error or None."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": False,
                         "max.in.flight": 1})
    errors: dict[int, KafkaError | None] = {}
    for n, stamp in enumerate(stamps):
        producer.produce(topic, value=f"v{n}".encode(), timestamp=stamp,
                         on_delivery=lambda error, _m, n=n: errors.__setitem__(n, error))
        producer.flush(30)
    assert len(errors) == len(stamps)
    return [errors[n] for n in range(len(stamps))]


def stored_values(bootstrap: str, topic: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    values: list[bytes] = []
    try:
        for _ in range(200):  # bounded: 200 polls of at most 0.1 s
            if len(values) >= high:
                break
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def test_records_outside_the_topics_bounds_are_refused_and_not_stored(shared_broker: RoostProcess) -> None:
    bootstrap = shared_broker.address("kafka")
    create(bootstrap, "ts-bounded", {"message.timestamp.before.max.ms": str(HOUR_MS),
                                     "message.timestamp.after.max.ms": str(60_000)})
    now = int(time.time() * 1000)
    errors = produce_at(bootstrap, "ts-bounded", [now, now - 2 * HOUR_MS, now + 10 * 60_000, now - 30 * 60_000])
    codes = [error.code() if error else None for error in errors]
    assert codes == [None, KafkaError.INVALID_TIMESTAMP, KafkaError.INVALID_TIMESTAMP, None], errors
    assert stored_values(bootstrap, "ts-bounded") == [b"v0", b"v3"]


def test_the_deprecated_difference_bounds_both_sides_and_log_append_time_is_not_checked(
        shared_broker: RoostProcess) -> None:
    bootstrap = shared_broker.address("kafka")
    create(bootstrap, "ts-difference", {"message.timestamp.difference.max.ms": str(HOUR_MS)})
    create(bootstrap, "ts-append-time", {"message.timestamp.difference.max.ms": str(HOUR_MS),
                                         "message.timestamp.type": "LogAppendTime"})
    now = int(time.time() * 1000)
    old, future = now - 2 * HOUR_MS, now + 2 * HOUR_MS
    assert [e.code() if e else None for e in produce_at(bootstrap, "ts-difference", [old, future, now])] == \
        [KafkaError.INVALID_TIMESTAMP, KafkaError.INVALID_TIMESTAMP, None]
    assert produce_at(bootstrap, "ts-append-time", [old, future]) == [None, None]


def test_a_changed_bound_applies_to_later_produces(shared_broker: RoostProcess) -> None:
    bootstrap = shared_broker.address("kafka")
    create(bootstrap, "ts-altered", {})
    old = int(time.time() * 1000) - 2 * HOUR_MS
    assert produce_at(bootstrap, "ts-altered", [old]) == [None]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "ts-altered", incremental_configs=[
        ConfigEntry("message.timestamp.before.max.ms", str(HOUR_MS), incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the change reaches the partition through ZooKeeper
        (error,) = produce_at(bootstrap, "ts-altered", [old])
        if error is not None:
            break
        time.sleep(0.2)
    assert error is not None and error.code() == KafkaError.INVALID_TIMESTAMP, error


def test_the_answer_names_each_refused_record(shared_broker: RoostProcess) -> None:
    """A raw Produce v9 of one batch of three records, the middle one too old: the partition's
    error is INVALID_TIMESTAMP with Kafka's message, record_errors names index 1 with its
    timestamp and the allowed range, and nothing of the batch is appended."""
    bootstrap = shared_broker.address("kafka")
    create(bootstrap, "ts-raw", {"message.timestamp.before.max.ms": str(HOUR_MS)})
    now = int(time.time() * 1000)
    batch = build_batch([Record(None, b"a", timestamp=now), Record(None, b"b", timestamp=now - 2 * HOUR_MS),
                         Record(None, b"c", timestamp=now)], timestamp_ms=now)
    client = WireClient(bootstrap)
    try:
        answer = client.request(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 10_000,
                                                    "topic_data": [{"name": "ts-raw", "partition_data": [
                                                        {"index": 0, "records": bytes(batch)}]}]})
    finally:
        client.close()
    (partition,) = answer["responses"][0]["partition_responses"]
    assert partition["error_code"] == ErrorCode.INVALID_TIMESTAMP
    assert partition["error_message"] == "One or more records have been rejected due to invalid timestamp"
    (record_error,) = partition["record_errors"]
    assert record_error["batch_index"] == 1
    assert f"Timestamp {now - 2 * HOUR_MS} of message with offset 1 is out of range" in \
        record_error["batch_index_error_message"]
    assert stored_values(bootstrap, "ts-raw") == []
