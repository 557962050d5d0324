"""Prometheus metrics of a real `roost up --metrics-port 0`, scraped over HTTP during produce and
consume runs with confluent-kafka: the series Kafka's JMX exporter and kafka_exporter produce
exist under their names and labels, and the counters move by exactly what was produced and
consumed.

What the byte counters count (roost.broker.net.stats): bytesin is the bytes of the record batches
appended (the produce requests' records, as stored), bytesout the bytes of record batches sent
in fetch responses. So once a topic is produced to and read once from the start by one consumer,
bytesin = bytesout = the size of its logs.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from roost.config import BrokerConfig
from tests.broker.conftest import FAST_GROUPS
from tests.support.procs import RoostProcess, start_roost, wait_for
from tests.support.scrape import Samples, labelled, names, scrape, value

BROKER_SERIES = {
    "kafka_server_brokertopicmetrics_messagesin_total",
    "kafka_server_brokertopicmetrics_bytesin_total",
    "kafka_server_brokertopicmetrics_bytesout_total",
    "kafka_server_brokertopicmetrics_failedproducerequests_total",
    "kafka_server_brokertopicmetrics_failedfetchrequests_total",
    "kafka_network_requestmetrics_requests_total",
    "kafka_network_requestmetrics_totaltimems",
    "kafka_network_requestmetrics_totaltimems_count",
    "kafka_network_requestchannel_requestqueuesize",
    "kafka_server_replicamanager_underreplicatedpartitions",
    "kafka_server_replicamanager_underminisrpartitioncount",
    "kafka_server_replicamanager_offlinereplicacount",
    "kafka_server_replicamanager_isrshrinks_total",
    "kafka_server_replicamanager_isrexpands_total",
    "kafka_server_replication_throttled_byte_rate",  # KIP-73 (issue 33)
    "roost_replication_throttled_bytes_total",
    "kafka_server_replicamanager_partitioncount",
    "kafka_server_replicamanager_leadercount",
    "kafka_controller_kafkacontroller_activecontrollercount",
    "kafka_controller_kafkacontroller_offlinepartitionscount",
    "kafka_log_log_size",
    "kafka_log_log_logendoffset",
    "kafka_consumergroup_lag",
    "kafka_consumergroup_lag_sum",
    "kafka_consumergroup_current_offset",
    "kafka_consumergroup_members",
    "kafka_topic_partition_current_offset",
    "kafka_topic_partition_oldest_offset",
    "kafka_topic_partition_in_sync_replica",
    "kafka_topic_partition_under_replicated_partition",
    "kafka_topic_partitions",
    "kafka_brokers",
}
KEEPER_SERIES = {"znode_count", "watch_count", "ephemerals_count", "global_sessions", "quorum_size"}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    directory = tmp_path_factory.mktemp("metrics-broker")
    proc = start_roost(["up", "--data-dir", str(directory), "--kafka-port", "0", "--metrics-port", "0",
                        *FAST_GROUPS], expect=("kafka", "keeper", "metrics"))
    yield proc
    proc.stop()


def create_topic(bootstrap: str, name: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                  config=configs or {})])[name].result(30)


def produce(bootstrap: str, topic: str, count: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(topic, key=str(i).encode(), value=f"value-{i}".encode() * 3)
    assert producer.flush(30) == 0


def consume(bootstrap: str, topic: str, group: str, count: int) -> None:
    """Read `count` records of `topic` from the start in `group`, commit them, and leave."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "max.poll.interval.ms": 10000,
                         "session.timeout.ms": 6000})
    consumer.subscribe([topic])
    got = 0
    try:
        for _ in range(300):  # bounded: 300 polls of at most 0.2 s
            if got >= count:
                break
            for message in consumer.consume(count - got, timeout=0.2):
                if message.error() is None:
                    got += 1
        assert got == count
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def topic_total(samples: Samples, name: str, topic: str) -> float:
    return sum(v for labels, v in labelled(samples, name).items() if ("topic", topic) in labels)


