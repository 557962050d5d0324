"""Reconnect across a 3-member ensemble (keepers, and real ZooKeeper): kill -9 the member the
client is connected to; the client moves to another member with the same session, its ephemeral
node stays, and a watch set before the kill fires for a change made after it."""

from __future__ import annotations

import asyncio

import pytest

from roost.wire.zk.constants import EventType
from roost.zkclient import ConnectionLossError, SessionState, ZkClient
from tests.keeper.zkharness import four_letter
from tests.zkclient.conftest import Ensemble
from tests.zkclient.support import Events, connected, round_trip, run, unique


def _mode(address: str) -> str:
    try:
        for line in four_letter(address, "srvr", timeout=2.0).splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "down"


async def _member_with_role(addresses: list[str], role: str, timeout: float = 60.0) -> int:
    """The index of a member in `role` once the ensemble has one leader and the rest following."""
    async with asyncio.timeout(timeout):
        while True:
            modes = await asyncio.gather(*(asyncio.to_thread(_mode, a) for a in addresses))
            if modes.count("leader") == 1 and modes.count("follower") == len(addresses) - 1:
                return modes.index(role)
            await asyncio.sleep(0.1)


def _zxid(address: str) -> int:
    try:
        for line in four_letter(address, "srvr", timeout=2.0).splitlines():
            if line.startswith("Zxid:"):
                return int(line.split(":", 1)[1].strip(), 16)
    except OSError:
        pass
    return -1


async def _all_members_reach(addresses: list[str], zxid: int, timeout: float = 30.0) -> None:
    """A member refuses a client that has seen more than it has applied (ZooKeeper does); wait
    until every member has applied what the client saw, so any of them may take the session."""
    async with asyncio.timeout(timeout):
        while min(await asyncio.gather(*(asyncio.to_thread(_zxid, a) for a in addresses))) < zxid:
            await asyncio.sleep(0.05)


async def _write_with_retries(client: ZkClient, path: str, data: bytes, attempts: int = 400) -> None:
    """A write from a client whose member may itself drop it during an election."""
    for _ in range(attempts):
        try:
            await client.set(path, data)
            return
        except ConnectionLossError:
            await asyncio.sleep(0.05)
    raise AssertionError(f"no write to {path} succeeded in {attempts} attempts")


@pytest.mark.parametrize("role", ["leader", "follower"])
def test_kill_the_member_the_client_is_on(ensemble: Ensemble, role: str) -> None:
    addresses = ensemble.addresses
    victim: list[int] = []

    async def scenario() -> None:
        first = await _member_with_role(addresses, role)
        ordered = addresses[first:] + addresses[:first]  # the client starts on the member in `role`
        zk, events = await connected(",".join(ordered), session_timeout=10, randomize_hosts=False)
        assert zk.server == addresses[first]
        root = unique("member-kill")
        other: ZkClient | None = None
        try:
            await zk.create(root, b"")
            await zk.create(f"{root}/eph", b"mine", ephemeral=True)
            data, children = Events(), Events()
            await zk.get(root, watch=data)
            await zk.get_children(root, watch=children)
            session = zk.session_id
            assert zk.server is not None
            victim.append(addresses.index(zk.server))
            other, _ = await connected(addresses[(victim[0] + 1) % len(addresses)])
            await _all_members_reach(addresses, zk.last_zxid)
            mark = len(events.items)

            await asyncio.to_thread(ensemble.kill, victim[0])
            suspended = await events.state(SessionState.SUSPENDED, start=mark)
            assert suspended.session_id == session
            resumed = await events.state(SessionState.CONNECTED, start=mark, timeout=45)
            assert not resumed.new_session and resumed.session_id == session == zk.session_id
            assert resumed.server != addresses[victim[0]] and zk.server == resumed.server

            data_now, stat = await zk.get(f"{root}/eph")
            assert data_now == b"mine" and stat.ephemeral_owner == session
            assert data.items == [] and children.items == []
            await _write_with_retries(other, root, b"after the kill")
            await other.create(f"{root}/child", b"")
            event = await data.wait_for(lambda e: True)
            assert (event.type, event.path) == (EventType.NODE_DATA_CHANGED, root)
            event = await children.wait_for(lambda e: True)
            assert (event.type, event.path) == (EventType.NODE_CHILDREN_CHANGED, root)
            await round_trip(zk)
            assert len(data.items) == len(children.items) == 1
            assert (await other.get(f"{root}/eph"))[1].ephemeral_owner == session
        finally:
            await zk.close()
            if other is not None:
                await other.close()

    try:
        run(scenario)
    finally:
        if victim:
            ensemble.restart(victim[0])
