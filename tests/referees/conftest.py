"""The shared Apache Kafka referees (one JVM each per session: tests/support/kafka_referee.py) and
the differential's Roost broker, one for the whole package: both differential modules ask it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.referees.differential import Count
from tests.support.cluster import LocalCluster
from tests.support.kafka_referee import KafkaCluster, kafka4, kafka39  # noqa: F401  (fixtures)

# What the differential's Roost broker shares with the referee's settings (tests/support/kafka_referee.py).
SAME_SETTINGS: dict[str, Any] = {"group.initial.rebalance.delay.ms": 0, "num.partitions": 1}


@pytest.fixture(scope="package")
def roost(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cluster = LocalCluster.start(tmp_path_factory.mktemp("roost-differential"), brokers=1, settings=SAME_SETTINGS)
    try:
        yield cluster.brokers[1].address
    finally:
        cluster.close()


@pytest.fixture(scope="package")
def kafka(kafka39: KafkaCluster) -> str:  # noqa: F811
    return kafka39.address


@pytest.fixture(scope="package", autouse=True)
def _print_case_count(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if not Count.cases:
        return
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    line = f"kafka differential: {Count.cases} cases compared against Apache Kafka 3.9"
    if reporter is not None:
        reporter.write_line(line)
    print(line)
