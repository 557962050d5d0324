"""A few hand-encoded Kafka requests, enough to move raw RecordBatch bytes in and out of a real
Kafka-protocol broker (librdkafka's mock cluster) without any client decoding them for us."""

from __future__ import annotations

import socket
import struct

from roost.wire.kafka import FrameSplitter
from tests.support.kafka_wire import recv_frame

FETCH_V4 = (1, 4)
PRODUCE_V3 = (0, 3)


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        length = self.take(">h")
        raw = self.data[self.pos : self.pos + length]
        self.pos += length
        return raw.decode()

    def bytes_(self) -> bytes | None:
        length = self.take(">i")
        if length < 0:
            return None
        raw = self.data[self.pos : self.pos + length]
        self.pos += length
        return raw


def _roundtrip(address: tuple[str, int], api: tuple[int, int], body: bytes, timeout: float = 30.0) -> bytes:
    api_key, api_version = api
    header = struct.pack(">hhi", api_key, api_version, 7) + _string("roost-tests")
    frame = header + body
    with socket.create_connection(address, timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        response = bytes(recv_frame(sock, FrameSplitter(1 << 30), []))
    assert struct.unpack_from(">i", response, 0)[0] == 7, "correlation id mismatch"
    return response[4:]


def fetch_raw(address: tuple[str, int], topic: str, partition: int, offset: int) -> tuple[int, bytes]:
    """Fetch v4 of one partition: (error code, the raw records bytes)."""
    body = struct.pack(">iiiib", -1, 500, 1, 16 << 20, 0)
    body += struct.pack(">i", 1) + _string(topic)
    body += struct.pack(">i", 1) + struct.pack(">iqi", partition, offset, 16 << 20)
    reader = _Reader(_roundtrip(address, FETCH_V4, body))
    reader.take(">i")  # throttle time
    assert reader.take(">i") == 1
    assert reader.string() == topic
    assert reader.take(">i") == 1
    assert reader.take(">i") == partition
    error = reader.take(">h")
    reader.take(">q")  # high watermark
    reader.take(">q")  # last stable offset
    aborted = reader.take(">i")
    reader.pos += max(aborted, 0) * 16
    return error, reader.bytes_() or b""


def produce_raw(address: tuple[str, int], topic: str, partition: int, records: bytes) -> tuple[int, int]:
    """Produce v3 (acks=1) of raw batches: (error code, base offset)."""
    body = struct.pack(">hhi", -1, 1, 30000)
    body += struct.pack(">i", 1) + _string(topic)
    body += struct.pack(">i", 1) + struct.pack(">ii", partition, len(records)) + records
    reader = _Reader(_roundtrip(address, PRODUCE_V3, body))
    assert reader.take(">i") == 1
    assert reader.string() == topic
    assert reader.take(">i") == 1
    assert reader.take(">i") == partition
    error = reader.take(">h")
    base_offset = reader.take(">q")
    return error, base_offset
