"""A new ACL reaches every broker of a 3-broker cluster within a second, with Roost's keepers and
with a real Apache ZooKeeper: made through one broker's CreateAcls, and written straight into
ZooKeeper by a kazoo client (Kafka's znodes and change notification), each broker obeys it.

The clusters run with `allow.everyone.if.no.acl.found=true`: the cluster resource has no ACL, so
the brokers' own requests (PLAINTEXT, User:ANONYMOUS until SASL lands) go through, and so does
CreateAcls; the ACLs under test are DENYs on one topic. One cluster per coordinator, shared by the
module's tests.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from tests.security.acl_support import ANONYMOUS, ZkAcls
from tests.support import referees
from tests.support.cluster import LocalCluster
from tests.support.kafka_wire import WireClient

SETTINGS = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": True}
TOPIC_DENIED = 29
PROPAGATION_LIMIT_S = 1.0


@pytest.fixture(scope="module", params=["keepers", pytest.param("zookeeper", marks=pytest.mark.zookeeper)])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root = tmp_path_factory.mktemp(f"acl-{request.param}")
    if request.param == "keepers":
        started = LocalCluster.start(root / "cluster", brokers=3, settings=SETTINGS)
        try:
            yield started
        finally:
            started.close()
        return
    from tests.keeper.zkharness import zookeeper_available, zookeeper_standalone
    if not zookeeper_available():
        referees.skip(referees.ZOOKEEPER)
    with zookeeper_standalone(root / "zk") as zookeeper:
        started = LocalCluster.start(root / "cluster", brokers=3, zookeeper=zookeeper.address, settings=SETTINGS)
        try:
            yield started
        finally:
            started.close()


def metadata_code(address: str, topic: str) -> int:
    client = WireClient(address, timeout=10)
    try:
        answer = client.request(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
        return answer["topics"][0]["error_code"]
    finally:
        client.close()


def time_until_every_broker(cluster: LocalCluster, topic: str, code: int, started: float) -> dict[int, float]:
    """Seconds from `started` until each broker answers Metadata for `topic` with `code` (bounded)."""
    seen: dict[int, float] = {}
    deadline = started + 10 * PROPAGATION_LIMIT_S
    while len(seen) < len(cluster.brokers) and time.monotonic() < deadline:
        for broker_id, node in cluster.brokers.items():
            if broker_id not in seen and metadata_code(node.address, topic) == code:
                seen[broker_id] = time.monotonic() - started
        time.sleep(0.005)
    assert set(seen) == set(cluster.brokers), f"brokers {set(cluster.brokers) - set(seen)} never answered {code}"
    return seen


def test_an_acl_made_through_one_broker_reaches_every_broker(cluster: LocalCluster) -> None:
    topic = "propagated-by-createacls"
    assert all(metadata_code(node.address, topic) != TOPIC_DENIED for node in cluster.brokers.values())
    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].address})
    deny = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, ANONYMOUS, "*",
                      AclOperation.DESCRIBE, AclPermissionType.DENY)
    started = time.monotonic()
    for future in admin.create_acls([deny]).values():
        future.result(10)
    seen = time_until_every_broker(cluster, topic, TOPIC_DENIED, started)
    print(f"CreateAcls through broker 1 -> obeyed by every broker after {max(seen.values()) * 1000:.0f} ms: {seen}")
    assert max(seen.values()) <= PROPAGATION_LIMIT_S, seen


def test_an_acl_written_by_any_zookeeper_client_is_obeyed(cluster: LocalCluster) -> None:
    topic = "propagated-by-kazoo"
    acls = ZkAcls(cluster.zookeeper)
    try:
        started = time.monotonic()
        acls.grant("Topic", "propagated-by-", "Describe", permission="Deny", pattern="PREFIXED")
        seen = time_until_every_broker(cluster, topic, TOPIC_DENIED, started)
        print(f"kazoo write -> obeyed by every broker after {max(seen.values()) * 1000:.0f} ms: {seen}")
        assert max(seen.values()) <= PROPAGATION_LIMIT_S, seen
        started = time.monotonic()
        acls.set("Topic", "propagated-by-", [], pattern="PREFIXED")
        seen = time_until_every_broker(cluster, topic, 3, started)  # described again: unknown topic
        assert max(seen.values()) <= PROPAGATION_LIMIT_S, seen
    finally:
        acls.close()


def test_a_broker_reads_the_acls_written_while_it_was_down(cluster: LocalCluster) -> None:
    topic = "written-while-down"
    cluster.stop_broker(3)
    acls = ZkAcls(cluster.zookeeper)
    try:
        acls.grant("Topic", topic, "Describe", permission="Deny")
    finally:
        acls.close()
    cluster.start_broker(3)
    deadline = time.monotonic() + 30
    code = None
    while code is None and time.monotonic() < deadline:
        try:
            code = metadata_code(cluster.brokers[3].address, topic)
        except OSError:
            time.sleep(0.1)
    assert code == TOPIC_DENIED


def test_brokers_replicate_under_default_deny_with_cluster_action_for_their_principal(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The documented interim rule while brokers talk PLAINTEXT: no `allow.everyone`, and the
    brokers' principal (User:ANONYMOUS on PLAINTEXT) granted ClusterAction on the cluster, written
    into ZooKeeper before any broker starts. Replication (follower fetches), the controller's
    requests and acks=all then work, and nothing else is allowed that the ACLs do not grant."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import NewTopic

    from tests.keeper.zkharness import keeper_process

    root = tmp_path_factory.mktemp("acl-default-deny")
    with keeper_process(root / "keeper") as keeper:
        acls = ZkAcls(keeper.address("keeper"))
        try:
            acls.grant("Cluster", "kafka-cluster", "ClusterAction", "Create")
            acls.grant("Topic", "replicated", "Write", "Read")
            acls.grant("Group", "replicated-readers", "Read")
        finally:
            acls.close()
        settings = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
        cluster = LocalCluster.start(root / "cluster", brokers=3, zookeeper=keeper.address("keeper"),
                                     settings=settings)
        try:
            admin = cluster.admin()
            admin.create_topics([NewTopic("replicated", 1, 3)])["replicated"].result(15)
            cluster.wait_for_isr("replicated", timeout=30)
            producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
            for n in range(20):
                producer.produce("replicated", f"r{n}".encode())
            assert producer.flush(20) == 0
            consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "replicated-readers",
                                 "auto.offset.reset": "earliest"})
            try:
                consumer.subscribe(["replicated"])
                got = 0
                deadline = time.monotonic() + 30
                while got < 20 and time.monotonic() < deadline:
                    message = consumer.poll(0.5)
                    got += message is not None and message.error() is None
                assert got == 20
            finally:
                consumer.close()
            cluster.wait_for_isr("replicated", timeout=30)  # every replica still in sync
            assert all(metadata_code(node.address, "not-granted") == TOPIC_DENIED
                       for node in cluster.brokers.values())
        finally:
            cluster.close()
