"""Apache Kafka 3.9's own command-line tools, run through their main classes (what bin/kafka-*.sh
runs) in the shared tool shell against Roost, each checked by what it printed and by what it did,
as an independent client (confluent-kafka) or the cluster's Metadata sees it.

kafka-topics, kafka-configs, kafka-consumer-groups, kafka-reassign-partitions,
kafka-transactions, kafka-producer-perf-test and kafka-consumer-perf-test run against the shared
three-broker cluster; kafka-acls against a one-node Roost with the ACL authorizer and a
SASL_PLAINTEXT listener, where the ACL it adds lets a client in and its removal shuts it out."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from roost.testing.node import RoostNode
from tests.jvm.programs import ToolShell
from tests.support.cluster import LocalCluster
from tests.support.procs import wait_for

DESCRIBE_LINE = re.compile(r"Partition: (?P<p>\d+)\s+Leader: (?P<leader>-?\d+)\s+Replicas: (?P<replicas>[\d,]*)"
                           r"\s+Isr: (?P<isr>[\d,]*)")


def ids(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def described(text: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """kafka-topics --describe's partition lines: partition -> (leader, replicas, isr)."""
    return {int(m["p"]): (int(m["leader"]), ids(m["replicas"]), ids(m["isr"])) for m in DESCRIBE_LINE.finditer(text)}


def group_table(text: str) -> dict[int, tuple[int, int, int]]:
    """kafka-consumer-groups --describe's rows: partition -> (current offset, log end, lag)."""
    rows = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 6 and words[2].isdigit() and words[3].isdigit():
            rows[int(words[2])] = (int(words[3]), int(words[4]), int(words[5]))
    return rows


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found}


def test_kafka_topics_create_describe_alter_delete(roost3: LocalCluster, tools: ToolShell) -> None:
    b, topic = roost3.bootstrap, "tools-topics"
    assert "Created topic tools-topics." in tools.ok(
        "kafka-topics", "--bootstrap-server", b, "--create", "--topic", topic, "--partitions", "3",
        "--replication-factor", "2", "--config", "retention.ms=100000")
    roost3.wait_for_isr(topic)
    # Every broker learns of a new topic a moment after the one that created it (in Kafka too):
    # the tool may ask one that has not yet.
    text = wait_for(lambda: (found := tools.run("kafka-topics", "--bootstrap-server", b, "--describe", "--topic",
                                                topic))[0] == 0 and found[1], 30, interval=0.3,
                    what="kafka-topics --describe to find the topic")
    assert "PartitionCount: 3" in text and "ReplicationFactor: 2" in text and "retention.ms=100000" in text
    assert described(text) == roost3.partitions(topic)  # what Roost's Metadata says
    assert topic in tools.ok("kafka-topics", "--bootstrap-server", b, "--list").splitlines()
    status, text = tools.run("kafka-topics", "--bootstrap-server", b, "--create", "--topic", topic,
                             "--partitions", "1")
    assert status == 1 and "already exists" in text
    tools.ok("kafka-topics", "--bootstrap-server", b, "--alter", "--topic", topic, "--partitions", "5")
    wait_for(lambda: len(roost3.partitions(topic)) == 5, 30, what="five partitions")
    roost3.wait_for_isr(topic)
    assert tools.ok("kafka-topics", "--bootstrap-server", b, "--describe", "--under-replicated-partitions",
                    "--topic", topic).strip() == ""
    tools.ok("kafka-topics", "--bootstrap-server", b, "--delete", "--topic", topic)
    wait_for(lambda: topic not in roost3.metadata().topics, 30, what="the topic deleted")


