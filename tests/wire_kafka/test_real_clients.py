"""Real clients judge the codec: librdkafka (confluent-kafka), kafka-python and aiokafka connect to a
scripted peer (tests/wire_kafka/peer.py) that decodes their requests with our decoder and answers
with our encoder. A client that bootstraps, produces, and fetches its message back at the offset
we assigned has parsed every response we encoded; every request it sent decoded without error.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator

import pytest

from roost.wire.kafka import ApiKey, decode_request
from tests.support import referees
from tests.wire_kafka.peer import BASE_OFFSET, TOPIC, ScriptedPeer, running_peer

pytestmark = pytest.mark.timeout(180)

# KIP-511's rule for client software names and versions.
SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")
DEADLINE_SECONDS = 60.0


@pytest.fixture
def peer() -> Iterator[ScriptedPeer]:
    with running_peer() as running:
        yield running


def _assert_clean(peer: ScriptedPeer, allowed_unsupported: set[tuple[int, int]] = frozenset()) -> None:
    for exchange in peer.exchanges:
        if exchange.error is not None:
            key = (exchange.header.api_key, exchange.header.api_version)
            assert key in allowed_unsupported, f"request {key} failed to decode: {exchange.error!r}"


def _produced_values(peer: ScriptedPeer) -> list[bytes]:
    """The request's records as sent: check they came out of the frame untouched."""
    found = []
    for exchange in peer.requests(ApiKey.PRODUCE):
        assert exchange.body is not None
        for topic in exchange.body["topic_data"]:
            assert topic["name"] == TOPIC
            for partition in topic["partition_data"]:
                records = partition["records"]
                assert isinstance(records, memoryview)
                assert records[16] == 2, "RecordBatch magic"
                found.append(bytes(records))
    return found


