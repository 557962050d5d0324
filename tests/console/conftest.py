"""One real cluster (three keepers, three brokers: tests/support/cluster.py) for the console's
tests, with a `roost console` process in front of it and a read-only one beside, and one headless
Debian chromium driven by Playwright."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.registry.local_registry import local_registry
from tests.support import referees
from tests.support.cluster import LocalCluster
from tests.support.procs import RoostProcess, start_roost, wait_for

CHROMIUM = Path("/usr/bin/chromium")
# Playwright's own browser download does not work here; Debian's chromium runs headless with these.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


@dataclass
class Answer:
    status: int
    body: Any


@dataclass
class ConsoleProcess:
    process: RoostProcess

    @property
    def url(self) -> str:
        return f"http://{self.process.address('console')}"

    def call(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
             raw: bytes | None = None) -> Answer:
        """One request to the console's API; its status and JSON answer (errors included)."""
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if body is not None:
            request.add_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return Answer(response.status, json.loads(response.read()))
        except urllib.error.HTTPError as error:
            return Answer(error.code, json.loads(error.read() or b"null"))

    def get(self, path: str) -> Any:
        answer = self.call("GET", path)
        assert answer.status == 200, answer
        return answer.body


@pytest.fixture(scope="package")
def console_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    # Each broker serves its Prometheus metrics on a free port ("broker N metrics" listener).
    # The balancer page's test: load samples each second (not 30 s), and a replication throttle
    # measured over 2 windows of 1 s (not 11) on fetches of at most 64 kB a partition (not 1 MB),
    # so that a throttled move of a few hundred kB lasts seconds instead of passing whole in the
    # first windows' allowance or in one fetch.
    cluster = LocalCluster.start(tmp_path_factory.mktemp("console-cluster"), brokers=3, keepers=3,
                                 settings={"metrics.port": 0, "balancer.load.sample.interval.ms": 1000,
                                           "balancer.load.windows": 2, "replication.quota.window.num": 2,
                                           "replica.fetch.max.bytes": 65_536})
    try:
        yield cluster
    finally:
        cluster.close()


def start_console(cluster: LocalCluster, *flags: str) -> Iterator[ConsoleProcess]:
    process = start_roost(["console", "-b", cluster.bootstrap, "--zookeeper", cluster.zookeeper, "--port", "0",
                           *flags], expect=("console",))
    try:
        yield ConsoleProcess(process)
    finally:
        process.stop()


def metrics_flags(cluster: LocalCluster) -> list[str]:
    """--broker-metrics for each broker's /metrics (the share group page's in-flight figures)."""
    flags = []
    for node in cluster.brokers.values():
        process, name = node.process, f"broker {node.broker_id} metrics"
        assert process is not None
        wait_for(lambda p=process, n=name: n in p.listeners, 30, what=f"{name} listening")  # said after the kafka one
        flags += ["--broker-metrics", f"http://{process.address(name)}/metrics"]
    return flags


@pytest.fixture(scope="package")
def registry_url() -> Iterator[str]:
    """Roost's schema registry served over real HTTP from this process, on an in-memory
    `_schemas` (tests/registry/local_registry.py), for the console's schema pages: a `roost
    schema-registry` process on the cluster took 17 s to start at load, and tests/registry covers
    the one that stores in Kafka."""
    served: list[str] = []
    ready, stop = threading.Event(), threading.Event()

    def serve() -> None:  # a thread of its own: Playwright's sync API holds the main thread's event loop
        with local_registry() as (url, _registry):
            served.append(url)
            ready.set()
            stop.wait()

    thread = threading.Thread(target=serve, name="console-test-registry", daemon=True)
    thread.start()
    try:
        assert ready.wait(30), "the registry did not start"
        yield served[0]
    finally:
        stop.set()
        thread.join(30)


@pytest.fixture(scope="package")
def console(console_cluster: LocalCluster, registry_url: str) -> Iterator[ConsoleProcess]:
    """The console most tests use: with each broker's /metrics and the schema registry (the
    read-only one has neither)."""
    yield from start_console(console_cluster, *metrics_flags(console_cluster), "--schema-registry", registry_url)


@pytest.fixture(scope="package")
def read_only_console(console_cluster: LocalCluster) -> Iterator[ConsoleProcess]:
    yield from start_console(console_cluster, "--read-only")


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        referees.skip("Debian's chromium at /usr/bin/chromium (make test installs it)")
    sync_playwright = referees.import_or_skip("playwright.sync_api", "Playwright").sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield opened
    finally:
        context.close()
    assert not errors, f"script errors in the page: {errors}"