def test_kafka_configs_topic_and_broker_default(roost3: LocalCluster, tools: ToolShell) -> None:
    b, topic = roost3.bootstrap, "tools-configs"
    tools.ok("kafka-topics", "--bootstrap-server", b, "--create", "--topic", topic, "--partitions", "1",
             "--replication-factor", "3")
    assert "Completed updating config for topic tools-configs." in tools.ok(
        "kafka-configs", "--bootstrap-server", b, "--entity-type", "topics", "--entity-name", topic, "--alter",
        "--add-config", "cleanup.policy=compact,max.message.bytes=20000")
    text = tools.ok("kafka-configs", "--bootstrap-server", b, "--entity-type", "topics", "--entity-name", topic,
                    "--describe")
    assert "cleanup.policy=compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact, " \
           "DEFAULT_CONFIG:log.cleanup.policy=delete}" in text
    assert "max.message.bytes=20000" in text
    # The effect: a record over the topic's new limit is refused.
    producer = Producer({"bootstrap.servers": b, "message.max.bytes": 100_000})
    errors: list[KafkaError] = []
    producer.produce(topic, b"x" * 30_000, key=b"k", on_delivery=lambda error, _: errors.append(error))
    producer.flush(30)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    tools.ok("kafka-configs", "--bootstrap-server", b, "--entity-type", "topics", "--entity-name", topic, "--alter",
             "--delete-config", "max.message.bytes")
    assert "max.message.bytes" not in tools.ok("kafka-configs", "--bootstrap-server", b, "--entity-type", "topics",
                                               "--entity-name", topic, "--describe")
    # The cluster-wide broker default, and a broker's own (empty) dynamic configs.
    tools.ok("kafka-configs", "--bootstrap-server", b, "--entity-type", "brokers", "--entity-default", "--alter",
             "--add-config", "log.retention.ms=7200000")
    assert "log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=" \
           "7200000}" in tools.ok("kafka-configs", "--bootstrap-server", b, "--entity-type", "brokers",
                                  "--entity-default", "--describe")
    tools.ok("kafka-configs", "--bootstrap-server", b, "--entity-type", "brokers", "--entity-default", "--alter",
             "--delete-config", "log.retention.ms")
    assert "Dynamic configs for broker 1 are:" in tools.ok("kafka-configs", "--bootstrap-server", b, "--entity-type",
                                                           "brokers", "--entity-name", "1", "--describe")


def test_kafka_consumer_groups_describe_lag_and_reset_offsets(roost3: LocalCluster, tools: ToolShell) -> None:
    b, topic, group = roost3.bootstrap, "tools-groups", "tools-group"
    admin = roost3.admin()
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    roost3.wait_for_isr(topic)
    tools.clients("produce", b, topic, "60", "g")
    tools.clients("consume", b, topic, group, "20", "max.poll.records=5")
    assert group in tools.ok("kafka-consumer-groups", "--bootstrap-server", b, "--list").splitlines()
    text = tools.ok("kafka-consumer-groups", "--bootstrap-server", b, "--describe", "--group", group)
    assert "has no active members" in text
    rows = group_table(text)
    offsets = committed(b, group, topic, 3)
    assert sorted(rows) == [0, 1, 2]
    for partition, (current, end, lag) in rows.items():
        assert current == offsets[partition] and lag == end - current
    assert sum(end for _, end, _ in rows.values()) == 60
    assert sum(lag for _, _, lag in rows.values()) == 60 - sum(offsets.values()) > 0
    state = tools.ok("kafka-consumer-groups", "--bootstrap-server", b, "--describe", "--group", group, "--state")
    assert re.search(r"tools-group\s+127\.0\.0\.1:\d+\s+\(\d\)\s+Empty\s+0", state), state

    plan = tools.ok("kafka-consumer-groups", "--bootstrap-server", b, "--reset-offsets", "--group", group,
                    "--topic", topic, "--to-earliest", "--dry-run")
    assert "NEW-OFFSET" in plan and committed(b, group, topic, 3) == offsets  # a dry run changes nothing
    tools.ok("kafka-consumer-groups", "--bootstrap-server", b, "--reset-offsets", "--group", group, "--topic", topic,
             "--to-earliest", "--execute")
    assert committed(b, group, topic, 3) == {0: 0, 1: 0, 2: 0}
    tools.ok("kafka-consumer-groups", "--bootstrap-server", b, "--reset-offsets", "--group", group,
             "--topic", f"{topic}:1", "--to-offset", "3", "--execute")
    tools.ok("kafka-consumer-groups", "--bootstrap-server", b, "--reset-offsets", "--group", group,
             "--topic", f"{topic}:2", "--to-latest", "--execute")
    ends = {p: end for p, (_, end, _) in rows.items()}
    assert committed(b, group, topic, 3) == {0: 0, 1: 3, 2: ends[2]}
    rows = group_table(tools.ok("kafka-consumer-groups", "--bootstrap-server", b, "--describe", "--group", group))
    assert rows == {0: (0, ends[0], ends[0]), 1: (3, ends[1], ends[1] - 3), 2: (ends[2], ends[2], 0)}
    # The reset offsets are where a consumer of the group starts: the records after them.
    read = tools.clients("consume", b, topic, group, str(ends[0] + ends[1] - 3))
    assert len(read["values"]) == ends[0] + ends[1] - 3

    assert "Deletion of requested consumer groups ('tools-group') was successful." in tools.ok(
        "kafka-consumer-groups", "--bootstrap-server", b, "--delete", "--group", group)
    assert group not in tools.ok("kafka-consumer-groups", "--bootstrap-server", b, "--list").splitlines()


