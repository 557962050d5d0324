"""Client quotas on real `roost up` processes with real clients: AlterClientQuotas and
DescribeClientQuotas (Roost's `roost quota`, Kafka's znodes), a confluent-kafka tenant over its
produce quota throttled near its rate while another tenant is not, classic and share consumers
over their fetch quota held near its rate, and the per-address
connection limits."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Message, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
)
from kazoo.client import KazooClient

from tests.support.kafka_wire import WireClient
from tests.support.procs import RoostProcess, start_roost
from tests.support.share_configs import read_from_earliest

# Rates measured over 3 windows of 1 s (Kafka's 11 would make the test wait out a 10 s allowance).
WINDOWS = ["--quota.window.num", "3", "--quota.window.size.seconds", "1"]
QUOTA = 300_000  # bytes per second for the throttled tenant
ALTER, DESCRIBE = 49, 48


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    proc = start_roost(["up", "--data-dir", str(tmp_path_factory.mktemp("quotas")), "--kafka-port", "0", *WINDOWS],
                       expect=("kafka", "keeper"))
    yield proc
    proc.stop()


def roost(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "roost.cli.main", *args], capture_output=True, text=True, timeout=60)


def alter(address: str, entity: list[tuple[str, str | None]], ops: list[tuple[str, float, bool]],
          validate_only: bool = False) -> dict:
    client = WireClient(address)
    try:
        return client.request(ALTER, 1, {"entries": [{
            "entity": [{"entity_type": k, "entity_name": n} for k, n in entity],
            "ops": [{"key": k, "value": v, "remove": r} for k, v, r in ops]}], "validate_only": validate_only})
    finally:
        client.close()


def test_quotas_are_set_described_and_stored_as_kafka_stores_them(node: RoostProcess) -> None:
    kafka = node.address("kafka")
    result = roost("quota", "set", "--user", "alice", "--client-id", "app 1", "producer_byte_rate=1048576",
                   "request_percentage=25.5", "-b", kafka)
    assert result.returncode == 0, result.stderr
    assert roost("quota", "set", "--user-default", "consumer_byte_rate=2097152", "-b", kafka).returncode == 0
    described = roost("quota", "describe", "--user", "alice", "--format", "json", "-b", kafka)
    assert json.loads(described.stdout) == [
        {"entity": "user=alice, client-id=app 1", "quotas": "producer_byte_rate=1048576, request_percentage=25.5"}]
    zk = KazooClient(hosts=node.address("keeper"))
    zk.start(timeout=30)
    try:
        data, _ = zk.get("/config/users/alice/clients/app%201")
        assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": "1048576",
                                                              "request_percentage": "25.5"}}
        assert json.loads(zk.get("/config/users/<default>")[0])["config"] == {"consumer_byte_rate": "2097152"}
        changes = [json.loads(zk.get(f"/config/changes/{c}")[0]) for c in zk.get_children("/config/changes")]
        assert {"version": 2, "entity_path": "users/alice/clients/app%201"} in changes
    finally:
        zk.stop()
        zk.close()
    # Kafka's refusals, entry by entry; the broker keeps serving.
    for entity, ops in [([("ip", "10.0.0.1")], [("producer_byte_rate", 10.0, False)]),
                        ([("user", "a"), ("ip", "10.0.0.1")], [("connection_creation_rate", 1.0, False)]),
                        ([("user", "a")], [("producer_byte_rate", -5.0, False)]),
                        ([("topic", "t")], [("producer_byte_rate", 5.0, False)])]:
        answer = alter(kafka, entity, ops)
        assert answer["entries"][0]["error_code"] == 42, (entity, ops, answer)
    assert alter(kafka, [("user", "bob")], [("producer_byte_rate", 5.0, False)], validate_only=True)[
        "entries"][0]["error_code"] == 0
    assert roost("quota", "delete", "--user", "alice", "--client-id", "app 1", "request_percentage",
                 "-b", kafka).returncode == 0
    client = WireClient(kafka)
    entries = client.request(DESCRIBE, 0, {"components": [], "strict": False})["entries"]
    client.close()
    assert not any(part["entity_name"] == "bob" for e in entries for part in e["entity"])  # validated only
    alice = [e["values"] for e in entries if e["entity"][0]["entity_name"] == "alice"]
    assert alice == [[{"key": "producer_byte_rate", "value": 1048576.0}]], entries  # request_percentage gone
    bad = roost("quota", "set", "--ip", "10.0.0.1", "producer_byte_rate=5", "-b", kafka)
    assert bad.returncode == 1 and bad.stderr.startswith("roost: alter quotas: INVALID_REQUEST")


def _produce(bootstrap: str, client_id: str, seconds: float, out: dict[str, list[tuple[float, int]]],
             throttles: dict[str, list[float]]) -> None:
    acked: list[tuple[float, int]] = []
    events: list[float] = []
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": "all", "linger.ms": 5,
                         "batch.size": 16384, "queue.buffering.max.kbytes": 512,
                         "throttle_cb": lambda event: events.append(event.throttle_time)})
    value = b"q" * 1000

    def delivered(error, message) -> None:  # type: ignore[no-untyped-def]
        if error is None:
            acked.append((time.monotonic(), len(message.value())))

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            producer.produce("quota-topic", value, callback=delivered)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.flush(30)
    out[client_id], throttles[client_id] = acked, events


def test_a_tenant_over_its_produce_quota_is_throttled_near_its_rate_and_another_is_not(node: RoostProcess) -> None:
    kafka = node.address("kafka")
    admin = AdminClient({"bootstrap.servers": kafka})
    admin.create_topics([NewTopic("quota-topic", 2, 1)])["quota-topic"].result(timeout=30)
    assert roost("quota", "set", "--client-id", "tenant-a", f"producer_byte_rate={QUOTA}", "-b", kafka).returncode == 0
    acked: dict[str, list[tuple[float, int]]] = {}
    throttles: dict[str, list[float]] = {}
    started = time.monotonic()
    seconds = 12.0
    threads = [threading.Thread(target=_produce, args=(kafka, name, seconds, acked, throttles))
               for name in ("tenant-a", "tenant-b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=90)

    def rate(name: str, start: float, end: float) -> float:
        return sum(size for at, size in acked[name] if started + start <= at < started + end) / (end - start)

    # After the first windows' allowance: the steady rate of each tenant.
    throttled, free = rate("tenant-a", 4, seconds), rate("tenant-b", 4, seconds)
    assert throttles["tenant-a"] and max(throttles["tenant-a"]) > 0, "tenant-a was never told to slow down"
    assert not throttles["tenant-b"], f"tenant-b was throttled: {throttles['tenant-b'][:5]}"
    assert QUOTA * 0.6 <= throttled <= QUOTA * 1.3, f"tenant-a moved {throttled:.0f} B/s against a quota of {QUOTA}"
    assert free > 3 * QUOTA, f"tenant-b (no quota) moved only {free:.0f} B/s"


def test_connections_per_address_are_limited_and_logged_once(tmp_path: Path) -> None:
    proc = start_roost(["up", "--no-keeper", "--data-dir", str(tmp_path / "d"), "--kafka-port", "0",
                        "--max.connections.per.ip", "1", "--max.connections.per.ip.overrides", "127.0.0.1:3"])
    try:
        host, port = proc.listeners["kafka"]
        open_sockets = [WireClient(f"{host}:{port}") for _ in range(3)]
        for client in open_sockets:  # each is served
            assert client.request(18, 0, {})["error_code"] == 0
        refused = []
        for _ in range(20):
            sock = socket.create_connection((host, port), timeout=10)
            refused.append(sock.recv(1) == b"")  # closed at once
            sock.close()
        assert all(refused)
        open_sockets.pop().close()
        deadline = time.monotonic() + 30
        while True:  # the closed one's place is free again once the broker has seen it close
            client = WireClient(f"{host}:{port}")
            try:
                assert client.request(18, 0, {})["error_code"] == 0
                break
            except (ConnectionError, OSError):
                assert time.monotonic() < deadline, "a closed connection's place never came back"
                time.sleep(0.2)
            finally:
                client.close()
        for client in open_sockets:
            client.close()
        # Quotas of a broker without a keeper live in its data directory and survive a restart.
        assert alter(f"{host}:{port}", [("client-id", None)], [("consumer_byte_rate", 4096.0, False)])[
            "entries"][0]["error_code"] == 0
    finally:
        proc.stop()
    assert proc.text().count("refusing connections from 127.0.0.1") == 1, proc.text()[-3000:]
    proc = start_roost(["up", "--no-keeper", "--data-dir", str(tmp_path / "d"), "--kafka-port", "0"])
    try:
        client = WireClient(proc.address("kafka"))
        answer = client.request(DESCRIBE, 1, {"components": [], "strict": False})
        client.close()
        assert answer["entries"] == [{"entity": [{"entity_type": "client-id", "entity_name": None}],
                                      "values": [{"key": "consumer_byte_rate", "value": 4096.0}]}]
    finally:
        proc.stop()


# Fetches far smaller than the quota's window (2 s of it here): with Kafka's 11 windows a 1 MiB
# fetch is a tenth of the window, as these are of the test's 3; a fetch as large as the whole
# window makes the rate step in window-sized jumps (Kafka's, and so Roost's).
SMALL_FETCHES = {"fetch.max.bytes": 65536, "message.max.bytes": 65536, "max.partition.fetch.bytes": 65536}


def _consume(consumer: Any, seconds: float, started: float, got: list[tuple[float, int]],
             throttles: list[float]) -> None:
    """Poll `consumer` (a Consumer or a ShareConsumer) for `seconds`, noting when each record's
    bytes arrived."""
    end = started + seconds
    try:
        while time.monotonic() < end:
            polled = consumer.poll(0.2) if isinstance(consumer, Consumer) else consumer.poll(200)
            for message in [polled] if isinstance(polled, Message) else polled or []:
                if message is not None and message.error() is None:
                    got.append((time.monotonic(), len(message.value())))
    finally:
        consumer.close()


def test_consumers_over_their_fetch_quota_are_held_near_its_rate(node: RoostProcess) -> None:
    """A classic consumer and a share consumer, each with a `consumer_byte_rate`, read a topic
    with far more waiting than the quota allows: after the first windows' allowance each is held
    near its rate (Kafka caps a quota'd fetch at the quota's window and answers an over-quota
    fetch empty, so a 1 MiB fetch cannot carry a client far past it); a consumer with no quota
    reads the same topic much faster."""
    kafka = node.address("kafka")
    admin = AdminClient({"bootstrap.servers": kafka})
    topic = "fetch-quota-topic"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": kafka, "linger.ms": 20, "batch.size": 65536})
    for _ in range(8_000):  # 8 MB: more than a reader held to the quota takes in 12 s
        while True:
            try:
                producer.produce(topic, b"f" * 1000)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    # With the default user's client id: above the <default> user's quota an earlier test sets
    # (Kafka's order: user and client id parts together before either alone).
    for client in ("reader-a", "sharer-a"):
        assert roost("quota", "set", "--user-default", "--client-id", client, f"consumer_byte_rate={QUOTA}",
                     "-b", kafka).returncode == 0
    share_group = "fetch-quota-share"
    read_from_earliest(admin, share_group)
    throttled: dict[str, list[float]] = {name: [] for name in ("reader-a", "sharer-a", "reader-b")}

    def classic(client_id: str) -> Consumer:
        consumer = Consumer({"bootstrap.servers": kafka, "client.id": client_id, "group.id": f"g-{client_id}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False, **SMALL_FETCHES,
                             "throttle_cb": lambda event: throttled[client_id].append(event.throttle_time)})
        consumer.subscribe([topic])
        return consumer

    sharer = ShareConsumer({"bootstrap.servers": kafka, "client.id": "sharer-a", "group.id": share_group,
                            **SMALL_FETCHES})
    sharer.subscribe([topic])
    readers = {"reader-a": classic("reader-a"), "reader-b": classic("reader-b"), "sharer-a": sharer}
    seconds = 12.0
    got: dict[str, list[tuple[float, int]]] = {name: [] for name in readers}
    started = time.monotonic()
    threads = [threading.Thread(target=_consume, args=(reader, seconds, started, got[name], throttled[name]))
               for name, reader in readers.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    def rate(name: str, start: float, end: float) -> float:
        return sum(size for at, size in got[name] if started + start <= at < started + end) / (end - start)

    # After the first windows' allowance (the quota's whole window, 2 s here, may come at once).
    print("steady B/s against", QUOTA, {name: round(rate(name, 4, seconds)) for name in got})
    for name in ("reader-a", "sharer-a"):
        steady = rate(name, 4, seconds)
        assert QUOTA * 0.6 <= steady <= QUOTA * 1.3, f"{name} read {steady:.0f} B/s against a quota of {QUOTA}"
    assert throttled["reader-a"] and max(throttled["reader-a"]) > 0, "reader-a was never told to slow down"
    # The whole topic, far more than a reader held to the quota could take in the time.
    free = sum(size for _, size in got["reader-b"])
    assert free == 8_000 * 1000 > 2 * QUOTA * seconds, f"reader-b (no quota) read only {free} bytes"
