"""Retention by time with tiny segments, DeleteRecords, and what consumers see afterwards."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from roost.wire.kafka.errors import ErrorCode
from tests.broker.conftest import StartBroker
from tests.support.kafka_wire import WireClient
from tests.support.procs import wait_for

FETCH = 1


def fetch_at(client: WireClient, topic: str, offset: int) -> dict:
    response = client.request(FETCH, 11, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                    "fetch_offset": offset, "log_start_offset": -1,
                                                    "partition_max_bytes": 1 << 20}]}],
    })
    return response["responses"][0]["partitions"][0]


def first_offset(bootstrap: str, topic: str, reset: str, start: int) -> int | None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ret-{reset}",
                         "auto.offset.reset": reset, "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, start)])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                return msg.offset()
        return None
    finally:
        consumer.close()


def test_time_retention_moves_the_log_start_and_consumers_reset(start_broker: StartBroker) -> None:
    broker = start_broker("--log.retention.check.interval.ms", "200")
    bootstrap = broker.address("kafka")
    topic = "short-lived"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1,
                                  config={"retention.ms": "60000", "segment.bytes": "1024"})])[topic].result(30)
    # Batches small enough for 1 KiB segments (a larger one gets RECORD_LIST_TOO_LARGE, as in Kafka).
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.size": 600})
    # Records stamped an hour ago are past retention at once; what is produced now stays.
    an_hour_ago = int(time.time() * 1000) - 3_600_000
    for n in range(100):
        producer.produce(topic, (f"old-{n}-" + "x" * 100).encode(), partition=0, timestamp=an_hour_ago)
        producer.poll(0)
    assert producer.flush(10) == 0

    def low_watermark() -> int:
        probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
        try:
            return probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0]
        finally:
            probe.close()

    # A retention pass may run while the old records are still arriving and another after the
    # flush: wait until the log start has stopped moving (seen the same across 5 check intervals).
    seen: list[int] = []

    def settled_low_watermark() -> int | None:
        seen.append(low_watermark())
        time.sleep(1.0)
        return seen[-1] if len(seen) >= 2 and seen[-1] == seen[-2] > 0 else None

    low = wait_for(settled_low_watermark, timeout=90, what="retention to delete old segments")
    assert 0 < low <= 100

    # A fetch before the log start is OFFSET_OUT_OF_RANGE on the wire ...
    wire = WireClient(bootstrap)
    try:
        assert fetch_at(wire, topic, 0)["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
    finally:
        wire.close()
    # ... and the clients reset as auto.offset.reset says.
    producer.produce(topic, b"fresh", partition=0)
    assert producer.flush(10) == 0
    low_before = low_watermark()
    earliest = first_offset(bootstrap, topic, "earliest", 0)
    # "fresh" may fill the active segment and roll it, and retention then deletes the old one:
    # the consumer lands on the log start of its reset, between the two readings.
    assert earliest is not None and 0 < low_before <= earliest <= low_watermark()
    assert first_offset(bootstrap, topic, "latest", 0) is None  # positioned at the end: nothing old


def test_delete_records_advances_the_log_start(start_broker: StartBroker) -> None:
    broker = start_broker()
    bootstrap = broker.address("kafka")
    topic = "trimmed"
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(30):
        producer.produce(topic, f"v{n}".encode(), partition=0)
    assert producer.flush(10) == 0
    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.delete_records([TopicPartition(topic, 0, 17)])
    deleted = next(iter(result.values())).result(30)
    assert deleted.low_watermark == 17
    assert first_offset(bootstrap, topic, "earliest", 0) == 17
