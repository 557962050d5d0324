"""DescribeTopicPartitions (75) and DescribeProducers (61), through the client that sends them.

Which clients send them (measured against a roost broker, from the versions it logs at shutdown):
kafka-python 3.0's KafkaAdminClient sends DescribeTopicPartitions v0 from `describe_topic_partitions`
and DescribeProducers v0 from `describe_producers`; its `describe_topics` sends Metadata, and so
does confluent-kafka 2.16's (librdkafka 2.16) AdminClient `describe_topics`. So kafka-python is
the client here, and our own wire client where a request must be shaped by hand.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import NotLeaderForPartitionError, UnknownTopicOrPartitionError

from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import iter_batch_headers
from tests.broker.conftest import StartBroker
from tests.support.cluster import LocalCluster
from tests.support.kafka_wire import FETCH, WireClient
from tests.support.procs import RoostProcess, wait_for

SERVED_LINE = re.compile(r"requests served: (?P<counts>.*)$", re.MULTILINE)
MAX_PAGES = 50


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1) for name, partitions in topics.items()])
    for future in futures.values():
        future.result(30)


def metadata_partitions(address: str, topics: list[str]) -> dict[tuple[str, int], dict[str, Any]]:
    """(topic, partition) -> Metadata v12's partition answer, asked of the same broker."""
    client = WireClient(address)
    try:
        answer = client.request(ApiKey.METADATA, 12, {
            "topics": [{"name": name, "topic_id": uuid.UUID(int=0)} for name in topics],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    finally:
        client.close()
    found = {}
    for topic in answer["topics"]:
        assert topic["error_code"] == 0, topic
        for partition in topic["partitions"]:
            found[(topic["name"], partition["partition_index"])] = partition
    return found


def page_through(admin: KafkaAdminClient, topics: list[str], limit: int) -> tuple[list[dict[str, Any]], int]:
    """Every (topic answer, with its partitions) from DescribeTopicPartitions, following the
    cursor; and how many requests it took."""
    answers: list[dict[str, Any]] = []
    cursor = None
    for page in range(1, MAX_PAGES + 1):
        result = admin.describe_topic_partitions(topics, response_partition_limit=limit, cursor=cursor)
        assert sum(len(topic["partitions"]) for topic in result["topics"]) <= limit
        answers.extend(result["topics"])
        cursor = result["next_cursor"]
        if cursor is None:
            return answers, page
    raise AssertionError(f"still paging after {MAX_PAGES} requests")


def test_paging_through_many_partitions_gives_each_once_as_metadata_tells_it(shared_broker: RoostProcess) -> None:
    bootstrap = shared_broker.address("kafka")
    create_topics(bootstrap, {"dtp-many": 30, "dtp-few": 3})
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        answers, pages = page_through(admin, ["dtp-many", "dtp-few"], limit=7)
    finally:
        admin.close()
    # Topics in name order ("dtp-few" first), 7 partitions an answer: 33 partitions take 5.
    assert pages == 5
    seen = [(topic["name"], partition["partition_index"]) for topic in answers for partition in topic["partitions"]]
    expected = [("dtp-few", i) for i in range(3)] + [("dtp-many", i) for i in range(30)]
    assert seen == expected  # every partition exactly once, in order
    metadata = metadata_partitions(bootstrap, ["dtp-many", "dtp-few"])
    for topic in answers:
        assert topic["error_code"] == 0 and not topic["is_internal"]
        for partition in topic["partitions"]:
            told = metadata[(topic["name"], partition["partition_index"])]
            mine = {key: partition[key] for key in ("error_code", "leader_id", "leader_epoch", "replica_nodes",
                                                    "isr_nodes", "offline_replicas")}
            assert mine == {key: told[key] for key in mine}, (topic["name"], partition, told)
    # The eligible-leader lists are empty, as Kafka sends them, not null: the Java admin client
    # reads them without a null check (tests/jvm/test_java_clients.py describes topics through
    # it). kafka-python reads an empty compact array as None, so ask with our own client.
    client = WireClient(bootstrap)
    try:
        answer = client.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {
            "topics": [{"name": "dtp-few"}], "response_partition_limit": 10, "cursor": None})
    finally:
        client.close()
    for partition in answer["topics"][0]["partitions"]:
        assert partition["eligible_leader_replicas"] == [] and partition["last_known_elr"] == [], partition


def test_unknown_topics_all_topics_and_a_cursor_outside_the_list(shared_broker: RoostProcess) -> None:
    bootstrap = shared_broker.address("kafka")
    create_topics(bootstrap, {"dtp-b": 2})
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        result = admin.describe_topic_partitions(["dtp-b", "dtp-absent", "bad name!"])
        by_name = {topic["name"]: topic for topic in result["topics"]}
        assert by_name["dtp-absent"]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert by_name["dtp-absent"]["partitions"] == []
        assert by_name["bad name!"]["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert by_name["dtp-b"]["error_code"] == 0 and len(by_name["dtp-b"]["partitions"]) == 2
        assert result["next_cursor"] is None
        # No topics named: every topic (this module's, and any internal one), in name order.
        everything = admin.describe_topic_partitions([])
        names = [topic["name"] for topic in everything["topics"]]
        assert names == sorted(names) and "dtp-b" in names
        assert all(topic["is_internal"] == (topic["name"] == "__consumer_offsets") for topic in everything["topics"])
    finally:
        admin.close()
    client = WireClient(bootstrap)
    try:
        # The cursor's topic must be one of those asked for (Kafka's InvalidRequestException).
        answer = client.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {
            "topics": [{"name": "dtp-b"}], "response_partition_limit": 10,
            "cursor": {"topic_name": "dtp-other", "partition_index": 0}})
        assert [(t["name"], t["error_code"]) for t in answer["topics"]] == [("dtp-b", ErrorCode.INVALID_REQUEST)]
        # A limit reached at a topic's end: the cursor points at the next topic's first partition.
        answer = client.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {
            "topics": [{"name": "dtp-b"}, {"name": "dtp-zz-absent"}], "response_partition_limit": 2,
            "cursor": None})
        assert [t["name"] for t in answer["topics"]] == ["dtp-b"]
        assert answer["next_cursor"] == {"topic_name": "dtp-zz-absent", "partition_index": 0}
    finally:
        client.close()