def test_metrics_are_off_unless_asked_for() -> None:
    assert BrokerConfig.build([])["metrics.port"] == -1


def test_every_series_exists_with_kafkas_names_and_labels(node: RoostProcess) -> None:
    bootstrap = node.address("kafka")
    create_topic(bootstrap, "m-names", 2)
    produce(bootstrap, "m-names", 10)
    consume(bootstrap, "m-names", "g-names", 10)
    samples = scrape(node.address("metrics"))
    assert names(samples) >= BROKER_SERIES, BROKER_SERIES - names(samples)
    # `roost up` serves its embedded keeper's series on the same endpoint.
    assert names(samples) >= KEEPER_SERIES
    assert value(samples, "kafka_server_brokertopicmetrics_messagesin_total", topic="m-names") == 10
    assert {dict(k)["request"] for k in labelled(samples, "kafka_network_requestmetrics_requests_total")} >= {
        "Produce", "Fetch", "Metadata", "JoinGroup", "OffsetCommit"}
    quantiles = labelled(samples, "kafka_network_requestmetrics_totaltimems")
    assert {dict(k)["quantile"] for k in quantiles if ("request", "Produce") in k} == {
        "0.5", "0.75", "0.95", "0.98", "0.99", "0.999"}
    assert any(("request", "FetchConsumer") in k for k in quantiles)
    assert set(labelled(samples, "kafka_log_log_logendoffset")) >= {
        frozenset({("topic", "m-names"), ("partition", "0")}), frozenset({("topic", "m-names"), ("partition", "1")})}
    assert set(labelled(samples, "kafka_consumergroup_members")) >= {frozenset({("consumergroup", "g-names")})}


