"""One `roost up` node with its schema registry and REST proxy, shared by the registry package's
modules that need a real broker beside the registry (test_restproxy, test_schema_records)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.procs import RoostProcess, start_roost


@pytest.fixture(scope="package")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    from confluent_kafka.admin import AdminClient, NewTopic

    directory = Path(tmp_path_factory.mktemp("registry-node"))
    process = start_roost(["up", "--data-dir", str(directory), "--kafka-port", "0", "--schema-registry-port", "0",
                           "--set", "group.initial.rebalance.delay.ms=0", "--set", "num.partitions=1"],
                          expect=("kafka", "schema registry"), timeout=120)
    try:
        admin = AdminClient({"bootstrap.servers": process.address("kafka")})
        for future in admin.create_topics([NewTopic("events", 1, 1), NewTopic("fuzzed", 1, 1)]).values():
            future.result(30)
        yield process
    finally:
        process.stop()
