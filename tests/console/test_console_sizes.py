"""Sizes where no broker answers DescribeLogDirs (a cluster without the API, a listener that
drops the request): unknown (None, shown as "—"), never an error. No cluster is needed: the
brokers named are a loopback port with nothing listening and a listener that closes every
connection unanswered, as a broker without the API does."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import BrokerMetadata, ClusterMetadata, PartitionMetadata, TopicMetadata

from roost.console.history import Due, TopicPoint, TopicRates
from roost.console.sampling import leader_sizes
from tests.support.procs import free_ports


@pytest.fixture
def closing_listener() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            connection.recv(65536)
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        server.close()


def metadata_naming(ports: list[int]) -> ClusterMetadata:
    metadata = ClusterMetadata()
    for broker_id, port in enumerate(ports, start=1):
        broker = BrokerMetadata()
        broker.id, broker.host, broker.port = broker_id, "127.0.0.1", port
        metadata.brokers[broker_id] = broker
    topic = TopicMetadata()
    topic.topic = "orders"
    for index, leader in enumerate(metadata.brokers):
        partition = PartitionMetadata()
        partition.id, partition.leader, partition.replicas, partition.isrs = index, leader, [leader], [leader]
        topic.partitions[index] = partition
    metadata.topics["orders"] = topic
    return metadata


def test_sizes_are_unknown_when_no_broker_answers_describe_log_dirs(closing_listener: int) -> None:
    (nothing_listening,) = free_ports(1)
    metadata = metadata_naming([nothing_listening, closing_listener])
    assert leader_sizes(metadata, None, 2.0) is None
    assert leader_sizes(metadata, ["orders"], 2.0) is None


def test_a_topic_with_unknown_sizes_has_no_size_and_no_byte_rate() -> None:
    rates = TopicRates()
    rates.record("orders", TopicPoint(100.0, 10, None))
    rates.record("orders", TopicPoint(102.0, 30, None))
    assert rates.figures("orders") == {"size": None, "messages_per_second": 10.0, "bytes_per_second": None}


def test_a_stale_topic_is_claimed_by_one_caller_until_sampled_or_the_claim_lapses() -> None:
    rates = TopicRates()
    assert rates.due(["orders", "users"], now=100.0) == Due(unseen=["orders", "users"], stale=[])
    rates.record("orders", TopicPoint(100.0, 10, 1000))
    assert rates.due(["orders"], now=100.5) == Due([], [])  # fresh
    assert rates.due(["orders"], now=101.0) == Due([], ["orders"])  # stale: this caller samples it
    assert rates.due(["orders"], now=101.2) == Due([], [])  # claimed: the next caller answers from the point
    rates.record("orders", TopicPoint(101.3, 20, 1100))
    assert rates.due(["orders"], now=102.3) == Due([], ["orders"])  # sampled, and stale again
    assert rates.due(["orders"], now=103.3) == Due([], ["orders"])  # that sample failed: the claim lapsed
