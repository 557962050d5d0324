"""At shutdown the broker logs which API versions it served, and how often (README: "the broker logs
which versions it served at shutdown"): exact counts for requests we send ourselves, and the
versions the real clients use (librdkafka: Produce 10, Fetch 16, Metadata 12; kafka-python:
Produce 9, Fetch 12)."""

from __future__ import annotations

import re

from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer

from tests.broker.conftest import StartBroker
from tests.support.kafka_wire import WireClient

API_VERSIONS, METADATA = 18, 3
SERVED_LINE = re.compile(r"broker \d+ stopped; requests served: (?P<counts>.*)$", re.MULTILINE)


def served(text: str) -> dict[str, int]:
    """The shutdown line's counts: {"Produce v10": 1, ...}."""
    lines = SERVED_LINE.findall(text)
    assert len(lines) == 1, f"expected one shutdown line with the versions served:\n{text[-3000:]}"
    counts = {}
    for item in filter(None, lines[0].split(", ")):
        name, count = item.rsplit(": ", 1)
        counts[name] = int(count)
    return counts


def test_the_versions_served_are_logged_at_shutdown(start_broker: StartBroker) -> None:
    broker = start_broker()
    bootstrap = broker.address("kafka")
    raw = WireClient(bootstrap)
    try:  # versions no real client here uses, so that their counts are exactly ours
        for _ in range(3):
            assert raw.request(API_VERSIONS, 1, {})["error_code"] == 0
        for _ in range(2):
            raw.request(METADATA, 5, {"topics": None, "allow_auto_topic_creation": False})
    finally:
        raw.close()

    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce("served-librdkafka", b"one")
    assert producer.flush(30) == 0
    del producer  # destroyed now, rather than retrying a stopped broker until collected
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "served", "auto.offset.reset": "earliest"})
    consumer.subscribe(["served-librdkafka"])
    try:
        message = None
        for _ in range(300):  # bounded: 300 polls of up to 0.1 s
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                break
        assert message is not None and message.error() is None and message.value() == b"one"
    finally:
        consumer.close()

    kp = KafkaProducer(bootstrap_servers=bootstrap)
    kp.send("served-kafka-python", b"two").get(timeout=30)
    kp.close(10)
    kc = KafkaConsumer("served-kafka-python", bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                       consumer_timeout_ms=30_000)
    try:
        assert next(iter(kc)).value == b"two"
    finally:
        kc.close()

    assert broker.stop() == 0
    counts = served(broker.text())
    assert counts.get("ApiVersions v1") == 3 and counts.get("Metadata v5") == 2, counts
    for name in ("Produce v10", "Fetch v16", "Metadata v12", "Produce v9", "Fetch v12"):
        assert counts.get(name, 0) >= 1, (name, counts)
    assert "roost: stopped" in broker.text()
