"""A leader cut off from the keeper and from its peers (fault proxies), while a client still
reaches it: it must acknowledge no acks=all write (the new leader elected behind its back never
gets them), and once the network heals it must notice, truncate what it wrote alone, and follow.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import build_batch
from tests.support.cluster import LocalCluster
from tests.support.kafka_wire import WireClient
from tests.support.procs import wait_for

TOPIC = "isolated"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster.start(tmp_path_factory.mktemp("isolation"), brokers=3, keepers=1, proxied=True)
    try:
        yield cluster
    finally:
        cluster.close()


def produce_direct(client: WireClient, value: bytes, acks: int) -> int:
    """One record to partition 0 straight to this broker's real port; its error code."""
    body = {"transactional_id": None, "acks": acks, "timeout_ms": 3000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 0, "records": build_batch([(b"iso", value)], timestamp_ms=int(time.time() * 1000))}]}]}
    answer = client.request(ApiKey.PRODUCE, 9, body)
    return answer["responses"][0]["partition_responses"][0]["error_code"]


def values_in_log(cluster: LocalCluster, acknowledged: int) -> list[bytes]:
    """Every value of the partition, read once its high watermark covers the `acknowledged`
    records: a leader elected a moment ago may still have the lower high watermark it had as a
    follower, until its followers' next fetches tell it theirs (as in Kafka)."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "iso-reader",
                         "enable.auto.commit": False})
    try:
        def high_watermark() -> int:
            # A fresh client's metadata may come from a broker that has not yet heard of the
            # latest election: NOT_LEADER then means "ask again", as a client would.
            try:
                return consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)[1]
            except KafkaException as error:
                if error.args[0].code() != KafkaError.NOT_LEADER_FOR_PARTITION:
                    raise
                return -1
        end = wait_for(lambda: (high := high_watermark()) >= acknowledged and high, 60, interval=0.2,
                       what="the high watermark to cover the acknowledged records")
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < end and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.5):
                if not msg.error():
                    values.append(msg.value())
        assert len(values) == end
        return values
    finally:
        consumer.close()


def test_a_cut_off_leader_acknowledges_no_acks_all_write_and_truncates_after_healing(cluster: LocalCluster) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    cluster.wait_for_isr(TOPIC)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    for n in range(100):
        producer.produce(TOPIC, f"before-{n}".encode())
    assert producer.flush(30) == 0
    leader = cluster.partitions(TOPIC)[0][0]
    node = cluster.brokers[leader]
    assert node.zk_proxy is not None and node.peer_proxy is not None

    # Cut the leader off from ZooKeeper and from the other brokers (and from clients that go
    # through its advertised address); this test still reaches its real port.
    node.zk_proxy.cut()
    node.peer_proxy.cut()
    direct = WireClient(node.address, timeout=30)
    try:
        answers = [produce_direct(direct, f"alone-{n}".encode(), acks=-1) for n in range(5)]
    finally:
        direct.close()
    assert ErrorCode.NONE not in answers, answers
    assert set(answers) <= {ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                            ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND}, answers

    # Meanwhile the rest of the cluster elects a new leader, which takes writes.
    wait_for(lambda: cluster.partitions(TOPIC).get(0, (-1,))[0] not in (-1, leader), 30,
             what="a new leader elected without the isolated one")
    for n in range(100):
        producer.produce(TOPIC, f"after-{n}".encode())
    assert producer.flush(60) == 0

    # Heal: the old leader re-registers, learns it is a follower, truncates what it wrote alone.
    node.zk_proxy.heal()
    node.peer_proxy.heal()
    cluster.wait_for_isr(TOPIC, full=True, timeout=90)
    # Let it lead again (it is the preferred replica, or make it so by waiting for the rebalance),
    # so that what is read comes from its log.
    replicas = cluster.partitions(TOPIC)[0][1]
    if replicas[0] == leader:
        cluster.wait_for_isr(TOPIC, full=True, preferred=True, timeout=60)
        # Each Metadata answer comes from whichever broker the admin client reached, and brokers
        # learn of an election one after another: ask until the answer says so.
        wait_for(lambda: cluster.partitions(TOPIC)[0][0] == leader, 30, what="the old leader leading again")
    values = values_in_log(cluster, acknowledged=200)  # 100 before the cut, 100 after
    assert not [v for v in values if v.startswith(b"alone-")], "a write the isolated leader took alone survived"
    assert [v for v in values if v.startswith(b"before-")] == [f"before-{n}".encode() for n in range(100)]
    assert [v for v in values if v.startswith(b"after-")] == [f"after-{n}".encode() for n in range(100)]
    appended = {ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND} & set(answers)
    if appended:  # it wrote them (and never acknowledged them): it must have cut them away
        cluster.wait_for_output(leader, "truncat")  # it did truncate
