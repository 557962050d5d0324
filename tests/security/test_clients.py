"""confluent-kafka, kafka-python, aiokafka and kcat each produce and consume over every secured
listener of one shared node: SSL, mutual TLS, SASL_PLAINTEXT with PLAIN, SCRAM-SHA-256 and
SCRAM-SHA-512, and SASL_SSL; and Metadata answers with the addresses of the client's listener."""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.security.conftest import PLAIN_USERS, SCRAM_PASSWORD, SCRAM_USER, SecuredNode

# (name, listener, SASL mechanism or None, whether to show alice's certificate)
WAYS = [
    ("ssl", "SSL", None, False),
    ("mtls", "MTLS", None, True),
    ("sasl-plain", "SASL_PLAINTEXT", "PLAIN", False),
    ("sasl-scram-256", "SASL_PLAINTEXT", "SCRAM-SHA-256", False),
    ("sasl-scram-512", "SASL_PLAINTEXT", "SCRAM-SHA-512", False),
    ("sasl-ssl-scram-512", "SASL_SSL", "SCRAM-SHA-512", False),
    ("sasl-ssl-plain", "SASL_SSL", "PLAIN", False),
]
WAY_IDS = [way[0] for way in WAYS]
MESSAGES = [f"message {i}".encode() for i in range(3)]
PROTOCOLS = {"SSL": "SSL", "MTLS": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"}


def credentials(mechanism: str) -> tuple[str, str]:
    return ("alice", PLAIN_USERS["alice"]) if mechanism == "PLAIN" else (SCRAM_USER, SCRAM_PASSWORD)


def librdkafka_config(secured: SecuredNode, listener: str, mechanism: str | None, cert: bool) -> dict[str, str]:
    config = {"bootstrap.servers": secured.address(listener), "security.protocol": PROTOCOLS[listener].lower()}
    if "SSL" in PROTOCOLS[listener]:
        config["ssl.ca.location"] = str(secured.ca)
    if cert:
        config["ssl.certificate.location"] = str(secured.client_cert)
        config["ssl.key.location"] = str(secured.client_key)
    if mechanism:
        user, password = credentials(mechanism)
        config.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    return config


def python_config(secured: SecuredNode, listener: str, mechanism: str | None, cert: bool) -> dict[str, Any]:
    config: dict[str, Any] = {"bootstrap_servers": secured.address(listener),
                              "security_protocol": PROTOCOLS[listener]}
    if mechanism:
        user, password = credentials(mechanism)
        config.update({"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password})
    return config


@pytest.mark.parametrize(("way", "listener", "mechanism", "cert"), WAYS, ids=WAY_IDS)
def test_confluent_kafka(secured: SecuredNode, way: str, listener: str, mechanism: str | None, cert: bool) -> None:
    config = librdkafka_config(secured, listener, mechanism, cert)
    topic = f"confluent-{way}"
    producer = Producer(config)
    for message in MESSAGES:
        producer.produce(topic, message)
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": f"g-{uuid.uuid4().hex}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = [m.value() for m in consumer.consume(len(MESSAGES), timeout=30)]
    consumer.close()
    assert got == MESSAGES


@pytest.mark.parametrize(("way", "listener", "mechanism", "cert"), WAYS, ids=WAY_IDS)
def test_kafka_python(secured: SecuredNode, way: str, listener: str, mechanism: str | None, cert: bool) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    config = python_config(secured, listener, mechanism, cert)
    if "SSL" in PROTOCOLS[listener]:
        config["ssl_cafile"] = str(secured.ca)
    if cert:
        config.update({"ssl_certfile": str(secured.client_cert), "ssl_keyfile": str(secured.client_key)})
    topic = f"kafka-python-{way}"
    producer = KafkaProducer(**config)
    for message in MESSAGES:
        producer.send(topic, message).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(**config, consumer_timeout_ms=20_000)
    consumer.assign([KTopicPartition(topic, 0)])
    consumer.seek(KTopicPartition(topic, 0), 0)
    got = []
    for record in consumer:
        got.append(record.value)
        if len(got) == len(MESSAGES):
            break
    consumer.close()
    assert got == MESSAGES


@pytest.mark.parametrize(("way", "listener", "mechanism", "cert"), WAYS, ids=WAY_IDS)
def test_aiokafka(secured: SecuredNode, way: str, listener: str, mechanism: str | None, cert: bool) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATopicPartition
    from aiokafka.helpers import create_ssl_context

    config = python_config(secured, listener, mechanism, cert)
    if "SSL" in PROTOCOLS[listener]:
        config["ssl_context"] = create_ssl_context(
            cafile=str(secured.ca), certfile=str(secured.client_cert) if cert else None,
            keyfile=str(secured.client_key) if cert else None)
    topic = f"aiokafka-{way}"

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**config)
        await producer.start()
        try:
            for message in MESSAGES:
                await producer.send_and_wait(topic, message)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**config)
        await consumer.start()
        try:
            partition = ATopicPartition(topic, 0)
            consumer.assign([partition])
            consumer.seek(partition, 0)
            got: list[bytes] = []
            while len(got) < len(MESSAGES):
                batch = await asyncio.wait_for(consumer.getmany(partition, timeout_ms=1000), 20)
                got += [record.value for records in batch.values() for record in records]
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == MESSAGES


@pytest.mark.parametrize(("way", "listener", "mechanism", "cert"), WAYS, ids=WAY_IDS)
def test_kcat(secured: SecuredNode, way: str, listener: str, mechanism: str | None, cert: bool) -> None:
    config = librdkafka_config(secured, listener, mechanism, cert)
    flags = [item for key, value in config.items() if key != "bootstrap.servers" for item in ("-X", f"{key}={value}")]
    topic = f"kcat-{way}"
    base = ["kcat", "-b", config["bootstrap.servers"], "-t", topic, *flags]
    subprocess.run([*base, "-P", "-p", "0"], input=b"\n".join(MESSAGES) + b"\n", check=True, timeout=60)
    out = subprocess.run([*base, "-C", "-p", "0", "-o", "beginning", "-c", str(len(MESSAGES)), "-e", "-q"],
                         capture_output=True, check=True, timeout=60)
    assert out.stdout.splitlines() == MESSAGES


def test_metadata_answers_with_the_listener_the_client_came_in_on(secured: SecuredNode) -> None:
    for listener, mechanism in (("PLAINTEXT", None), ("SSL", None), ("SASL_SSL", "PLAIN")):
        config = {**librdkafka_config(secured, listener, mechanism, False)} if listener != "PLAINTEXT" else \
            {"bootstrap.servers": secured.address("PLAINTEXT")}
        brokers = AdminClient(config).list_topics(timeout=30).brokers
        assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", secured.ports[listener])], listener
