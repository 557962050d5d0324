"""Fixtures: one real Apache ZooKeeper and one keeper process per test session (both with
tickTime 500 ms), started once because a JVM takes seconds to start."""

from __future__ import annotations

import difflib
import pprint
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.keeper.zkharness import (
    ZK_VERSIONS,
    Recorder,
    kazoo,
    keeper_process,
    reap_abandoned,
    require_zookeeper,
    unique_root,
    zookeeper_available,
    zookeeper_standalone,
)
from tests.support import referees
from tests.support.procs import RoostProcess


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> str:
    if not zookeeper_available():
        referees.skip(referees.ZOOKEEPER)
    with zookeeper_standalone(tmp_path_factory.mktemp("zookeeper")) as process:
        yield process.address


@pytest.fixture(scope="session")
def zookeeper39(tmp_path_factory: pytest.TempPathFactory) -> str:
    """ZooKeeper 3.9 from Maven Central (the referee cache), beside Debian's 3.8."""
    require_zookeeper("3.9")
    with zookeeper_standalone(tmp_path_factory.mktemp("zookeeper39"), version="3.9") as process:
        yield process.address


# Where ZooKeeper 3.9 answers otherwise than 3.8, whose answers the keeper gives (listed on
# docs/kafka-differences.md): each such scenario is a strict xfail against 3.9, so that the day the
# keeper follows 3.9 the list must shrink.
DIFFERS_FROM_3_9 = {
    "acls_and_auth": "3.9 asks READ permission of `exists` (NoAuth); 3.8 and the keeper do not",
    "four_letter_words": "3.9 reports its own version (3.9.5) and drops it from `envi`; the keeper reports 3.8.0",
    "other_operations": "3.9 returns the created node's Stat for a create2 inside a multi; 3.8 and the keeper return none",
}


@pytest.fixture(params=ZK_VERSIONS)
def zookeepers(request: pytest.FixtureRequest) -> str:
    """Each ZooKeeper the differential compares with in turn (3.8 from Debian, 3.9 from Maven)."""
    if request.param == "3.9":
        scenario = getattr(request.node, "callspec", None) and request.node.callspec.params.get("scenario")
        name = getattr(scenario, "__name__", "auth_failure" if scenario is None else "")
        if name in DIFFERS_FROM_3_9:
            request.applymarker(pytest.mark.xfail(strict=True, reason=DIFFERS_FROM_3_9[name]))
    return request.getfixturevalue("zookeeper" if request.param == "3.8" else "zookeeper39")


@pytest.fixture(scope="session")
def keeper_proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    """The shared keeper process, for tests that read its log."""
    with keeper_process(tmp_path_factory.mktemp("keeper")) as proc:
        yield proc


@pytest.fixture(scope="session")
def keeper(keeper_proc: RoostProcess) -> str:
    return keeper_proc.address("keeper")


Scenario = Callable[[str, Recorder], None]


def run_scenario(address: str, scenario: Scenario, name: str) -> list[tuple[str, Any]]:
    reap_abandoned(address)  # sessions other tests left behind on this shared server
    client = kazoo(address)
    try:
        recorder = Recorder(client, unique_root(name))
        scenario(address, recorder)
        return recorder.records
    finally:
        reap_abandoned(address)
        client.stop()
        client.close()


def differential(zookeeper: str, keeper: str, scenario: Scenario) -> list[tuple[str, Any]]:
    """Run `scenario` against the real ZooKeeper and the keeper (concurrently, they are
    independent servers) and assert that the normalised records are equal."""
    name = scenario.__name__.replace("_", "-")
    with ThreadPoolExecutor(2) as pool:
        expected_future = pool.submit(run_scenario, zookeeper, scenario, name)
        actual_future = pool.submit(run_scenario, keeper, scenario, name)
        expected, actual = expected_future.result(), actual_future.result()
    if expected != actual:
        diff = "\n".join(difflib.unified_diff(
            pprint.pformat(expected, width=110).splitlines(),
            pprint.pformat(actual, width=110).splitlines(),
            "zookeeper", "keeper", lineterm=""))
        pytest.fail(f"keeper differs from ZooKeeper in {scenario.__name__}:\n{diff}")
    assert expected, "the scenario recorded nothing"
    return actual
