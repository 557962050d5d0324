"""A cluster holds and lists many topics created in batches: 600 topics in CreateTopics requests of
100 (the way an operator's script or a console benchmark creates them), each topic answered
created only once it has a leader, every one of them then named by Metadata with a leader among
its replicas, on every broker. A topic in a batch that cannot be created fails alone.

Real processes (three brokers, one keeper) and confluent-kafka's AdminClient. The time the
creation takes is bench/topic_scale_bench.py's business, never asserted here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import LocalCluster
from tests.support.procs import wait_for

TOPICS = 600
BATCH = 100
REPLICATION = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster.start(tmp_path_factory.mktemp("many-topics"), brokers=3, keepers=1)
    try:
        yield cluster
    finally:
        cluster.close()


def names(first: int, count: int) -> list[str]:
    return [f"many-{n:04d}" for n in range(first, first + count)]


def test_a_cluster_creates_and_lists_hundreds_of_topics_in_batches(cluster: LocalCluster) -> None:
    admin = cluster.admin()
    for first in range(0, TOPICS, BATCH):
        futures = admin.create_topics([NewTopic(name, 1, REPLICATION) for name in names(first, BATCH)],
                                      operation_timeout=120, request_timeout=150)
        for future in futures.values():
            future.result(180)  # raises if this topic's creation failed or timed out
    wanted = set(names(0, TOPICS))
    # Every broker's metadata cache learns each topic (the controller tells them all).
    for broker in sorted(cluster.brokers):
        own = AdminClient({"bootstrap.servers": cluster.brokers[broker].address})
        listed = wait_for(lambda own=own: (found := own.list_topics(timeout=30).topics) and
                          wanted <= set(found) and found, 60, interval=0.5,
                          what=f"broker {broker} listing all {TOPICS} topics")
        for name in sorted(wanted):
            topic = listed[name]
            assert topic.error is None, (broker, name, topic.error)
            assert sorted(topic.partitions) == [0], (broker, name)
            partition = topic.partitions[0]
            assert len(partition.replicas) == REPLICATION, (broker, name, partition.replicas)
            assert partition.leader in partition.replicas, (broker, name, partition.leader)
            assert partition.leader in partition.isrs, (broker, name, partition.isrs)


def test_a_topic_that_cannot_be_created_fails_alone_in_its_batch(cluster: LocalCluster) -> None:
    admin = cluster.admin()
    good = [f"batch-ok-{n}" for n in range(20)]
    futures = admin.create_topics([*(NewTopic(name, 2, REPLICATION) for name in good),
                                   NewTopic("batch-too-wide", 1, 5), NewTopic("many-0000", 1, 1)],
                                  operation_timeout=60)
    for name in good:
        futures[name].result(90)
    with pytest.raises(KafkaException) as too_wide:
        futures["batch-too-wide"].result(90)
    assert too_wide.value.args[0].name() == "INVALID_REPLICATION_FACTOR"
    with pytest.raises(KafkaException) as exists:
        futures["many-0000"].result(90)
    assert exists.value.args[0].name() == "TOPIC_ALREADY_EXISTS"
    # The broker that answered had the leaders; the others learn them from the controller soon after.
    listed = wait_for(lambda: (found := cluster.metadata().topics) and all(name in found for name in good)
                      and found, 60, interval=0.2, what="the new topics listed")
    for name in good:
        assert sorted(listed[name].partitions) == [0, 1]
    # Each ask may reach another broker, one that has not yet heard of every topic: not yet, not an error.
    def every_partition_led() -> bool:
        topics = cluster.metadata().topics
        return all(name in topics and all(p.leader >= 0 for p in topics[name].partitions.values()) for name in good)
    wait_for(every_partition_led, 60, interval=0.2, what="a leader for every partition of the new topics")
    assert "batch-too-wide" not in listed
