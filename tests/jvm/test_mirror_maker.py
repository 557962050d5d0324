"""MirrorMaker 2 (Kafka 3.9) from a Roost cluster to another Roost cluster, from Roost to Apache
Kafka 3.9 and from Kafka 3.9 to Roost, all three flows in one MirrorMaker process
(tests/jvm/mirror.py): every record arrives in the remote topic, and the checkpoints translate a
consumer group's committed offsets to the target, where a consumer of the group (Java's
RemoteClusterUtils, and librdkafka's committed offsets) goes on from exactly the next record."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from roost.testing.node import RoostNode
from tests.jvm import mirror
from tests.jvm.programs import ToolShell
from tests.support.cluster import LocalCluster
from tests.support.kafka_referee import KafkaCluster, kafka39  # noqa: F401  (the fixture)
from tests.support.procs import wait_for

RECORDS = 100
MORE = 30
GROUPS = "mm-g-.*"


@pytest.fixture(scope="module")
def roost1(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostNode]:
    node = RoostNode.start(tmp_path_factory.mktemp("jvm-mm2-target") / "data")
    yield node
    node.stop()


def create(bootstrap: str, topic: str, partitions: int, replicas: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replicas)])[topic].result(60)


def ends(bootstrap: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mm-watermarks"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    except Exception:  # not there yet: the wait asks again
        return [-1] * partitions
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[str, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    finally:
        consumer.close()
    return {f"{tp.topic}-{tp.partition}": tp.offset for tp in found if tp.offset >= 0}


def test_mirror_maker_2_between_roost_clusters_and_kafka(
        roost3: LocalCluster, roost1: RoostNode, kafka39: KafkaCluster,  # noqa: F811
        java_classes: Path, tools: ToolShell, tmp_path: Path) -> None:
    clusters = {"roost": roost3.bootstrap, "target": roost1.bootstrap, "kafka": kafka39.bootstrap}
    # Source topics and groups: on Roost (to the other Roost and to Kafka) and on Kafka (to Roost).
    sources = {"roost": ("mm-r-orders", 3), "kafka": ("mm-k-orders", 1)}
    group_offsets: dict[str, dict[str, int]] = {}
    for alias, (topic, replicas) in sources.items():
        bootstrap = clusters[alias]
        create(bootstrap, topic, 2, replicas)
        tools.clients("produce", bootstrap, topic, str(RECORDS), f"{alias}-")
        # The group reads everything there is and commits: a consumer caught up, as one is
        # when its cluster fails. (MirrorMaker translates a caught-up offset exactly; one
        # behind the newest offset sync only to a lower bound, by design: KIP-545.)
        read = tools.clients("consume", bootstrap, topic, f"mm-g-{alias}", str(RECORDS))
        group_offsets[alias] = read["committed"]
        assert sum(read["committed"].values()) == RECORDS
    flows = {("roost", "target"): "mm-r-.*", ("roost", "kafka"): "mm-r-.*", ("kafka", "target"): "mm-k-.*"}
    mm2 = mirror.start(java_classes, tmp_path, clusters, flows, GROUPS)
    try:
        for (source, target) in flows:
            topic = sources[source][0]
            remote = f"{source}.{topic}"
            wait_for(lambda r=remote, t=target: sum(ends(clusters[t], r, 2)) == RECORDS, 150, interval=1.0,
                     what=f"{remote} mirrored to {target}")
            # The translated offsets, committed for the group on the target by the checkpoints.
            expected = {f"{source}.{name}": offset for name, offset in group_offsets[source].items()}
            last: list[dict[str, int]] = []
            try:
                wait_for(lambda t=target, s=source, r=remote, e=expected, seen=last:
                         (seen.append(committed(clusters[t], f"mm-g-{s}", r, 2)), seen[-1] == e)[1], 90,
                         interval=1.0, what=f"mm-g-{source}'s offsets translated onto {target}")
            except AssertionError as error:
                raise AssertionError(f"{error}: expected {expected}, last seen {last[-1:]}") from None
            translated = tools.clients("translate", clusters[target], source, f"mm-g-{source}")
            assert translated["offsets"] == expected, (source, target)
        # New records after the group's commit are mirrored too.
        for alias, (topic, _) in sources.items():
            tools.clients("produce", clusters[alias], topic, str(MORE), f"{alias}-after-")
        for (source, target) in flows:
            remote = f"{source}.{sources[source][0]}"
            wait_for(lambda r=remote, t=target: sum(ends(clusters[t], r, 2)) == RECORDS + MORE, 90, interval=1.0,
                     what=f"the new records of {remote} mirrored to {target}")
    finally:
        mm2.stop(timeout=10)
    # The group moved to the target goes on from exactly where it stopped: the new records only,
    # none it had read on the source and none lost.
    for (source, target) in flows:
        topic = sources[source][0]
        resumed = tools.clients("consume", clusters[target], f"{source}.{topic}", f"mm-g-{source}", str(MORE))
        assert sorted(resumed["values"]) == sorted(f"{source}-after-{i}" for i in range(MORE)), (source, target)
