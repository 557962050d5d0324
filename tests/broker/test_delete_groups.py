"""DeleteGroups (42) and OffsetDelete (47) against a real broker, with confluent-kafka's AdminClient
(`delete_consumer_groups`; confluent-kafka 2.16 has no call for OffsetDelete) and kafka-python's
KafkaAdminClient (`delete_groups`, `delete_group_offsets`).

librdkafka 2.16 was seen to abort the whole process when a broker refused DeleteGroups, so its
admin calls run in a child process: a crash there is this test's failure, not pytest's death.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaConsumer, OffsetAndMetadata
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import GroupIdNotFoundError

from tests.broker.conftest import StartBroker
from tests.broker.test_served_versions import served
from tests.support.kafka_wire import WireClient
from tests.support.procs import RoostProcess, wait_for

TOPIC = "dg-orders"  # two partitions
OTHER = "dg-audit"  # one partition, which no consumer here subscribes to
FIND_COORDINATOR, API_VERSIONS, DELETE_GROUPS, OFFSET_DELETE = 10, 18, 42, 47
NONE, INVALID_GROUP_ID, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND = 0, 24, 68, 69
RETRIABLE = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR

# Runs in a child process: deletes the groups given with confluent-kafka's AdminClient and prints
# {group: KafkaError code or 0}.
CONFLUENT_DELETE = r"""
import json, sys
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

admin = AdminClient({"bootstrap.servers": sys.argv[1]})
results = {}
for group, future in admin.delete_consumer_groups(sys.argv[2:], request_timeout=30).items():
    try:
        future.result(60)
        results[group] = 0
    except KafkaException as error:
        results[group] = error.args[0].code()
print(json.dumps(results))
"""


def confluent_delete(bootstrap: str, *groups: str) -> dict[str, int]:
    done = subprocess.run([sys.executable, "-c", CONFLUENT_DELETE, bootstrap, *groups],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"confluent-kafka's child exited {done.returncode}: {done.stderr[-2000:]}"
    result: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit as a consumer outside any generation does (the group stays empty)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def committed(admin: KafkaAdminClient, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets, as OffsetFetch for all of the group's partitions answers."""
    offsets = admin.list_group_offsets(group)[group]
    return {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items() if meta.offset >= 0}


def listed(admin: KafkaAdminClient) -> dict[str, str]:
    return {g["group_id"]: g["group_state"] for g in admin.list_groups()}


@pytest.fixture(scope="module")
def bootstrap(shared_broker: RoostProcess) -> str:
    address = shared_broker.address("kafka")
    admin = KafkaAdminClient(bootstrap_servers=address)
    try:
        admin.create_topics([NewTopic(TOPIC, 2, 1), NewTopic(OTHER, 1, 1)])
    finally:
        admin.close()
    return address


@pytest.fixture
def admin(bootstrap: str) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=bootstrap)
    yield client
    client.close()


@pytest.fixture
def live_consumer(bootstrap: str) -> Iterator[KafkaConsumer]:
    """A member of group dg-live, subscribed to TOPIC, its group Stable."""
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id="dg-live", session_timeout_ms=10_000,
                             heartbeat_interval_ms=500, enable_auto_commit=False)
    try:
        for _ in range(300):  # bounded: 300 polls of up to 0.1 s
            consumer.poll(timeout_ms=100)
            if consumer.assignment():
                break
        assert consumer.assignment(), "the consumer never got its partitions"
        yield consumer
    finally:
        consumer.close()


def test_api_versions_advertise_the_two_apis(bootstrap: str) -> None:
    raw = WireClient(bootstrap)
    try:
        answer = raw.request(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    finally:
        raw.close()
    ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in answer["api_keys"]}
    assert ranges[DELETE_GROUPS] == (0, 2) and ranges[OFFSET_DELETE] == (0, 0)


def test_older_versions_and_kafka_s_group_id_rules(bootstrap: str) -> None:
    """Versions no client here sends (librdkafka 2.16 and kafka-python send DeleteGroups v2), and
    the group ids Kafka refuses: OffsetDelete needs a non-empty one, DeleteGroups takes any."""
    raw = WireClient(bootstrap)
    try:
        # The first FindCoordinator creates __consumer_offsets; until its partitions are loaded,
        # groups answer NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS (clients retry those).
        raw.request(FIND_COORDINATOR, 0, {"key": "dg-never-raw"})

        def settled(version: int) -> bool:
            answer = raw.request(DELETE_GROUPS, version, {"groups_names": ["dg-never-raw", ""]})
            codes = [(r["group_id"], r["error_code"]) for r in answer["results"]]
            if any(code in RETRIABLE for _, code in codes):
                return False
            assert codes == [("dg-never-raw", GROUP_ID_NOT_FOUND), ("", GROUP_ID_NOT_FOUND)]
            return True

        for version in (0, 1):
            wait_for(lambda v=version: settled(v), timeout=30, what=f"DeleteGroups v{version}'s answer")
        answer = raw.request(OFFSET_DELETE, 0, {"group_id": "", "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": 0}]}]})
        assert answer["error_code"] == INVALID_GROUP_ID and answer["topics"] == []
    finally:
        raw.close()


