"""A tiny blocking Kafka client built on roost's codec, for tests that need exact bytes on the wire
(re-sent batches, garbage frames). Real client libraries are used everywhere else."""

from __future__ import annotations

import socket
import struct
from typing import Any

from roost.wire.kafka import RequestHeader, decode_response, encode_request

SIZE = struct.Struct(">i")


class WireClient:
    def __init__(self, address: str, timeout: float = 30.0, client_id: str = "roost-test") -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.client_id = client_id
        self._correlation = 0

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read_exact(self, size: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < size:
            chunk = self.sock.recv(size - len(chunks))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks += chunk
        return bytes(chunks)

    def read_frame(self) -> bytes:
        (size,) = SIZE.unpack(self._read_exact(4))
        return self._read_exact(size)

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
