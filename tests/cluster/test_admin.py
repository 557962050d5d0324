"""Administering a cluster with the clients' admin APIs: topics with replication across brokers,
replica placement, DescribeCluster, ElectLeaders (preferred and unclean), and moving replicas
onto a new broker with AlterPartitionReassignments — data kept, leadership moved, old replicas
deleted. Real processes and clients (confluent-kafka's AdminClient, kafka-python's
KafkaAdminClient)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import NewPartitions, NewTopic
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient

from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
from tests.cluster.verify import read_log
from tests.support.cluster import LocalCluster
from tests.support.kafka_wire import WireClient
from tests.support.procs import wait_for


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    # Four brokers; the fourth stays out of topics until a reassignment moves replicas onto it.
    cluster = LocalCluster.start(tmp_path_factory.mktemp("admin"), brokers=4, keepers=1)
    try:
        yield cluster
    finally:
        cluster.close()


def kafka_python_admin(cluster: LocalCluster) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=cluster.running_bootstrap().split(","), request_timeout_ms=30000)


def produce(cluster: LocalCluster, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    for n in range(count):
        producer.produce(topic, f"{n}".encode(), f"k{n % 7}".encode())
    assert producer.flush(60) == 0


def test_topics_spread_their_replicas_and_leaders(cluster: LocalCluster) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic("spread", 8, 3)])["spread"].result(30)
    cluster.wait_for_isr("spread")
    partitions = cluster.partitions("spread")
    assert all(len(set(replicas)) == 3 for _, replicas, _ in partitions.values())
    leaders = cluster.leader_counts("spread")
    assert set(leaders) <= set(cluster.brokers) and max(leaders.values()) - min(leaders.values()) <= 1, leaders
    # Too many replicas for the live brokers: Kafka's error.
    future = admin.create_topics([NewTopic("too-wide", 1, 5)])["too-wide"]
    with pytest.raises(KafkaException) as caught:
        future.result(30)
    assert caught.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR
    # Growing a replicated topic places the new partitions too.
    admin.create_partitions([NewPartitions("spread", 10)])["spread"].result(30)
    # Answered once the controller's broker knows; the others learn a moment later.
    wait_for(lambda: len(cluster.partitions("spread")) == 10, 30, what="10 partitions everywhere")
    cluster.wait_for_isr("spread")
    admin.delete_topics(["spread"])["spread"].result(60)
    assert "spread" not in cluster.metadata().topics


def test_describe_cluster(cluster: LocalCluster) -> None:
    admin = cluster.admin()
    described = admin.describe_cluster(include_authorized_operations=False).result(30)
    assert sorted(node.id for node in described.nodes) == sorted(cluster.brokers)
    assert described.controller.id == cluster.controller()
    assert described.cluster_id
    assert kafka_python_admin(cluster).describe_cluster()["controller_id"] == cluster.controller()


def test_preferred_leader_election_on_request(cluster: LocalCluster) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic("elect", 1, replica_assignment=[[1, 2, 3]])])["elect"].result(30)
    cluster.wait_for_isr("elect", preferred=True)
    # Move leadership away with a controlled shutdown of the preferred leader, then bring it back.
    assert cluster.stop_broker(1) == 0
    wait_for(lambda: cluster.partitions("elect")[0][0] in (2, 3), 30, what="leadership moved off broker 1")
    cluster.restart(1)
    cluster.wait_for_isr("elect", full=True, timeout=60)
    from confluent_kafka import ElectionType

    # ElectLeaders goes to the controller; a client that still knows an old one gets NOT_CONTROLLER
    # (Kafka's answer) and asks again with fresh metadata.
    def elect() -> dict:
        client = cluster.admin()  # kept alive until its answer is in
        try:
            return client.elect_leaders(ElectionType.PREFERRED, [CkTopicPartition("elect", 0)]).result(30)
        except KafkaException as error:
            assert error.args[0].code() == KafkaError.NOT_CONTROLLER, error
            return {}

    result = wait_for(elect, 30, interval=0.5, what="an ElectLeaders answer from the controller")
    errors = [e for e in result.values() if e is not None and e.code() != KafkaError.ELECTION_NOT_NEEDED]
    assert not errors, errors
    wait_for(lambda: cluster.partitions("elect")[0][0] == 1, 30, what="the preferred leader back")


def test_reassignment_moves_replicas_onto_a_new_broker_and_keeps_the_data(cluster: LocalCluster) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic("moving", 1, replica_assignment=[[1, 2, 3]])])["moving"].result(30)
    cluster.wait_for_isr("moving")
    produce(cluster, "moving", 2000)
    client = kafka_python_admin(cluster)
    try:
        client.alter_partition_reassignments({TopicPartition("moving", 0): [4, 2, 3]})
        wait_for(lambda: not client.list_partition_reassignments({"moving": [0]}), 60, interval=0.2,
                 what="the reassignment to finish")
    finally:
        client.close()
    # Each Metadata answer comes from whichever broker the client reached, and brokers learn the
    # final state one after another: one answer must show all of it (replicas, leader and ISR).
    def moved() -> bool:
        leader, replicas, isr = cluster.partitions("moving")[0]
        return replicas == [4, 2, 3] and leader in (4, 2, 3) and sorted(isr) == [2, 3, 4]
    wait_for(moved, 30, interval=0.2, what="the new replica set, led from inside it, all in sync")
    # The old replica's log is deleted; the new one holds everything.
    wait_for(lambda: not (cluster.root / "broker-1" / "logs" / "moving-0").exists(), 30,
             what="broker 1's replica deleted")
    records = read_log(cluster, "moving", partitions=1)
    assert sorted(int(r.value) for r in records) == list(range(2000))
    # Make broker 4 lead and read from it: its copy is complete.
    client = kafka_python_admin(cluster)
    try:
        client.elect_leaders(0, {"moving": [0]}, raise_errors=False)
    finally:
        client.close()
    wait_for(lambda: cluster.partitions("moving")[0][0] == 4, 30, what="broker 4 leading")
    assert sorted(int(r.value) for r in read_log(cluster, "moving", partitions=1)) == list(range(2000))


def test_producer_ids_are_unique_across_the_cluster(cluster: LocalCluster) -> None:
    """Each broker reserves its block of producer ids in ZooKeeper: two producers never share one
    (they would break each other's sequence numbers on the partitions they both write)."""
    from roost.wire.kafka import ApiKey
    from tests.support.kafka_wire import WireClient

    ids = []
    for node in cluster.brokers.values():
        client = WireClient(node.address)
        try:
            for _ in range(3):
                answer = client.request(ApiKey.INIT_PRODUCER_ID, 3, {"transactional_id": None,
                                                                     "transaction_timeout_ms": 60000})
                assert answer["error_code"] == 0
                ids.append(answer["producer_id"])
        finally:
            client.close()
    assert len(set(ids)) == len(ids), ids


def test_transactions_commit_promptly_beside_acks_all_load(cluster: LocalCluster) -> None:
    """A leader answers each connection's requests in order. The transaction coordinator's
    WriteTxnMarkers waits for its marker to replicate; when the coordinator's broker is also a
    follower of the partition and its fetches shared that connection, the fetch response the
    replication needed sat behind the waiting marker: a deadlock until the marker timed out (5 s),
    again at each retry. Under a steady acks=all producer a commit then hung past 30 s. The
    fetchers have their own connections: every commit completes, no marker write fails."""
    import threading
    import time

    topic = "admin-txn-load"
    admin = cluster.admin()  # kept until the answer: a destroyed client fails its futures
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    cluster.wait_for_isr(topic)
    stop = threading.Event()

    def load() -> None:
        steady = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 2, "log_level": 3})
        while not stop.is_set():
            for partition in range(3):
                steady.produce(topic, b"y" * 200, partition=partition)
            steady.poll(0)
            time.sleep(0.001)
        steady.flush(30)

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    try:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "admin-txn-load",
                             "log_level": 3})
        producer.init_transactions(30)
        for _ in range(20):
            producer.begin_transaction()
            for partition in range(3):
                producer.produce(topic, b"x" * 100, partition=partition)
            producer.commit_transaction(20)  # raises on a hung commit (it flushes first)
    finally:
        stop.set()
        loader.join(40)
    failed = [line for broker in cluster.brokers for line in cluster.broker_output(broker).splitlines()
              if "WriteTxnMarkers to broker" in line]
    assert not failed, failed[:5]


