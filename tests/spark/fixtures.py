"""Shared fixtures for the Spark tests (tests/spark and tests/examples import them).

One SparkSession for the whole pytest session (local[2], UI off, 2 shuffle partitions, UTC): a
session costs 6-10 s to start and about 1.4 GiB, so every Spark test shares it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.procs import RoostProcess, start_roost

FAST_GROUPS = ["--group.initial.rebalance.delay.ms", "500", "--group.min.session.timeout.ms", "1000"]


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    pytest.importorskip("pyspark")
    from roost.spark.session import local_session

    session = local_session("roost-tests")
    try:
        yield session
    finally:
        for query in session.streams.active:
            query.stop()
        session.stop()


def start_node(directory: Path, port: int = 0, *flags: str) -> RoostProcess:
    """`roost up` on `port` (0: a free one) with its data in `directory`."""
    return start_roost(["up", "--data-dir", str(directory), "--kafka-port", str(port), *FAST_GROUPS, *flags])


@pytest.fixture(scope="module")
def roost_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    """One broker for a test module; tests use distinct topic names."""
    proc = start_node(tmp_path_factory.mktemp("roost-node"))
    try:
        yield proc
    finally:
        proc.stop()
