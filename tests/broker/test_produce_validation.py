"""Malformed batches are refused with Kafka's codes and nothing is appended; limits on size."""

from __future__ import annotations

import struct

import crc32c

from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import build_batch
from tests.broker.conftest import StartBroker
from tests.broker.test_idempotence import latest_offset, produce_batch
from tests.support.kafka_wire import WireClient
from tests.support.procs import RoostProcess

PRODUCE = 0


def good(n: int = 3) -> bytearray:
    return bytearray(build_batch([(b"k", f"v{i}".encode()) for i in range(n)], timestamp_ms=1_700_000_000_000))


def test_malformed_batches_are_refused_and_nothing_is_appended(broker: RoostProcess) -> None:
    client = WireClient(broker.address("kafka"))
    try:
        topic = "validated"
        assert produce_batch(client, topic, bytes(good()))["error_code"] == 0
        assert latest_offset(client, topic) == 3

        flipped = good()
        flipped[-1] ^= 0x01  # inside the CRC-covered records
        crc_bad = produce_batch(client, topic, bytes(flipped))
        assert crc_bad["error_code"] == ErrorCode.CORRUPT_MESSAGE

        miscounted = good()
        struct.pack_into(">i", miscounted, 57, 4)  # recordsCount 4, lastOffsetDelta says 3 records
        # with a correct CRC, so only the count is wrong
        struct.pack_into(">I", miscounted, 17, crc32c.crc32c(bytes(miscounted[21:])))
        assert produce_batch(client, topic, bytes(miscounted))["error_code"] == ErrorCode.INVALID_RECORD

        truncated = bytes(good())[:-5]
        assert produce_batch(client, topic, truncated)["error_code"] == ErrorCode.CORRUPT_MESSAGE

        old_magic = good()
        old_magic[16] = 1
        assert produce_batch(client, topic, bytes(old_magic))["error_code"] == ErrorCode.INVALID_RECORD

        # Two batches where the second is damaged: the whole request for the partition fails.
        second = good()
        second[-1] ^= 0x01
        assert produce_batch(client, topic, bytes(good()) + bytes(second))["error_code"] == ErrorCode.CORRUPT_MESSAGE

        assert latest_offset(client, topic) == 3, "a refused batch must not be appended"
        assert produce_batch(client, topic, bytes(good()))["error_code"] == 0
        assert latest_offset(client, topic) == 6
    finally:
        client.close()


def test_oversized_batch_is_message_too_large(start_broker: StartBroker) -> None:
    broker = start_broker("--message.max.bytes", "2000")
    client = WireClient(broker.address("kafka"))
    try:
        big = build_batch([(None, b"x" * 5000)], timestamp_ms=1)
        assert produce_batch(client, "limited", big)["error_code"] == ErrorCode.MESSAGE_TOO_LARGE
        assert latest_offset(client, "limited") == 0
    finally:
        client.close()


def test_produce_v2_is_answered_unsupported_version(broker: RoostProcess) -> None:
    client = WireClient(broker.address("kafka"))
    try:
        response = client.request(PRODUCE, 2, {"acks": 1, "timeout_ms": 1000, "topic_data": [
            {"name": "old", "partition_data": [{"index": 0, "records": b""}]}]})
        partition = response["responses"][0]["partition_responses"][0]
        assert partition["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    finally:
        client.close()
