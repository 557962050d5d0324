"""Fixtures: the same tests run against a keeper process and a real Apache ZooKeeper 3.8.

Servers are shared: one standalone of each kind per test session (`server`), and one 3-member
ensemble of each kind per module that asks for `ensemble`. Both kinds run with tickTime 500 ms,
so session timeouts from 1 s to 10 s are granted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.keeper.zkharness import (
    ZooKeeperProcess,
    keeper_ensemble,
    keeper_process,
    wait_serving,
    zookeeper_available,
    zookeeper_ensemble,
    zookeeper_standalone,
)
from tests.support.procs import RoostProcess, start_roost

KINDS = ["keeper", "zookeeper"]


@dataclass
class Server:
    kind: str
    address: str

    @property
    def host_port(self) -> tuple[str, int]:
        host, port = self.address.rsplit(":", 1)
        return host, int(port)


def _need_zookeeper(kind: str) -> None:
    if kind == "zookeeper" and not zookeeper_available():
        pytest.skip("needs java and Debian's zookeeper package (make test installs them)")


@pytest.fixture(scope="session", params=KINDS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    kind = request.param
    _need_zookeeper(kind)
    directory = tmp_path_factory.mktemp(f"zkclient-{kind}")
    if kind == "keeper":
        with keeper_process(directory) as proc:
            yield Server(kind, proc.address("keeper"))
    else:
        with zookeeper_standalone(directory) as process:
            yield Server(kind, process.address)


@dataclass
class Ensemble:
    """Three members of one kind; `kill(i)` is kill -9 and `restart(i)` brings it back on the
    same client port with its data."""

    kind: str
    keepers: list[RoostProcess]
    zookeepers: list[ZooKeeperProcess]

    @property
    def addresses(self) -> list[str]:
        if self.kind == "keeper":
            return [proc.address("keeper") for proc in self.keepers]
        return [process.address for process in self.zookeepers]

    def kill(self, index: int) -> None:
        if self.kind == "keeper":
            self.keepers[index].kill9()
        else:
            self.zookeepers[index].kill9()

    def restart(self, index: int) -> None:
        if self.kind == "keeper":
            # The list is the one keeper_ensemble stops at the end, so the new process is stopped too.
            self.keepers[index] = start_roost(self.keepers[index].args, expect=("keeper",))
        else:
            self.zookeepers[index].restart()
            wait_serving(self.zookeepers[index])


@pytest.fixture(scope="module", params=KINDS)
def ensemble(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ensemble]:
    kind = request.param
    _need_zookeeper(kind)
    directory = tmp_path_factory.mktemp(f"zkclient-{kind}-ensemble")
    if kind == "keeper":
        with keeper_ensemble(directory, fixed_client_ports=True) as procs:
            yield Ensemble(kind, procs, [])
    else:
        with zookeeper_ensemble(directory) as processes:
            yield Ensemble(kind, [], processes)
