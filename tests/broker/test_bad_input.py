"""Bad input on some connections while good clients work: the bad connections close with a log
line, the good producer and consumer see nothing of it."""

from __future__ import annotations

import socket
import struct
import threading
import time

from confluent_kafka import Consumer, Producer

from roost.wire.kafka import RequestHeader, encode_request
from tests.support.kafka_wire import WireClient
from tests.support.procs import RoostProcess, wait_for

TOTAL = 20_000


def raw_frame(api_key: int, version: int, body: bytes = b"") -> bytes:
    header = struct.pack(">hhih", api_key, version, 7, 4) + b"test"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def test_bad_connections_close_and_good_clients_carry_on(broker: RoostProcess) -> None:
    bootstrap = broker.address("kafka")
    topic = "steady"
    consumed: set[bytes] = set()
    errors: list[str] = []
    done_producing = threading.Event()
    bad_input_sent = threading.Event()

    def produce() -> None:
        # Half before the bad input and half after it has all been sent, so that the good
        # clients are at work on both sides of it (ordered by events, not paced by the clock).
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "enable.idempotence": True})
        for n in range(TOTAL):
            if n == TOTAL // 2 and not bad_input_sent.wait(120):
                errors.append("the bad input was never sent")
                return
            producer.produce(topic, f"m{n}".encode(), on_delivery=lambda e, _m: errors.append(str(e)) if e else None)
            if n % 500 == 0:
                producer.poll(0)
        if producer.flush(60) != 0:
            errors.append("undelivered messages")
        done_producing.set()

    def consume() -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "steady-group",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        deadline = time.monotonic() + 120
        while len(consumed) < TOTAL and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.2):
                if not msg.error():
                    consumed.add(msg.value())
        consumer.close()

    producer_thread = threading.Thread(target=produce, daemon=True)
    consumer_thread = threading.Thread(target=consume, daemon=True)
    producer_thread.start()
    consumer_thread.start()
    wait_for(lambda: len(consumed) > 1000, timeout=60, what="the good clients to get going")

    host, port = bootstrap.rsplit(":", 1)
    cases = {
        "garbage": b"GET / HTTP/1.1\r\nHost: roost\r\n\r\n",
        "oversized length": struct.pack(">i", 1_000_000_000) + b"\x00" * 64,
        "unknown api key": raw_frame(999, 0),
        "unsupported version": raw_frame(3, 99),
        "malformed body": raw_frame(3, 1, b"\x00\x00\x00\x05\x00"),  # 5 topics promised, none there
        "negative length": struct.pack(">i", -5),
    }
    for name, data in cases.items():
        client = WireClient(bootstrap, timeout=10)
        client.send_raw(data)
        assert client.is_closed_by_peer(), f"{name}: the broker kept the connection open"
        client.close()

    # A truncated frame: half a request, then the client closes its side.
    truncated = b"".join(bytes(b) for b in encode_request(RequestHeader(3, 1, 1, "x"), {"topics": None}))
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(truncated[: len(truncated) // 2])
        sock.shutdown(socket.SHUT_WR)
        assert sock.recv(100) == b""
    bad_input_sent.set()

    producer_thread.join(120)
    consumer_thread.join(120)
    assert done_producing.is_set() and not errors, errors[:3]
    assert consumed == {f"m{n}".encode() for n in range(TOTAL)}

    log = broker.text()
    for expected in ("frame size 1195725856", "frame size 1000000000", "unknown api key 999",
                     "version 99 is not supported", "frame size -5", "in the middle of a frame"):
        assert expected in log, f"no log line with {expected!r}"
    assert "bad request api_key=3 v1" in log
