"""The seeds' experiment on a cluster where every link is SASL_SSL: three brokers with one
SASL_SSL listener (clients and inter-broker traffic alike: replica fetches, the controller's
requests), a keeper that serves TLS only (no plain client port) and asks for SASL DIGEST-MD5,
and brokers that reach it over TLS as a SASL user. No PLAINTEXT port anywhere: the test's own
clients (admin, producer, reader) log in with SCRAM-SHA-512 over TLS too.

A topic with 3 partitions, replication factor 3, min.insync.replicas 2; an idempotent acks=all
producer streams keyed messages; the broker leading the most partitions is killed with SIGKILL a
third of the way in. Every acknowledged message must then be in the log exactly once and in order
per key (tests.cluster.verify.check_log).

The brokers also protect their znodes (`zookeeper.set.acl`), and a `roost console` reaches this
cluster with the settings of every client command: its Kafka clients over SASL_SSL with SCRAM,
its keeper client over TLS as the brokers' SASL user, which alone may read `/config/users`."""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.cluster.clients import Acks
from tests.cluster.verify import check_log
from tests.security.conftest import make_certificates
from tests.support.cluster import TEST_BROKER_SETTINGS, BrokerNode, KeeperNode, LocalCluster, write_toml
from tests.support.procs import free_ports, start_roost, wait_for
from tests.support.workload import Received, messages

BROKER_USER, BROKER_PASSWORD = "broker", "broker-link-secret"
KEEPER_USER, KEEPER_PASSWORD = "kafka", "keeper-link-secret"
APP_USER, APP_PASSWORD = "app", "app-scram-secret"
METRICS_TOKEN = "keeper-metrics-token-41"
TOPIC = "seeds-sasl-ssl"
MESSAGES = 3000
RATE = 1000  # messages per second offered


@dataclass
class SecuredCluster:
    cluster: LocalCluster
    ca: Path

    def client(self, user: str = APP_USER, password: str = APP_PASSWORD, mechanism: str = "SCRAM-SHA-512",
                bootstrap: str | None = None, **extra: Any) -> dict[str, Any]:
        return {"bootstrap.servers": bootstrap or self.cluster.running_bootstrap(), "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(self.ca), "sasl.mechanism": mechanism, "sasl.username": user,
                "sasl.password": password, "socket.timeout.ms": 10000, **extra}

    def leaders(self, topic: str) -> dict[int, int]:
        """partition -> leader, from Metadata over SASL_SSL (-1 while a partition has none)."""
        described = AdminClient(self.client()).list_topics(topic, timeout=10).topics[topic]
        return {p: meta.leader for p, meta in described.partitions.items()}

    def in_sync(self, topic: str) -> bool:
        described = AdminClient(self.client()).list_topics(topic, timeout=10).topics[topic]
        return all(len(meta.isrs) == 3 and meta.leader >= 1 for meta in described.partitions.values())


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredCluster]:
    root = tmp_path_factory.mktemp("sasl-ssl-failover")
    certs = make_certificates(root)
    cluster = LocalCluster(root)
    try:
        keeper_port, *broker_ports = free_ports(4)
        write_toml(root / "keeper.toml", {
            "dataDir": str(root / "keeper"), "tickTime": 500, "clientPort": -1, "clientPortAddress": "127.0.0.1",
            # The brokers' identity to the keeper is their SASL user, not a certificate.
            "secureClientPort": keeper_port, "ssl.keyStore.location": str(certs["broker"]), "ssl.clientAuth": "none",
            f"sasl.users.{KEEPER_USER}": KEEPER_PASSWORD,
            # Its metrics over HTTPS only, to scrapes with the token (ZooKeeper's names, and Roost's).
            "metricsProvider.httpsPort": 0, "metricsProvider.ssl.keyStore.location": str(certs["broker"]),
            "metricsProvider.bearerToken": METRICS_TOKEN})
        cluster.keepers[1] = KeeperNode(1, keeper_port, root / "keeper.toml", process=start_roost(
            ["keeper", "--config", str(root / "keeper.toml")], expect=("keeper secure", "keeper metrics")))
        cluster.zookeeper = f"127.0.0.1:{keeper_port}"
        jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="{BROKER_USER}" password="{BROKER_PASSWORD}" user_{BROKER_USER}="{BROKER_PASSWORD}";')
        for broker_id, port in enumerate(broker_ports, start=1):
            node = BrokerNode(broker_id, port, root / f"broker-{broker_id}.toml", port)
            write_toml(node.config, {
                "broker.id": broker_id, "zookeeper.connect": cluster.zookeeper,
                "zookeeper.ssl.client.enable": True, "zookeeper.ssl.truststore.location": str(certs["ca"]),
                "zookeeper.sasl.client.username": KEEPER_USER, "zookeeper.sasl.client.password": KEEPER_PASSWORD,
                "zookeeper.set.acl": True,
                "listeners": f"SASL_SSL://127.0.0.1:{port}",
                "inter.broker.listener.name": "SASL_SSL", "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "sasl.jaas.config": jaas,
                "ssl.keystore.location": str(certs["broker"]), "ssl.truststore.location": str(certs["ca"]),
                "log.dirs": str(root / f"broker-{broker_id}"),
                "offsets.topic.replication.factor": 3, "default.replication.factor": 3,
                **TEST_BROKER_SETTINGS})
            cluster.brokers[broker_id] = node
        for broker_id in cluster.brokers:
            cluster.start_broker(broker_id, wait=False)
        for broker_id in cluster.brokers:
            cluster._await_broker(broker_id)
        secured = SecuredCluster(cluster, certs["ca"])
        # The application's SCRAM user, made through the cluster as its brokers' PLAIN user.
        admin = AdminClient(secured.client(BROKER_USER, BROKER_PASSWORD, "PLAIN"))
        upsert = UserScramCredentialUpsertion(APP_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                              APP_PASSWORD.encode())
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(30)
        for node in cluster.brokers.values():  # every broker knows the user (ZooKeeper notifications)
            wait_for(lambda node=node: logs_in(secured, node.address), 20, interval=0.2,
                     what=f"{APP_USER} to log in at {node.address}")
        yield secured
    finally:
        cluster.close()


