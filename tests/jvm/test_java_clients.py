"""Apache Kafka's own Java client (3.9, the reference client) against a three-broker Roost
cluster: the idempotent producer with acks=all, the consumer in a group with the classic
protocol and with KIP-848's (`group.protocol=consumer`), the admin client's topics, configs and
groups, and a transactional producer read back read_committed. Each scenario runs in the shared
tool shell (tests/jvm/programs.py) and reports what it saw; the checks are here, against what
confluent-kafka (librdkafka, an independent client) reads from the same cluster."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.jvm.programs import ToolShell
from tests.support.cluster import LocalCluster
from tests.support.reading import read_to_end

COUNT = 120


def create(cluster: LocalCluster, topic: str, partitions: int = 3, replicas: int = 3) -> None:
    admin = cluster.admin()  # kept until the answer comes: a dropped client cancels its requests
    admin.create_topics([NewTopic(topic, partitions, replicas)])[topic].result(30)
    cluster.wait_for_isr(topic)


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[str, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "jvm-watermarks"})
    try:
        return {f"{topic}-{p}": consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1]
                for p in range(partitions)}
    finally:
        consumer.close()


def test_idempotent_producer_then_a_group_with_each_protocol(roost3: LocalCluster, tools: ToolShell) -> None:
    topic, bootstrap = "jvm-orders", roost3.bootstrap
    create(roost3, topic)
    produced = tools.clients("produce", bootstrap, topic, str(COUNT), "v", "linger.ms=5")
    assert produced["acked"] == COUNT
    # Idempotent acks=all: each partition's offsets are 0, 1, 2, ... with no gap or repeat.
    for offsets in produced["offsets"].values():
        assert offsets == list(range(len(offsets)))
    ends = end_offsets(bootstrap, topic, 3)
    assert sorted(ends.values()) == sorted(len(o) for o in produced["offsets"].values())
    assert sorted(read_to_end(bootstrap, topic, 3, "read_uncommitted", must_reach_end=True)) == \
        sorted(b"v%d" % i for i in range(COUNT))

    for group, protocol in (("jvm-classic", "group.protocol=classic"), ("jvm-848", "group.protocol=consumer")):
        consumed = tools.clients("consume", bootstrap, topic, group, str(COUNT), protocol)
        assert sorted(consumed["values"]) == sorted(f"v{i}" for i in range(COUNT)), protocol
        assert consumed["assigned"] == 3
        assert consumed["committed"] == ends, protocol  # committed at each partition's end
        # librdkafka sees the same committed offsets for the group.
        reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        try:
            seen = reader.committed([TopicPartition(topic, p) for p in range(3)], timeout=15)
        finally:
            reader.close()
        assert {f"{tp.topic}-{tp.partition}": tp.offset for tp in seen} == ends


def test_admin_client_topics_configs_and_groups(roost3: LocalCluster, tools: ToolShell) -> None:
    group_topic = "jvm-admin-source"
    create(roost3, group_topic, partitions=2)
    tools.clients("produce", roost3.bootstrap, group_topic, "10", "a")
    tools.clients("consume", roost3.bootstrap, group_topic, "jvm-admin-group", "10")
    answer = tools.clients("admin", roost3.bootstrap, "jvm-admin-topic", "jvm-admin-group")
    assert answer["create_again"] == "TopicExistsException"
    assert answer["cluster_nodes"] == 3
    partitions = answer["partitions"]
    assert sorted(partitions) == ["0", "1", "2"]
    for one in partitions.values():  # three replicas on three brokers, all in sync, led by one
        assert sorted(one["replicas"]) == [1, 2, 3] and sorted(one["isr"]) == [1, 2, 3]
        assert one["leader"] in one["replicas"]
    before, after = answer["configs_before"], answer["configs_after"]
    assert before["retention.ms"] == ["3600000", "DYNAMIC_TOPIC_CONFIG"]
    assert before["segment.bytes"][1] == "DEFAULT_CONFIG"
    assert after["segment.bytes"] == ["1048576", "DYNAMIC_TOPIC_CONFIG"]
    assert after["retention.ms"][1] != "DYNAMIC_TOPIC_CONFIG"  # deleted: back to a default
    assert after["cleanup.policy"] == ["delete", "DEFAULT_CONFIG"]
    assert "jvm-admin-group" in answer["groups"]
    assert answer["group"]["state"] == "Empty" and answer["group"]["members"] == 0
    assert answer["group"]["coordinator"] in (1, 2, 3)
    assert answer["group_offsets"] == end_offsets(roost3.bootstrap, group_topic, 2)
    assert answer["deleted"] is True
    assert "jvm-admin-topic" not in roost3.metadata().topics


def test_transactions_read_committed_sees_only_the_committed(roost3: LocalCluster, tools: ToolShell) -> None:
    topic = "jvm-txn"
    create(roost3, topic, partitions=2)
    tools.clients("txn", roost3.bootstrap, topic, "jvm-txn-app", "20", "15")
    committed = sorted([f"c{i}" for i in range(20)] + ["after"])
    read = tools.clients("consume", roost3.bootstrap, topic, "jvm-txn-reader", str(len(committed)),
                         "isolation.level=read_committed")
    assert sorted(read["values"]) == committed
    # librdkafka agrees, and read_uncommitted does see the aborted records (they were written).
    assert sorted(v.decode() for v in read_to_end(roost3.bootstrap, topic, 2, "read_committed",
                                                  must_reach_end=True)) == committed
    everything = read_to_end(roost3.bootstrap, topic, 2, "read_uncommitted", must_reach_end=True)
    assert sorted(v.decode() for v in everything) == sorted(committed + [f"a{i}" for i in range(15)])