def test_any_broker_serves_topic_changes_not_only_the_controller(cluster: LocalCluster) -> None:
    """A client whose Metadata names a controller that has just moved sends CreateTopics to a
    broker that is not the controller: it is served there (as Kafka's forwarding serves it)."""
    controller = cluster.controller()
    other = next(b for b in sorted(cluster.brokers) if b != controller)
    client = WireClient(cluster.brokers[other].address, timeout=60)
    try:
        created = client.request(ApiKey.CREATE_TOPICS, 5, {"topics": [
            {"name": "elsewhere", "num_partitions": 2, "replication_factor": 3, "assignments": [], "configs": []}],
            "timeout_ms": 30000, "validate_only": False})
        assert created["topics"][0]["error_code"] == ErrorCode.NONE, created
        again = client.request(ApiKey.CREATE_TOPICS, 5, {"topics": [
            {"name": "elsewhere", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 30000, "validate_only": False})
        assert again["topics"][0]["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS, again
        grown = client.request(ApiKey.CREATE_PARTITIONS, 2, {"topics": [
            {"name": "elsewhere", "count": 3, "assignments": None}], "timeout_ms": 30000, "validate_only": False})
        assert grown["results"][0]["error_code"] == ErrorCode.NONE, grown
        wait_for(lambda: len(cluster.partitions("elsewhere")) == 3, 30, interval=0.2, what="three partitions")
        cluster.wait_for_isr("elsewhere")
        deleted = client.request(ApiKey.DELETE_TOPICS, 5, {"topic_names": ["elsewhere"], "timeout_ms": 30000})
        assert deleted["responses"][0]["error_code"] == ErrorCode.NONE, deleted
        assert cluster.controller() == controller  # nothing moved: the other broker served them itself
    finally:
        client.close()
    # Asked for all topics (asking for it by name would auto-create it again).
    wait_for(lambda: "elsewhere" not in cluster.metadata().topics, 30, interval=0.2, what="the topic gone")
