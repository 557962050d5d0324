"""The pytest plugin (registered through the `pytest11` entry point `roost`): fixtures giving
tests a real Roost broker and keeper, without Docker or a JVM.

- `roost_node` (session): one `roost up` node, started once per session (per xdist worker);
- `roost_topic` (function): a fresh, uniquely named topic, deleted after the test;
  `@pytest.mark.roost_topic(partitions=3, config={...}, replication_factor=...)` or indirect
  parametrization (an int: partitions; a dict: those keyword arguments) shape it;
- `roost_cluster` (module, opt-in): brokers and a keeper ensemble as separate processes, with
  fault injection; `@pytest.mark.roost_cluster(brokers=3, keepers=1)` sizes it;
- `roost_node_settings` (session): broker settings for `roost_node`; override it in a conftest;
- `roost_node_security` (session): plaintext, ssl, sasl_plaintext or sasl_ssl for `roost_node`.

`--roost-bootstrap` / `roost_bootstrap` use an external cluster instead (see roost.testing.options).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from roost.testing.node import RoostNode
from roost.testing.options import add_options, external_cluster

MARKERS = (
    "roost_topic(partitions=1, config=None, replication_factor=None): the shape of the roost_topic fixture's topic",
    "roost_cluster(brokers=3, keepers=1, settings=None): the size of the module's roost_cluster "
    "(put it on the module, or give every test of the module the same one)",
)
TOPIC_NAME_MAX = 120  # Kafka allows 249; shorter names keep logs and directory names readable


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)


@pytest.fixture(scope="session")
def roost_node_settings() -> dict[str, Any]:
    """Broker settings (Kafka's names) for the roost_node fixture's `roost up`, on top of Roost's
    defaults. Override this fixture in a conftest.py to change them."""
    return {}


@pytest.fixture(scope="session")
def roost_node_security() -> str:
    """`roost_node`'s security: plaintext (the default), ssl, sasl_plaintext or sasl_ssl, as
    `roost up --security` (a throw-away CA and an admin user; `roost_node.client_config()`
    carries the client settings). Override this fixture in a conftest.py to change it."""
    return "plaintext"


@pytest.fixture(scope="session")
def roost_node(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
               roost_node_settings: dict[str, Any], roost_node_security: str) -> Iterator[RoostNode]:
    """A running Roost node (broker + keeper) for the whole session: `.bootstrap` and
    `.zookeeper` are its addresses; `.create_topic`, `.produce`, `.consume` help. With
    --roost-bootstrap, the external cluster instead (nothing is started)."""
    external = external_cluster(request.config)
    if external is not None:
        yield RoostNode.external(external.bootstrap, external.zookeeper)
        return
    node = RoostNode.start(tmp_path_factory.mktemp("roost-node"), roost_node_settings,
                           security=roost_node_security)
    try:
        yield node
    finally:
        node.stop()


def _topic_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """roost_topic's arguments: the marker's, then an indirect parameter's."""
    options: dict[str, Any] = {}
    marker = request.node.get_closest_marker("roost_topic")
    if marker is not None:
        if marker.args:
            options["partitions"] = marker.args[0]
        options.update(marker.kwargs)
    param = getattr(request, "param", None)
    if isinstance(param, int):
        options["partitions"] = param
    elif isinstance(param, dict):
        options.update(param)
    elif param is not None:
        raise pytest.UsageError(f"roost_topic: an indirect parameter is partitions (int) or a dict, got {param!r}")
    unknown = options.keys() - {"partitions", "config", "replication_factor"}
    if unknown:
        raise pytest.UsageError(f"roost_topic: unknown options {sorted(unknown)}")
    return options


def unique_topic_name(test_name: str) -> str:
    """A legal, unique topic name that says which test it belongs to."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", test_name).strip("-.") or "topic"
    return f"{readable[:TOPIC_NAME_MAX]}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def roost_topic(request: pytest.FixtureRequest) -> Iterator[str]:
    """The name of a topic created for this test (on roost_cluster when the test uses it, else on
    roost_node) and deleted after it."""
    target = request.getfixturevalue("roost_cluster" if "roost_cluster" in request.fixturenames else "roost_node")
    if isinstance(target, RoostNode):
        target.ensure_running()
    name = target.create_topic(unique_topic_name(request.node.name), **_topic_options(request))
    yield name
    target.delete_topic(name)


def _cluster_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The size the module's tests ask of roost_cluster; they must agree (one cluster a module)."""
    module = request.node
    wanted: dict[str, dict[str, Any]] = {}
    for item in request.session.items:
        if "roost_cluster" not in getattr(item, "fixturenames", ()) or item.getparent(pytest.Module) is not module:
            continue
        marker = item.get_closest_marker("roost_cluster")
        wanted[item.nodeid] = dict(marker.kwargs) if marker is not None else {}
    shapes = {repr(sorted(options.items())) for options in wanted.values()}
    if len(shapes) > 1:
        raise pytest.UsageError(f"roost_cluster is one cluster per module, but its tests ask for different "
                                f"ones: {wanted}")
    return next(iter(wanted.values()), {})


@pytest.fixture(scope="module")
def roost_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A cluster of broker processes and a keeper ensemble, for this module, with fault injection
    (`kill`, `stop`, `restart`, `stop_keeper`, `start_keeper`, `expire_session`). Skipped with
    --roost-bootstrap: faults cannot be injected into an external cluster."""
    if external_cluster(request.config) is not None:
        pytest.skip("roost_cluster injects faults into processes it starts; with --roost-bootstrap "
                    "(an external cluster) it cannot")
    from roost.testing.cluster import RoostCluster

    cluster = RoostCluster.start(tmp_path_factory.mktemp("roost-cluster"), **_cluster_options(request))
    try:
        yield cluster
    finally:
        cluster.close()
