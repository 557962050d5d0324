"""`roost acl create|list|delete` against a real node with the authorizer on (the client is a
super user, so the commands themselves are what is tested; the broker's obedience is the ACL
matrix's job). What the CLI creates is checked in ZooKeeper, where Kafka keeps it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from tests.cli.kafka_cli import run_cli, run_json
from tests.support.procs import RoostProcess, start_roost


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    proc = start_roost(["up", "--data-dir", str(tmp_path_factory.mktemp("acl-cli")), "--kafka-port", "0",
                        "--authorizer.class.name", "kafka.security.authorizer.AclAuthorizer",
                        "--super.users", "User:ANONYMOUS"], expect=("kafka", "keeper"))
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def zk(node: RoostProcess) -> Iterator[KazooClient]:
    client = KazooClient(hosts=node.address("keeper"))
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


def stored(zk: KazooClient, path: str) -> list[dict[str, str]]:
    return sorted(json.loads(zk.get(path)[0])["acls"], key=lambda a: (a["principal"], a["operation"]))


def test_create_list_delete(node: RoostProcess, zk: KazooClient) -> None:
    b = ("-b", node.address("kafka"))
    created = run_json("acl", "create", *b, "--allow-principal", "User:alice", "--operation", "Read",
                       "--operation", "describe", "--topic", "orders")
    assert {(r["principal"], r["operation"], r["permission"]) for r in created} == {
        ("User:alice", "READ", "ALLOW"), ("User:alice", "DESCRIBE", "ALLOW")}
    assert stored(zk, "/kafka-acl/Topic/orders") == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Describe", "host": "*"},
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]
    run_json("acl", "create", *b, "--deny-principal", "User:mallory", "--deny-host", "10.0.0.9",
             "--operation", "All", "--topic", "ord", "--resource-pattern-type", "prefixed")
    assert stored(zk, "/kafka-acl-extended/prefixed/Topic/ord") == [
        {"principal": "User:mallory", "permissionType": "Deny", "operation": "All", "host": "10.0.0.9"}]
    run_json("acl", "create", *b, "--allow-principal", "User:carol", "--consumer", "--topic", "orders",
             "--group", "billing")
    assert stored(zk, "/kafka-acl/Group/billing") == [
        {"principal": "User:carol", "permissionType": "Allow", "operation": "Read", "host": "*"}]
    run_json("acl", "create", *b, "--allow-principal", "User:ops", "--operation", "ClusterAction", "--cluster")
    assert stored(zk, "/kafka-acl/Cluster/kafka-cluster")[0]["operation"] == "ClusterAction"

    everything = run_json("acl", "list", *b)
    assert len(everything) == 2 + 1 + 2 + 1 + 1
    applying = run_json("acl", "list", *b, "--topic", "orders", "--resource-pattern-type", "match")
    assert {(r["principal"], r["pattern"]) for r in applying} == {
        ("User:alice", "LITERAL"), ("User:carol", "LITERAL"), ("User:mallory", "PREFIXED")}
    assert {r["name"] for r in run_json("acl", "list", *b, "--principal", "User:carol")} == {"orders", "billing"}

    removed = run_json("acl", "delete", *b, "--topic", "orders", "--allow-principal", "User:alice",
                       "--operation", "Read")
    assert [(r["principal"], r["operation"]) for r in removed] == [("User:alice", "READ")]
    removed = run_json("acl", "delete", *b, "--topic", "ord", "--resource-pattern-type", "prefixed")
    assert [r["principal"] for r in removed] == ["User:mallory"]
    assert not zk.exists("/kafka-acl-extended/prefixed/Topic/ord")
    assert len(run_json("acl", "list", *b)) == 7 - 2


def test_mistakes_are_one_line_errors(node: RoostProcess) -> None:
    b = ("-b", node.address("kafka"))
    done = run_cli("acl", "create", *b, "--allow-principal", "alice", "--operation", "Read", "--topic", "t")
    assert done.returncode != 0 and "Type:name" in done.stderr
    done = run_cli("acl", "create", *b, "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t")
    assert done.returncode != 0 and "unknown operation" in done.stderr
    done = run_cli("acl", "create", *b, "--allow-principal", "User:a", "--operation", "Read")
    assert done.returncode != 0 and "name a resource" in done.stderr
    done = run_cli("acl", "create", *b, "--allow-principal", "User:a", "--operation", "ClusterAction",
                   "--topic", "t")
    assert done.returncode != 0 and "CLUSTER_ACTION does not apply to TOPIC" in done.stderr


def test_kafka_python_admin_creates_describes_and_deletes_acls(node: RoostProcess) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )
    admin = KafkaAdminClient(bootstrap_servers=node.address("kafka"))
    try:
        acl = ACL("User:kp", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                  ResourcePattern(ResourceType.TOPIC, "kp-", ACLResourcePatternType.PREFIXED))
        assert admin.create_acls([acl])["failed"] == []
        mine = ACLFilter("User:kp", None, ACLOperation.ANY, ACLPermissionType.ANY,
                         ResourcePatternFilter(ResourceType.TOPIC, None, ACLResourcePatternType.ANY))
        described, error = admin.describe_acls(mine)
        assert error.errno == 0 and [(a.resource_pattern.resource_name, a.operation) for a in described] == [
            ("kp-", ACLOperation.WRITE)]
        ((_, deleted, error),) = admin.delete_acls([mine])
        assert error.errno == 0 and len(deleted) == 1
        assert admin.describe_acls(mine)[0] == []
    finally:
        admin.close()