def written_batches(address: str, topic: str, partition: int) -> list[Any]:
    """The headers of the batches stored in one partition, read by Fetch from offset 0."""
    client = WireClient(address)
    try:
        response = client.request(FETCH, 11, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 8 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": topic, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": 0,
                "log_start_offset": -1, "partition_max_bytes": 8 << 20}]}]})
    finally:
        client.close()
    result = response["responses"][0]["partitions"][0]
    assert result["error_code"] == 0, result
    return [header for _, header in iter_batch_headers(bytes(result["records"] or b""))]


def produce_idempotently(bootstrap: str, topic: str, partition: int, rounds: int) -> None:
    """`rounds` flushes of a few records each: several batches from one idempotent producer."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for round_number in range(rounds):
        for record in range(3):
            producer.produce(topic, f"{round_number}-{record}".encode(), partition=partition)
        assert producer.flush(30) == 0


def test_describe_producers_lists_the_idempotent_producer_as_written(shared_broker: RoostProcess) -> None:
    bootstrap = shared_broker.address("kafka")
    topic = "dp-idempotent"
    create_topics(bootstrap, {topic: 2})
    produce_idempotently(bootstrap, topic, 0, rounds=3)
    batches = written_batches(bootstrap, topic, 0)
    assert len(batches) >= 3 and len({(b.producer_id, b.producer_epoch) for b in batches}) == 1
    last = batches[-1]
    assert last.producer_id >= 0 and last.last_sequence == 8  # nine records, sequences 0-8

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        states = admin.describe_producers([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        (producer,) = states[TopicPartition(topic, 0)].active_producers
        assert (producer.producer_id, producer.producer_epoch, producer.last_sequence) == \
            (last.producer_id, last.producer_epoch, last.last_sequence)
        assert producer.last_timestamp == max(b.max_timestamp for b in batches)
        assert (producer.coordinator_epoch, producer.current_transaction_start_offset) == (-1, -1)
        assert states[TopicPartition(topic, 1)].active_producers == []  # nothing written there
        try:
            admin.describe_producers([TopicPartition(topic, 5)], broker_id=0)
            raise AssertionError("partition 5 of a two-partition topic was described")
        except UnknownTopicOrPartitionError:
            pass
    finally:
        admin.close()
    client = WireClient(bootstrap)
    try:
        answer = client.request(ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [
            {"name": "dp-absent", "partition_indexes": [0]}, {"name": topic, "partition_indexes": [0, 9]}]})
    finally:
        client.close()
    errors = {(t["name"], p["partition_index"]): p["error_code"] for t in answer["topics"] for p in t["partitions"]}
    assert errors == {("dp-absent", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, (topic, 0): ErrorCode.NONE,
                      (topic, 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_in_a_cluster_a_follower_answers_and_a_broker_without_a_replica_does_not(tmp_path: Path) -> None:
    """Kafka answers DescribeProducers on any replica of the partition (its admin may ask a
    follower by broker id) and NOT_LEADER_OR_FOLLOWER on a broker that holds none."""
    cluster = LocalCluster.start(tmp_path, brokers=2, keepers=1)
    try:
        topic = "dp-cluster"
        admin = cluster.admin()
        solo = "dp-cluster-solo"
        # `topic` led by 2 and followed by 1; `solo` on broker 2 alone.
        futures = admin.create_topics([NewTopic(topic, 1, replica_assignment=[[2, 1]]),
                                       NewTopic(solo, 1, replica_assignment=[[2]])])
        for future in futures.values():
            future.result(30)
        cluster.wait_for_isr(topic)
        cluster.wait_for_isr(solo)
        produce_idempotently(cluster.bootstrap, topic, 0, rounds=2)
        leader_batches = written_batches(cluster.brokers[2].address, topic, 0)
        last = leader_batches[-1]
        kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            led = kp.describe_producers([TopicPartition(topic, 0)])[TopicPartition(topic, 0)].active_producers

            def follower_state() -> Any:
                answer = kp.describe_producers([TopicPartition(topic, 0)], broker_id=1)
                return answer[TopicPartition(topic, 0)].active_producers

            # The follower knows the producer once it has fetched the batches.
            followed = wait_for(lambda: (found := follower_state()) and found[0].last_sequence == 5 and found,
                                30, interval=0.2, what="the follower's producer state")
            try:
                kp.describe_producers([TopicPartition(solo, 0)], broker_id=1)
                raise AssertionError("broker 1 described a partition it holds no replica of")
            except NotLeaderForPartitionError:
                pass
        finally:
            kp.close()
        # DescribeTopicPartitions from either broker (its metadata cache) says what Metadata says.
        for broker_id, node in cluster.brokers.items():
            client = WireClient(node.address)
            try:
                described = client.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {
                    "topics": [{"name": topic}], "response_partition_limit": 5, "cursor": None})
            finally:
                client.close()
            assert described["next_cursor"] is None, broker_id
            told = metadata_partitions(node.address, [topic])[(topic, 0)]
            (partition,) = described["topics"][0]["partitions"]
            assert (partition["leader_id"], partition["leader_epoch"], partition["replica_nodes"],
                    sorted(partition["isr_nodes"])) == \
                (told["leader_id"], told["leader_epoch"], told["replica_nodes"], sorted(told["isr_nodes"]))
            assert (partition["leader_id"], partition["replica_nodes"], sorted(partition["isr_nodes"])) == \
                (2, [2, 1], [1, 2]), broker_id
        (producer,) = led
        assert (producer.producer_id, producer.producer_epoch, producer.last_sequence) == \
            (last.producer_id, last.producer_epoch, 5)
        assert [(p.producer_id, p.producer_epoch, p.last_sequence) for p in followed] == \
            [(producer.producer_id, producer.producer_epoch, producer.last_sequence)]
    finally:
        cluster.close()


def test_which_clients_send_these_apis(start_broker: StartBroker) -> None:
    """The measurement in the module docstring, kept honest: confluent-kafka's describe_topics
    sends Metadata, kafka-python's describe_topic_partitions and describe_producers send 75 and 61."""
    broker = start_broker("--no-keeper")
    bootstrap = broker.address("kafka")
    create_topics(bootstrap, {"measure": 2})
    confluent = AdminClient({"bootstrap.servers": bootstrap})
    for future in confluent.describe_topics(TopicCollection(["measure"])).values():
        assert len(future.result(30).partitions) == 2
    del confluent
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.describe_topic_partitions(["measure"])
        admin.describe_producers([TopicPartition("measure", 0)])
    finally:
        admin.close()
    broker.stop()  # the counts are logged at shutdown
    lines = SERVED_LINE.findall(broker.text())
    assert len(lines) == 1
    served = dict(item.rsplit(": ", 1) for item in lines[0].split(", ") if item)
    # Exactly kafka-python's one of each: confluent-kafka's describe_topics sent neither.
    assert served.get("DescribeTopicPartitions v0") == "1" and served.get("DescribeProducers v0") == "1", served
    assert "Metadata v12" in served


def test_list_config_resources_as_kafka_python_asks_for_it(shared_broker: RoostProcess) -> None:
    """ListConfigResources (Kafka 4.1, KIP-1142) through kafka-python's admin: every topic and
    every live broker by type, filtered by type, nothing for client metrics or group configs (Roost
    keeps none), INVALID_REQUEST for broker loggers, which Roost has no configs for."""
    from kafka.errors import InvalidRequestError

    bootstrap = shared_broker.address("kafka")
    create_topics(bootstrap, {"listed-a": 1, "listed-b": 2})
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        everything = admin.list_config_resources()
        assert {"listed-a", "listed-b"} <= set(everything["topic"])
        assert set(everything) == {"topic", "broker"} and len(everything["broker"]) == 1
        assert admin.list_config_resources(["BROKER"]) == {"broker": everything["broker"]}
        assert admin.list_config_resources(["CLIENT_METRICS", "GROUP"]) == {}
        with pytest.raises(InvalidRequestError):
            admin.list_config_resources(["BROKER_LOGGER"])
    finally:
        admin.close()
