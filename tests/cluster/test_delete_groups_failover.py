"""A group deleted in a three-broker cluster stays deleted when its coordinator is killed: DeleteGroups
is answered once its tombstones are in every in-sync replica of the group's `__consumer_offsets`
partition, so the replica that takes over reads the deletion back, while a group that was not
deleted keeps its offsets."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import NewTopic
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaError

from roost.broker.group.offsets import offsets_partition_for
from roost.broker.metadata.catalog import OFFSETS_TOPIC
from tests.support.cluster import LocalCluster
from tests.support.procs import wait_for

TOPIC = "dgf-orders"
OFFSETS_PARTITIONS = 3
T = TypeVar("T")


def commit(bootstrap: str, group: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def answered(call: Callable[[], T]) -> T | None:
    """The call's result, or None while the cluster answers with an error (a coordinator moving)."""
    try:
        return call()
    except KafkaError:
        return None


def test_a_deleted_group_stays_deleted_when_its_coordinator_dies(tmp_path: Path) -> None:
    cluster = LocalCluster.start(tmp_path, brokers=3, keepers=1,
                                 settings={"offsets.topic.num.partitions": OFFSETS_PARTITIONS})
    try:
        creator = cluster.admin()  # held: the topic is created before the client goes
        creator.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
        cluster.wait_for_isr(TOPIC)
        gone = "dgf-gone"
        kept = next(g for i in range(1000) if offsets_partition_for(g := f"dgf-kept-{i}", OFFSETS_PARTITIONS)
                    == offsets_partition_for(gone, OFFSETS_PARTITIONS))  # the same coordinator
        commit(cluster.bootstrap, gone, 7)
        commit(cluster.bootstrap, kept, 8)
        cluster.wait_for_isr(OFFSETS_TOPIC)  # all three replicas in sync: the tombstones must reach all

        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            assert admin.delete_groups([gone]) == {gone: "OK"}
        finally:
            admin.close()
        coordinator, _, _ = cluster.partitions(OFFSETS_TOPIC)[offsets_partition_for(gone, OFFSETS_PARTITIONS)]
        cluster.kill(coordinator)

        # A new client each time: kafka-python's admin client kept asking the dead broker.
        def ask(call: Callable[[KafkaAdminClient], T]) -> T | None:
            def once() -> T:
                client = KafkaAdminClient(bootstrap_servers=cluster.running_bootstrap())
                try:
                    return call(client)
                finally:
                    client.close()
            return answered(once)

        def committed(group: str) -> dict[tuple[str, int], int] | None:
            found = ask(lambda client: client.list_group_offsets(group)[group])
            if found is None:
                return None
            return {(tp.topic, tp.partition): m.offset for tp, m in found.items() if m.offset >= 0}

        assert wait_for(lambda: committed(kept), timeout=60, what="the new coordinator to answer") == {(TOPIC, 0): 8}
        # An answer, not an error of a cluster still settling (None), and it must hold nothing.
        gone_answer = wait_for(lambda: (found := committed(gone)) is not None and [found], timeout=60,
                               what="the new coordinator to answer for the deleted group")
        assert gone_answer == [{}]
        listed = wait_for(lambda: ask(lambda client: client.list_groups()), timeout=60,
                          what="ListGroups from every broker")
        assert gone not in {g["group_id"] for g in listed} and kept in {g["group_id"] for g in listed}
    finally:
        cluster.close()