def logs_in(secured: SecuredCluster, address: str) -> bool:
    try:
        AdminClient(secured.client(bootstrap=address)).list_topics(timeout=3)
    except KafkaException:
        return False
    return True


def read_all(secured: SecuredCluster, topic: str, partitions: int = 3) -> list[Received]:
    consumer = Consumer(secured.client(**{"group.id": f"reader-{topic}", "enable.auto.commit": False}))
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        records: list[Received] = []
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + 60
        while len(done) < partitions and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if msg.error():
                    continue
                records.append(Received(msg.key(), msg.value(), msg.partition(), msg.offset()))
                if msg.offset() + 1 >= ends[msg.partition()]:
                    done.add(msg.partition())
        assert len(done) == partitions, f"could not read partitions {set(range(partitions)) - done} to the end"
        return records
    finally:
        consumer.close()


def test_a_leader_killed_mid_stream_loses_nothing_acknowledged(secured: SecuredCluster) -> None:
    cluster = secured.cluster
    admin = AdminClient(secured.client())
    admin.create_topics([NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    wait_for(lambda: secured.in_sync(TOPIC), 30, interval=0.2, what="every replica in sync")
    led: dict[int, set[int]] = {}
    for partition, leader in secured.leaders(TOPIC).items():
        led.setdefault(leader, set()).add(partition)
    victim = max(led, key=lambda broker: len(led[broker]))
    acks = Acks()
    producer = Producer(secured.client(**{"enable.idempotence": True, "acks": "all", "linger.ms": 5}))
    killed_at = 0.0
    start = time.monotonic()
    for n, message in enumerate(messages(MESSAGES, TOPIC)):
        if n == MESSAGES // 3:
            cluster.kill(victim)
            killed_at = time.monotonic()
        delay = start + n / RATE - time.monotonic()
        if delay > 0:
            time.sleep(delay)

        def report(error: Any, msg: Any, n: int = n) -> None:
            if error is None:
                acks.success(n, msg.partition(), msg.offset())
            else:
                acks.failure(n, str(error))

        while True:
            try:
                producer.produce(TOPIC, message.value, message.key, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0, "messages left undelivered"
    outage = acks.first_after(killed_at, led[victim])
    print(f"\nSASL_SSL everywhere: killed broker {victim} leading {sorted(led[victim])}; outage until the first "
          "acknowledgement per partition: " + ", ".join(f"p{p} {s:.2f} s" for p, s in sorted(outage.items())))
    assert not acks.failed, f"{len(acks.failed)} sends failed, e.g. {list(acks.failed.items())[:3]}"
    assert len(acks.ok) == MESSAGES
    assert led[victim] <= outage.keys(), "a partition of the dead leader never acknowledged again"
    check_log(read_all(secured, TOPIC), set(acks.ok))
    for broker_id in cluster.brokers:  # and no password in any broker's output
        output = cluster.broker_output(broker_id)
        assert not [secret for secret in (BROKER_PASSWORD, KEEPER_PASSWORD, APP_PASSWORD) if secret in output]


def test_the_console_reaches_kafka_and_the_keeper_as_configured_principals(secured: SecuredCluster) -> None:
    settings = {**secured.client(), "zookeeper.ssl.client.enable": "true",
                "zookeeper.ssl.truststore.location": str(secured.ca),
                "zookeeper.sasl.client.username": KEEPER_USER,
                "zookeeper.sasl.client.password": "${env:TEST_CONSOLE_ZK_PASSWORD}",
                "sasl.password": "${env:TEST_CONSOLE_KAFKA_PASSWORD}"}
    bootstrap = settings.pop("bootstrap.servers")
    settings.pop("socket.timeout.ms")
    flags = [item for key, value in settings.items() for item in ("-X", f"{key}={value}")]
    console = start_roost(["console", "-b", bootstrap, "--zookeeper", secured.cluster.zookeeper, "--port", "0",
                           *flags], expect=("console",),
                          env={"TEST_CONSOLE_ZK_PASSWORD": KEEPER_PASSWORD, "TEST_CONSOLE_KAFKA_PASSWORD": APP_PASSWORD})
    try:
        def get(path: str) -> Any:
            with urllib.request.urlopen(f"http://{console.address('console')}{path}", timeout=30) as answer:
                return json.loads(answer.read())

        # The members' roles: `srvr` over the keeper's TLS port, as the kazoo client connects.
        assert [member["role"] for member in get("/api/keeper/members")["members"]] == ["standalone"]
        topics = get("/api/topics")
        assert TOPIC in [topic["name"] for topic in topics["topics"]]
        # Only the brokers' SASL identity may list the SCRAM users (zookeeper.set.acl).
        users = get("/api/keeper/node?path=/config/users")
        assert APP_USER in users["children"], users
        assert [(acl["scheme"], acl["id"]) for acl in users["acl"]] == [("sasl", KEEPER_USER)], users["acl"]
        for secret in (KEEPER_PASSWORD, APP_PASSWORD):
            assert secret not in console.text()
            assert secret.encode() not in Path(f"/proc/{console.popen.pid}/cmdline").read_bytes()
    finally:
        console.stop()


def test_the_keepers_metrics_need_tls_and_the_token(secured: SecuredCluster) -> None:
    keeper = secured.cluster.keepers[1].process
    assert keeper is not None
    host, port = keeper.address("keeper metrics").rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(secured.ca))

    def scrape(headers: dict[str, str]) -> tuple[int, bytes]:
        request = urllib.request.Request(f"https://{host}:{port}/metrics", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    status, body = scrape({})
    assert status == 401 and b"znode_count" not in body
    status, body = scrape({"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert status == 200 and b"znode_count" in body
    assert METRICS_TOKEN not in keeper.text() and KEEPER_PASSWORD not in keeper.text()
