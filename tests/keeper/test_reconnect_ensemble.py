"""A reconnect that moves a session to another server: kazoo drops its connection to one member
of a three-member ensemble and reconnects to the next; the session, its ephemeral node and the
client's view must survive. Run against a real three-node ZooKeeper ensemble and three keeper
processes, and compared."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from tests.keeper.zkharness import (
    Recorder,
    four_letter,
    keeper_ensemble,
    serving,
    unique_root,
    wait_until,
    zookeeper_available,
    zookeeper_ensemble,
)
from tests.support import referees

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]


@pytest.fixture(scope="module")
def zookeeper_three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    if not zookeeper_available():
        referees.skip(referees.ZOOKEEPER)
    with zookeeper_ensemble(tmp_path_factory.mktemp("zk-ensemble")) as processes:
        yield [process.address for process in processes]


@pytest.fixture(scope="module")
def keeper_three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    with keeper_ensemble(tmp_path_factory.mktemp("keeper-ensemble")) as procs:
        addresses = [proc.address("keeper") for proc in procs]
        # As zookeeper_ensemble does: every member in the quorum before kazoo dials the first (a
        # member still joining turns a client away, and kazoo would start on another host).
        wait_until(lambda: all(serving(address) for address in addresses), 60, "every keeper serving")
        yield addresses


def _peer(client: KazooClient) -> str:
    """The member the client's socket is connected to, or "" while it has none (kazoo can still
    report CONNECTED for a moment after its socket was shut down under it)."""
    try:
        host, port = client._connection._socket.getpeername()[:2]
    except (OSError, AttributeError):
        return ""
    return f"{host}:{port}"


def _zxid(address: str) -> int:
    for line in four_letter(address, "srvr").splitlines():
        if line.startswith("Zxid:"):
            return int(line.split(":", 1)[1].strip(), 16)
    return -1


def move_session(addresses: list[str]) -> list[tuple[str, object]]:
    client = KazooClient(hosts=",".join(addresses), randomize_hosts=False, timeout=10.0)
    client.start(timeout=60)
    try:
        rec = Recorder(client, unique_root("move"))
        rec.start(b"r")
        r = rec.root
        rec.do("ephemeral", lambda: client.create(f"{r}/eph", b"mine", ephemeral=True))
        rec.do("write", lambda: client.set(r, b"before the move"))
        first = _peer(client)
        rec.note("first member is the first host", addresses.index(first))
        session = client.client_id
        seen = client.last_zxid
        # A member refuses a client that has seen more than it has applied; let the others
        # catch up first so that kazoo's next host accepts the session.
        wait_until(lambda: all(_zxid(address) >= seen for address in addresses), 30,
                   "every member to apply the client's writes")
        client._connection._socket.shutdown(socket.SHUT_RDWR)
        wait_until(lambda: client.state == KazooState.CONNECTED and _peer(client) not in ("", first), 60,
                   "kazoo to reconnect to another member")
        rec.note("moved to another member", _peer(client) != first)
        rec.note("same session", client.client_id == session)
        rec.note("no zxid went backwards", client.last_zxid >= seen)
        rec.do("read own write on the new member", lambda: client.get(r))
        rec.do("ephemeral kept", lambda: client.exists(f"{r}/eph"))
        rec.do("write on the new member", lambda: client.create(f"{r}/after", b"a"))
        rec.do("children", lambda: sorted(client.get_children(r)))
        return rec.records
    finally:
        client.stop()
        client.close()


def test_reconnect_moves_session_like_zookeeper(zookeeper_three: list[str], keeper_three: list[str]) -> None:
    with ThreadPoolExecutor(2) as pool:
        expected = pool.submit(move_session, zookeeper_three)
        actual = pool.submit(move_session, keeper_three)
        expected_records, actual_records = expected.result(), actual.result()
    assert actual_records == expected_records
    assert ("same session", True) in actual_records
