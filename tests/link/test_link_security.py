"""A cluster link over SASL_SSL (SCRAM-SHA-512) to a source with the ACL authorizer on: a link
principal granted only READ and DESCRIBE on the topic mirrors it byte for byte; one granted
DESCRIBE but not READ gets Kafka's TOPIC_AUTHORIZATION_FAILED, which the link reports (state
FAILED, the error named in `roost link describe`). With `acl.sync.enable` the source's literal
ACLs of the mirrored topic appear on the destination (its authorizer on too), no others."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.link.raw import batches
from tests.link.test_link_cluster import roost
from tests.security.conftest import make_certificates
from tests.support.cluster import TEST_BROKER_SETTINGS, BrokerNode, LocalCluster, write_toml
from tests.support.procs import free_ports, wait_for

pytestmark = pytest.mark.timeout(300)

TOPIC = "secure"
USERS = {"linker": "linker-secret", "peeker": "peeker-secret"}


@pytest.fixture(scope="module")
def secured_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, str, str, LocalCluster]]:
    root = tmp_path_factory.mktemp("link-security")
    certs = make_certificates(root)
    source = LocalCluster(root / "source")
    destination: LocalCluster | None = None
    try:
        source.zookeeper = source._start_keepers(1, 500)
        plain, sasl = free_ports(2)
        node = BrokerNode(1, plain, root / "source-broker.toml", plain)
        write_toml(node.config, {
            "broker.id": 1, "zookeeper.connect": source.zookeeper,
            # Test clients and the broker itself on PLAINTEXT (ANONYMOUS, a super user here); the
            # link alone on SASL_SSL, as a user the ACLs limit.
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl}",
            "inter.broker.listener.name": "PLAINTEXT",
            "ssl.keystore.location": str(certs["broker"]), "ssl.truststore.location": str(certs["ca"]),
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "authorizer.class.name": "roost.AclAuthorizer", "super.users": "User:ANONYMOUS",
            "log.dirs": str(root / "source-broker"), **TEST_BROKER_SETTINGS})
        source.brokers[1] = node
        source.start_broker(1)
        source.wait_for_brokers({1})
        admin = source.admin()
        upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                                password.encode()) for user, password in USERS.items()]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(30)
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        acls = [AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, f"User:{user}", "*", operation,
                           AclPermissionType.ALLOW)
                for user, operations in (("linker", (AclOperation.READ, AclOperation.DESCRIBE)),
                                         ("peeker", (AclOperation.DESCRIBE,)))
                for operation in operations]
        acls += [AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:linker", "*",
                            AclOperation.DESCRIBE, AclPermissionType.ALLOW),  # DescribeAcls, for the ACL sync
                 AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:app", "*",
                            AclOperation.WRITE, AclPermissionType.ALLOW),
                 AclBinding(ResourceType.TOPIC, "elsewhere", ResourcePatternType.LITERAL, "User:app", "*",
                            AclOperation.READ, AclPermissionType.ALLOW)]
        for future in admin.create_acls(acls).values():
            future.result(30)
        destination = LocalCluster.start(root / "destination", brokers=1, settings={
            "authorizer.class.name": "roost.AclAuthorizer", "super.users": "User:ANONYMOUS"})
        yield source, f"127.0.0.1:{sasl}", str(certs["ca"]), destination
    finally:
        if destination is not None:
            destination.close()
        source.close()


def described(destination: LocalCluster, link: str) -> dict[str, object]:
    out = roost("link", "describe", link, "--zookeeper", destination.zookeeper, "--format", "json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_limited_link_principal_mirrors_and_one_without_read_is_refused(secured_pair: tuple) -> None:
    source, sasl_address, ca, destination = secured_pair
    producer = Producer({"bootstrap.servers": source.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(50):
        producer.produce(TOPIC, value=f"secret-{i}".encode())
    assert producer.flush(30) == 0
    common = ["--source-bootstrap", sasl_address, "--zookeeper", destination.zookeeper, "-c", "security.protocol=SASL_SSL",
              "-c", "sasl.mechanism=SCRAM-SHA-512", "-c", f"ssl.ca.location={ca}", "-c", "topics=literal:secure",
              "-c", "metadata.max.age.ms=1000"]
    out = roost("link", "create", "ok", *common, "-c", "sasl.username=linker", "-c", "sasl.password=linker-secret",
                "-c", "acl.sync.enable=true", "-c", "acl.sync.ms=1000")
    assert out.returncode == 0, out.stderr
    out = roost("link", "create", "denied", *common, "-c", "sasl.username=peeker", "-c",
                "sasl.password=peeker-secret", "-c", "cluster.link.prefix=denied.")
    assert out.returncode == 0, out.stderr
    expected = batches(source.bootstrap, TOPIC, 0)

    def mirrored() -> bool:
        try:
            return batches(destination.bootstrap, TOPIC, 0) == expected
        except Exception:
            return False
    wait_for(mirrored, 90, interval=0.5, what="the SASL_SSL link to mirror the topic byte for byte")

    def refused() -> bool:
        status = described(destination, "denied")
        return status["state"] == "FAILED" and any(
            "TOPIC_AUTHORIZATION_FAILED" in (p["error"] or "") for p in status["partitions"])  # type: ignore[union-attr]
    wait_for(refused, 90, interval=1.0, what="the link without READ to report TOPIC_AUTHORIZATION_FAILED")
    assert described(destination, "ok")["state"] == "ACTIVE"

    # ACL sync: the source's literal ACLs of the mirrored topic came (WRITE too: what producers
    # need once the mirror is promoted); the ACL of a topic the link does not mirror did not.
    def destination_acls() -> set[tuple[str, str, str]]:
        admin = destination.admin()
        found = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                                     AclOperation.ANY, AclPermissionType.ANY)).result(30)
        return {(b.name, b.principal, b.operation.name) for b in found}
    expected_acls = {(TOPIC, "User:linker", "READ"), (TOPIC, "User:linker", "DESCRIBE"),
                     (TOPIC, "User:peeker", "DESCRIBE"), (TOPIC, "User:app", "WRITE")}
    wait_for(lambda: expected_acls <= destination_acls(), 60, interval=1.0,
             what="the source's ACLs of the mirrored topic synced to the destination")
    assert not any(name == "elsewhere" for name, _, _ in destination_acls())
    assert not any(name == "kafka-cluster" for name, _, _ in destination_acls())

    # A removal on the source follows; an ACL the destination's administrators made does not go.
    local = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:ops", "*", AclOperation.READ,
                       AclPermissionType.ALLOW)
    destination_admin, source_admin = destination.admin(), source.admin()  # alive until answered
    for future in destination_admin.create_acls([local]).values():
        future.result(30)
    dropped = AclBindingFilter(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:peeker", "*",
                               AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    for future in source_admin.delete_acls([dropped]).values():
        assert len(future.result(30)) == 1
    wait_for(lambda: (TOPIC, "User:peeker", "DESCRIBE") not in destination_acls(), 60, interval=1.0,
             what="the ACL removed on the source to be removed on the destination")
    assert expected_acls - {(TOPIC, "User:peeker", "DESCRIBE")} | {(TOPIC, "User:ops", "READ")} <= destination_acls()
    assert "peeker-secret" not in json.dumps(described(destination, "denied"))
