"""Restarts: SIGTERM keeps everything; kill -9 with fsync-before-ack loses nothing acknowledged;
a torn segment tail is cut, logged and never served."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kafka import KafkaProducer

from roost.wire.kafka.records import build_batch
from tests.broker.conftest import StartBroker
from tests.broker.test_idempotence import INIT_PRODUCER_ID, latest_offset, produce_batch
from tests.support.kafka_wire import WireClient
from tests.support.procs import wait_for


def consume_all(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> list[tuple[int, int, bytes]]:
    """Everything in the topic, read with assign() from the beginning to the end offsets."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        records: list[tuple[int, int, bytes]] = []
        at_end: set[int] = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.2):
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add(msg.partition())
                        continue
                    raise AssertionError(str(msg.error()))
                records.append((msg.partition(), msg.offset(), msg.value()))
        assert len(at_end) == partitions, "did not reach the end of every partition"
        return records
    finally:
        consumer.close()


def test_sigterm_restart_keeps_topics_messages_offsets_and_producer_ids(start_broker: StartBroker) -> None:
    broker = start_broker()
    bootstrap = broker.address("kafka")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = "durable"
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1,
                                  config={"retention.ms": "3600000"})])[topic].result(30)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=2)
    for n in range(1000):
        producer.send(topic, value=f"m{n}".encode(), key=str(n % 13).encode())
    producer.flush(30)
    producer.close(10)

    group = Consumer({"bootstrap.servers": bootstrap, "group.id": "durable-group", "enable.auto.commit": False})
    group.commit(offsets=[TopicPartition(topic, 0, 11), TopicPartition(topic, 2, 22)], asynchronous=False)
    group.close()

    wire = WireClient(bootstrap)
    pid = wire.request(INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 60000})["producer_id"]
    batch = build_batch([(b"k", b"once")], timestamp_ms=int(time.time() * 1000), producer_id=pid,
                        producer_epoch=0, base_sequence=0)
    first = produce_batch(wire, "idem-restart", batch)
    assert first["error_code"] == 0
    wire.close()

    assert broker.stop(signal.SIGTERM) == 0
    assert "roost: stopped" in broker.text()

    again = start_broker()
    bootstrap = again.address("kafka")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(timeout=30)
    assert len(metadata.topics[topic].partitions) == 3
    configs = admin.describe_configs([ConfigResource("topic", topic)])
    described = next(iter(configs.values())).result(30)
    assert described["retention.ms"].value == "3600000"

    values = sorted(v for _, _, v in consume_all(bootstrap, topic, 3))
    assert values == sorted(f"m{n}".encode() for n in range(1000))

    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "durable-group"})
    committed = probe.committed([TopicPartition(topic, p) for p in range(3)], timeout=30)
    probe.close()
    assert [tp.offset for tp in committed] == [11, -1001, 22]  # -1001: nothing committed

    wire = WireClient(bootstrap)
    try:
        # The producer's sequence state survived: the same batch again is a duplicate.
        resent = produce_batch(wire, "idem-restart", batch)
        assert (resent["error_code"], resent["base_offset"]) == (0, first["base_offset"])
        assert latest_offset(wire, "idem-restart") == 1
        # Producer ids are never handed out twice.
        newer = wire.request(INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 60000})
        assert newer["producer_id"] > pid
    finally:
        wire.close()


def test_kill9_during_stream_with_fsync_before_ack_loses_nothing_acknowledged(start_broker: StartBroker) -> None:
    broker = start_broker("--log.flush.interval.messages", "1")
    bootstrap = broker.address("kafka")
    topic = "fsync-stream"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(30)

    acked: list[bytes] = []
    lock = threading.Lock()
    stop = threading.Event()

    def stream() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1,
                             "message.timeout.ms": 5000, "retries": 0})

        def delivered(error: KafkaError | None, msg: object) -> None:
            if error is None:
                with lock:
                    acked.append(msg.value())  # type: ignore[attr-defined]

        n = 0
        while not stop.is_set() and n < 200_000:
            try:
                producer.produce(topic, f"m{n}".encode(), on_delivery=delivered)
                n += 1
            except BufferError:
                pass
            producer.poll(0.001 if n % 100 == 0 else 0)
        producer.flush(10)

    thread = threading.Thread(target=stream, daemon=True)
    thread.start()
    wait_for(lambda: len(acked) >= 3000, timeout=60, what="3000 acknowledged messages")
    broker.kill9()
    with lock:
        acknowledged = set(acked)
    stop.set()
    thread.join(30)

    again = start_broker("--log.flush.interval.messages", "1")
    stored = {v for _, _, v in consume_all(again.address("kafka"), topic, 3)}
    missing = acknowledged - stored
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {sorted(missing)[:5]}"
    assert len(acknowledged) >= 3000


def test_torn_segment_tail_is_cut_logged_and_never_served(start_broker: StartBroker, tmp_path: Path) -> None:
    broker = start_broker()
    bootstrap = broker.address("kafka")
    topic = "torn"
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for n in range(50):
        producer.produce(topic, f"m{n}".encode(), partition=0)
        producer.flush(10)  # one batch per message
    assert producer.flush(10) == 0
    broker.kill9()  # a crash: no clean-shutdown marker, so recovery checks the tail

    segment = tmp_path / "data" / "logs" / f"{topic}-0" / f"{0:020d}.log"
    original = segment.read_bytes()
    with segment.open("ab") as handle:
        # A torn write: the start of a copy of a real batch, cut off half way.
        handle.write(original[:40])
    torn_size = segment.stat().st_size
    assert torn_size == len(original) + 40

    again = start_broker()
    wait_for(lambda: "recovery: cut" in again.text(), timeout=30, what="the recovery log line")
    assert segment.stat().st_size == len(original)
    values = [v for _, _, v in consume_all(again.address("kafka"), topic, 1)]
    assert values == [f"m{n}".encode() for n in range(50)]

    producer = Producer({"bootstrap.servers": again.address("kafka")})
    offsets: list[int] = []
    producer.produce(topic, b"after", partition=0, on_delivery=lambda e, m: offsets.append(m.offset()))
    assert producer.flush(10) == 0
    assert offsets == [50]


def test_flipped_byte_in_last_batch_is_caught_by_crc(start_broker: StartBroker, tmp_path: Path) -> None:
    broker = start_broker()
    bootstrap = broker.address("kafka")
    topic = "flipped"
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for n in range(10):
        producer.produce(topic, f"value-{n}".encode(), partition=0)
        producer.flush(10)
    broker.kill9()
    segment = tmp_path / "data" / "logs" / f"{topic}-0" / f"{0:020d}.log"
    data = bytearray(segment.read_bytes())
    position = data.rfind(b"value-9")
    data[position] ^= 0xFF  # damage inside the CRC-covered part of the last batch
    segment.write_bytes(bytes(data))

    again = start_broker()
    wait_for(lambda: "recovery: cut" in again.text(), timeout=30, what="the recovery log line")
    values = [v for _, _, v in consume_all(again.address("kafka"), topic, 1)]
    assert values == [f"value-{n}".encode() for n in range(9)]
