"""Every API a broker serves, with the authorizer on: a principal without the ACL Kafka's table asks
for is refused with Kafka's error code, and the same request succeeds once the ACL is granted.

One `roost up` node (keeper and broker, a one-broker cluster) with
`authorizer.class.name = kafka.security.authorizer.AclAuthorizer`, shared by the module. Clients
are User:ANONYMOUS (a PLAINTEXT listener). ACLs are written straight into ZooKeeper with kazoo, as
any ZooKeeper client could (Kafka's znodes and change notifications), so the test also shows
the broker obeys them. The table is keyed by principal-independent rows: once SASL lands, the same
rows run with a SASL principal by changing `PRINCIPAL` and the client's connection.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from roost.wire.kafka.records import build_batch
from tests.broker.conftest import FAST_GROUPS
from tests.cli.kafka_cli import run_cli
from tests.security.acl_support import ANONYMOUS, ZkAcls, eventually
from tests.support.kafka_wire import WireClient
from tests.support.procs import RoostProcess, start_roost

AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
PRINCIPAL = ANONYMOUS
TOPIC, GROUP = "matrix", "matrix-group"
LISTED_GROUP = "matrix-listed"  # left alone by the matrix's rows (OffsetDelete empties GROUP)
TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED = 29, 30, 31, 53
TXN_ID = "matrix-txn"
CLUSTER = ("Cluster", "kafka-cluster")


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    directory = tmp_path_factory.mktemp("acl-node")
    proc = start_roost(["up", "--data-dir", str(directory), "--kafka-port", "0", *FAST_GROUPS,
                        "--authorizer.class.name", AUTHORIZER, "--super.users", "User:admin"],
                       expect=("kafka", "keeper"))
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def zk_acls(node: RoostProcess) -> Iterator[ZkAcls]:
    acls = ZkAcls(node.address("keeper"))
    # The matrix's topic and group exist: made while ANONYMOUS may do everything.
    acls.grant("Cluster", "kafka-cluster", "All")
    acls.grant("Topic", "*", "All")
    acls.grant("Group", "*", "All")
    bootstrap = node.address("kafka")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    eventually(lambda: _created(admin, TOPIC), what="topic created")
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(TOPIC, b"seed")
    assert producer.flush(10) == 0
    for group in (GROUP, LISTED_GROUP):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        consumer.subscribe([TOPIC])
        eventually(lambda c=consumer: c.poll(0.5) is not None, timeout=30, what="seed consumed")
        consumer.commit(asynchronous=False)
        consumer.close()
    acls.clear()
    yield acls
    acls.close()


def _created(admin: AdminClient, topic: str) -> bool:
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    except KafkaException as error:
        return error.args[0].code() == 36  # TOPIC_ALREADY_EXISTS
    return True


CONSUMER_GROUP = "matrix-consumer-group"


def _consumer_heartbeat() -> dict[str, Any]:
    return {"group_id": CONSUMER_GROUP, "member_id": "nobody", "member_epoch": 5,
            "subscribed_topic_names": [TOPIC]}


SHARE_GROUP = "matrix-share-group"


def _share_heartbeat() -> dict[str, Any]:
    return {"group_id": SHARE_GROUP, "member_id": "nobody", "member_epoch": 5, "subscribed_topic_names": [TOPIC]}


# ------------------------------------------------------------------------------------------------
# The table: one row per (API, what it needs). `grants` are (ResourceType dir, name, operation).

Body = Callable[[], dict[str, Any]]


def _share_offsets_describe() -> dict[str, Any]:
    return {"groups": [{"group_id": SHARE_GROUP, "topics": [{"topic_name": TOPIC, "partitions": [0]}]}]}


def _first_share_offset_code(group: dict[str, Any]) -> int:
    """The first partition's code, or the group's while ACL changes are still arriving."""
    topics = group["topics"]
    return topics[0]["partitions"][0]["error_code"] if topics else group["error_code"]


def _share_offsets_alter() -> dict[str, Any]:
    return {"group_id": SHARE_GROUP, "topics": [{"topic_name": TOPIC, "partitions": [
        {"partition_index": 0, "start_offset": 0}]}]}


@dataclass(frozen=True)
class Row:
    name: str
    api: int
    version: int
    body: Body
    grants: tuple[tuple[str, str, str], ...]  # the last is the one withheld, the others granted
    code: Callable[[dict[str, Any]], int]
    refused: int
    allowed: Callable[[int], bool] = field(default=lambda code: code == 0)


def first_partition(topics_key: str = "topics", parts_key: str = "partitions", code_key: str = "error_code",
                    ) -> Callable[[dict[str, Any]], int]:
    return lambda r: r[topics_key][0][parts_key][0][code_key]


def top(r: dict[str, Any]) -> int:
    return r["error_code"]


def not_refused(refused: int) -> Callable[[int], bool]:
    """For requests a test client may send but not carry out (a stale controller epoch, no such
    member): allowed means the authorizer let it through to the handler's own answer."""
    return lambda code: code != refused


def batch() -> bytes:
    return bytes(build_batch([(None, b"matrix")], timestamp_ms=int(time.time() * 1000)))


