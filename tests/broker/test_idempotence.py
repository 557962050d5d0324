"""Idempotent producers: the clients' own, made to retry by a lost answer, and a batch re-sent
byte for byte on the wire."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Protocol

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from kafka import KafkaProducer

from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import build_batch
from tests.broker.conftest import StartBroker
from tests.support.faultproxy import ThreadedFaultProxy
from tests.support.kafka_wire import WireClient
from tests.support.procs import RoostProcess, free_ports, wait_for

PRODUCE, LIST_OFFSETS, METADATA, INIT_PRODUCER_ID = 0, 2, 3, 22


def read_exactly(bootstrap: str, topic: str, timeout: float = 60.0) -> list[bytes]:
    """Every value in partition 0 of `topic`, in offset order, up to its high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        values: list[bytes] = []
        offsets: list[int] = []
        deadline = time.monotonic() + timeout
        while (not offsets or offsets[-1] < end - 1) and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.2):
                if msg.error():
                    assert msg.error().code() == KafkaError._PARTITION_EOF, str(msg.error())
                    continue
                offsets.append(msg.offset())
                values.append(msg.value())
    finally:
        consumer.close()
    assert offsets == list(range(end)), "did not read the whole partition"
    return values


@pytest.fixture
def proxied_broker(start_broker: StartBroker) -> Iterator[tuple[RoostProcess, ThreadedFaultProxy]]:
    """A broker whose clients all go through a fault proxy: it advertises the proxy's address, so
    after bootstrapping the clients' connections to it pass the proxy too."""
    (proxy_port,) = free_ports(1)
    broker = start_broker("--no-keeper", "--advertised.listeners", f"PLAINTEXT://127.0.0.1:{proxy_port}")
    with ThreadedFaultProxy(("127.0.0.1", broker.port("kafka")), listen=("127.0.0.1", proxy_port)) as proxy:
        yield broker, proxy


class Send(Protocol):
    def __call__(self, values: list[bytes]) -> None:
        """Produce `values` to the topic and return once all are acknowledged."""


def confluent_sender(bootstrap: str, topic: str, idempotent: bool) -> tuple[Send, Callable[[], None]]:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": idempotent, "acks": "all",
                         "linger.ms": 0, "retry.backoff.ms": 50, "compression.type": "none"})
    errors: list[str] = []

    def send(values: list[bytes]) -> None:
        for value in values:
            producer.produce(topic, value, on_delivery=lambda e, _m: errors.append(str(e)) if e else None)
        assert producer.flush(60) == 0
        assert not errors, errors

    return send, lambda: None


def kafka_python_sender(bootstrap: str, topic: str, idempotent: bool) -> tuple[Send, Callable[[], None]]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=idempotent, acks="all",
                             retries=5, linger_ms=0, retry_backoff_ms=50)
    assert producer.config["enable_idempotence"] is idempotent

    def send(values: list[bytes]) -> None:
        futures = [producer.send(topic, value=value) for value in values]
        producer.flush(60)
        for future in futures:
            future.get(timeout=30)

    return send, lambda: producer.close(10)


SENDERS = {"confluent-kafka": confluent_sender, "kafka-python": kafka_python_sender}


def produce_through_a_lost_reply(broker: RoostProcess, proxy: ThreadedFaultProxy, client: str,
                                 idempotent: bool) -> tuple[list[bytes], list[bytes]]:
    """Produce 50 values, then one whose answer the proxy loses after the broker appended it (the
    client sees its connection close and sends it again), then 50 more. Returns what was sent
    (each value once) and what the partition holds."""
    topic = f"retry-{client}-{'idem' if idempotent else 'plain'}"
    tag = uuid.uuid4().hex[:8]
    before = [f"before-{tag}-{n}".encode() for n in range(50)]
    trigger = f"lost-reply-{tag}".encode()
    after = [f"after-{tag}-{n}".encode() for n in range(50)]
    send, close = SENDERS[client](f"127.0.0.1:{proxy.address[1]}", topic, idempotent)
    try:
        send(before)
        proxy.lose_reply(trigger)
        send([trigger])
        send(after)
    finally:
        close()
    assert proxy.proxy.replies_lost == 1, "the fault did not fire"
    assert proxy.proxy.marker_seen == 2, "the client did not send the batch again"
    return [*before, trigger, *after], read_exactly(broker.address("kafka"), topic)


@pytest.mark.parametrize("client", SENDERS)
def test_an_idempotent_producer_retrying_a_batch_whose_answer_was_lost_writes_it_once(
        proxied_broker: tuple[RoostProcess, ThreadedFaultProxy], client: str) -> None:
    sent, stored = produce_through_a_lost_reply(*proxied_broker, client, idempotent=True)
    duplicates = sorted(value for value, count in Counter(stored).items() if count > 1)
    assert not duplicates, f"written twice: {duplicates}"
    assert stored == sent


@pytest.mark.parametrize("client", SENDERS)
def test_without_idempotence_the_same_retry_writes_a_duplicate(
        proxied_broker: tuple[RoostProcess, ThreadedFaultProxy], client: str) -> None:
    """The control: the fault above really makes the client send the batch twice."""
    sent, stored = produce_through_a_lost_reply(*proxied_broker, client, idempotent=False)
    trigger = sent[50]
    assert stored == [*sent[:51], trigger, *sent[51:]]


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
        assert gap["log_start_offset"] == 0  # Kafka names it with a refused sequence (and epoch)
        assert latest_offset(client, topic) == 3
        # The broker says what it refused and what it holds for the producer (the trace a fault
        # run's duplicate is followed by: a client may renumber after this answer).
        refusal = f"refused OUT_OF_ORDER_SEQUENCE_NUMBER for producer {pid} epoch {epoch} seq 5..6"
        wait_for(lambda: refusal in broker.text() and "held for it: epoch" in broker.text(), 10,
                 what="the refusal in the broker's log")

        follow = produce_batch(client, topic, batch(3, 2))
        assert (follow["error_code"], follow["base_offset"]) == (0, 3)
        assert latest_offset(client, topic) == 5

        # A new epoch starts again at sequence 0; the old epoch is fenced from then on.
        newer = build_batch([(b"k", b"new")], timestamp_ms=now, producer_id=pid, producer_epoch=epoch + 1,
                            base_sequence=0)
        assert produce_batch(client, topic, newer)["error_code"] == 0
        fenced = produce_batch(client, topic, batch(5, 1))
        assert (fenced["error_code"], fenced["log_start_offset"]) == (ErrorCode.INVALID_PRODUCER_EPOCH, 0)
        assert latest_offset(client, topic) == 6
    finally:
        client.close()

