"""Abusive clients on the keeper's ZooKeeper port (docs/hostile-input.md, "Abusive clients"): one
address over `maxClientCnxns` is refused without starving another, and connections that never
ask for a session (idle, or a slow-loris ConnectRequest) are closed after
`zookeeper.nio.sessionlessCnxnTimeout`, as ZooKeeper's NIO server closes them. A kazoo client
is served throughout. One real `roost keeper` process for the module.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tests.keeper.zkharness import keeper_process
from tests.support.abuse import close_all, connect, count_open
from tests.support.procs import RoostProcess

CAP = 20
SESSIONLESS_S = 1.5
OTHER_HOST = "127.0.0.2"


@pytest.fixture(scope="module")
def keeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    with keeper_process(tmp_path_factory.mktemp("keeper-abuse"),
                        extra={"maxClientCnxns": CAP,
                               "zookeeper.nio.sessionlessCnxnTimeout": int(SESSIONLESS_S * 1000)}) as proc:
        yield proc


def kazoo_works(keeper: RoostProcess, path: str) -> None:
    client = KazooClient(hosts=keeper.address("keeper"), timeout=10)
    client.start(timeout=10)
    try:
        client.create(path, b"x", makepath=True)
        assert client.get(path)[0] == b"x"
    finally:
        client.stop()
        client.close()


def test_one_address_over_max_client_cnxns_does_not_starve_another(keeper: RoostProcess) -> None:
    host, port = keeper.listeners["keeper"]
    attacker = []
    try:
        for _ in range(CAP + 30):
            attacker.append(connect(host, port, source=OTHER_HOST))
        deadline = time.monotonic() + 15  # a refused one is closed once the keeper accepts it
        while count_open(attacker) > CAP and time.monotonic() < deadline:
            time.sleep(0.1)
        assert count_open(attacker) == CAP
        kazoo_works(keeper, "/abuse/cap")
    finally:
        close_all(attacker)
    # One line for the flood, not one per refused connection.
    assert keeper.text().count(f"closing connections from {OTHER_HOST}: too many connections") == 1


def test_connections_without_a_session_are_closed(keeper: RoostProcess, tmp_path: Path) -> None:
    host, port = keeper.listeners["keeper"]
    silent = [connect(host, port) for _ in range(10)]
    # A ConnectRequest's length prefix and a few of its bytes, then nothing.
    loris = [connect(host, port) for _ in range(5)]
    for sock in loris:
        sock.sendall(struct.pack(">i", 44) + b"\x00" * 6)
    try:
        kazoo_works(keeper, "/abuse/sessionless")  # a real client gets its session meanwhile
        started = time.monotonic()
        while count_open(silent + loris):
            assert time.monotonic() - started < SESSIONLESS_S + 5, \
                f"{count_open(silent + loris)} connections without a session still open"
            time.sleep(0.1)
    finally:
        close_all(silent)
        close_all(loris)
    assert "no session asked for within zookeeper.nio.sessionlessCnxnTimeout" in keeper.text()
