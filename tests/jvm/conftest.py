"""What the JVM ecosystem tests share, once per session: the Java programs compiled against Apache
Kafka 3.9's jars, a three-broker Roost cluster (one keeper), and one JVM running Kafka's tools and
the Java client's scenarios (tests/jvm/programs.py). The Streams test kills a broker of the shared
cluster and brings it back before it ends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.jvm.programs import ToolShell, compiled, require_kafka
from tests.support.cluster import LocalCluster


@pytest.fixture(scope="session")
def java_classes() -> Path:
    require_kafka()
    return compiled()


@pytest.fixture(scope="session")
def roost3(tmp_path_factory: pytest.TempPathFactory, java_classes: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster.start(tmp_path_factory.mktemp("jvm-roost3"), brokers=3, keepers=1,
                                 settings={"offsets.topic.num.partitions": 6,
                                           "transaction.state.log.num.partitions": 3})
    yield cluster
    cluster.close()


@pytest.fixture(scope="session")
def tools(tmp_path_factory: pytest.TempPathFactory, java_classes: Path) -> Iterator[ToolShell]:
    shell = ToolShell(java_classes, tmp_path_factory.mktemp("jvm-tools") / "tool-shell.log")
    yield shell
    shell.close()
