"""A consumer that never joins its group (manual assign(), group.id set) commits offsets, and a
new consumer of that group finds them: Kafka accepts an OffsetCommit with generation -1 on an
empty or new group whatever member id it carries (ClassicGroup/ConsumerGroup.validateOffsetCommit),
and librdkafka's `group.protocol=consumer` sends its own member id with it (issue 29)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.kafka_wire import WireClient
from tests.support.procs import RoostProcess, retry, wait_for

OFFSET_COMMIT = 8
FIND_COORDINATOR = 10
COORDINATOR_NOT_READY = {14, 15, 16}  # load in progress, not available, not coordinator (yet)


def _raw_commit(client: WireClient, group: str, member_id: str, topic: str, offset: int) -> int:
    """One partition's error code for a generation -1 commit, asked again while the offsets
    topic is still being created or loaded (a fresh broker). Only ever one broker here, so the
    coordinator is the broker asked."""
    def attempt() -> int:
        # As a client does first: finding the coordinator creates the offsets topic if need be.
        client.request(FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        answer = client.request(OFFSET_COMMIT, 8, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": member_id,
            "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]})
        code = answer["topics"][0]["partitions"][0]["error_code"]
        if code in COORDINATOR_NOT_READY:
            raise LookupError(code)
        return code
    return retry(attempt, retry_on=(LookupError,), attempts=200, interval=0.1, what="a raw OffsetCommit")


def _topic(bootstrap: str, partitions: int = 2) -> str:
    name = f"standalone-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(20):
        producer.produce(name, f"m{n}".encode(), partition=n % partitions)
    assert producer.flush(30) == 0
    return name


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_manual_assign_commits_are_found_by_the_next_consumer(shared_broker: RoostProcess, protocol: str) -> None:
    bootstrap = shared_broker.address("kafka")
    topic = _topic(bootstrap)
    group = f"standalone-{protocol}-{uuid.uuid4().hex[:6]}"
    settings = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                "group.protocol": protocol}
    first = Consumer(settings)
    try:
        first.assign([TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 7)])
        committed = first.commit(offsets=[TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 7)],
                                 asynchronous=False)
        assert [(tp.partition, tp.offset, tp.error) for tp in committed] == [(0, 3, None), (1, 7, None)]
    finally:
        first.close()
    second = Consumer(settings)
    try:
        found = second.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=30)
        assert [(tp.partition, tp.offset) for tp in found] == [(0, 3), (1, 7)]
    finally:
        second.close()


def test_a_generation_minus_one_commit_with_a_member_id_on_a_new_group(shared_broker: RoostProcess) -> None:
    """The raw request: generation -1, a member id nobody was given, a group that does not exist."""
    bootstrap = shared_broker.address("kafka")
    topic = _topic(bootstrap, partitions=1)
    group = f"raw-{uuid.uuid4().hex[:6]}"
    client = WireClient(bootstrap)
    try:
        assert _raw_commit(client, group, f"m-{uuid.uuid4()}", topic, 5) == 0
    finally:
        client.close()
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        assert reader.committed([TopicPartition(topic, 0)], timeout=30)[0].offset == 5
    finally:
        reader.close()


def test_a_standalone_commit_to_a_live_group_is_refused(shared_broker: RoostProcess) -> None:
    """While the group has members, their offsets are theirs: generation -1 gets UNKNOWN_MEMBER_ID."""
    bootstrap = shared_broker.address("kafka")
    topic = _topic(bootstrap, partitions=1)
    group = f"live-{uuid.uuid4().hex[:6]}"
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    client = WireClient(bootstrap)
    try:
        member.subscribe([topic])
        wait_for(lambda: member.poll(0.5) is not None and bool(member.assignment()), 60,
                 interval=0, what="the member's assignment")
        for member_id in ("", f"m-{uuid.uuid4()}"):
            assert _raw_commit(client, group, member_id, topic, 1) == 25, member_id  # UNKNOWN_MEMBER_ID
    finally:
        client.close()
        member.close()