def test_counters_move_by_exactly_what_was_produced_and_consumed(node: RoostProcess) -> None:
    bootstrap = node.address("kafka")
    metrics = node.address("metrics")
    create_topic(bootstrap, "m-counts", 3)
    before = scrape(metrics)
    assert topic_total(before, "kafka_server_brokertopicmetrics_messagesin_total", "m-counts") == 0
    produce(bootstrap, "m-counts", 300)
    after_produce = scrape(metrics)
    assert value(after_produce, "kafka_server_brokertopicmetrics_messagesin_total", topic="m-counts") == 300
    assert topic_total(after_produce, "kafka_log_log_logendoffset", "m-counts") == 300
    log_bytes = topic_total(after_produce, "kafka_log_log_size", "m-counts")
    assert log_bytes > 300 * len(b"value-0" * 3)
    assert value(after_produce, "kafka_server_brokertopicmetrics_bytesin_total", topic="m-counts") == log_bytes
    assert value(after_produce, "kafka_server_brokertopicmetrics_bytesout_total", topic="m-counts") == 0
    # kafka_exporter's view: newest offsets, the topic's partition count, the live brokers.
    assert topic_total(after_produce, "kafka_topic_partition_current_offset", "m-counts") == 300
    assert value(after_produce, "kafka_topic_partitions", topic="m-counts") == 3
    assert value(after_produce, "kafka_brokers") == 1
    consume(bootstrap, "m-counts", "g-counts", 300)
    after_consume = scrape(metrics)
    assert value(after_consume, "kafka_server_brokertopicmetrics_bytesout_total", topic="m-counts") == log_bytes
    assert value(after_consume, "kafka_server_brokertopicmetrics_messagesin_total", topic="m-counts") == 300
    assert value(after_consume, "kafka_server_brokertopicmetrics_failedproducerequests_total", topic="m-counts") == 0
    # The all-topics series (no topic label, as the JMX exporter shows Kafka's) is the sum over topics.
    for name in ("messagesin", "bytesin", "bytesout"):
        series = labelled(after_consume, f"kafka_server_brokertopicmetrics_{name}_total")
        assert series[frozenset()] == sum(v for labels, v in series.items() if labels)
    # Every Produce request counted by version was timed once.
    produces = sum(v for k, v in labelled(after_consume, "kafka_network_requestmetrics_requests_total").items()
                   if ("request", "Produce") in k)
    assert produces >= 1
    assert value(after_consume, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == produces


def test_a_rejected_produce_counts_as_failed(node: RoostProcess) -> None:
    bootstrap = node.address("kafka")
    create_topic(bootstrap, "m-failed", 1, {"max.message.bytes": "1000"})
    producer = Producer({"bootstrap.servers": bootstrap, "retries": 0})
    errors: list[object] = []
    producer.produce("m-failed", b"x" * 5000, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(30) == 0
    assert len(errors) == 1 and errors[0] is not None
    samples = scrape(node.address("metrics"))
    assert value(samples, "kafka_server_brokertopicmetrics_failedproducerequests_total", topic="m-failed") == 1
    assert value(samples, "kafka_server_brokertopicmetrics_messagesin_total", topic="m-failed") == 0


def test_partition_and_leader_counts_match_the_cluster(node: RoostProcess) -> None:
    bootstrap = node.address("kafka")
    create_topic(bootstrap, "m-layout", 4)
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    partitions = sum(len(t.partitions) for t in metadata.topics.values())
    samples = scrape(node.address("metrics"))
    assert value(samples, "kafka_server_replicamanager_partitioncount") == partitions
    assert value(samples, "kafka_server_replicamanager_leadercount") == partitions  # one broker leads all
    assert len(labelled(samples, "kafka_log_log_size")) == partitions
    assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0


def test_a_stopped_groups_lag_shows_and_grows(node: RoostProcess) -> None:
    bootstrap = node.address("kafka")
    metrics = node.address("metrics")
    create_topic(bootstrap, "m-lag", 1)
    produce(bootstrap, "m-lag", 50)
    consume(bootstrap, "m-lag", "g-lag", 20)  # commits 20, then leaves: nothing consumes now
    where = {"consumergroup": "g-lag", "topic": "m-lag", "partition": "0"}

    def once_empty() -> Samples | None:
        samples = scrape(metrics)
        return samples if value(samples, "kafka_consumergroup_members", consumergroup="g-lag") == 0 else None

    samples = wait_for(once_empty, what="the group to be empty")
    assert value(samples, "kafka_consumergroup_current_offset", **where) == 20
    assert value(samples, "kafka_consumergroup_lag", **where) == 30
    assert value(samples, "kafka_consumergroup_lag_sum", consumergroup="g-lag", topic="m-lag") == 30
    produce(bootstrap, "m-lag", 5, start=50)
    assert value(scrape(metrics), "kafka_consumergroup_lag", **where) == 35


def test_other_paths_get_404(node: RoostProcess) -> None:
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(f"http://{node.address('metrics')}/nothing", timeout=10)
    assert error.value.code == 404
    assert node.listeners["metrics"][0] == "127.0.0.1"


def test_a_taken_metrics_port_is_an_error(node: RoostProcess, tmp_path: Path) -> None:
    taken = node.port("metrics")
    proc = start_roost(["up", "--data-dir", str(tmp_path / "d"), "--kafka-port", "0", "--no-keeper",
                        "--metrics-port", str(taken)], expect=("kafka",))
    try:
        assert proc.popen.wait(30) == 1
        wait_for(lambda: "cannot serve metrics" in proc.text(), timeout=10, what="the error line")
    finally:
        proc.stop()


def test_a_parked_fetch_shows_in_the_request_queue(node: RoostProcess) -> None:
    bootstrap = node.address("kafka")
    create_topic(bootstrap, "m-idle", 1)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-idle", "auto.offset.reset": "latest",
                         "fetch.wait.max.ms": 1000})
    consumer.assign([TopicPartition("m-idle", 0, OFFSET_END)])
    try:
        consumer.poll(0.5)  # the consumer now long-polls an empty partition: its fetch waits in the broker

        def parked() -> bool:
            consumer.poll(0.05)
            return value(scrape(node.address("metrics")), "kafka_network_requestchannel_requestqueuesize") >= 1

        wait_for(parked, timeout=30, what="a fetch waiting in the broker")
    finally:
        consumer.close()
