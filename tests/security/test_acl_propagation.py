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
