"""Slow-loris clients on a broker's TLS listener (docs/hostile-input.md, "Abusive clients";
issue 35): connections that never begin the TLS handshake, ones that send part of a ClientHello
and stall, ones that do not speak TLS at all, and ones that finish the handshake and then trickle
a request. Each is cut off within its configured bound (`ssl.handshake.timeout.ms`, then
`request.receive.timeout.ms`), the broker says so once, not once per connection, and a
confluent-kafka client on the same TLS listener produces and consumes meanwhile. A handshake
given up also gives back its place under `max.connections` (the event loop tells the connection
nothing of it: roost.broker.net.tls_handshakes).

One real `roost` broker for the module, PLAINTEXT and SSL listeners, a throw-away CA from trustme.
The large versions, with RSS: `scripts/abuse_run.py tls-loris`.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from tests.broker.conftest import FAST_GROUPS
from tests.support.abuse import (
    client_hello,
    close_all,
    connect,
    consume_all,
    count_open,
    open_idle,
    produce_latency,
    raise_open_files,
    rss_mib,
    send_each,
    tls_connect,
    wait_closed,
)
from tests.support.procs import RoostProcess, start_roost

HANDSHAKE_S = 1.0  # ssl.handshake.timeout.ms
RECEIVE_S = 1.5  # request.receive.timeout.ms
MAX_CONNECTIONS = 200
SSL_LISTENER = "kafka listener ssl"
GIVEN_UP = "TLS handshake not done within"  # the broker's one line for them


def tls_broker_args(data_dir: Path, broker_pem: Path, *more: str) -> list[str]:
    """`roost up` with a PLAINTEXT and an SSL listener (shared with scripts/abuse_run.py)."""
    return ["up", "--no-keeper", "--data-dir", str(data_dir), "--kafka-port", "0",
            "--listeners", "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "--listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SSL:SSL",
            "--ssl.keystore.location", str(broker_pem), *more]


def make_certificates(where: Path) -> tuple[Path, Path]:
    """A CA's certificate and the broker's key and certificate chain (for 127.0.0.1)."""
    ca = trustme.CA()
    ca_pem, broker_pem = where / "ca.pem", where / "broker.pem"
    ca.cert_pem.write_to_path(ca_pem)
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(broker_pem)
    return ca_pem, broker_pem


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RoostProcess, Path]]:
    raise_open_files(MAX_CONNECTIONS * 3 + 500)
    where = tmp_path_factory.mktemp("tls-abuse")
    ca_pem, broker_pem = make_certificates(where)
    proc = start_roost(tls_broker_args(
        where / "data", broker_pem,
        "--ssl.handshake.timeout.ms", str(int(HANDSHAKE_S * 1000)),
        "--request.receive.timeout.ms", str(int(RECEIVE_S * 1000)),
        "--request.receive.min.bytes.per.second", str(1 << 20),
        "--max.connections", str(MAX_CONNECTIONS), *FAST_GROUPS), expect=(SSL_LISTENER,))
    yield proc, ca_pem
    proc.stop()


def client_settings(ca: Path) -> dict[str, str]:
    return {"security.protocol": "SSL", "ssl.ca.location": str(ca)}


def served(tls: tuple[RoostProcess, Path], topic: str, records: int = 20) -> None:
    """A confluent-kafka producer and consumer get through on the SSL listener."""
    proc, ca = tls
    bootstrap, settings = proc.address(SSL_LISTENER), client_settings(ca)
    latency = produce_latency(bootstrap, topic, records, settings=settings)
    print(f"{topic}: produce over TLS {latency}")
    assert consume_all(bootstrap, topic, records + 1, settings=settings) == records + 1


def test_handshakes_never_begun_stalled_or_not_tls_are_cut_off_and_others_served(
        tls: tuple[RoostProcess, Path]) -> None:
    proc, _ = tls
    host, port = proc.listeners[SSL_LISTENER]
    before = rss_mib(proc.popen.pid)
    started = time.monotonic()
    silent = open_idle(host, port, 80)
    hello = client_hello()
    stalled = [connect(host, port) for _ in range(40)]
    for sock in stalled:
        sock.sendall(hello[:len(hello) // 2])
    not_tls = [connect(host, port) for _ in range(10)]
    for sock in not_tls:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    abusers = silent + stalled + not_tls
    try:
        # (Not TLS at all may be refused at once, or when its handshake times out: either will do.)
        if time.monotonic() - started < HANDSHAKE_S - 0.5:  # (a loaded machine may be slower to open them)
            assert count_open(silent + stalled) == len(silent + stalled), "closed before ssl.handshake.timeout.ms"
        held = rss_mib(proc.popen.pid)
        served(tls, "tls-handshake-held")
        waited = wait_closed(abusers, HANDSHAKE_S + 3)
        elapsed = time.monotonic() - started
        print(f"{len(abusers)} handshakes cut {elapsed:.1f} s after the first opened "
              f"({waited:.1f} s of waiting); broker RSS {before:.0f} -> {held:.0f} MiB")
        # None was closed before the timeout: the last opened well within it must have lived it out.
        assert elapsed >= HANDSHAKE_S - 0.2
    finally:
        close_all(abusers)
    served(tls, "tls-handshake-after")
    # One line for all of them, not one per connection.
    assert proc.text().count(GIVEN_UP) == 1, proc.text()[-3000:]


def test_given_up_handshakes_give_back_their_places_under_max_connections(tls: tuple[RoostProcess, Path]) -> None:
    proc, _ = tls
    host, port = proc.listeners[SSL_LISTENER]
    # More silent connections than max.connections: while they are held, well-behaved clients are
    # refused (the cap is the broker's, whoever holds it); once their handshakes are given up,
    # every place is free again.
    silent = open_idle(host, port, MAX_CONNECTIONS + 50)
    try:
        wait_closed(silent, HANDSHAKE_S + 3)
    finally:
        close_all(silent)
    served(tls, "tls-after-the-cap")


def test_a_request_trickled_after_the_handshake_is_cut_off_by_the_receive_timeout(
        tls: tuple[RoostProcess, Path]) -> None:
    proc, ca = tls
    host, port = proc.listeners[SSL_LISTENER]
    # The handshake done, a request's length prefix and one byte of it; then a byte every 0.3 s
    # (never idle) for some, nothing more for the others.
    trickle = [tls_connect(host, port, ca) for _ in range(30)]
    silent = [tls_connect(host, port, ca) for _ in range(20)]
    for sock in trickle + silent:
        sock.sendall(b"\x00\x00\x00\x28\x00")
    sockets: list[socket.socket] = [*trickle, *silent]
    try:
        served(tls, "tls-loris-held", records=10)
        started = time.monotonic()
        while count_open(trickle) and time.monotonic() - started < RECEIVE_S + 3:
            send_each(trickle, b"\x00")
            time.sleep(0.3)
        assert count_open(trickle) == 0, "a byte-by-byte sender over TLS kept its connection past the timeout"
        wait_closed(silent, 3)
    finally:
        close_all(sockets)
    assert proc.text().count("still incomplete") == 1, proc.text()[-3000:]


def test_the_broker_survived(tls: tuple[RoostProcess, Path]) -> None:
    proc, _ = tls
    assert proc.popen.poll() is None
    assert "Traceback" not in proc.text(), proc.text()[-3000:]
