"""A 3-broker cluster whose inter-broker links (replica fetches, the controller's requests, the
brokers' other peer traffic) go over a SASL_SSL listener with SCRAM-SHA-512 and mutual TLS: it
produces with
acks=all to a replicated topic and every replica catches up; a SCRAM user created through one
broker reaches all three within a second."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from kazoo.client import KazooClient

from roost.broker.security.scram import make_credential
from tests.security.conftest import make_certificates
from tests.support.cluster import TEST_BROKER_SETTINGS, BrokerNode, LocalCluster, write_toml
from tests.support.procs import free_ports

BROKER_USER, BROKER_PASSWORD = "broker", "broker-secret"


@pytest.fixture(scope="module")
def secured_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root: Path = tmp_path_factory.mktemp("secured-cluster")
    certs = make_certificates(root)
    cluster = LocalCluster(root)
    try:
        cluster.zookeeper = cluster._start_keepers(1, 500)
        # The brokers' own SCRAM user, written before they start, as kafka-configs --zookeeper did.
        zk = KazooClient(hosts=cluster.zookeeper)
        zk.start(timeout=10)
        credential = make_credential("SCRAM-SHA-512", BROKER_PASSWORD, 4096)
        zk.create(f"/config/users/{BROKER_USER}",
                  json.dumps({"version": 1, "config": {"SCRAM-SHA-512": credential.encode()}}).encode(), makepath=True)
        zk.stop()
        zk.close()
        login = (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{BROKER_USER}" '
                 f'password="{BROKER_PASSWORD}";')
        for broker_id, port in enumerate(free_ports(3), start=1):
            node = BrokerNode(broker_id, port, root / f"broker-{broker_id}.toml", port)
            write_toml(node.config, {
                "broker.id": broker_id, "zookeeper.connect": cluster.zookeeper,
                "listeners": f"PLAINTEXT://127.0.0.1:{port},INTERNAL://127.0.0.1:0",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
                "inter.broker.listener.name": "INTERNAL",
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                "listener.name.internal.scram-sha-512.sasl.jaas.config": login,
                "ssl.keystore.location": str(certs["broker"]),
                "ssl.truststore.location": str(certs["ca"]),
                # Mutual TLS between brokers too: each shows its key store's certificate.
                "listener.name.internal.ssl.client.auth": "required",
                "log.dirs": str(root / f"broker-{broker_id}"),
                "offsets.topic.replication.factor": 3, "default.replication.factor": 3,
                **TEST_BROKER_SETTINGS})
            cluster.brokers[broker_id] = node
        for broker_id in cluster.brokers:
            cluster.start_broker(broker_id, wait=False)
        for broker_id in cluster.brokers:
            cluster._await_broker(broker_id)
        cluster.wait_for_brokers({1, 2, 3})
        yield cluster
    finally:
        cluster.close()


def test_replication_and_controller_requests_go_over_sasl_ssl(secured_cluster: LocalCluster) -> None:
    cluster = secured_cluster
    admin = cluster.admin()
    admin.create_topics([NewTopic("replicated", 2, 3)])["replicated"].result(timeout=30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(200):
        producer.produce("replicated", f"m{i}".encode(), partition=i % 2)
    assert producer.flush(60) == 0
    cluster.wait_for_isr("replicated")
    # The controller reaches every other broker over INTERNAL as User:broker (itself it asks
    # in-process); and the followers could only have caught up through INTERNAL, the one address
    # brokers know each other by.
    controller = cluster.controller()
    for broker_id in set(cluster.brokers) - {controller}:
        cluster.wait_for_output(broker_id, "on listener INTERNAL: authenticated as User:broker with SCRAM-SHA-512")
    # The inter-broker listener is registered first; clients on PLAINTEXT never see it.
    brokers = admin.list_topics(timeout=30).brokers
    assert {(b.host, b.port) for b in brokers.values()} == {("127.0.0.1", n.port) for n in cluster.brokers.values()}


def test_a_new_scram_user_reaches_every_broker_within_a_second(secured_cluster: LocalCluster) -> None:
    cluster = secured_cluster
    admin = cluster.admin()
    future = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"erin-secret")])["erin"]
    future.result(timeout=30)
    answered = time.monotonic()
    for broker_id in cluster.brokers:
        cluster.wait_for_output(broker_id, "user 'erin': SCRAM credentials for SCRAM-SHA-256", timeout=5)
    # Measured from the answer, including the output pipe's own delay.
    assert time.monotonic() - answered < 1.0


def test_kill_9_of_a_leader_mid_stream_loses_nothing_acknowledged(secured_cluster: LocalCluster) -> None:
    """The seeds' experiment on SASL_SSL inter-broker links: acks=all writes while the leader is
    killed; every acknowledged message is read back after failover (the followers log in to the
    new leader, the controller to the survivors)."""
    from confluent_kafka import Consumer, TopicPartition

    cluster = secured_cluster
    admin = cluster.admin()
    admin.create_topics([NewTopic("failover", 1, 3, config={"min.insync.replicas": "2"})])["failover"].result(30)
    cluster.wait_for_isr("failover")
    leader = cluster.partitions("failover")[0][0]
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 2, "message.timeout.ms": 30000})
    acked: list[bytes] = []

    def delivered(error: object, message: object) -> None:
        if error is None:
            acked.append(message.value())  # type: ignore[attr-defined]

    killed = False
    started = time.monotonic()
    for i in range(3000):
        producer.produce("failover", f"m{i}".encode(), on_delivery=delivered)
        producer.poll(0)
        if i % 100 == 0:
            time.sleep(0.02)
        if i == 1000:
            cluster.kill(leader)
            killed = True
        assert time.monotonic() - started < 60
    producer.flush(60)
    assert killed and len(acked) > 1000
    new_leader = cluster.partitions("failover")[0][0]
    assert new_leader not in (-1, leader)
    consumer = Consumer({"bootstrap.servers": cluster.running_bootstrap(), "group.id": "failover-check",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("failover", 0, 0)])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 60
    while not set(acked) <= seen and time.monotonic() < deadline:
        for message in consumer.consume(500, timeout=1.0):
            if message.error() is None:
                seen.add(message.value())
    consumer.close()
    assert set(acked) <= seen, f"{len(set(acked) - seen)} acknowledged messages lost"
    cluster.restart(leader)
    cluster.wait_for_isr("failover")


def test_the_inter_broker_listener_refuses_a_client_without_a_certificate(secured_cluster: LocalCluster) -> None:
    import re
    import socket
    import ssl

    from roost.wire.kafka import RequestHeader, encode_request

    output = secured_cluster.wait_for_output(1, "listener internal listening on")
    port = int(re.search(r"listener internal listening on 127\.0\.0\.1:(\d+)", output).group(1))  # type: ignore[union-attr]
    context = ssl.create_default_context(cafile=str(secured_cluster.root / "ca.pem"))
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    answer = b""
    try:
        tls = context.wrap_socket(raw, server_hostname="localhost")
        tls.sendall(b"".join(bytes(b) for b in encode_request(RequestHeader(18, 0, 1, "t"), {})))
        answer = tls.recv(1024)
    except (ssl.SSLError, ConnectionError):
        pass
    finally:
        raw.close()
    assert answer == b""