def test_kafka_reassign_partitions_moves_a_replica(roost3: LocalCluster, tools: ToolShell, tmp_path: Path) -> None:
    b, topic = roost3.bootstrap, "tools-reassign"
    admin = roost3.admin()
    admin.create_topics([NewTopic(topic, 1, 2)])[topic].result(30)
    roost3.wait_for_isr(topic)
    tools.clients("produce", b, topic, "50", "r")
    _, replicas, _ = roost3.partitions(topic)[0]
    newcomer = ({1, 2, 3} - set(replicas)).pop()
    target = [replicas[0], newcomer]
    plan = tmp_path / "reassign.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": target}]}))
    text = tools.ok("kafka-reassign-partitions", "--bootstrap-server", b, "--reassignment-json-file", str(plan),
                    "--execute")
    assert "Successfully started partition reassignment for tools-reassign-0" in text

    def verified() -> str:
        out = tools.ok("kafka-reassign-partitions", "--bootstrap-server", b, "--reassignment-json-file", str(plan),
                       "--verify")
        return out if "Reassignment of partition tools-reassign-0 is completed." in out else ""
    text = wait_for(verified, 60, interval=0.5, what="the reassignment verified")
    assert "Clearing topic-level throttles on topic tools-reassign" in text
    # Every broker's metadata catches up a moment after the controller's (the union of old and
    # new replicas until then).
    leader, now, isr = wait_for(lambda: (found := roost3.partitions(topic).get(0)) and
                                sorted(found[1]) == sorted(target) and sorted(found[2]) == sorted(target) and found,
                                30, interval=0.2, what="the new replicas in every broker's metadata")
    wait_for(lambda: described(tools.ok("kafka-topics", "--bootstrap-server", b, "--describe", "--topic", topic))
             .get(0) == (leader, now, isr), 30, interval=0.3, what="kafka-topics --describe to show the move")
    # --throttle sets Kafka's KIP-73 throttles, which Roost has (issue 33); --verify clears them.
    status, text = tools.run("kafka-reassign-partitions", "--bootstrap-server", b, "--reassignment-json-file",
                             str(plan), "--execute", "--throttle", "10000")
    assert status == 0, text
    text = wait_for(verified, 60, interval=0.5, what="the throttled reassignment verified")
    assert "Clearing broker-level throttles" in text, text


