"""The source's own read path without Spark: Roost's fetch client against a real `roost` process,
batches produced by real clients (confluent-kafka, kafka-python) in every codec decoded into the
Arrow columns the librdkafka reader produces, retries over a broker restart, the poll timeout,
data loss, and the batch walk's rules (control batches, aborted transactions, partial batches)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")

from roost.spark import kafka_io, record_reader  # noqa: E402
from roost.spark.arrow_columns import to_record_batch  # noqa: E402
from roost.spark.driver_queries import RoostClusterView  # noqa: E402
from roost.spark.fetch_client import (  # noqa: E402
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ClusterClient,
    Retriable,
    parse_servers,
)
from roost.spark.offsets import DataLossError, OffsetRange, TopicPartition  # noqa: E402
from roost.spark.options import OptionError, Subscription, parse_reader_options  # noqa: E402
from roost.spark.record_reader import FetchWalk  # noqa: E402
from roost.spark.schema import source_arrow_schema  # noqa: E402
from roost.wire.kafka import ErrorCode  # noqa: E402
from roost.wire.kafka.record_columns import RecordColumns  # noqa: E402
from roost.wire.kafka.records import InvalidRecordBatch, build_batch  # noqa: E402
from tests.spark.fixtures import start_node  # noqa: E402
from tests.spark.kafka_helpers import RecordingProducer, create_topics, delete_records_before  # noqa: E402
from tests.support.procs import RoostProcess, free_ports  # noqa: E402

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
BASE_MS = 1_790_000_000_000


def roost_read(bootstrap: str, tp: TopicPartition, start: int, end: int, fail_on_data_loss: bool = True,
               poll_timeout_ms: int = 30_000) -> Any:
    batches = list(record_reader.read_range({"bootstrap.servers": bootstrap}, OffsetRange(tp, start, end),
                                            fail_on_data_loss, poll_timeout_ms))
    return pa.Table.from_batches(batches, schema=source_arrow_schema())


def librdkafka_read(bootstrap: str, tp: TopicPartition, start: int, end: int) -> Any:
    batches = list(kafka_io.read_range({"bootstrap.servers": bootstrap}, OffsetRange(tp, start, end), True, 30_000))
    return pa.Table.from_batches(batches, schema=source_arrow_schema())


def produce_mixed(producer: RecordingProducer, topic: str, count: int, tag: str) -> None:
    """Null keys and values, empty and null header values, distinct timestamps."""
    for n in range(count):
        key = None if n % 7 == 0 else f"{tag}-k{n % 13}".encode()
        value = b"" if n % 11 == 0 else f"{tag}-value-{n}".encode() * (1 + n % 4)
        headers = [("n", str(n).encode()), ("empty", b""), ("none", None)] if n % 3 else []
        producer.send(topic, value, key=key, headers=headers, partition=0, timestamp_ms=BASE_MS + n)
    producer.producer.produce(topic, None, b"tombstone-key", partition=0, timestamp=BASE_MS)  # a null value
    producer.flush()


@pytest.mark.parametrize("codec", CODECS)
def test_batches_from_confluent_kafka_in_every_codec_decode_as_librdkafka_reads_them(
        roost_node: RoostProcess, codec: str) -> None:
    bootstrap = roost_node.address("kafka")
    topic = f"rr-ck-{codec}"
    create_topics(bootstrap, {topic: 1})
    producer = RecordingProducer(bootstrap, **{"compression.type": codec, "linger.ms": 20})
    produce_mixed(producer, topic, 500, codec)
    tp = TopicPartition(topic, 0)
    ours = roost_read(bootstrap, tp, 0, 501)
    assert ours.num_rows == 501
    assert ours.equals(librdkafka_read(bootstrap, tp, 0, 501))
    # A slice that starts and ends inside batches.
    assert roost_read(bootstrap, tp, 37, 333).equals(librdkafka_read(bootstrap, tp, 37, 333))
    rows = ours.to_pylist()
    by_offset = {p.offset: p for p in producer.acked}
    for row in rows[:500]:
        produced = by_offset[row["offset"]]
        assert (row["key"], row["value"]) == (produced.key, produced.value)
        assert [(h["key"], h["value"]) for h in row["headers"]] == list(produced.headers)
        assert row["timestamp"].timestamp() * 1000 == produced.timestamp_ms
        assert (row["topic"], row["partition"], row["timestampType"]) == (topic, 0, 0)
    assert (rows[500]["key"], rows[500]["value"]) == (b"tombstone-key", None)


@pytest.mark.parametrize("codec", CODECS)
def test_batches_from_kafka_python_in_every_codec(roost_node: RoostProcess, codec: str) -> None:
    kafka = pytest.importorskip("kafka")
    bootstrap = roost_node.address("kafka")
    topic = f"rr-kp-{codec}"
    create_topics(bootstrap, {topic: 1})
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                                   linger_ms=20, batch_size=64 * 1024)
    try:
        sent = []
        for n in range(300):
            key = None if n % 5 == 0 else f"k{n}".encode()
            headers = [("h", f"{n}".encode()), ("empty", b"")] if n % 2 else []  # it sends no null values
            value = f"kafka-python {codec} {n}".encode()
            sent.append((key, value, [(k, v) for k, v in headers]))
            producer.send(topic, value=value, key=key, headers=headers, partition=0, timestamp_ms=BASE_MS + n)
        producer.flush(60)
    finally:
        producer.close(30)
    rows = roost_read(bootstrap, TopicPartition(topic, 0), 0, 300).to_pylist()
    assert [(r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]]) for r in rows] == sent
    assert [r["offset"] for r in rows] == list(range(300))
    assert roost_read(bootstrap, TopicPartition(topic, 0), 0, 300).equals(
        librdkafka_read(bootstrap, TopicPartition(topic, 0), 0, 300))


def test_fetch_client_answers_metadata_offsets_and_out_of_range(roost_node: RoostProcess) -> None:
    bootstrap = roost_node.address("kafka")
    create_topics(bootstrap, {"rr-fc": 3})
    producer = RecordingProducer(bootstrap)
    for n in range(90):
        producer.send("rr-fc", f"v{n}".encode(), partition=n % 3)
    producer.flush()
    client = ClusterClient(bootstrap)
    try:
        assert client.topics(lambda name: name.startswith("rr-fc")) == {"rr-fc": [0, 1, 2]}
        tps = [TopicPartition("rr-fc", p) for p in range(3)]
        assert client.list_offsets(tps, EARLIEST_TIMESTAMP) == dict.fromkeys(tps, 0)
        assert client.list_offsets(tps, LATEST_TIMESTAMP) == dict.fromkeys(tps, 30)
        fetched = client.fetch(tps[1], 10, 100, 1 << 20)
        assert (fetched.error_code, fetched.high_watermark, fetched.log_start_offset) == (0, 30, 0)
        columns = RecordColumns()
        assert FetchWalk(fetched.records, []).append(columns, 10, 30) == 30
        assert list(columns.offsets) == list(range(10, 30))
        assert client.fetch(tps[0], 31, 100, 1 << 20).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        with pytest.raises(Retriable, match=r"UNKNOWN_TOPIC_OR_PARTITION|no leader"):
            client.leader(TopicPartition("rr-no-such-topic", 0))
    finally:
        client.close()
    view = RoostClusterView({"bootstrap.servers": bootstrap})
    try:
        assert view.partitions(Subscription(pattern="rr-f.*")) == tps
        assert view.watermarks(tps) == (dict.fromkeys(tps, 0), dict.fromkeys(tps, 30))
    finally:
        view.close()


def test_a_broker_that_is_down_is_retriable_and_the_read_times_out_naming_the_option() -> None:
    port = free_ports(1)[0]
    with pytest.raises(Retriable, match="cannot connect"):
        ClusterClient(f"127.0.0.1:{port}").leader(TopicPartition("t", 0))
    with pytest.raises(TimeoutError, match=r"kafkaConsumer\.pollTimeoutMs"):
        roost_read(f"127.0.0.1:{port}", TopicPartition("t", 0), 0, 10, poll_timeout_ms=1500)


def test_a_read_rides_out_a_broker_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Small fetches and Arrow batches: the read is paused after its first batch while the broker restarts.
    monkeypatch.setattr(record_reader, "PARTITION_MAX_BYTES", 4096)
    monkeypatch.setattr(record_reader, "ARROW_BATCH_ROWS", 200)
    node = start_node(tmp_path / "node")
    port = node.port("kafka")
    try:
        bootstrap = node.address("kafka")
        create_topics(bootstrap, {"rr-restart": 1})
        producer = RecordingProducer(bootstrap, **{"linger.ms": 0, "batch.size": 2000})
        for n in range(4000):
            producer.send("rr-restart", f"value-{n}".encode() * 4, partition=0)
        producer.flush()
        del producer
        tp = TopicPartition("rr-restart", 0)
        batches: Iterator[Any] = record_reader.read_range({"bootstrap.servers": bootstrap}, OffsetRange(tp, 0, 4000),
                                                          True, 60_000)
        first = next(batches)
        node.stop()
        restarted: list[RoostProcess] = []
        # Start the broker again a moment after the reader has found it gone.
        timer = threading.Timer(1.0, lambda: restarted.append(start_node(tmp_path / "node", port)))
        timer.start()
        try:
            rest = list(batches)
        finally:
            timer.join()
            node = restarted[0] if restarted else node
        assert first.num_rows < 4000, "the first batch should come before the restart"
        offsets = [o for b in [first, *rest] for o in b.column("offset").to_pylist()]
        assert offsets == list(range(4000))
    finally:
        node.stop()


def test_records_removed_before_the_read_are_data_loss(roost_node: RoostProcess) -> None:
    bootstrap = roost_node.address("kafka")
    create_topics(bootstrap, {"rr-loss": 1})
    producer = RecordingProducer(bootstrap)
    for n in range(100):
        producer.send("rr-loss", f"v{n}".encode(), partition=0)
    producer.flush()
    delete_records_before(bootstrap, "rr-loss", 0, 40)
    tp = TopicPartition("rr-loss", 0)
    with pytest.raises(DataLossError, match=r"Cannot fetch offsets \[10, 40\) of rr-loss-0"):
        roost_read(bootstrap, tp, 10, 100)
    assert roost_read(bootstrap, tp, 10, 100, fail_on_data_loss=False).column("offset").to_pylist() == \
        list(range(40, 100))


# ------------------------------------------------------------------ the batch walk, without a broker

def _control(producer_id: int, abort: bool, offset: int) -> bytes:
    key = (0).to_bytes(2, "big") + (0 if abort else 1).to_bytes(2, "big")
    return build_batch([(key, b"\x00\x00\x00\x00\x00\x00")], base_offset=offset, timestamp_ms=5,
                       producer_id=producer_id, producer_epoch=0, is_transactional=True, is_control=True)


def _walk(buffer: bytes, start: int, end: int, aborted: list[tuple[int, int]] | None = None) -> tuple[list[int], int]:
    columns = RecordColumns()
    walk = FetchWalk(memoryview(buffer), aborted or [])
    next_offset = walk.append(columns, start, end)
    assert walk.done
    return list(columns.offsets), next_offset


def test_control_batches_and_aborted_transactions_are_skipped() -> None:
    def txn(producer_id: int, offset: int) -> bytes:
        return build_batch([(b"k", b"v")] * 2, base_offset=offset, timestamp_ms=5, producer_id=producer_id,
                           producer_epoch=0, base_sequence=0, is_transactional=True)

    log = (build_batch([(b"k", b"plain")], base_offset=0, timestamp_ms=5) + txn(7, 1) + txn(8, 3)
           + _control(7, True, 5) + _control(8, False, 6) + txn(7, 7) + _control(7, False, 9))
    offsets, next_offset = _walk(log, 0, 100, aborted=[(7, 1)])
    assert offsets == [0, 3, 4, 7, 8]  # producer 7's first transaction was aborted; its second commits
    assert next_offset == 10
    # A range that ends on a control record is finished, not waited for.
    assert _walk(log, 0, 7) == ([0, 1, 2, 3, 4], 7)
    # Starting after the abort marker: producer 7's later transaction is still read.
    assert _walk(log, 6, 100, aborted=[(7, 1)]) == ([7, 8], 10)


def test_the_walk_starts_inside_a_batch_stops_at_the_end_and_leaves_a_partial_batch() -> None:
    first = build_batch([(None, b"a")] * 5, base_offset=10, timestamp_ms=5)
    second = build_batch([(None, b"b")] * 5, base_offset=15, timestamp_ms=5)
    assert _walk(first + second, 12, 17) == ([12, 13, 14, 15, 16], 17)
    walk = FetchWalk(memoryview(first + second[:70]), [])
    assert (walk.append(RecordColumns(), 12, 20), walk.done, walk.cut) == (15, True, len(second))
    # Full columns stop the walk before the next batch; it goes on from there once flushed.
    walk, columns = FetchWalk(memoryview(first + second), []), RecordColumns()
    assert (walk.append(columns, 10, 20, max_rows=3), walk.done) == (15, False)
    assert (walk.append(RecordColumns(), 15, 20, max_rows=3), walk.done) == (20, True)
    corrupt = bytearray(first)
    corrupt[-1] ^= 0xFF
    with pytest.raises(InvalidRecordBatch, match="CRC"):
        _walk(bytes(corrupt), 10, 15)


def test_arrow_columns_refuse_header_keys_that_are_not_utf8() -> None:
    batch = build_batch([(b"k", b"v", [("ok", b"1")])], base_offset=0, timestamp_ms=5)
    broken = batch.replace(b"\x04ok", b"\x04\xff\xfe")
    columns = RecordColumns()
    FetchWalk(memoryview(_recrc(broken)), []).append(columns, 0, 1)
    with pytest.raises(InvalidRecordBatch, match="not UTF-8"):
        to_record_batch(columns, TopicPartition("t", 0))


def _recrc(batch: bytes) -> bytes:
    import crc32c

    from roost.wire.kafka.records import CRC_START
    return batch[:17] + crc32c.crc32c(batch[CRC_START:]).to_bytes(4, "big") + batch[21:]


def test_the_consumer_option_picks_the_client_that_honours_the_kafka_options() -> None:
    base = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t"}
    assert parse_reader_options(base, streaming=True).consumer == "roost"
    assert parse_reader_options({**base, "kafka.client.id": "me", "kafka.security.protocol": "PLAINTEXT"},
                                streaming=True).consumer == "roost"
    assert parse_reader_options({**base, "kafka.fetch.wait.max.ms": "10"}, streaming=True).consumer == "librdkafka"
    assert parse_reader_options({**base, "consumer": "librdkafka"}, streaming=True).consumer == "librdkafka"
    with pytest.raises(OptionError, match=r"kafka\.security\.protocol"):
        parse_reader_options({**base, "consumer": "roost", "kafka.security.protocol": "ssl"}, streaming=True)
    with pytest.raises(OptionError, match="consumer"):
        parse_reader_options({**base, "consumer": "fast"}, streaming=True)
    assert parse_servers("a:1, [::1]:2") == [("a", 1), ("::1", 2)]