ROWS = [
    Row("Produce", 0, 9, lambda: {"acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 0, "records": batch()}]}]},
        (("Topic", TOPIC, "Write"),), first_partition("responses", "partition_responses"), TOPIC_DENIED),
    Row("Fetch (consumer)", 1, 12, lambda: {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "topics": [
        {"topic": TOPIC, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1024}]}]},
        (("Topic", TOPIC, "Read"),), first_partition("responses"), TOPIC_DENIED),
    Row("Fetch (follower)", 1, 12, lambda: {"replica_id": 7, "max_wait_ms": 0, "min_bytes": 0, "topics": [
        {"topic": TOPIC, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1024}]}]},
        ((*CLUSTER, "ClusterAction"),), first_partition("responses"), TOPIC_DENIED, not_refused(TOPIC_DENIED)),
    Row("ListOffsets", 2, 7, lambda: {"replica_id": -1, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
        (("Topic", TOPIC, "Describe"),), first_partition(), TOPIC_DENIED),
    Row("Metadata (named)", 3, 12, lambda: {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False},
        (("Topic", TOPIC, "Describe"),), lambda r: r["topics"][0]["error_code"], TOPIC_DENIED),
    Row("Metadata (auto-create)", 3, 12, lambda: {"topics": [{"name": "matrix-auto"}],
                                                  "allow_auto_topic_creation": True},
        (("Topic", "matrix-auto", "Describe"), ("Topic", "matrix-auto", "Create")),
        lambda r: r["topics"][0]["error_code"], TOPIC_DENIED, not_refused(TOPIC_DENIED)),
    Row("OffsetCommit (group)", 8, 8, lambda: {"group_id": GROUP, "generation_id_or_member_epoch": -1,
                                               "member_id": "", "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 1}]}]},
        (("Topic", TOPIC, "Read"), ("Group", GROUP, "Read")), first_partition(), GROUP_DENIED),
    Row("OffsetCommit (topic)", 8, 8, lambda: {"group_id": GROUP, "generation_id_or_member_epoch": -1,
                                               "member_id": "", "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 1}]}]},
        (("Group", GROUP, "Read"), ("Topic", TOPIC, "Read")), first_partition(), TOPIC_DENIED),
    Row("OffsetFetch", 9, 7, lambda: {"group_id": GROUP, "topics": [{"name": TOPIC, "partition_indexes": [0]}]},
        (("Topic", TOPIC, "Describe"), ("Group", GROUP, "Describe")), top, GROUP_DENIED),
    Row("FindCoordinator", 10, 3, lambda: {"key": GROUP, "key_type": 0},
        (("Group", GROUP, "Describe"),), top, GROUP_DENIED),
    Row("JoinGroup", 11, 7, lambda: {"group_id": GROUP, "session_timeout_ms": 6000, "rebalance_timeout_ms": 6000,
                                     "member_id": "", "protocol_type": "consumer",
                                     "protocols": [{"name": "range", "metadata": b""}]},
        (("Group", GROUP, "Read"),), top, GROUP_DENIED, not_refused(GROUP_DENIED)),
    Row("Heartbeat", 12, 4, lambda: {"group_id": GROUP, "generation_id": 1, "member_id": "nobody"},
        (("Group", GROUP, "Read"),), top, GROUP_DENIED, not_refused(GROUP_DENIED)),
    Row("LeaveGroup", 13, 4, lambda: {"group_id": GROUP, "members": [{"member_id": "nobody"}]},
        (("Group", GROUP, "Read"),), top, GROUP_DENIED, not_refused(GROUP_DENIED)),
    Row("SyncGroup", 14, 5, lambda: {"group_id": GROUP, "generation_id": 1, "member_id": "nobody",
                                     "assignments": []},
        (("Group", GROUP, "Read"),), top, GROUP_DENIED, not_refused(GROUP_DENIED)),
    Row("DescribeGroups", 15, 5, lambda: {"groups": [GROUP]},
        (("Group", GROUP, "Describe"),), lambda r: r["groups"][0]["error_code"], GROUP_DENIED),
    # KIP-848: Group READ, and DESCRIBE on every subscribed topic (a stranger's heartbeat: UNKNOWN_MEMBER_ID).
    Row("ConsumerGroupHeartbeat (group)", 68, 1, lambda: _consumer_heartbeat(),
        (("Topic", TOPIC, "Describe"), ("Group", CONSUMER_GROUP, "Read")), top, GROUP_DENIED,
        not_refused(GROUP_DENIED)),
    Row("ConsumerGroupHeartbeat (topic)", 68, 1, lambda: _consumer_heartbeat(),
        (("Group", CONSUMER_GROUP, "Read"), ("Topic", TOPIC, "Describe")), top, TOPIC_DENIED,
        not_refused(TOPIC_DENIED)),
    Row("ConsumerGroupDescribe", 69, 0, lambda: {"group_ids": [CONSUMER_GROUP]},
        (("Group", CONSUMER_GROUP, "Describe"),), lambda r: r["groups"][0]["error_code"], GROUP_DENIED,
        not_refused(GROUP_DENIED)),
    # KIP-932 share groups: the same checks as KIP-848's for the heartbeat and describe; ShareFetch
    # and ShareAcknowledge need Group READ (and Topic READ on the topics they name).
    Row("ShareGroupHeartbeat (group)", 76, 1, lambda: _share_heartbeat(),
        (("Topic", TOPIC, "Describe"), ("Group", SHARE_GROUP, "Read")), top, GROUP_DENIED,
        not_refused(GROUP_DENIED)),
    Row("ShareGroupHeartbeat (topic)", 76, 1, lambda: _share_heartbeat(),
        (("Group", SHARE_GROUP, "Read"), ("Topic", TOPIC, "Describe")), top, TOPIC_DENIED,
        not_refused(TOPIC_DENIED)),
    Row("ShareGroupDescribe", 77, 1, lambda: {"group_ids": [SHARE_GROUP], "include_authorized_operations": False},
        (("Group", SHARE_GROUP, "Describe"),), lambda r: r["groups"][0]["error_code"], GROUP_DENIED,
        not_refused(GROUP_DENIED)),
    Row("ShareFetch", 78, 1, lambda: {"group_id": SHARE_GROUP, "member_id": "matrix-member", "share_session_epoch": 0,
                                      "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1024, "max_records": 10,
                                      "batch_size": 10, "topics": [], "forgotten_topics_data": []},
        (("Group", SHARE_GROUP, "Read"),), top, GROUP_DENIED),
    Row("ShareAcknowledge", 79, 1, lambda: {"group_id": SHARE_GROUP, "member_id": "nobody", "share_session_epoch": 1,
                                            "topics": []},
        (("Group", SHARE_GROUP, "Read"),), top, GROUP_DENIED, lambda code: code == 122),  # no session
    # The share offsets admin (KafkaApis 4.2): Group DESCRIBE + Topic DESCRIBE to describe, Group
    # READ + Topic READ to alter, Group DELETE + Topic READ to delete.
    Row("DescribeShareGroupOffsets (group)", 90, 1, lambda: _share_offsets_describe(),
        (("Topic", TOPIC, "Describe"), ("Group", SHARE_GROUP, "Describe")),
        lambda r: r["groups"][0]["error_code"], GROUP_DENIED),
    Row("DescribeShareGroupOffsets (topic)", 90, 1, lambda: _share_offsets_describe(),
        (("Group", SHARE_GROUP, "Describe"), ("Topic", TOPIC, "Describe")),
        lambda r: _first_share_offset_code(r["groups"][0]), TOPIC_DENIED),
    Row("AlterShareGroupOffsets (group)", 91, 0, lambda: _share_offsets_alter(),
        (("Topic", TOPIC, "Read"), ("Group", SHARE_GROUP, "Read")), top, GROUP_DENIED, not_refused(GROUP_DENIED)),
    Row("AlterShareGroupOffsets (topic)", 91, 0, lambda: _share_offsets_alter(),
        (("Group", SHARE_GROUP, "Read"), ("Topic", TOPIC, "Read")),
        lambda r: r["responses"][0]["partitions"][0]["error_code"] if r["responses"] else r["error_code"],
        TOPIC_DENIED, not_refused(TOPIC_DENIED)),
    Row("DeleteShareGroupOffsets (group)", 92, 0, lambda: {"group_id": SHARE_GROUP, "topics": [{"topic_name": TOPIC}]},
        (("Topic", TOPIC, "Read"), ("Group", SHARE_GROUP, "Delete")), top, GROUP_DENIED, not_refused(GROUP_DENIED)),
    Row("DeleteShareGroupOffsets (topic)", 92, 0, lambda: {"group_id": SHARE_GROUP, "topics": [{"topic_name": TOPIC}]},
        (("Group", SHARE_GROUP, "Delete"), ("Topic", TOPIC, "Read")),
        lambda r: r["responses"][0]["error_code"] if r["responses"] else r["error_code"],
        TOPIC_DENIED, not_refused(TOPIC_DENIED)),
    Row("CreateTopics", 19, 5, lambda: {"topics": [{"name": "matrix-created", "num_partitions": 1,
                                                    "replication_factor": 1}], "timeout_ms": 10000,
                                        "validate_only": True},
        (("Topic", "matrix-created", "Create"),), lambda r: r["topics"][0]["error_code"], TOPIC_DENIED),
    Row("DeleteTopics", 20, 5, lambda: {"topic_names": ["matrix-missing"], "timeout_ms": 5000},
        (("Topic", "matrix-missing", "Delete"),), lambda r: r["responses"][0]["error_code"], TOPIC_DENIED,
        lambda code: code == 3),  # allowed: the topic does not exist (3), as Kafka answers
    Row("DeleteRecords", 21, 2, lambda: {"topics": [{"name": TOPIC, "partitions": [
        {"partition_index": 0, "offset": 0}]}], "timeout_ms": 5000},
        (("Topic", TOPIC, "Delete"),), first_partition(), TOPIC_DENIED),
    Row("InitProducerId", 22, 3, lambda: {"transactional_id": None, "transaction_timeout_ms": 60000,
                                          "producer_id": -1, "producer_epoch": -1},
        ((*CLUSTER, "IdempotentWrite"),), top, CLUSTER_DENIED),
    Row("InitProducerId (write on a topic)", 22, 3, lambda: {"transactional_id": None,
                                                             "transaction_timeout_ms": 60000,
                                                             "producer_id": -1, "producer_epoch": -1},
        (("Topic", TOPIC, "Write"),), top, CLUSTER_DENIED),
    # Transactions: with the ACL the request reaches the coordinator, which has no such producer
    # (49), or finds the transaction coordinator (a FindCoordinator creates __transaction_state).
    Row("InitProducerId (transactional)", 22, 4, lambda: {"transactional_id": TXN_ID,
                                                          "transaction_timeout_ms": 60000,
                                                          "producer_id": -1, "producer_epoch": -1},
        (("TransactionalId", TXN_ID, "Write"),), top, TXN_DENIED, not_refused(TXN_DENIED)),
    Row("FindCoordinator (transaction)", 10, 3, lambda: {"key": TXN_ID, "key_type": 1},
        (("TransactionalId", TXN_ID, "Describe"),), top, TXN_DENIED, not_refused(TXN_DENIED)),
    Row("AddPartitionsToTxn (transactional id)", 24, 3, lambda: {
        "v3_and_below_transactional_id": TXN_ID, "v3_and_below_producer_id": 1, "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}]},
        (("Topic", TOPIC, "Write"), ("TransactionalId", TXN_ID, "Write")),
        first_partition("results_by_topic_v3_and_below", "results_by_partition", "partition_error_code"),
        TXN_DENIED, not_refused(TXN_DENIED)),
    Row("AddPartitionsToTxn (topic)", 24, 3, lambda: {
        "v3_and_below_transactional_id": TXN_ID, "v3_and_below_producer_id": 1, "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}]},
        (("TransactionalId", TXN_ID, "Write"), ("Topic", TOPIC, "Write")),
        first_partition("results_by_topic_v3_and_below", "results_by_partition", "partition_error_code"),
        TOPIC_DENIED, not_refused(TOPIC_DENIED)),
    Row("AddOffsetsToTxn (transactional id)", 25, 3, lambda: {"transactional_id": TXN_ID, "producer_id": 1,
                                                              "producer_epoch": 0, "group_id": GROUP},
        (("Group", GROUP, "Read"), ("TransactionalId", TXN_ID, "Write")), top, TXN_DENIED, not_refused(TXN_DENIED)),
    Row("AddOffsetsToTxn (group)", 25, 3, lambda: {"transactional_id": TXN_ID, "producer_id": 1,
                                                   "producer_epoch": 0, "group_id": GROUP},
        (("TransactionalId", TXN_ID, "Write"), ("Group", GROUP, "Read")), top, GROUP_DENIED,
        not_refused(GROUP_DENIED)),
    Row("EndTxn", 26, 3, lambda: {"transactional_id": TXN_ID, "producer_id": 1, "producer_epoch": 0,
                                  "committed": True},
        (("TransactionalId", TXN_ID, "Write"),), top, TXN_DENIED, not_refused(TXN_DENIED)),
    Row("TxnOffsetCommit (transactional id)", 28, 3, lambda: {
        "transactional_id": TXN_ID, "group_id": GROUP, "producer_id": 1, "producer_epoch": 0, "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]}]},
        (("Group", GROUP, "Read"), ("Topic", TOPIC, "Read"), ("TransactionalId", TXN_ID, "Write")),
        first_partition(), TXN_DENIED, not_refused(TXN_DENIED)),
    Row("TxnOffsetCommit (group)", 28, 3, lambda: {
        "transactional_id": TXN_ID, "group_id": GROUP, "producer_id": 1, "producer_epoch": 0, "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]}]},
        (("TransactionalId", TXN_ID, "Write"), ("Topic", TOPIC, "Read"), ("Group", GROUP, "Read")),
        first_partition(), GROUP_DENIED, not_refused(GROUP_DENIED)),
    Row("TxnOffsetCommit (topic)", 28, 3, lambda: {
        "transactional_id": TXN_ID, "group_id": GROUP, "producer_id": 1, "producer_epoch": 0, "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]}]},
        (("TransactionalId", TXN_ID, "Write"), ("Group", GROUP, "Read"), ("Topic", TOPIC, "Read")),
        first_partition(), TOPIC_DENIED, not_refused(TOPIC_DENIED)),
    # A marker for a producer the partition has not seen, from coordinator epoch 0: appended.
    Row("WriteTxnMarkers", 27, 1, lambda: {"markers": [{"producer_id": 999_999, "producer_epoch": 0,
                                                        "transaction_result": False, "coordinator_epoch": 0,
                                                        "topics": [{"name": TOPIC, "partition_indexes": [0]}]}]},
        ((*CLUSTER, "ClusterAction"),), lambda r: r["markers"][0]["topics"][0]["partitions"][0]["error_code"],
        CLUSTER_DENIED),
    # The share coordinator's state APIs (from share-partition leaders): a random topic id is
    # UNKNOWN_TOPIC_OR_PARTITION (or the coordinator is not loaded yet) once let through.
    *(Row(name, api, version, lambda fields=fields: {"group_id": "matrix-share", "topics": [
        {"topic_id": uuid.UUID(int=7), "partitions": [{"partition": 0, **fields}]}]},
        ((*CLUSTER, "ClusterAction"),), lambda r: r["results"][0]["partitions"][0]["error_code"], CLUSTER_DENIED,
        not_refused(CLUSTER_DENIED))
      for name, api, version, fields in (
          ("InitializeShareGroupState", 83, 0, {"state_epoch": 0, "start_offset": 0}),
          ("ReadShareGroupState", 84, 0, {"leader_epoch": 0}),
          ("WriteShareGroupState", 85, 1, {"state_epoch": 0, "leader_epoch": 0, "start_offset": 0,
                                           "delivery_complete_count": 0, "state_batches": []}),
          ("DeleteShareGroupState", 86, 0, {}),
          ("ReadShareGroupStateSummary", 87, 1, {"leader_epoch": 0}))),
    Row("DescribeTransactions", 65, 0, lambda: {"transactional_ids": [TXN_ID]},
        (("TransactionalId", TXN_ID, "Describe"),), lambda r: r["transaction_states"][0]["error_code"], TXN_DENIED,
        not_refused(TXN_DENIED)),
    Row("DescribeConfigs (topic)", 32, 3, lambda: {"resources": [{"resource_type": 2, "resource_name": TOPIC,
                                                                  "configuration_keys": None}]},
        (("Topic", TOPIC, "DescribeConfigs"),), lambda r: r["results"][0]["error_code"], TOPIC_DENIED),
    Row("DescribeConfigs (broker)", 32, 3, lambda: {"resources": [{"resource_type": 4, "resource_name": "0",
                                                                   "configuration_keys": None}]},
        ((*CLUSTER, "DescribeConfigs"),), lambda r: r["results"][0]["error_code"], CLUSTER_DENIED),
    # A share group's configs: the GROUP resource (32), DESCRIBE_CONFIGS / ALTER_CONFIGS on the group.
    Row("DescribeConfigs (group)", 32, 3, lambda: {"resources": [{"resource_type": 32, "resource_name": SHARE_GROUP,
                                                                  "configuration_keys": None}]},
        (("Group", SHARE_GROUP, "DescribeConfigs"),), lambda r: r["results"][0]["error_code"], GROUP_DENIED),
    Row("IncrementalAlterConfigs (group)", 44, 1, lambda: {"resources": [
        {"resource_type": 32, "resource_name": SHARE_GROUP, "configs": [
            {"name": "roost.share.dead.letter.topic", "config_operation": 0, "value": "matrix-dlt"}]}],
        "validate_only": True},
        (("Group", SHARE_GROUP, "AlterConfigs"),), lambda r: r["responses"][0]["error_code"], GROUP_DENIED),
    Row("AlterConfigs", 33, 2, lambda: {"resources": [{"resource_type": 2, "resource_name": TOPIC, "configs": [
        {"name": "retention.ms", "value": "86400000"}]}], "validate_only": True},
        (("Topic", TOPIC, "AlterConfigs"),), lambda r: r["responses"][0]["error_code"], TOPIC_DENIED),
    Row("IncrementalAlterConfigs", 44, 1, lambda: {"resources": [{"resource_type": 2, "resource_name": TOPIC,
                                                                   "configs": [{"name": "retention.ms",
                                                                                "config_operation": 0,
                                                                                "value": "86400000"}]}],
                                                   "validate_only": True},
        (("Topic", TOPIC, "AlterConfigs"),), lambda r: r["responses"][0]["error_code"], TOPIC_DENIED),
    Row("AlterReplicaLogDirs", 34, 2, lambda: {"dirs": [{"path": "/nowhere", "topics": [
        {"name": TOPIC, "partitions": [0]}]}]},
        ((*CLUSTER, "Alter"),), first_partition("results"), CLUSTER_DENIED, not_refused(CLUSTER_DENIED)),
    Row("DescribeLogDirs", 35, 4, lambda: {"topics": None}, ((*CLUSTER, "Describe"),), top, CLUSTER_DENIED),
    Row("CreatePartitions", 37, 2, lambda: {"topics": [{"name": TOPIC, "count": 1, "assignments": None}],
                                            "timeout_ms": 5000, "validate_only": True},
        (("Topic", TOPIC, "Alter"),), lambda r: r["results"][0]["error_code"], TOPIC_DENIED,
        not_refused(TOPIC_DENIED)),  # allowed: INVALID_PARTITIONS (the count is not larger)
    Row("DeleteGroups", 42, 2, lambda: {"groups_names": ["matrix-missing-group"]},
        (("Group", "matrix-missing-group", "Delete"),), lambda r: r["results"][0]["error_code"], GROUP_DENIED,
        not_refused(GROUP_DENIED)),
    Row("OffsetDelete", 47, 0, lambda: {"group_id": GROUP, "topics": [{"name": TOPIC, "partitions": [
        {"partition_index": 0}]}]},
        (("Topic", TOPIC, "Read"), ("Group", GROUP, "Delete")), top, GROUP_DENIED),
    Row("DescribeProducers", 61, 0, lambda: {"topics": [{"name": TOPIC, "partition_indexes": [0]}]},
        (("Topic", TOPIC, "Read"),), first_partition(), TOPIC_DENIED),
    Row("DescribeTopicPartitions", 75, 0, lambda: {"topics": [{"name": TOPIC}], "response_partition_limit": 10},
        (("Topic", TOPIC, "Describe"),), lambda r: r["topics"][0]["error_code"], TOPIC_DENIED),
    Row("ListConfigResources", 74, 1, lambda: {"resource_types": [2]},
        ((*CLUSTER, "DescribeConfigs"),), top, CLUSTER_DENIED),
    Row("DescribeClientQuotas", 48, 1, lambda: {"components": [], "strict": False},
        ((*CLUSTER, "DescribeConfigs"),), top, CLUSTER_DENIED),
    Row("AlterClientQuotas", 49, 1, lambda: {"entries": [{
        "entity": [{"entity_type": "client-id", "entity_name": "matrix-quota"}],
        "ops": [{"key": "producer_byte_rate", "value": 1048576.0, "remove": False}]}], "validate_only": True},
        ((*CLUSTER, "AlterConfigs"),), lambda r: r["entries"][0]["error_code"], CLUSTER_DENIED),
    Row("DescribeAcls", 29, 3, lambda: {"resource_type_filter": 1, "resource_name_filter": None,
                                        "pattern_type_filter": 1, "principal_filter": None, "host_filter": None,
                                        "operation": 1, "permission_type": 1},
        ((*CLUSTER, "Describe"),), top, CLUSTER_DENIED),
    Row("CreateAcls", 30, 3, lambda: {"creations": [{"resource_type": 2, "resource_name": "matrix-acl",
                                                     "resource_pattern_type": 3, "principal": "User:nobody",
                                                     "host": "*", "operation": 3, "permission_type": 3}]},
        ((*CLUSTER, "Alter"),), lambda r: r["results"][0]["error_code"], CLUSTER_DENIED),
    Row("DeleteAcls", 31, 3, lambda: {"filters": [{"resource_type_filter": 2, "resource_name_filter": "matrix-acl",
                                                   "pattern_type_filter": 3, "principal_filter": "User:nobody",
                                                   "host_filter": None, "operation": 1, "permission_type": 1}]},
        ((*CLUSTER, "Alter"),), lambda r: r["filter_results"][0]["error_code"], CLUSTER_DENIED),
    Row("DescribeUserScramCredentials", 50, 0, lambda: {"users": None},
        ((*CLUSTER, "Describe"),), top, CLUSTER_DENIED),
    Row("AlterUserScramCredentials", 51, 0, lambda: {"deletions": [{"name": "matrix-nobody", "mechanism": 1}],
                                                     "upsertions": []},
        ((*CLUSTER, "Alter"),), lambda r: r["results"][0]["error_code"], CLUSTER_DENIED,
        not_refused(CLUSTER_DENIED)),  # allowed: RESOURCE_NOT_FOUND (no such credential)
    # The cluster's own requests: refused to a client without CLUSTER_ACTION. With it, a stale
    # controller epoch (0) makes the broker answer without acting.
    Row("LeaderAndIsr", 4, 7, lambda: {"controller_id": 0, "controller_epoch": 0, "broker_epoch": -1,
                                       "topic_states": [], "live_leaders": []},
        ((*CLUSTER, "ClusterAction"),), top, CLUSTER_DENIED, not_refused(CLUSTER_DENIED)),
    Row("UpdateMetadata", 6, 8, lambda: {"controller_id": 0, "controller_epoch": 0, "broker_epoch": -1,
                                         "topic_states": [], "live_brokers": []},
        ((*CLUSTER, "ClusterAction"),), top, CLUSTER_DENIED, not_refused(CLUSTER_DENIED)),
    Row("StopReplica", 5, 4, lambda: {"controller_id": 0, "controller_epoch": 0, "broker_epoch": -1,
                                      "topic_states": []},
        ((*CLUSTER, "ClusterAction"),), top, CLUSTER_DENIED, not_refused(CLUSTER_DENIED)),
    Row("ControlledShutdown", 7, 3, lambda: {"broker_id": 99, "broker_epoch": -1},
        ((*CLUSTER, "ClusterAction"),), top, CLUSTER_DENIED, not_refused(CLUSTER_DENIED)),
    Row("AlterPartition", 56, 3, lambda: {"broker_id": 99, "broker_epoch": -1, "topics": []},
        ((*CLUSTER, "ClusterAction"),), top, CLUSTER_DENIED, not_refused(CLUSTER_DENIED)),
    Row("OffsetForLeaderEpoch (follower)", 23, 4, lambda: {"replica_id": 7, "topics": [
        {"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
        ((*CLUSTER, "ClusterAction"),), first_partition(), CLUSTER_DENIED, not_refused(CLUSTER_DENIED)),
    Row("OffsetForLeaderEpoch (consumer)", 23, 4, lambda: {"replica_id": -1, "topics": [
        {"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
        (("Topic", TOPIC, "Describe"),), first_partition(), TOPIC_DENIED),
    Row("ElectLeaders", 43, 2, lambda: {"election_type": 0, "topic_partitions": [
        {"topic": TOPIC, "partitions": [0]}], "timeout_ms": 5000},
        ((*CLUSTER, "Alter"),), top, CLUSTER_DENIED, not_refused(CLUSTER_DENIED)),
    Row("DescribeCluster", 60, 1, lambda: {"include_cluster_authorized_operations": False},
        ((*CLUSTER, "Describe"),), top, CLUSTER_DENIED),
    Row("AlterPartitionReassignments", 45, 0, lambda: {"timeout_ms": 5000, "topics": []},
        ((*CLUSTER, "Alter"),), top, CLUSTER_DENIED),
    Row("ListPartitionReassignments", 46, 0, lambda: {"timeout_ms": 5000, "topics": None},
        ((*CLUSTER, "Describe"),), top, CLUSTER_DENIED),
]


def send(node: RoostProcess, row: Row) -> int:
    client = WireClient(node.address("kafka"), timeout=15)
    try:
        return row.code(client.request(row.api, row.version, row.body()))
    finally:
        client.close()


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_refused_without_the_acl_and_served_with_it(node: RoostProcess, zk_acls: ZkAcls, row: Row) -> None:
    zk_acls.clear()
    # Everything else granted, so only the row's own ACLs are missing: the refusal is theirs.
    for kind, name, operation in row.grants[:-1]:
        zk_acls.grant(kind, name, operation)
    eventually(lambda: send(node, row) == row.refused, what=f"{row.name} refused")
    kind, name, operation = row.grants[-1]
    zk_acls.grant(kind, name, operation, principal=PRINCIPAL)
    eventually(lambda: row.allowed(send(node, row)), what=f"{row.name} served")


def test_every_served_api_has_a_row() -> None:
    from roost.broker.broker import CLUSTER_VERSIONS
    from roost.broker.net.dispatcher import ADVERTISED_VERSIONS
    served = set(ADVERTISED_VERSIONS) | set(CLUSTER_VERSIONS)
    # ApiVersions and the SASL login are never checked; ListGroups filters
    # (test_list_groups_shows_only_describable_groups), ListTransactions too.
    assert served - {row.api for row in ROWS} == {18, 16, 17, 36, 66}


# ------------------------------------------------------------------------------------------------
# Beyond single operations: DENY over ALLOW, PREFIXED patterns, super users, filtering lists.

def metadata_code(node: RoostProcess, topic: str) -> int:
    client = WireClient(node.address("kafka"), timeout=15)
    try:
        answer = client.request(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
        return answer["topics"][0]["error_code"]
    finally:
        client.close()


def cleared(node: RoostProcess, zk_acls: ZkAcls) -> None:
    """No ACL left, and the broker knows it (the matrix topic no longer describable)."""
    zk_acls.clear()
    eventually(lambda: metadata_code(node, TOPIC) == TOPIC_DENIED, what="ACLs cleared")


def test_deny_beats_allow(node: RoostProcess, zk_acls: ZkAcls) -> None:
    cleared(node, zk_acls)
    zk_acls.grant("Topic", TOPIC, "Describe")
    eventually(lambda: metadata_code(node, TOPIC) == 0, what="allowed")
    zk_acls.grant("Topic", "*", "Describe", principal="User:*", permission="Deny")
    eventually(lambda: metadata_code(node, TOPIC) == TOPIC_DENIED, what="denied despite the allow")


def test_prefixed_pattern(node: RoostProcess, zk_acls: ZkAcls) -> None:
    cleared(node, zk_acls)
    zk_acls.grant("Topic", "matr", "Describe", pattern="PREFIXED")
    eventually(lambda: metadata_code(node, TOPIC) == 0, what="covered by the prefix")
    zk_acls.clear()
    zk_acls.grant("Topic", "other-", "Describe", pattern="PREFIXED")
    eventually(lambda: metadata_code(node, TOPIC) == TOPIC_DENIED, what="not covered")


def test_host_of_an_acl_is_the_clients_address(node: RoostProcess, zk_acls: ZkAcls) -> None:
    cleared(node, zk_acls)
    zk_acls.grant("Topic", TOPIC, "Describe", host="127.0.0.1")
    eventually(lambda: metadata_code(node, TOPIC) == 0, what="an ACL for this client's address applies")
    zk_acls.set("Topic", TOPIC, [{"principal": ANONYMOUS, "permissionType": "Allow", "operation": "Describe",
                                  "host": "10.9.9.9"}])
    eventually(lambda: metadata_code(node, TOPIC) == TOPIC_DENIED, what="an ACL for another host does not apply")


def test_all_topics_metadata_hides_what_may_not_be_described(node: RoostProcess, zk_acls: ZkAcls) -> None:
    zk_acls.clear()

    def listed() -> set[str]:
        client = WireClient(node.address("kafka"), timeout=15)
        try:
            return {t["name"] for t in client.request(3, 12, {"topics": None})["topics"]}
        finally:
            client.close()
    eventually(lambda: TOPIC not in listed(), what="hidden")
    zk_acls.grant("Topic", TOPIC, "Read")
    eventually(lambda: TOPIC in listed(), what="listed once READ (which implies DESCRIBE) is granted")


def test_a_pattern_subscription_gets_only_describable_topics(node: RoostProcess, zk_acls: ZkAcls) -> None:
    """KIP-848: a member subscribing by pattern is assigned only the matching topics its principal
    may describe (LISTED_GROUP's offsets made "matrix" and the listed group's topic both exist)."""
    zk_acls.clear()
    zk_acls.grant("Cluster", "kafka-cluster", "All")
    zk_acls.grant("Topic", "*", "All")
    admin = AdminClient({"bootstrap.servers": node.address("kafka")})
    eventually(lambda: _created(admin, "matrix-hidden"), what="a second topic the pattern matches")
    zk_acls.clear()
    zk_acls.grant("Group", "matrix-pattern", "Read")
    zk_acls.grant("Topic", TOPIC, "Describe")

    def assigned() -> set[str] | None:
        client = WireClient(node.address("kafka"), timeout=15)
        try:
            ids = {t["topic_id"]: t["name"] for t in client.request(3, 12, {"topics": None})["topics"]}
            answer = client.request(68, 1, {"group_id": "matrix-pattern", "member_id": str(uuid.uuid4()),
                                            "member_epoch": 0, "rebalance_timeout_ms": 10000,
                                            "subscribed_topic_names": [], "subscribed_topic_regex": "matrix.*",
                                            "topic_partitions": []})
            if answer["error_code"] != 0:
                return None  # the ACLs have not reached the broker yet
            client.request(68, 1, {"group_id": "matrix-pattern", "member_id": answer["member_id"],
                                   "member_epoch": -1})
            return {ids.get(t["topic_id"], "?") for t in (answer["assignment"] or {}).get("topic_partitions", [])}
        finally:
            client.close()
    eventually(lambda: assigned() == {TOPIC}, what="only the describable topic assigned")


def test_list_groups_shows_only_describable_groups(node: RoostProcess, zk_acls: ZkAcls) -> None:
    zk_acls.clear()

    def groups() -> set[str]:
        client = WireClient(node.address("kafka"), timeout=15)
        try:
            answer = client.request(16, 4, {"states_filter": []})
            assert answer["error_code"] == 0  # never CLUSTER_AUTHORIZATION_FAILED
            return {g["group_id"] for g in answer["groups"]}
        finally:
            client.close()
    eventually(lambda: LISTED_GROUP not in groups(), what="hidden")
    zk_acls.grant("Group", LISTED_GROUP, "Describe")
    eventually(lambda: LISTED_GROUP in groups(), what="listed")
    zk_acls.clear()
    eventually(lambda: LISTED_GROUP not in groups(), what="hidden again")
    zk_acls.grant("Cluster", "kafka-cluster", "Describe")
    eventually(lambda: LISTED_GROUP in groups(), what="listed to a principal that may describe the cluster")


def test_unknown_authorizer_is_refused_at_start(tmp_path: Path) -> None:
    done = run_cli("up", "--data-dir", str(tmp_path / "d"), "--kafka-port", "0", "--no-keeper",
                   "--authorizer.class.name", "org.example.Nope", timeout=30)
    assert done.returncode != 0
    assert "'authorizer.class.name' = 'org.example.Nope' is not an authorizer Roost has" in done.stderr
    assert "Traceback" not in done.stderr


def test_confluent_admin_creates_describes_and_deletes_acls(node: RoostProcess, zk_acls: ZkAcls) -> None:
    zk_acls.clear()
    zk_acls.grant("Cluster", "kafka-cluster", "Alter")
    zk_acls.grant("Cluster", "kafka-cluster", "Describe")
    admin = AdminClient({"bootstrap.servers": node.address("kafka")})
    literal = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    prefixed = AclBinding(ResourceType.GROUP, "app-", ResourcePatternType.PREFIXED, "User:bob", "10.0.0.1",
                          AclOperation.READ, AclPermissionType.DENY)

    def created() -> bool:
        try:
            for future in admin.create_acls([literal, prefixed]).values():
                future.result(10)
        except KafkaException:
            return False
        return True
    eventually(created, what="ACLs created")
    # Stored as Kafka stores them.
    assert b'"principal":"User:alice"' in zk_acls.zk.get("/kafka-acl/Topic/orders")[0]
    assert b'"permissionType":"Deny"' in zk_acls.zk.get("/kafka-acl-extended/prefixed/Group/app-")[0]
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    described = set(admin.describe_acls(everything).result(10))
    assert {literal, prefixed} <= described
    match = AclBindingFilter(ResourceType.GROUP, "app-orders", ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    assert set(admin.describe_acls(match).result(10)) == {prefixed}
    deleted = [b for f in admin.delete_acls([match]).values() for b in f.result(10)]
    assert deleted == [prefixed]
    assert not zk_acls.zk.exists("/kafka-acl-extended/prefixed/Group/app-")
    bad = AclBinding(ResourceType.BROKER, "not-kafka-cluster", ResourcePatternType.LITERAL, "User:x", "*",
                     AclOperation.ALTER, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as refused:
        next(iter(admin.create_acls([bad]).values())).result(10)
    assert refused.value.args[0].code() == 42  # INVALID_REQUEST


def test_super_users_and_a_broker_without_zookeeper_keeping_its_acls(tmp_path: Path) -> None:
    """User:ANONYMOUS in super.users may do anything with no ACL at all; a lone broker keeps the
    ACLs it is given across a restart (meta/acls.json)."""
    flags = ["up", "--data-dir", str(tmp_path / "d"), "--kafka-port", "0", "--no-keeper",
             "--authorizer.class.name", "roost.AclAuthorizer", "--super.users", "User:admin;User:ANONYMOUS"]
    binding = AclBinding(ResourceType.TOPIC, "kept", ResourcePatternType.PREFIXED, "User:alice", "*",
                         AclOperation.WRITE, AclPermissionType.ALLOW)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    proc = start_roost(flags, expect=("kafka",))
    try:
        admin = AdminClient({"bootstrap.servers": proc.address("kafka")})
        admin.create_topics([NewTopic("by-super-user", 1, 1)])["by-super-user"].result(15)
        assert metadata_code(proc, "by-super-user") == 0
        for future in admin.create_acls([binding]).values():
            future.result(10)
    finally:
        proc.stop()
    proc = start_roost(flags, expect=("kafka",))
    try:
        admin = AdminClient({"bootstrap.servers": proc.address("kafka")})
        assert admin.describe_acls(everything).result(10) == [binding]
    finally:
        proc.stop()


def test_real_clients_with_kafka_acls_producer_and_consumer_grants(node: RoostProcess, zk_acls: ZkAcls) -> None:
    """confluent-kafka with exactly what `kafka-acls --producer` / `--consumer` grant: an idempotent
    producer and a group consumer work; a topic without ACLs is refused with Kafka's error."""
    zk_acls.clear()
    topic, group = "e2e-orders", "e2e-billing"
    zk_acls.grant("Group", group, "Read")
    zk_acls.grant("Topic", topic, "Write", "Describe", "Create", "Read")  # last: waited for below
    bootstrap = node.address("kafka")
    eventually(lambda: metadata_code(node, topic) == 3, what="the grants obeyed (not there yet, but describable)")
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    delivered: list[Any] = []
    for n in range(10):
        producer.produce(topic, f"m{n}".encode(), on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(20) == 0
    assert delivered == [None] * 10
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
        assert got == [f"m{n}".encode() for n in range(10)]
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    refused: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 5000})
    producer.produce("e2e-forbidden", b"x", on_delivery=lambda err, msg: refused.append(err))
    producer.flush(15)
    assert refused and refused[0] is not None and refused[0].code() == 29  # TOPIC_AUTHORIZATION_FAILED


def test_authorized_operations_as_kafka_reports_them(node: RoostProcess, zk_acls: ZkAcls) -> None:
    """confluent-kafka's describe_topics / describe_consumer_groups / describe_cluster with
    include_authorized_operations: what the principal may do, implied operations included."""
    from confluent_kafka import TopicCollection
    zk_acls.clear()
    # The topic's grant last: notifications are handled in order, so once it shows, all have.
    zk_acls.grant("Group", LISTED_GROUP, "Read")
    zk_acls.grant("Cluster", "kafka-cluster", "Describe", "Create")
    zk_acls.grant("Topic", TOPIC, "Read", "AlterConfigs")
    admin = AdminClient({"bootstrap.servers": node.address("kafka")})

    def topic_operations() -> set[AclOperation]:
        described = admin.describe_topics(TopicCollection([TOPIC]), include_authorized_operations=True)
        try:
            return set(described[TOPIC].result(10).authorized_operations or [])
        except KafkaException:  # the grants not there yet: TOPIC_AUTHORIZATION_FAILED
            return set()
    eventually(lambda: topic_operations() == {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.ALTER_CONFIGS,
                                              AclOperation.DESCRIBE_CONFIGS}, what="topic operations")
    (group,) = admin.describe_consumer_groups([LISTED_GROUP], include_authorized_operations=True).values()
    assert set(group.result(10).authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    cluster = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert set(cluster.authorized_operations) == {AclOperation.DESCRIBE, AclOperation.CREATE}


def test_a_request_naming_several_topics_is_answered_per_topic(node: RoostProcess, zk_acls: ZkAcls) -> None:
    """Kafka's way: the refused topic gets 29, the allowed one is served in the same answer."""
    cleared(node, zk_acls)
    zk_acls.grant("Topic", TOPIC, "Write")
    eventually(lambda: metadata_code(node, TOPIC) == 0, what="granted")
    client = WireClient(node.address("kafka"), timeout=15)
    try:
        answer = client.request(0, 9, {"acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": name, "partition_data": [{"index": 0, "records": batch()}]}
            for name in (TOPIC, "matrix-forbidden")]})
        codes = {t["name"]: t["partition_responses"][0]["error_code"] for t in answer["responses"]}
        assert codes == {TOPIC: 0, "matrix-forbidden": TOPIC_DENIED}
        answer = client.request(3, 12, {"topics": [{"name": TOPIC}, {"name": "matrix-forbidden"}],
                                        "allow_auto_topic_creation": False})
        codes = {t["name"]: t["error_code"] for t in answer["topics"]}
        assert codes == {TOPIC: 0, "matrix-forbidden": TOPIC_DENIED}
        assert [t["partitions"] for t in answer["topics"] if t["name"] == "matrix-forbidden"] == [[]]
    finally:
        client.close()