def test_confluent_deletes_an_empty_group_and_its_offsets(bootstrap: str, admin: KafkaAdminClient) -> None:
    commit(bootstrap, "dg-empty-c", {(TOPIC, 0): 5, (TOPIC, 1): 6})
    assert committed(admin, "dg-empty-c") == {(TOPIC, 0): 5, (TOPIC, 1): 6}
    assert listed(admin).get("dg-empty-c") == "Empty"

    assert confluent_delete(bootstrap, "dg-empty-c", "dg-never-c") == {
        "dg-empty-c": NONE, "dg-never-c": GROUP_ID_NOT_FOUND}

    assert "dg-empty-c" not in listed(admin)
    assert committed(admin, "dg-empty-c") == {}
    # Deleted: a second deletion finds no group.
    assert confluent_delete(bootstrap, "dg-empty-c") == {"dg-empty-c": GROUP_ID_NOT_FOUND}


def test_kafka_python_deletes_an_empty_group(bootstrap: str, admin: KafkaAdminClient) -> None:
    commit(bootstrap, "dg-empty-k", {(TOPIC, 0): 3})
    assert admin.delete_groups(["dg-empty-k", "dg-never-k"]) == {
        "dg-empty-k": "OK", "dg-never-k": "GroupIdNotFoundError"}
    assert "dg-empty-k" not in listed(admin)
    assert committed(admin, "dg-empty-k") == {}


def test_a_group_with_a_live_member_is_not_deleted(bootstrap: str, admin: KafkaAdminClient,
                                                   live_consumer: KafkaConsumer) -> None:
    live_consumer.commit({KafkaTopicPartition(TOPIC, 0): OffsetAndMetadata(4, "", -1)})
    assert admin.delete_groups(["dg-live"]) == {"dg-live": "NonEmptyGroupError"}
    assert confluent_delete(bootstrap, "dg-live") == {"dg-live": NON_EMPTY_GROUP}
    assert committed(admin, "dg-live") == {(TOPIC, 0): 4}

    # OffsetDelete: the subscribed topic's offsets stay, another topic's may go.
    answer = admin.delete_group_offsets("dg-live", [KafkaTopicPartition(TOPIC, 0), KafkaTopicPartition(OTHER, 0)])
    assert {tp.topic: error.__name__ for tp, error in answer.items()} == {
        TOPIC: "GroupSubscribedToTopicError", OTHER: "NoError"}
    assert committed(admin, "dg-live") == {(TOPIC, 0): 4}
    assert listed(admin).get("dg-live") == "Stable"

    live_consumer.close()  # leaves the group: Empty, deletable
    wait_for(lambda: listed(admin).get("dg-live") == "Empty", timeout=30, what="dg-live to become empty")
    assert admin.delete_groups(["dg-live"]) == {"dg-live": "OK"}
    assert committed(admin, "dg-live") == {}


def test_offset_delete_of_an_empty_group(bootstrap: str, admin: KafkaAdminClient) -> None:
    commit(bootstrap, "dg-offsets", {(TOPIC, 0): 10, (TOPIC, 1): 11})
    answer = admin.delete_group_offsets("dg-offsets", [KafkaTopicPartition(TOPIC, 0)])
    assert {(tp.topic, tp.partition): e.__name__ for tp, e in answer.items()} == {(TOPIC, 0): "NoError"}
    assert committed(admin, "dg-offsets") == {(TOPIC, 1): 11}
    assert listed(admin).get("dg-offsets") == "Empty"

    # A partition the cluster does not have is answered as such; the last offset going takes the
    # group with it (Kafka: an empty group without offsets is dead).
    answer = admin.delete_group_offsets("dg-offsets", [KafkaTopicPartition(TOPIC, 1),
                                                      KafkaTopicPartition("dg-no-such-topic", 0)])
    assert {(tp.topic, tp.partition): e.__name__ for tp, e in answer.items()} == {
        (TOPIC, 1): "NoError", ("dg-no-such-topic", 0): "UnknownTopicOrPartitionError"}
    assert committed(admin, "dg-offsets") == {}
    assert "dg-offsets" not in listed(admin)

    with pytest.raises(GroupIdNotFoundError):
        admin.delete_group_offsets("dg-offsets", [KafkaTopicPartition(TOPIC, 1)])


def test_deletions_survive_a_restart(start_broker: StartBroker) -> None:
    broker = start_broker()
    address = broker.address("kafka")
    admin = KafkaAdminClient(bootstrap_servers=address)
    try:
        admin.create_topics([NewTopic(TOPIC, 2, 1)])
        for group in ("dg-gone", "dg-kept", "dg-trimmed"):
            commit(address, group, {(TOPIC, 0): 20, (TOPIC, 1): 21})
        assert confluent_delete(address, "dg-gone") == {"dg-gone": NONE}
        admin.delete_group_offsets("dg-trimmed", [KafkaTopicPartition(TOPIC, 0)])
    finally:
        admin.close()
    assert broker.stop() == 0
    counts = served(broker.text())
    assert counts.get("DeleteGroups v2") == 1, counts  # what librdkafka 2.16 sends
    assert counts.get("OffsetDelete v0") == 1, counts

    again = start_broker()  # the same data directory
    admin = KafkaAdminClient(bootstrap_servers=again.address("kafka"))
    try:
        wait_for(lambda: "dg-kept" in listed(admin), timeout=30, what="the offsets to load")
        assert committed(admin, "dg-gone") == {}
        assert "dg-gone" not in listed(admin)
        assert committed(admin, "dg-trimmed") == {(TOPIC, 1): 21}
        assert committed(admin, "dg-kept") == {(TOPIC, 0): 20, (TOPIC, 1): 21}
    finally:
        admin.close()
