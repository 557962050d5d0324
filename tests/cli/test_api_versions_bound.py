"""The CLI's hand-read ApiVersions exchange (roost.admin.kafka_client.broker_api_keys) reads no
answer larger than an ApiVersions answer can be: a peer that announces a gigabyte (not a Kafka
broker, or a broken one) is taken as "APIs unknown" at once, not read into memory."""

from __future__ import annotations

import socket
import struct
import threading

from roost.admin.kafka_client import MAX_API_VERSIONS_BYTES, broker_api_keys
from roost.admin.target import Target


def answer_once(announced_size: int, body: bytes, hung_up: list[bool] | None = None,
                ) -> tuple[socket.socket, threading.Thread]:
    """A one-connection server that answers any request with `announced_size` and `body`, then
    notes in `hung_up` whether the client closed within 3 s (it has stopped reading) or not."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(5)

    def serve() -> None:
        connection, _ = server.accept()
        with connection:
            connection.recv(1024)
            connection.sendall(struct.pack(">i", announced_size) + body)
            connection.settimeout(3)
            try:
                closed = connection.recv(1) == b""
            except ConnectionResetError:  # closed with our bytes unread
                closed = True
            except OSError:  # the timeout: still reading
                closed = False
            if hung_up is not None:
                hung_up.append(closed)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server, thread


def test_an_oversized_answer_is_not_read() -> None:
    hung_up: list[bool] = []
    server, thread = answer_once(1 << 30, b"\0" * 64, hung_up)
    try:
        target = Target(f"127.0.0.1:{server.getsockname()[1]}", timeout_s=10)
        assert broker_api_keys(target) is None
    finally:
        thread.join(5)
        server.close()
    assert MAX_API_VERSIONS_BYTES < 1 << 30
    assert hung_up == [True], "the client kept reading an answer no ApiVersions answer can be"


def test_a_short_answer_is_unknown_not_an_exception() -> None:
    server, thread = answer_once(4, b"\0\0\0\1")
    try:
        assert broker_api_keys(Target(f"127.0.0.1:{server.getsockname()[1]}", timeout_s=5)) is None
    finally:
        thread.join(5)
        server.close()


def test_a_well_formed_answer_is_read() -> None:
    body = struct.pack(">ihi", 1, 0, 2) + struct.pack(">hhh", 0, 0, 9) + struct.pack(">hhh", 18, 0, 3)
    server, thread = answer_once(len(body), body)
    try:
        assert broker_api_keys(Target(f"127.0.0.1:{server.getsockname()[1]}", timeout_s=5)) == {0, 18}
    finally:
        thread.join(5)
        server.close()
