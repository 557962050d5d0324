"""Prometheus metrics across a local cluster (`roost up --brokers 2 --metrics-port 0`): each broker
serves its own endpoint, and the cluster-wide rules dashboards rely on hold when the series of
all brokers are added up."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from roost.cli.servers import cluster_plan as cluster_plan
from roost.cli.servers.node_runner import GivenSettings
from tests.support.procs import RoostProcess, free_ports, start_roost, wait_for
from tests.support.scrape import Samples, scrape, value

LISTENERS = ("broker 1 kafka", "broker 2 kafka", "broker 1 metrics", "broker 2 metrics", "keeper 1 metrics")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    directory = tmp_path_factory.mktemp("metrics-cluster")
    proc = start_roost(["up", "--brokers", "2", "--keepers", "1", "--data-dir", str(directory),
                        "--metrics-port", "0"], expect=LISTENERS)
    yield proc
    proc.stop()


def scrape_all(cluster: RoostProcess) -> list[Samples]:
    return [scrape(cluster.address(f"broker {i} metrics")) for i in (1, 2)]


def total(scraped: list[Samples], name: str, **labels: str) -> float:
    return sum(value(samples, name, **labels) for samples in scraped)


def test_cluster_wide_sums(cluster: RoostProcess) -> None:
    bootstrap = cluster.address("broker 1 kafka")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("m-replicated", num_partitions=4, replication_factor=2)])["m-replicated"].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(200):
        producer.produce("m-replicated", key=str(i).encode(), value=b"v")
    assert producer.flush(30) == 0
    metadata = admin.list_topics(timeout=30)
    partitions = sum(len(t.partitions) for t in metadata.topics.values())
    replicas = sum(len(p.replicas) for t in metadata.topics.values() for p in t.partitions.values())

    def settled() -> list[Samples] | None:
        scraped = scrape_all(cluster)
        in_sync = total(scraped, "kafka_server_replicamanager_underreplicatedpartitions") == 0
        return scraped if in_sync and total(scraped, "kafka_server_replicamanager_leadercount") == partitions \
            else None

    scraped = wait_for(settled, timeout=30, what="every partition led and in sync")
    assert total(scraped, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert total(scraped, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert total(scraped, "kafka_server_replicamanager_partitioncount") == replicas
    # Only leaders count appended records: the cluster's sum is what was produced, once.
    assert total(scraped, "kafka_server_brokertopicmetrics_messagesin_total", topic="m-replicated") == 200
    # kafka_exporter's series: each partition once (from its leader), cluster counts once (from
    # the active controller).
    offsets = [v for samples in scraped for (n, labels), v in samples.items()
               if n == "kafka_topic_partition_current_offset" and ("topic", "m-replicated") in labels]
    assert len(offsets) == 4 and sum(offsets) == 200
    assert total(scraped, "kafka_topic_partitions", topic="m-replicated") == 4
    assert total(scraped, "kafka_brokers") == 2
    # Followers fetched what the leaders hold: FetchFollower requests were timed somewhere.
    assert total(scraped, "kafka_network_requestmetrics_totaltimems_count", request="FetchFollower") > 0


def test_the_keepers_serve_their_metrics_too(cluster: RoostProcess) -> None:
    samples = scrape(cluster.address("keeper 1 metrics"))
    assert value(samples, "quorum_size") == 1
    # The brokers' sessions and registrations (/brokers/ids/1 and 2, /controller) are there.
    assert value(samples, "global_sessions") >= 2
    assert value(samples, "ephemerals_count") >= 3


def test_a_fixed_metrics_port_counts_up_from_broker_to_broker(tmp_path: Path) -> None:
    first = min(free_ports(1)[0], 65000)  # planning only: nothing binds these
    args = argparse.Namespace(no_keeper=False, zookeeper=None, keepers=1, brokers=3, data_dir=tmp_path,
                              host="127.0.0.1", keeper_port=None, kafka_port=None, log_level="INFO")
    plan = cluster_plan.plan_from_args(args, GivenSettings([("--set", {"metrics.port": str(first)})]))
    assert [spec.config["metrics.port"] for spec in plan.brokers] == [first, first + 1, first + 2]
    assert [spec.config["metricsProvider.httpPort"] for spec in plan.keepers] == [0]
    off = cluster_plan.plan_from_args(args, GivenSettings([]))
    assert all("metricsProvider.httpPort" not in spec.config for spec in off.keepers)
