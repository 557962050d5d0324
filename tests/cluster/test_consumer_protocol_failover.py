"""A KIP-848 consumer group survives the death of its coordinator: three brokers, the topic and
`__consumer_offsets` with three replicas, two confluent-kafka members (`group.protocol=consumer`)
consuming; the broker leading the group's offsets partition is killed (-9). The new leader loads
the group from its replica of the partition (Kafka's record layouts), the members carry on under
their member ids, and every record produced before and after is consumed."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from roost.broker.group.offsets import offsets_partition_for
from roost.broker.metadata.catalog import OFFSETS_TOPIC
from tests.broker.test_consumer_protocol import Member, describe_group
from tests.support.cluster import LocalCluster
from tests.support.procs import wait_for

TOPIC, GROUP = "kip848-failover", "kip848-failover-group"
OFFSETS_PARTITIONS, PARTITIONS = 3, 4


def test_a_consumer_group_carries_on_when_its_coordinator_is_killed(tmp_path: Path) -> None:
    cluster = LocalCluster.start(tmp_path, brokers=3, keepers=1, settings={
        "offsets.topic.num.partitions": OFFSETS_PARTITIONS, "group.consumer.heartbeat.interval.ms": 500})
    seen: set[int] = set()
    lock = threading.Lock()
    members: list[Member] = []
    try:
        creator = cluster.admin()  # held: the topic is created before the client goes
        creator.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        cluster.wait_for_isr(TOPIC)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5, "acks": "all"})

        def produce(first: int, count: int) -> None:
            for n in range(first, first + count):
                producer.produce(TOPIC, json.dumps({"n": n}).encode(), partition=n % PARTITIONS)
            assert producer.flush(60) == 0

        members = [Member(cluster.bootstrap, GROUP, TOPIC, f"m{i}", seen, lock) for i in range(2)]
        for member in members:
            member.start()
        produce(0, 2000)
        wait_for(lambda: len(seen) == 2000, timeout=60, what="the first records consumed")
        wait_for(lambda: sorted(len(m.owned()) for m in members) == [2, 2], timeout=30, what="two members")
        cluster.wait_for_isr(OFFSETS_TOPIC)
        index = offsets_partition_for(GROUP, OFFSETS_PARTITIONS)
        coordinator = cluster.partitions(OFFSETS_TOPIC)[index][0]
        before = describe_group(f"127.0.0.1:{cluster.brokers[coordinator].advertised_port}", GROUP)
        assert before["error_code"] == 0 and len(before["members"]) == 2

        cluster.kill(coordinator)
        successor = wait_for(lambda: (leader := cluster.partitions(OFFSETS_TOPIC).get(index, (-1,))[0])
                             not in (-1, coordinator) and leader, timeout=60, what="a new coordinator")
        cluster.wait_for_output(successor, f"group {GROUP} (consumer protocol) loaded")
        produce(2000, 2000)
        wait_for(lambda: len(seen) == 4000, timeout=60, what="every record consumed after the failover")
        after = describe_group(f"127.0.0.1:{cluster.brokers[successor].advertised_port}", GROUP)
        assert after["error_code"] == 0
        assert {m["member_id"] for m in after["members"]} == {m["member_id"] for m in before["members"]}
        assert after["group_epoch"] >= before["group_epoch"]
    finally:
        for member in members:
            member.stop.set()
        for member in members:
            member.join(30)
        cluster.close()
    assert seen == set(range(4000))