def test_kafka_transactions_lists_describes_and_finds_no_hanging(roost3: LocalCluster, tools: ToolShell) -> None:
    b, topic = roost3.bootstrap, "tools-txn"
    admin = roost3.admin()
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    roost3.wait_for_isr(topic)
    tools.clients("txn", b, topic, "tools-txn-id", "4", "2")
    listed = tools.ok("kafka-transactions", "--bootstrap-server", b, "list")
    row = next(line.split() for line in listed.splitlines() if line.startswith("tools-txn-id"))
    coordinator, producer_id, state = int(row[1]), int(row[2]), row[3]
    assert coordinator in (1, 2, 3) and state == "CompleteCommit"
    text = tools.ok("kafka-transactions", "--bootstrap-server", b, "describe", "--transactional-id", "tools-txn-id")
    values = text.splitlines()[1].split()
    assert values[:5] == [str(coordinator), "tools-txn-id", str(producer_id), "0", "CompleteCommit"]
    text = tools.ok("kafka-transactions", "--bootstrap-server", b, "describe-producers", "--topic", topic,
                    "--partition", "0")
    producers = {int(line.split()[0]): line.split() for line in text.splitlines()[1:] if line.strip()}
    assert producer_id in producers and producers[producer_id][-1] == "None"  # no open transaction
    for broker in (1, 2, 3):
        hanging = tools.ok("kafka-transactions", "--bootstrap-server", b, "find-hanging", "--broker-id", str(broker))
        assert hanging.strip().splitlines()[1:] == [], hanging

    # An open transaction: seen Ongoing, with its partition, and its start offset in describe-producers.
    producer = Producer({"bootstrap.servers": b, "transactional.id": "tools-open-txn"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"open")
    assert producer.flush(30) == 0
    try:
        text = tools.ok("kafka-transactions", "--bootstrap-server", b, "describe", "--transactional-id",
                        "tools-open-txn")
        assert "Ongoing" in text and f"{topic}-0" in text
        text = tools.ok("kafka-transactions", "--bootstrap-server", b, "describe-producers", "--topic", topic,
                        "--partition", "0")
        open_rows = [line.split() for line in text.splitlines()[1:] if line.strip() and line.split()[-1] != "None"]
        assert len(open_rows) == 1 and int(open_rows[0][-1]) >= 0
    finally:
        producer.abort_transaction(30)


def test_perf_tools_produce_and_consume_what_they_say(roost3: LocalCluster, tools: ToolShell) -> None:
    b, topic, count = roost3.bootstrap, "tools-perf", 20_000
    admin = roost3.admin()
    admin.create_topics([NewTopic(topic, 2, 3)])[topic].result(30)
    roost3.wait_for_isr(topic)
    text = tools.ok("kafka-producer-perf-test", "--topic", topic, "--num-records", str(count), "--record-size", "100",
                    "--throughput", "-1", "--producer-props", f"bootstrap.servers={b}", "acks=all")
    assert re.search(rf"^{count} records sent, [\d.]+ records/sec", text, re.MULTILINE), text
    consumer = Consumer({"bootstrap.servers": b, "group.id": "tools-perf-watermarks"})
    try:
        ends = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in range(2)]
    finally:
        consumer.close()
    assert sum(ends) == count
    text = tools.ok("kafka-consumer-perf-test", "--bootstrap-server", b, "--topic", topic, "--messages", str(count),
                    "--timeout", "60000")
    header, row = [line for line in text.splitlines() if "," in line][-2:]
    fields = dict(zip([h.strip() for h in header.split(",")], [v.strip() for v in row.split(",")], strict=True))
    assert int(fields["data.consumed.in.nMsg"]) == count
    assert abs(float(fields["data.consumed.in.MB"]) - count * 100 / 1024 / 1024) < 0.01


# kafka-acls: a node with the authorizer and a SASL_PLAINTEXT listener ---------------------------

SASL_USERS = {"admin": "admin-secret", "alice": "alice-secret"}


@pytest.fixture(scope="module")
def acl_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RoostNode, str]]:
    root = tmp_path_factory.mktemp("jvm-acls")
    users = " ".join(f'user_{name}="{password}"' for name, password in SASL_USERS.items())
    node = RoostNode.start(root / "data", {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.jaas.config": f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin"})
    try:
        assert node.process is not None
        host, port = node.process.wait_listening(["kafka listener sasl-plaintext"])["kafka listener sasl-plaintext"]
        yield node, f"{host}:{port}"
    finally:
        node.stop()


def sasl(user: str) -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user,
            "sasl.password": SASL_USERS[user]}


