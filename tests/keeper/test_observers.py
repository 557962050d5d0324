"""Observers: three voting `roost keeper` processes and one observer (`server.4 =
"127.0.0.1:port:observer"`), driven by kazoo clients connected to the observer.

The observer serves reads, forwarded writes, watches and sessions (with their ephemerals); it
says `Mode: observer` (srvr) and `zk_server_state observer` (mntr) as ZooKeeper does; and it never
counts toward a quorum: with two of the three voters killed, a write through it does not succeed
although it and one voter are still up.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from tests.keeper.zkharness import four_letter, kazoo, keeper_ensemble, unique_root, wait_until
from tests.support.procs import RoostProcess

pytestmark = pytest.mark.slow

OBSERVER = 4


def modes(procs: list[RoostProcess]) -> dict[int, str]:
    out = {}
    for sid, proc in enumerate(procs, start=1):
        try:
            text = four_letter(proc.address("keeper"), "srvr", timeout=5.0)
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("Mode: "):
                out[sid] = line.removeprefix("Mode: ")
    return out


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[RoostProcess]]:
    with keeper_ensemble(Path(tmp_path_factory.mktemp("observers")), size=4,
                         observers=frozenset({OBSERVER})) as procs:
        wait_until(lambda: sorted(modes(procs).values()) == ["follower", "follower", "leader", "observer"],
                   60, "a leader, two followers and the observer")
        yield procs


def client_on(proc: RoostProcess) -> KazooClient:
    return kazoo(proc.address("keeper"))


def test_the_observer_reports_its_mode(ensemble: list[RoostProcess]) -> None:
    address = ensemble[OBSERVER - 1].address("keeper")
    assert "Mode: observer" in four_letter(address, "srvr")
    mntr = dict(line.split("\t", 1) for line in four_letter(address, "mntr").splitlines() if "\t" in line)
    assert mntr["zk_server_state"] == "observer"
    conf = four_letter(address, "conf")
    assert f"server.{OBSERVER}=" in conf and ":observer" in conf


def test_the_observer_serves_reads_writes_watches_and_sessions(ensemble: list[RoostProcess]) -> None:
    root = unique_root("observer")
    on_observer = client_on(ensemble[OBSERVER - 1])
    on_voter = client_on(ensemble[0])
    try:
        on_observer.create(root, b"v0", makepath=True)  # forwarded to the leader
        on_observer.create(f"{root}/eph", b"mine", ephemeral=True)
        on_voter.sync(root)
        assert on_voter.get(root)[0] == b"v0"
        owner = on_voter.exists(f"{root}/eph").ephemeralOwner
        assert owner == on_observer.client_id[0]
        # A watch set on the observer fires for a change made through a voter.
        fired = threading.Event()
        seen: list[str] = []

        def on_change(event: object) -> None:
            seen.append(getattr(event, "type", "?"))
            fired.set()

        assert on_observer.get(root, watch=on_change)[0] == b"v0"
        on_voter.set(root, b"v1")
        assert fired.wait(20), "the observer's watch never fired"
        assert seen == ["CHANGED"]
        on_observer.sync(root)
        assert on_observer.get(root)[0] == b"v1"
        # The observer's session is the ensemble's: its ephemeral goes when it closes.
        on_observer.stop()
        on_observer.close()
        wait_until(lambda: on_voter.exists(f"{root}/eph") is None, 30, "the ephemeral to go")
    finally:
        for client in (on_observer, on_voter):
            client.stop()
            client.close()


def test_the_observer_never_counts_toward_a_quorum(ensemble: list[RoostProcess]) -> None:
    """Last in this module: it kills two voters."""
    root = unique_root("no-quorum")
    on_observer = client_on(ensemble[OBSERVER - 1])
    try:
        on_observer.create(root, b"before", makepath=True)
        # Kill two voters: the third voter and the observer are up, which would be a majority of
        # four if the observer counted.
        for sid in (1, 2):
            ensemble[sid - 1].kill9()
        attempt = on_observer.create_async(f"{root}/after", b"x")
        with pytest.raises((KazooException, KazooTimeoutError)):  # no quorum: no acknowledgement
            attempt.get(timeout=8.0)
        assert ensemble[OBSERVER - 1].popen.poll() is None, "the observer died"
        assert modes(ensemble).get(OBSERVER) in (None, "observer")
        assert modes(ensemble).get(3) != "leader", "one voter of three stayed leader"
    finally:
        on_observer.stop()
        on_observer.close()
