"""A tiny blocking Kafka client built on roost's codec, for tests that need exact bytes on the wire
(re-sent batches, garbage frames). Real client libraries are used everywhere else."""

from __future__ import annotations

import select
import socket
from typing import Any

from roost.wire.kafka import FrameSplitter, RequestHeader, decode_response, encode_request
from roost.wire.kafka.records import BatchHeader, iter_batch_headers

MAX_RESPONSE_BYTES = 1 << 30
FETCH = 1
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def recv_frame(sock: socket.socket, frames: FrameSplitter, pending: list[bytearray]) -> bytearray:
    """The next whole frame from a blocking socket (`pending` holds frames already cut)."""
    while not pending:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("connection closed by the peer")
        pending.extend(frames.split(chunk))
    return pending.pop(0)


class WireClient:
    def __init__(self, address: str, timeout: float = 30.0, client_id: str = "roost-test",
                 receive_buffer: int | None = None) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if receive_buffer is not None:  # before connecting, so that the window is small from the start
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.sock.settimeout(timeout)
        self.sock.connect((host, int(port)))
        self.client_id = client_id
        self._correlation = 0
        self._frames = FrameSplitter(MAX_RESPONSE_BYTES)
        self._pending: list[bytearray] = []

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        return bytes(recv_frame(self.sock, self._frames, self._pending))

    def frame(self, api_key: int, version: int, body: dict[str, Any]) -> tuple[int, bytes]:
        """A request frame with the next correlation id, not sent (to pipeline several in one write)."""
        self._correlation += 1
        header = RequestHeader(api_key, version, self._correlation, self.client_id)
        return self._correlation, b"".join(bytes(b) for b in encode_request(header, body))

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> int:
        correlation, data = self.frame(api_key, version, body)
        self.sock.sendall(data)
        return correlation

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        return self.receive(api_key, version, self.send(api_key, version, body))

    def receive(self, api_key: int, version: int, correlation: int) -> dict[str, Any]:
        """Read the next response, which must answer request `correlation` (responses come in order)."""
        got, response = decode_response(api_key, version, self.read_frame())
        assert got == correlation, (got, correlation)
        return response

    def has_data(self) -> bool:
        """Whether the broker has sent something not read yet (checked without waiting)."""
        if self._pending or self._frames.buffered:
            return True
        readable, _, _ = select.select([self.sock], [], [], 0)
        return bool(readable)

    def is_closed_by_peer(self, timeout: float = 10.0) -> bool:
        """True when the broker closes the connection (reads EOF or a reset) within `timeout`."""
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()


def stored_batch_headers(address: str, topic: str, partition: int, max_fetches: int = 10_000) -> list[BatchHeader]:
    """The headers of the batches the broker at `address` holds for one partition, read by Fetch
    from offset 0 to the end (batches are stored as the producers sent them)."""
    client = WireClient(address)
    found: list[BatchHeader] = []
    try:
        offset = 0
        for _ in range(max_fetches):
            response = client.request(FETCH, 11, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 8 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
                "forgotten_topics_data": [],
                "topics": [{"topic": topic, "partitions": [{
                    "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                    "log_start_offset": -1, "partition_max_bytes": 8 << 20}]}]})
            result = response["responses"][0]["partitions"][0]
            assert result["error_code"] == 0, result["error_code"]
            headers = [header for _, header in iter_batch_headers(bytes(result["records"] or b""))]
            if not headers:
                return found
            found.extend(headers)
            offset = headers[-1].next_offset
        raise AssertionError(f"{topic}/{partition}: still reading after {max_fetches} fetches")
    finally:
        client.close()


def stored_batch_codecs(address: str, topic: str, partitions: int, max_fetches: int = 10_000) -> set[str]:
    """The compression codecs of the batches the broker holds for `topic`: what the producers
    really sent, since batches are stored as they came."""
    return {CODEC_NAMES[header.compression] for partition in range(partitions)
            for header in stored_batch_headers(address, topic, partition, max_fetches)}