def produce_as(bootstrap: str, user: str, topic: str) -> KafkaError | None:
    """The delivery error of one record `user` writes to `topic` (None: written)."""
    producer = Producer({"bootstrap.servers": bootstrap, **sasl(user), "message.timeout.ms": 10_000})
    outcome: list[KafkaError | None] = []
    producer.produce(topic, b"hello", on_delivery=lambda error, _: outcome.append(error))
    producer.flush(30)
    assert outcome, "no delivery report"
    return outcome[0]


def test_kafka_acls_adds_an_acl_that_lets_a_client_in_and_removes_it(
        acl_node: tuple[RoostNode, str], tools: ToolShell, tmp_path: Path) -> None:
    _, bootstrap = acl_node
    command_config = tmp_path / "admin.properties"
    command_config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
                              "org.apache.kafka.common.security.plain.PlainLoginModule required "
                              f'username="admin" password="{SASL_USERS["admin"]}";\n')
    admin = ["--bootstrap-server", bootstrap, "--command-config", str(command_config)]
    tools.ok("kafka-topics", *admin, "--create", "--topic", "acl-orders", "--partitions", "1",
             "--replication-factor", "1")
    denied = produce_as(bootstrap, "alice", "acl-orders")
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    text = tools.ok("kafka-acls", *admin, "--add", "--allow-principal", "User:alice", "--operation", "Write",
                    "--operation", "Describe", "--topic", "acl-orders")
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=acl-orders, patternType=LITERAL)`" \
        in text
    listed = tools.ok("kafka-acls", *admin, "--list", "--topic", "acl-orders")
    assert "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)" in listed
    assert "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)" in listed
    assert produce_as(bootstrap, "alice", "acl-orders") is None  # let in
    # A deny for her host wins over the allow.
    tools.ok("kafka-acls", *admin, "--add", "--deny-principal", "User:alice", "--deny-host", "127.0.0.1",
             "--operation", "Write", "--topic", "acl-orders")
    refused = produce_as(bootstrap, "alice", "acl-orders")
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    tools.ok("kafka-acls", *admin, "--remove", "--force", "--topic", "acl-orders")
    assert "User:alice" not in tools.ok("kafka-acls", *admin, "--list", "--topic", "acl-orders")
    shut_out = produce_as(bootstrap, "alice", "acl-orders")
    assert shut_out is not None and shut_out.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Without credentials the tool itself is refused the listing (alice has no Describe on the cluster).
    status, text = tools.run("kafka-acls", "--bootstrap-server", bootstrap, "--command-config", str(_alice(tmp_path)),
                             "--list")
    assert status == 1 and "ClusterAuthorizationException" in text


def _alice(tmp_path: Path) -> Path:
    path = tmp_path / "alice.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
                    "org.apache.kafka.common.security.plain.PlainLoginModule required "
                    f'username="alice" password="{SASL_USERS["alice"]}";\n')
    return path


def test_kafka_configs_sets_a_scram_credential_a_client_logs_in_with(
        acl_node: tuple[RoostNode, str], tools: ToolShell, tmp_path: Path) -> None:
    _, bootstrap = acl_node
    command_config = tmp_path / "admin.properties"
    command_config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
                              "org.apache.kafka.common.security.plain.PlainLoginModule required "
                              f'username="admin" password="{SASL_USERS["admin"]}";\n')
    admin = ["--bootstrap-server", bootstrap, "--command-config", str(command_config)]
    tools.ok("kafka-configs", *admin, "--entity-type", "users", "--entity-name", "dora", "--alter",
             "--add-config", "SCRAM-SHA-256=[iterations=4096,password=dora-secret]")
    # dora now logs in with SCRAM: the authorizer (not the login) is what refuses her write.
    producer = Producer({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "dora", "sasl.password": "dora-secret",
                         "message.timeout.ms": 10_000})
    outcome: list[KafkaError | None] = []
    producer.produce("dora-topic", b"x", on_delivery=lambda error, _: outcome.append(error))
    producer.flush(30)
    assert outcome and outcome[0] is not None and outcome[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, outcome
