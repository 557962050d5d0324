"""Client quotas on real `roost up` processes with real clients: AlterClientQuotas and
DescribeClientQuotas (Roost's `roost quota`, Kafka's znodes), a confluent-kafka tenant over its
produce quota throttled near its rate while another tenant is not, and the per-address
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

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from tests.support.kafka_wire import WireClient
from tests.support.procs import RoostProcess, start_roost

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
