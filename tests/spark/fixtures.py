"""Shared fixtures for the Spark tests (tests/spark and tests/examples import them).

One SparkSession for the whole pytest session (local[2], UI off, 2 shuffle partitions, UTC): a
session costs 6-10 s to start and about 1.4 GiB, so every Spark test shares it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import referees
from tests.support.procs import RoostProcess, start_roost

FAST_GROUPS = ["--group.initial.rebalance.delay.ms", "500", "--group.min.session.timeout.ms", "1000"]


_shared: dict[str, Any] = {}


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The shared SparkSession. tests/spark and tests/examples each import this fixture; the first
    to run creates the session and, at the end of the pytest session, stops it and its JVM."""
    referees.import_or_skip("pyspark", "PySpark")
    from roost.spark.session import local_session

    owner = "session" not in _shared
    if owner:
        _shared["session"] = local_session("roost-tests")
    session = _shared["session"]
    try:
        yield session
    finally:
        if owner:
            _stop_spark(session)
            _shared.clear()


def _stop_spark(session: Any) -> None:
    from pyspark import SparkContext

    for query in session.streams.active:
        query.stop()
    session.stop()
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    if gateway is not None:
        gateway.shutdown()
    if process is not None:  # the JVM started by PySpark: make sure it is gone
        process.terminate()
        process.wait(60)
    SparkContext._gateway = None
    SparkContext._jvm = None


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
