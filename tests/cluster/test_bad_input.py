"""Requests of the cluster's own protocol from where they do not belong: refused with Kafka's
codes and a log line, and nothing breaks (the cluster keeps serving, the data stays)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
from tests.support.cluster import LocalCluster, write_toml
from tests.support.kafka_wire import WireClient
from tests.support.procs import free_ports, wait_for

TOPIC = "guarded"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster.start(tmp_path_factory.mktemp("bad-input"), brokers=2, keepers=1)
    try:
        admin = cluster.admin()
        admin.create_topics([NewTopic(TOPIC, 1, 2)])[TOPIC].result(30)
        cluster.wait_for_isr(TOPIC)
        yield cluster
    finally:
        cluster.close()


def leader_client(cluster: LocalCluster) -> tuple[int, WireClient]:
    leader = cluster.partitions(TOPIC)[0][0]
    return leader, WireClient(cluster.brokers[leader].address)


def topic_id(client: WireClient) -> uuid.UUID:
    """The topic's id as this broker knows it. Brokers learn of a topic one after another (the
    controller's UpdateMetadata reaches each on its own channel), so the broker another one named
    as leader may not know the topic yet: ask it again until it does, as a client would."""
    def known() -> uuid.UUID | None:
        answer = client.request(ApiKey.METADATA, 12, {"topics": [{"name": TOPIC, "topic_id": uuid.UUID(int=0)}],
                                                      "allow_auto_topic_creation": False,
                                                      "include_topic_authorized_operations": False})
        topic = answer["topics"][0]
        return topic["topic_id"] if topic["error_code"] == ErrorCode.NONE and topic["partitions"] else None
    return wait_for(known, 30, interval=0.1, what=f"the leader to know {TOPIC}")


def still_serving(cluster: LocalCluster) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    producer.produce(TOPIC, b"still here")
    assert producer.flush(30) == 0
    cluster.wait_for_isr(TOPIC, full=True)


def test_a_replica_fetch_from_a_client_that_is_not_a_broker_is_refused(cluster: LocalCluster) -> None:
    leader, client = leader_client(cluster)
    try:
        ident = topic_id(client)
        body = {"replica_state": {"replica_id": 77, "replica_epoch": 1}, "max_wait_ms": 0, "min_bytes": 1,
                "topics": [{"topic_id": ident, "partitions": [{"partition": 0, "fetch_offset": 10**9,
                                                              "partition_max_bytes": 1 << 20}]}]}
        answer = client.request(ApiKey.FETCH, 15, body)
        assert answer["responses"][0]["partitions"][0]["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        # A fetch that claims to be the follower but reaches past the log end moves nothing.
        follower = next(b for b in cluster.brokers if b != leader)
        body["replica_state"]["replica_id"] = follower
        answer = client.request(ApiKey.FETCH, 15, body)
        assert answer["responses"][0]["partitions"][0]["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
    finally:
        client.close()
    cluster.wait_for_output(leader, "not a live broker", "past the log end")
    still_serving(cluster)


def test_controller_requests_with_stale_epochs_are_refused(cluster: LocalCluster) -> None:
    leader, client = leader_client(cluster)
    try:
        ident = topic_id(client)
        state = {"partition_index": 0, "controller_epoch": 1, "leader": 99, "leader_epoch": 10**6,
                 "isr": [99], "partition_epoch": 10**6, "replicas": [99, leader], "adding_replicas": [],
                 "removing_replicas": [], "is_new": False}
        forged = {"controller_id": 99, "controller_epoch": 10**6, "broker_epoch": 12345, "type": 1,
                  "topic_states": [{"topic_name": TOPIC, "topic_id": ident, "partition_states": [state]}],
                  "live_leaders": []}
        answer = client.request(ApiKey.LEADER_AND_ISR, 7, forged)
        assert answer["error_code"] == ErrorCode.STALE_BROKER_EPOCH
        update = {"controller_id": 99, "controller_epoch": 0, "broker_epoch": 12345, "topic_states": [],
                  "live_brokers": []}
        assert client.request(ApiKey.UPDATE_METADATA, 8, update)["error_code"] == ErrorCode.STALE_BROKER_EPOCH
        stop = {"controller_id": 99, "controller_epoch": 0, "broker_epoch": 12345, "topic_states": [
            {"topic_name": TOPIC, "partition_states": [{"partition_index": 0, "leader_epoch": -2,
                                                        "delete_partition": True}]}]}
        assert client.request(ApiKey.STOP_REPLICA, 4, stop)["error_code"] == ErrorCode.STALE_BROKER_EPOCH
    finally:
        client.close()
    cluster.wait_for_output(leader, "refused")
    still_serving(cluster)


def test_controller_only_requests_elsewhere_get_not_controller(cluster: LocalCluster) -> None:
    controller = cluster.controller()
    other = next(b for b in cluster.brokers if b != controller)
    client = WireClient(cluster.brokers[other].address)
    try:
        answer = client.request(ApiKey.ALTER_PARTITION, 3, {"broker_id": other, "broker_epoch": -1, "topics": []})
        assert answer["error_code"] == ErrorCode.NOT_CONTROLLER
        answer = client.request(ApiKey.CONTROLLED_SHUTDOWN, 3, {"broker_id": other, "broker_epoch": -1})
        assert answer["error_code"] == ErrorCode.NOT_CONTROLLER
    finally:
        client.close()


def test_a_broker_id_already_registered_is_refused(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path_factory.mktemp("twin")
    config = root / "twin.toml"
    (port,) = free_ports(1)
    write_toml(config, {"broker.id": 1, "zookeeper.connect": cluster.zookeeper,
                        "listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(root / "data"),
                        "zookeeper.session.timeout.ms": 2000, "replica.lag.time.max.ms": 6000})
    done = subprocess.run([sys.executable, "-m", "roost.cli.main", "broker", "--config", str(config)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "already registered" in done.stdout + done.stderr, done.stdout + done.stderr
    still_serving(cluster)
