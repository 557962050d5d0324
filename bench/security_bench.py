"""What TLS and SASL cost: one `roost up` with PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512)
listeners on loopback, the same work over each in one run.

- produce: 100-byte messages with batching (confluent-kafka, linger.ms=5, acks=all), msg/s;
- caught-up reads: a consumer reading a topic already written (64 KiB values, 1 GB), MB/s;
- the broker's serve rate: the same reads by a raw fetch client that throws the bytes away;
- logins: SCRAM-SHA-256 (4096 iterations) and PLAIN logins per second over raw sockets
  (one connection each, sequential; the client's own PBKDF2 is part of a SCRAM login's time).

Prints figures with their conditions and the broker's CPU seconds; never asserts.

    .venv/bin/python bench/security_bench.py                 # ~1-2 minutes
    .venv/bin/python bench/security_bench.py --messages 500000 --read-mb 1024

The machine is shared and noisy: compare rows of the same run.
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import ssl
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import trustme
from broker_bench import CONSUMER_CONFIG, RawFetcher
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from process_cpu import cpu_seconds
from scramp import ScramClient

from roost.testing.node import RoostNode
from roost.wire.kafka import FrameSplitter, RequestHeader, decode_response, encode_request

LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
USER, PASSWORD = "bench", "bench-secret"


def start_node(root: Path) -> tuple[RoostNode, dict[str, int], Path]:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(root / "ca.pem")
    ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(root / "broker.pem")
    node = RoostNode.start(root / "data", {
        "listeners": ",".join(f"{name}://127.0.0.1:0" for name in LISTENERS),
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.location": str(root / "broker.pem"),
        "sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{USER}="{PASSWORD}";',
    })
    assert node.process is not None
    names = {name: f"kafka listener {name.lower().replace('_', '-')}" for name in LISTENERS}
    found = node.process.wait_listening(list(names.values()))
    ports = {name: found[label][1] for name, label in names.items()}
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
    for future in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            USER, ScramCredentialInfo(mechanism, 4096), PASSWORD.encode())
            for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)]).values():
        future.result(timeout=30)
    return node, ports, root / "ca.pem"


def client_config(listener: str, port: int, ca: Path) -> dict[str, str]:
    config = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": listener.lower()}
    if "SSL" in listener:
        config["ssl.ca.location"] = str(ca)
    if listener.startswith("SASL"):
        config.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": PASSWORD})
    return config


def measured(pid: int, work: Callable[[], float]) -> tuple[float, float, float]:
    """(work's figure, wall seconds, broker CPU seconds)."""
    cpu0, wall0 = cpu_seconds(pid), time.perf_counter()
    figure = work()
    return figure, time.perf_counter() - wall0, cpu_seconds(pid) - cpu0


def produce(config: dict[str, str], topic: str, count: int) -> float:
    producer = Producer({**config, "linger.ms": 5, "batch.size": 1_000_000, "acks": "all",
                         "queue.buffering.max.messages": 1_000_000})
    value = b"x" * 100
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0
    return count / (time.perf_counter() - started)


def read_all(config: dict[str, str], topic: str, total_bytes: int, value_size: int) -> float:
    """MB/s of one consumer reading the topic from offset 0, with broker_bench's fetch sizes. It
    asks for about one fetch's worth at a time: consume(n) waits until n messages are there, so a
    larger n measures the wait for them to gather, not the reads."""
    consumer = Consumer({**config, "group.id": f"bench-{time.time_ns()}", **CONSUMER_CONFIG})
    consumer.assign([TopicPartition(topic, 0, 0)])
    batch = max(1, min(10_000, CONSUMER_CONFIG["fetch.max.bytes"] // value_size))
    got = 0
    started = time.perf_counter()
    deadline = started + 300
    while got < total_bytes and time.perf_counter() < deadline:
        for message in consumer.consume(batch, timeout=1.0):
            if message.error() is None:
                got += len(message.value())
    elapsed = time.perf_counter() - started
    consumer.close()
    return got / elapsed / 1e6


def read_together(fetchers: list[RawFetcher]) -> int:
    """Bytes read by every fetcher, each in its own thread (ssl reads let go of the GIL)."""
    with ThreadPoolExecutor(len(fetchers)) as pool:
        return sum(pool.map(lambda fetcher: fetcher.fetch_all(), fetchers))


def wire(port: int, api: int, version: int, body: dict, sock: socket.socket, frames: FrameSplitter,
         pending: list[bytearray]) -> dict:
    sock.sendall(b"".join(bytes(b) for b in encode_request(RequestHeader(api, version, 1, "bench"), body)))
    while not pending:
        pending.extend(frames.split(sock.recv(65536)))
    return decode_response(api, version, pending.pop(0))[1]


def logins(port: int, mechanism: str, seconds: float, ca: Path) -> float:
    import ssl
    context = ssl.create_default_context(cafile=str(ca))
    done = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        raw = socket.create_connection(("127.0.0.1", port))
        sock = context.wrap_socket(raw, server_hostname="localhost")
        frames, pending = FrameSplitter(1 << 20), []
        assert wire(port, 17, 1, {"mechanism": mechanism}, sock, frames, pending)["error_code"] == 0
        if mechanism == "PLAIN":
            answer = wire(port, 36, 1, {"auth_bytes": f"\0{USER}\0{PASSWORD}".encode()}, sock, frames, pending)
        else:
            scram = ScramClient([mechanism], USER, PASSWORD)
            first = wire(port, 36, 1, {"auth_bytes": scram.get_client_first().encode()}, sock, frames, pending)
            scram.set_server_first(bytes(first["auth_bytes"]).decode())
            answer = wire(port, 36, 1, {"auth_bytes": scram.get_client_final().encode()}, sock, frames, pending)
        assert answer["error_code"] == 0
        sock.close()
        done += 1
    return done / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000, help="100-byte messages produced per listener")
    parser.add_argument("--read-mb", type=int, default=1024, help="MB written once, then read over each listener")
    parser.add_argument("--value-kib", type=int, default=64, help="size of each value read back")
    parser.add_argument("--login-seconds", type=float, default=3.0)
    args = parser.parse_args()
    print(f"# security_bench: Python {platform.python_version()}, {os.cpu_count()} CPUs (shared), "
          f"one roost up node on loopback, data on {tempfile.gettempdir()}")
    with tempfile.TemporaryDirectory() as tmp:
        node, ports, ca = start_node(Path(tmp))
        assert node.process is not None
        pid = node.process.pid
        try:
            print(f"\n## produce {args.messages} x 100 B, linger.ms=5, acks=all, one partition")
            base = None
            for listener in LISTENERS:
                rate, wall, cpu = measured(pid, lambda listener=listener: produce(
                    client_config(listener, ports[listener], ca), f"p-{listener.lower()}", args.messages))
                base = base or rate
                print(f"{listener:10} {rate:>10,.0f} msg/s  ({rate / base:4.0%} of PLAINTEXT)  "
                      f"broker CPU {cpu:5.2f} s over {wall:5.2f} s wall")
            value_size = args.value_kib * 1024
            count = args.read_mb * 1_000_000 // value_size
            producer = Producer({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}", "linger.ms": 5,
                                 "batch.size": 1_000_000, "message.max.bytes": 2_000_000})
            for _ in range(count):
                while True:
                    try:
                        producer.produce("reads", os.urandom(16) + b"r" * (value_size - 16))
                        break
                    except BufferError:
                        producer.poll(0.01)
            producer.flush(300)
            total = count * value_size
            print(f"\n## caught-up reads: {total / 1e6:.0f} MB in {value_size // 1024} KiB values, one partition, "
                  f"one confluent-kafka consumer in this process, fetch.max.bytes={CONSUMER_CONFIG['fetch.max.bytes'] >> 20} MiB, "
                  f"max.partition.fetch.bytes={CONSUMER_CONFIG['max.partition.fetch.bytes'] >> 20} MiB")
            base = None
            for listener in LISTENERS:
                rate, wall, cpu = measured(pid, lambda listener=listener: read_all(
                    client_config(listener, ports[listener], ca), "reads", total, value_size))
                base = base or rate
                print(f"{listener:10} {rate:>8,.0f} MB/s  ({rate / base:4.0%} of PLAINTEXT)  "
                      f"broker CPU {cpu:5.2f} s over {wall:5.2f} s wall")
            print("\n## broker serve rate: the same 1 GB read by roost's own fetch client (bytes thrown away, "
                  "8 MiB per fetch, TLS 1.3 in the client's ssl module), by 1 reader and by 2 readers at once "
                  "(each reads all of it, in its own thread: one reader waits for each answer before it asks "
                  "again, so the broker idles while it decrypts)")
            tls = ssl.create_default_context(cafile=str(ca))
            for readers in (1, 2):
                base = None
                for listener in ("PLAINTEXT", "SSL"):
                    fetchers = [RawFetcher(f"127.0.0.1:{ports[listener]}", "reads", 1,
                                           tls if listener == "SSL" else None) for _ in range(readers)]
                    fetched, wall, cpu = measured(pid, lambda fetchers=fetchers: read_together(fetchers))
                    for fetcher in fetchers:
                        fetcher.sock.close()
                    assert fetched >= total * readers, fetched
                    rate = fetched / wall / 1e6
                    base = base or rate
                    print(f"{listener:10} x{readers} {rate:>8,.0f} MB/s  ({rate / base:4.0%} of PLAINTEXT)  "
                          f"broker CPU {cpu:5.2f} s over {wall:5.2f} s wall ({cpu / fetched * 1e9:.2f} s per GB)")
            print(f"\n## logins over TLS (SASL_SSL), one connection each, sequential, {args.login_seconds:g} s each")
            for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
                rate, wall, cpu = measured(pid, lambda mechanism=mechanism: logins(
                    ports["SASL_SSL"], mechanism, args.login_seconds, ca))
                done = rate * wall
                print(f"{mechanism:14} {rate:7.1f} logins/s  broker CPU {cpu / max(done, 1) * 1000:6.2f} ms per login "
                      "(TLS handshake included)")
        finally:
            node.stop()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
