"""A tiny blocking Kafka client built on roost's codec, for tests that need exact bytes on the wire
(re-sent batches, garbage frames). Real client libraries are used everywhere else."""

from __future__ import annotations

import socket
from typing import Any

from roost.wire.kafka import FrameSplitter, RequestHeader, decode_response, encode_request

MAX_RESPONSE_BYTES = 1 << 30


def recv_frame(sock: socket.socket, frames: FrameSplitter, pending: list[bytearray]) -> bytearray:
    """The next whole frame from a blocking socket (`pending` holds frames already cut)."""
    while not pending:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("connection closed by the peer")
        pending.extend(frames.split(chunk))
    return pending.pop(0)


class WireClient:
    def __init__(self, address: str, timeout: float = 30.0, client_id: str = "roost-test") -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.client_id = client_id
        self._correlation = 0
        self._frames = FrameSplitter(MAX_RESPONSE_BYTES)
        self._pending: list[bytearray] = []

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        return bytes(recv_frame(self.sock, self._frames, self._pending))

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> int:
        self._correlation += 1
        header = RequestHeader(api_key, version, self._correlation, self.client_id)
        self.sock.sendall(b"".join(bytes(b) for b in encode_request(header, body)))
        return self._correlation

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        correlation = self.send(api_key, version, body)
        got, response = decode_response(api_key, version, self.read_frame())
        assert got == correlation, (got, correlation)
        return response

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
