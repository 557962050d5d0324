"""A client's member dies: kazoo, connected to one member of a three-keeper ensemble, sees that
member killed with kill -9 (once a follower, once the leader) and must move to another member
within its session timeout with its session, its ephemeral znode and its watches intact (kazoo's
DataWatch and ChildrenWatch recipes, which set their watches again on reconnect: kazoo sends no
SetWatches); the session must then outlive another session timeout (the member it moved to keeps it
alive).

Behaviour only: how fast the ensemble recovers is `bench/keeper_failover_bench.py`'s business."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from tests.keeper.zkharness import four_letter, keeper_ensemble, unique_root, wait_until
from tests.support.procs import RoostProcess, start_roost

pytestmark = pytest.mark.slow

TICK_MS = 1000  # sessions of 3 s (the smallest a member grants is 2 ticks), so that outliving one is cheap
SESSION_TIMEOUT = 3.0


def _mode(address: str) -> str:
    try:
        for line in four_letter(address, "srvr", timeout=2).splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "down"


def _zxid(address: str) -> int:
    try:
        for line in four_letter(address, "srvr", timeout=2).splitlines():
            if line.startswith("Zxid:"):
                return int(line.split(":", 1)[1].strip(), 16)
    except OSError:
        pass
    return -1


def _peer(client: KazooClient) -> str:
    """The member kazoo's socket is connected to, "" while it has none."""
    try:
        host, port = client._connection._socket.getpeername()[:2]
    except (OSError, AttributeError):
        return ""
    return f"{host}:{port}"


class Keepers:
    def __init__(self, procs: list[RoostProcess]) -> None:
        self.procs = procs
        self.addresses = [proc.address("keeper") for proc in procs]

    def healthy(self) -> list[str]:
        def ready() -> list[str] | None:
            modes = [_mode(address) for address in self.addresses]
            return modes if modes.count("leader") == 1 and modes.count("follower") == 2 else None

        return wait_until(ready, 60, "one leader and two followers", interval=0.1)

    def restart(self, index: int) -> None:
        self.procs[index] = start_roost(self.procs[index].args, expect=("keeper",))


@pytest.fixture(scope="module")
def keepers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Keepers]:
    directory: Path = tmp_path_factory.mktemp("keepers-death")
    with keeper_ensemble(directory, extra={"tickTime": TICK_MS}, fixed_client_ports=True) as procs:
        cluster = Keepers(procs)
        try:
            yield cluster
        finally:
            for proc in cluster.procs:  # the restarted ones are not in keeper_ensemble's list
                proc.stop()


@pytest.mark.parametrize("role", ["follower", "leader"])
def test_client_moves_off_a_killed_member_with_session_ephemeral_and_watches(keepers: Keepers, role: str) -> None:
    modes = keepers.healthy()
    target = modes.index(role)
    # Survivors that are followers first: kazoo moves to the first, so that when a follower dies
    # the session lands on the other follower (whose touches must reach the leader).
    others = sorted((a for k, a in enumerate(keepers.addresses) if k != target),
                    key=lambda a: modes[keepers.addresses.index(a)] == "leader")
    client = KazooClient(hosts=",".join([keepers.addresses[target], *others]), randomize_hosts=False,
                         timeout=SESSION_TIMEOUT)
    observer = KazooClient(hosts=others[0], timeout=10.0)
    states: list[KazooState] = []
    client.add_listener(states.append)
    client.start(timeout=30)
    observer.start(timeout=30)
    try:
        assert _peer(client) == keepers.addresses[target]
        assert _mode(keepers.addresses[target]) == role
        root = unique_root(f"death-{role}")
        client.create(root, b"before", makepath=True)
        ephemeral = client.create(f"{root}/owner", b"mine", ephemeral=True)
        # kazoo (2.11) sends no SetWatches: on any connection loss it fires its one-shot watches with
        # a NONE event and forgets them, and its DataWatch / ChildrenWatch recipes set them again
        # once reconnected. Those recipes are how kazoo's users keep watching across a move.
        seen_data: list[bytes] = []
        seen_children: list[list[str]] = []
        DataWatch(client, root, lambda data, stat: seen_data.append(data))
        ChildrenWatch(client, root, lambda children: seen_children.append(sorted(children)))
        session = client.client_id
        seen = client.last_zxid
        # A member refuses a session that has seen more than it applied: let the survivors catch up.
        wait_until(lambda: all(_zxid(a) >= seen for a in others), 30, "the survivors to apply the client's writes")

        keepers.procs[target].kill9()
        wait_until(lambda: client.state == KazooState.CONNECTED and _peer(client) in others,
                   SESSION_TIMEOUT, "kazoo to reconnect to a surviving member within its session timeout")
        assert client.client_id == session
        assert KazooState.LOST not in states

        # The watches were set on the dead member; the recipes set them again on the new one.
        # (The election may still be under way when the client is back: a write then gets
        # ConnectionLoss, as from ZooKeeper, and is retried.)
        observer.retry(observer.set, root, b"after")
        observer.retry(observer.ensure_path, f"{root}/child")
        wait_until(lambda: b"after" in seen_data, 10, f"the data watch to fire after the move: {seen_data}")
        wait_until(lambda: any("child" in c for c in seen_children), 10,
                   f"the child watch to fire after the move: {seen_children}")

        # The session outlives another session timeout on its new member (someone keeps it alive).
        time.sleep(SESSION_TIMEOUT + 1.0)
        assert KazooState.LOST not in states and client.client_id == session
        assert observer.exists(ephemeral) is not None, "the moved session's ephemeral znode is gone"
        assert client.get(root)[0] == b"after"
        client.create(f"{root}/written-after-the-move", b"")
    finally:
        client.stop()
        client.close()
        observer.stop()
        observer.close()
        keepers.restart(target)
