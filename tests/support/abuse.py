"""Abusive clients for tests and scripts/abuse_run.py: idle connections by the thousand, slow-loris
senders, a client that never reads its answers; and the measures (broker RSS from /proc, a
well-behaved confluent-kafka client's latency) that show the broker keeps serving the others.

Only loopback: a source address other than 127.0.0.1 (127.0.0.2, ...) stands for a second host.
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer

from roost.wire.kafka import RequestHeader, encode_request


def rss_mib(pid: int) -> float:
    """Resident memory of process `pid` (VmRSS), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def raise_open_files(wanted: int) -> int:
    """Raise this process's soft open-files limit towards `wanted` (within the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft


def connect(host: str, port: int, source: str | None = None, timeout: float = 10.0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    if source is not None:
        sock.bind((source, 0))
    sock.connect((host, port))
    return sock


def open_idle(host: str, port: int, count: int, source: str | None = None) -> list[socket.socket]:
    """`count` connections that never send a byte (the broker accepts each before the next)."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sockets.append(connect(host, port, source))
    except BaseException:
        close_all(sockets)
        raise
    return sockets


def close_all(sockets: list[socket.socket]) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.close()
    sockets.clear()


def closed_by_peer(sock: socket.socket, timeout: float = 0.0) -> bool:
    """Whether the server has closed `sock` (EOF or reset), waiting at most `timeout` seconds
    (0: look without waiting). Answers sent before the close are skipped."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left > 0:
            sock.settimeout(left)
        else:
            sock.setblocking(False)
        try:
            if sock.recv(65536) == b"":
                return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except (TimeoutError, BlockingIOError):
            if time.monotonic() >= deadline:
                return False


TCP_ESTABLISHED = 1  # tcpi_state in Linux's struct tcp_info


def peer_gone(sock: socket.socket) -> bool:
    """Whether the server has closed or reset `sock`, looked up in the kernel's TCP state without
    reading a byte (reading would take answers that a never-reading client must leave unread)."""
    try:
        return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] != TCP_ESTABLISHED
    except OSError:
        return True


def count_open(sockets: list[socket.socket]) -> int:
    """How many of `sockets` the server still holds open (checked without waiting or reading)."""
    return sum(not peer_gone(sock) for sock in sockets)


def wait_closed(sockets: list[socket.socket], within: float, interval: float = 0.05) -> float:
    """Seconds until the server has closed every one of `sockets`; fails past `within`."""
    started = time.monotonic()
    while count_open(sockets):
        assert time.monotonic() - started < within, f"{count_open(sockets)} of {len(sockets)} still open"
        time.sleep(interval)
    return time.monotonic() - started


def send_each(sockets: list[socket.socket], data: bytes) -> None:
    """`data` written on each of `sockets` (a trickling client's next bytes); one the server has
    closed already is passed over."""
    for sock in sockets:
        try:
            sock.send(data)
        except OSError:
            pass


def request_frame(api_key: int, version: int, body: dict, correlation: int, client_id: str = "abuser") -> bytes:
    return b"".join(bytes(b) for b in encode_request(RequestHeader(api_key, version, correlation, client_id), body))


def api_versions_frame(correlation: int = 1) -> bytes:
    return request_frame(18, 3, {"client_software_name": "abuse", "client_software_version": "1"}, correlation)


def fetch_frame(topic: str, correlation: int, max_bytes: int = 50 << 20) -> bytes:
    """A Fetch v11 of partition 0 from offset 0 that answers at once with up to `max_bytes`."""
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                        "fetch_offset": 0, "log_start_offset": -1,
                                                        "partition_max_bytes": max_bytes}]}]}
    return request_frame(1, 11, body, correlation)


def start_slow_loris(host: str, port: int, declared: int, sent: int) -> socket.socket:
    """A connection that sends the length prefix of a `declared`-byte request and `sent` bytes of
    it (the caller trickles more, or nothing)."""
    sock = connect(host, port)
    sock.sendall(struct.pack(">i", declared) + b"\x00" * sent)
    return sock


def push_partial(host: str, port: int, declared: int, size: int, seconds: float) -> tuple[socket.socket, int]:
    """A connection that declares a `declared`-byte request and, for up to `seconds`, sends
    `size` bytes of it as fast as the broker takes them; then nothing. Returns the socket and how
    many bytes the kernel accepted (the broker read at most that)."""
    sock = connect(host, port)
    sock.setblocking(False)
    data = memoryview(struct.pack(">i", declared) + b"\x00" * min(size, declared - 1))
    sent, deadline = 0, time.monotonic() + seconds
    while sent < len(data) and time.monotonic() < deadline:
        try:
            sent += sock.send(data[sent:sent + (1 << 20)])
        except BlockingIOError:
            time.sleep(0.01)
    return sock, sent


def never_reader(host: str, port: int, topic: str, requests: int, receive_buffer: int = 4096) -> socket.socket:
    """A connection that pipelines `requests` large Fetches of `topic` and never reads an answer."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)  # before connecting: a small window
    sock.settimeout(10)
    sock.connect((host, port))
    data = b"".join(fetch_frame(topic, correlation) for correlation in range(1, requests + 1))
    sock.setblocking(False)
    with contextlib.suppress(BlockingIOError):  # what the broker does not read stays unsent: fine
        sock.send(data)
    return sock


@dataclass(frozen=True)
class Latency:
    p50_ms: float
    p99_ms: float
    max_ms: float
    count: int

    def __str__(self) -> str:
        return f"p50 {self.p50_ms:.2f} ms, p99 {self.p99_ms:.2f} ms, max {self.max_ms:.2f} ms over {self.count}"


def produce_latency(bootstrap: str, topic: str, count: int = 200, timeout: float = 10.0,
                    settings: dict[str, str] | None = None) -> Latency:
    """Send `count` 100-byte records one at a time (acks=all, each flushed) and time each.
    `settings`: more client settings (security.protocol, ssl.ca.location, ...)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all",
                         "socket.timeout.ms": int(timeout * 1000), "message.timeout.ms": int(timeout * 1000),
                         **(settings or {})})
    errors: list[str] = []
    acknowledged = [0]

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            errors.append(str(error))
        else:
            acknowledged[0] += 1

    producer.produce(topic, b"warm-up", on_delivery=delivered)
    if producer.flush(timeout * 3) != 0:
        raise AssertionError(f"the warm-up record to {topic} was not delivered")
    times = []
    for i in range(count):
        started = time.perf_counter()
        producer.produce(topic, b"%99d" % i, on_delivery=delivered)
        if producer.flush(timeout) != 0:
            raise AssertionError(f"record {i} to {topic} not delivered within {timeout} s")
        times.append((time.perf_counter() - started) * 1000)
        if acknowledged[0] != i + 2:  # flush returned once the broker acknowledged this one
            raise AssertionError(f"record {i} to {topic}: flush returned before its acknowledgement")
    if errors:
        raise AssertionError(f"delivery errors: {errors[:3]}")
    times.sort()
    return Latency(times[len(times) // 2], times[min(len(times) - 1, int(len(times) * 0.99))], times[-1], len(times))


def consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 30.0,
                settings: dict[str, str] | None = None) -> int:
    """Read `topic` from the start with a consumer group until `expected` records came (or the
    timeout); returns how many came."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"abuse-check-{topic}-{os.getpid()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **(settings or {})})
    got = 0
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while got < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got += 1
    finally:
        consumer.close()
    return got


def fill_topic(bootstrap: str, topic: str, mib: int) -> None:
    """Write about `mib` MiB of incompressible 100 kB records to `topic`."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "compression.type": "none", "message.max.bytes": 2 << 20})
    value = os.urandom(100_000)
    for _ in range(mib * 10):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) != 0:
        raise AssertionError(f"filling {topic} did not finish")


def client_hello() -> bytes:
    """The ClientHello a TLS 1.2/1.3 client opens with (made by `ssl` in memory, sent nowhere)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    handshake = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with contextlib.suppress(ssl.SSLWantReadError):
        handshake.do_handshake()
    return outgoing.read()


def tls_connect(host: str, port: int, ca: Path, timeout: float = 10.0) -> ssl.SSLSocket:
    """A connection whose TLS handshake is done (the server's certificate checked against `ca`)."""
    context = ssl.create_default_context(cafile=str(ca))
    return context.wrap_socket(connect(host, port, timeout=timeout), server_hostname=host)


@contextlib.contextmanager
def held(sockets: list[socket.socket]) -> Iterator[list[socket.socket]]:
    try:
        yield sockets
    finally:
        close_all(sockets)