def test_librdkafka_produces_and_fetches(peer: ScriptedPeer) -> None:
    confluent_kafka = referees.import_or_skip("confluent_kafka", "confluent-kafka")
    address = f"127.0.0.1:{peer.port}"
    producer = confluent_kafka.Producer({
        "bootstrap.servers": address, "client.id": "codec-rdkafka", "linger.ms": 0,
        "compression.type": "none", "socket.timeout.ms": 10000, "message.timeout.ms": 30000})
    reports: list[tuple[object, int]] = []
    producer.produce(TOPIC, value=b"hello from librdkafka", key=b"k", partition=0,
                     on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert producer.flush(DEADLINE_SECONDS) == 0
    assert reports == [(None, BASE_OFFSET)]

    first = peer.exchanges[0]
    assert (first.header.api_key, first.header.api_version) == (ApiKey.API_VERSIONS, 3)
    assert first.header.client_id == "codec-rdkafka"
    assert first.body is not None
    assert SOFTWARE.match(first.body["client_software_name"]), first.body
    assert SOFTWARE.match(first.body["client_software_version"]), first.body
    produce = peer.requests(ApiKey.PRODUCE)[0]
    assert produce.header.api_version == 10, "librdkafka 2.16 produces with the newest we offer"
    assert any(b"hello from librdkafka" in value for value in _produced_values(peer))

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": address, "group.id": "codec-test", "client.id": "codec-rdkafka-consumer",
        "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, BASE_OFFSET)])
        message = None
        deadline = time.monotonic() + DEADLINE_SECONDS
        for _ in range(600):
            message = consumer.poll(0.1)
            if (message is not None and message.error() is None) or time.monotonic() > deadline:
                break
        assert message is not None and message.error() is None, message and message.error()
        assert (message.offset(), message.key(), message.value()) == \
            (BASE_OFFSET, b"k", b"hello from librdkafka")
    finally:
        consumer.close()
    fetches = peer.requests(ApiKey.FETCH)
    assert fetches and fetches[0].header.api_version == 16
    assert fetches[0].body is not None
    assert fetches[0].body["topics"][0]["topic_id"] is not None
    _assert_clean(peer)


def test_kafka_python_falls_back_then_produces_and_fetches(peer: ScriptedPeer) -> None:
    kafka = referees.import_or_skip("kafka", "kafka-python")
    address = f"127.0.0.1:{peer.port}"
    producer = kafka.KafkaProducer(bootstrap_servers=address, client_id="codec-kafka-python",
                                   request_timeout_ms=30000, max_block_ms=30000)
    try:
        metadata = producer.send(TOPIC, key=b"k", value=b"hello from kafka-python",
                                 partition=0).get(timeout=DEADLINE_SECONDS)
        assert metadata.offset == BASE_OFFSET
    finally:
        producer.close(timeout=10)

    # kafka-python opens with an ApiVersions version newer than ours, gets the KIP-511 fallback,
    # and retries at our newest.
    versions_sent = [exchange.header.api_version for exchange in peer.requests(ApiKey.API_VERSIONS)]
    assert versions_sent[0] > 3 and 3 in versions_sent, versions_sent
    retried = next(exchange for exchange in peer.requests(ApiKey.API_VERSIONS)
                   if exchange.header.api_version == 3)
    assert retried.header.client_id == "codec-kafka-python"
    assert retried.body is not None and SOFTWARE.match(retried.body["client_software_name"])
    produce = peer.requests(ApiKey.PRODUCE)[0]
    assert produce.header.api_version >= 9, "a flexible Produce version"
    assert produce.body is not None and produce.body["acks"] == -1
    assert any(b"hello from kafka-python" in value for value in _produced_values(peer))
    assert peer.requests(ApiKey.INIT_PRODUCER_ID), "idempotence is on by default in kafka-python 3"

    consumer = kafka.KafkaConsumer(bootstrap_servers=address, client_id="codec-kafka-python",
                                   enable_auto_commit=False, group_id=None,
                                   request_timeout_ms=30000, fetch_max_wait_ms=100)
    try:
        partition = kafka.TopicPartition(TOPIC, 0)
        consumer.assign([partition])
        consumer.seek(partition, BASE_OFFSET)
        records = []
        deadline = time.monotonic() + DEADLINE_SECONDS
        for _ in range(300):
            batch = consumer.poll(timeout_ms=200)
            records.extend(batch.get(partition, []))
            if records or time.monotonic() > deadline:
                break
        assert [(record.offset, record.value) for record in records][:1] == \
            [(BASE_OFFSET, b"hello from kafka-python")]
    finally:
        consumer.close()
    assert peer.requests(ApiKey.FETCH)[0].header.api_version == 12, "kafka-python fetches at v12"
    unsupported = {(ApiKey.API_VERSIONS, exchange.header.api_version)
                   for exchange in peer.requests(ApiKey.API_VERSIONS) if exchange.header.api_version > 3}
    _assert_clean(peer, unsupported)


def test_aiokafka_uses_classic_versions(peer: ScriptedPeer) -> None:
    aiokafka = referees.import_or_skip("aiokafka")
    address = f"127.0.0.1:{peer.port}"

    async def scenario() -> tuple[int, list[tuple[int, bytes | None]]]:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=address, client_id="codec-aiokafka",
                                             request_timeout_ms=30000)
        await producer.start()
        try:
            sent = await asyncio.wait_for(
                producer.send_and_wait(TOPIC, b"hello from aiokafka", partition=0), DEADLINE_SECONDS)
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=address, client_id="codec-aiokafka",
                                             enable_auto_commit=False, group_id=None,
                                             fetch_max_wait_ms=100, request_timeout_ms=30000)
        await consumer.start()
        try:
            partition = aiokafka.TopicPartition(TOPIC, 0)
            consumer.assign([partition])
            consumer.seek(partition, BASE_OFFSET)
            got = await asyncio.wait_for(consumer.getmany(partition, timeout_ms=5000), DEADLINE_SECONDS)
            records = [(record.offset, record.value) for record in got.get(partition, [])]
        finally:
            await consumer.stop()
        return sent.offset, records

    offset, records = asyncio.run(scenario())
    assert offset == BASE_OFFSET
    assert records[:1] == [(BASE_OFFSET, b"hello from aiokafka")]
    first = peer.exchanges[0]
    assert (first.header.api_key, first.header.api_version, first.header.client_id) == \
        (ApiKey.API_VERSIONS, 0, "codec-aiokafka")
    assert peer.requests(ApiKey.METADATA)[0].header.api_version <= 5
    assert peer.requests(ApiKey.PRODUCE)[0].header.api_version <= 8
    assert peer.requests(ApiKey.FETCH)[0].header.api_version <= 11
    assert any(b"hello from aiokafka" in value for value in _produced_values(peer))
    _assert_clean(peer)


def test_captured_frames_decode_again_identically(peer: ScriptedPeer) -> None:
    """The frames kept by the peer are the clients' exact bytes; decoding them again is stable."""
    confluent_admin = referees.import_or_skip("confluent_kafka.admin", "confluent-kafka")
    admin = confluent_admin.AdminClient({"bootstrap.servers": f"127.0.0.1:{peer.port}"})
    cluster = admin.list_topics(timeout=DEADLINE_SECONDS)
    assert TOPIC in cluster.topics and cluster.controller_id == 1
    assert cluster.cluster_id == "codec-test-cluster"
    assert list(cluster.topics[TOPIC].partitions) == [0]
    metadata = peer.requests(ApiKey.METADATA)
    assert metadata and metadata[0].header.api_version == 12
    for exchange in peer.exchanges:
        header, body = decode_request(exchange.frame)
        assert header == exchange.header and body == exchange.body
    _assert_clean(peer)
