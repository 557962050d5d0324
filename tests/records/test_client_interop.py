"""Our RecordBatch code against a real client, over real sockets.

librdkafka (confluent-kafka) produces into its own in-process mock Kafka cluster; the raw batch
bytes are then fetched with a hand-encoded Fetch request, so nothing decodes them but our code.
The other way, batches we build are produced raw into the mock cluster and read back by a
confluent-kafka consumer, which decompresses and parses them itself.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import confluent_kafka as ck
import pytest

from roost.wire.kafka import records as rec
from tests.records.raw_kafka import fetch_raw, produce_raw

CODEC_NAMES = {
    rec.COMPRESSION_NONE: "none",
    rec.COMPRESSION_GZIP: "gzip",
    rec.COMPRESSION_SNAPPY: "snappy",
    rec.COMPRESSION_LZ4: "lz4",
    rec.COMPRESSION_ZSTD: "zstd",
}
MESSAGES = [
    (b"user-%d" % i, b'{"event": "message sent", "n": %d}' % i * (i + 1), [("seq", b"%d" % i)])
    for i in range(20)
] + [(None, b"keyless", []), (b"tombstone", None, [("null", None)])]


@pytest.fixture(scope="module")
def mock_cluster() -> Iterator[tuple[ck.Producer, tuple[str, int]]]:
    """A producer that owns a one-broker librdkafka mock cluster, and that broker's address."""
    producer = ck.Producer({"test.mock.num.brokers": 1, "linger.ms": 5, "log_level": 3})
    try:
        broker = producer.list_topics(timeout=30).brokers[1]
        yield producer, (broker.host, broker.port)
    finally:
        producer.flush(30)


@pytest.mark.parametrize("codec", sorted(CODEC_NAMES))
def test_decode_batches_produced_by_librdkafka(
    mock_cluster: tuple[ck.Producer, tuple[str, int]], codec: int
) -> None:
    _, address = mock_cluster
    topic = f"from-librdkafka-{CODEC_NAMES[codec]}"
    producer = ck.Producer(
        {
            "bootstrap.servers": f"{address[0]}:{address[1]}",
            "compression.type": CODEC_NAMES[codec],
            # One batch for all messages as a rule (flush sends it at once).
            "linger.ms": 10_000,
        }
    )
    for key, value, headers in MESSAGES:
        producer.produce(
            topic, key=key, value=value, headers=headers, partition=0, timestamp=1_700_000_000_000
        )
    assert producer.flush(30) == 0

    # The mock answers a fetch with what it has at hand, which under load can be the first of
    # two batches: fetch on from the next offset until every message is in (a bounded number).
    decoded: list[rec.Record] = []
    codecs: set[int] = set()
    for _ in range(10):
        error, raw = fetch_raw(address, topic, 0, len(decoded))
        assert error == 0
        if not raw:
            time.sleep(0.1)
            continue
        batches = rec.validate_batches(memoryview(raw))  # every CRC checks out
        codecs |= {header.compression for _, header in batches}
        decoded += rec.iter_records(raw)
        if len(decoded) >= len(MESSAGES):
            break
    # librdkafka sends a batch plain when compressing would not shrink it (a batch a loaded
    # machine's flush cut to a message or two, once in CI): the rest come compressed with `codec`.
    assert codec in codecs and codecs <= {codec, rec.COMPRESSION_NONE}, codecs
    assert [(r.key, r.value, r.headers) for r in decoded] == [(k, v, h) for k, v, h in MESSAGES]
    assert [r.offset for r in decoded] == list(range(len(MESSAGES)))
    assert {r.timestamp for r in decoded} == {1_700_000_000_000}


@pytest.mark.parametrize("codec", sorted(CODEC_NAMES))
def test_librdkafka_consumes_batches_we_built(
    mock_cluster: tuple[ck.Producer, tuple[str, int]], codec: int
) -> None:
    producer, address = mock_cluster
    topic = f"from-roost-{CODEC_NAMES[codec]}"
    producer.list_topics(topic, timeout=30)  # a metadata request makes the mock create the topic
    first = rec.build_batch(MESSAGES[:10], timestamp_ms=1_600_000_000_000, compression=codec)
    second = rec.build_batch(MESSAGES[10:], timestamp_ms=1_600_000_000_500, compression=codec)
    assert produce_raw(address, topic, 0, first) == (0, 0)
    assert produce_raw(address, topic, 0, second) == (0, 10)

    consumer = ck.Consumer(
        {
            "bootstrap.servers": f"{address[0]}:{address[1]}",
            "group.id": f"g-{topic}",
            "check.crcs": True,
            "log_level": 3,
        }
    )
    try:
        consumer.assign([ck.TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < len(MESSAGES) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append(message)
    finally:
        consumer.close()
    assert [(m.key(), m.value(), m.headers() or []) for m in got] == [(k, v, h) for k, v, h in MESSAGES]
    assert [m.offset() for m in got] == list(range(len(MESSAGES)))
    assert [m.timestamp()[1] for m in got] == [1_600_000_000_000] * 10 + [1_600_000_000_500] * 12
