"""Sessions across connection trouble, against a keeper and a real ZooKeeper: a reconnect keeps
the session and re-arms watches (a change made while disconnected fires at once); an expired
session is reported and replaced by a new one with the old ephemerals gone; garbage from the
server drops the connection with a clear reason and the client reconnects.

The client reaches the server through a proxy: roost's fault proxy (cut, blackhole, heal) or a
corrupting one from tests/zkclient/support.py."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator

import pytest

from roost.wire.zk.connection import encode_reply
from roost.wire.zk.constants import EventType, KeeperState, OpCode
from roost.wire.zk.records import EmptyRequest
from roost.zkclient import (
    ConnectionLossError,
    SessionExpiredError,
    SessionState,
    ZkClient,
)
from tests.keeper.zkharness import RawClient
from tests.support.faultproxy import FaultProxy
from tests.support.procs import free_ports
from tests.zkclient.conftest import Server
from tests.zkclient.support import CorruptingProxy, Events, connected, round_trip, run, unique


@contextlib.asynccontextmanager
async def fault_proxy(server: Server) -> AsyncIterator[tuple[FaultProxy, str]]:
    proxy = FaultProxy(server.host_port)
    host, port = await proxy.start()
    try:
        yield proxy, f"{host}:{port}"
    finally:
        await proxy.stop()


async def _gone(client: ZkClient, path: str, timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while True:
            await client.sync(path)
            if await client.exists(path) is None:
                return
            await asyncio.sleep(0.05)


def test_reconnect_keeps_session_and_rearms_watches_for_changes_missed(server: Server) -> None:
    async def scenario() -> None:
        async with fault_proxy(server) as (proxy, address):
            zk, events = await connected(address, session_timeout=10)
            other, _ = await connected(server.address)
            root = unique("rearm")
            try:
                await zk.create(root, b"")
                await zk.create(f"{root}/c", b"0")
                await zk.create(f"{root}/eph", b"", ephemeral=True)
                data, child, exist, quiet = Events(), Events(), Events(), Events()
                await zk.get(f"{root}/c", watch=data)
                await zk.get_children(root, watch=child)
                assert await zk.exists(f"{root}/new", watch=exist) is None
                await zk.exists(f"{root}/eph", watch=quiet)  # nothing happens to it
                session = zk.session_id
                mark = len(events.items)

                proxy.cut()  # the connection closes; reconnects are refused until heal()
                suspended = await events.state(SessionState.SUSPENDED, start=mark)
                assert suspended.session_id == session
                await other.set(f"{root}/c", b"changed while away")
                await other.create(f"{root}/new", b"")
                assert data.items == [] and child.items == [] and exist.items == []
                proxy.heal()
                resumed = await events.state(SessionState.CONNECTED, start=mark)
                assert not resumed.new_session and resumed.session_id == session == zk.session_id
                await data.wait_for(lambda e: True)
                await child.wait_for(lambda e: True)
                await exist.wait_for(lambda e: True)
                await round_trip(zk)
                assert [(e.type, e.path) for e in data.items] == [(EventType.NODE_DATA_CHANGED, f"{root}/c")]
                assert [(e.type, e.path) for e in child.items] == [(EventType.NODE_CHILDREN_CHANGED, root)]
                assert [(e.type, e.path) for e in exist.items] == [(EventType.NODE_CREATED, f"{root}/new")]
                assert quiet.items == []
                # One-shot: further changes tell nobody.
                await other.set(f"{root}/c", b"again")
                await other.create(f"{root}/newer", b"")
                await round_trip(zk)
                assert len(data.items) == len(child.items) == len(exist.items) == 1
                assert (await other.get(f"{root}/eph"))[1].ephemeral_owner == session
            finally:
                await zk.close()
                await other.close()

    run(scenario)


def _close_session_elsewhere(address: str, session_id: int, passwd: bytes) -> int:
    """Take the session over from another connection and close it (the server expires it)."""
    raw = RawClient(address, timeout_ms=10_000, session_id=session_id, passwd=passwd)
    try:
        assert raw.response.timeout > 0, "the session should still be alive"
        return raw.request(EmptyRequest(OpCode.CLOSE_SESSION)).err
    finally:
        raw.sock.close()


def test_session_ended_by_the_server_is_reported_and_replaced(server: Server) -> None:
    async def scenario() -> None:
        async with fault_proxy(server) as (proxy, address):
            zk, events = await connected(address, session_timeout=10)
            observer, _ = await connected(server.address)
            root = unique("expired")
            try:
                await zk.create(root, b"")
                await zk.create(f"{root}/eph", b"", ephemeral=True)
                watch = Events()
                await zk.get(root, watch=watch)
                old_session, passwd = zk.client_id
                mark = len(events.items)
                proxy.cut()
                await events.state(SessionState.SUSPENDED, start=mark)
                assert await asyncio.to_thread(_close_session_elsewhere, server.address, old_session, passwd) == 0
                await _gone(observer, f"{root}/eph")
                proxy.heal()

                expired = await events.state(SessionState.EXPIRED, start=mark)
                assert expired.session_id == old_session and "expired" in expired.reason
                fresh = await events.state(SessionState.CONNECTED, start=mark)
                assert fresh.new_session and fresh.session_id not in (0, old_session)
                assert zk.session_id == fresh.session_id and zk.state is SessionState.CONNECTED
                expired_watch = await watch.wait_for(lambda e: True)
                assert (expired_watch.type, expired_watch.state, expired_watch.path) == \
                    (EventType.NONE, KeeperState.EXPIRED, root)
                # The broker re-registers its ephemerals in the new session.
                await zk.create(f"{root}/eph", b"", ephemeral=True)
                assert (await observer.get(f"{root}/eph"))[1].ephemeral_owner == fresh.session_id
            finally:
                await zk.close()
                await observer.close()

    run(scenario)


def test_no_server_within_the_session_timeout_expires_the_session_locally(server: Server) -> None:
    async def scenario() -> None:
        async with fault_proxy(server) as (proxy, address):
            zk, events = await connected(address, session_timeout=2)
            observer, _ = await connected(server.address)
            root = unique("local-expiry")
            try:
                assert zk.session_timeout == 2.0
                await zk.create(root, b"")
                await zk.create(f"{root}/eph", b"", ephemeral=True)
                watch = Events()
                await zk.exists(f"{root}/eph", watch=watch)
                old_session = zk.session_id
                mark = len(events.items)

                proxy.blackhole()  # silence: the connection stays open, nothing comes back
                in_flight = asyncio.ensure_future(zk.get(root))
                suspended = await events.state(SessionState.SUSPENDED, start=mark)
                assert "no data" in suspended.reason
                with pytest.raises(ConnectionLossError):
                    await in_flight
                waiting = asyncio.ensure_future(zk.get(root))  # no connection: it waits
                expired = await events.state(SessionState.EXPIRED, start=mark)
                assert expired.session_id == old_session and "session timeout" in expired.reason
                with pytest.raises(SessionExpiredError):
                    await waiting
                expired_watch = await watch.wait_for(lambda e: True)
                assert expired_watch.state is KeeperState.EXPIRED

                proxy.cut()
                proxy.heal()
                fresh = await events.state(SessionState.CONNECTED, start=mark)
                assert fresh.new_session and fresh.session_id != old_session
                await _gone(observer, f"{root}/eph")
                assert (await zk.get(root))[0] == b""
                states = [e.state for e in events.items[mark:]]
                assert states == [SessionState.SUSPENDED, SessionState.EXPIRED, SessionState.CONNECTED]
            finally:
                await zk.close()
                await observer.close()

    run(scenario)


@pytest.mark.parametrize("garbage", [
    pytest.param(struct.pack("!i", 0x7FFFFFFF), id="frame-too-long"),
    pytest.param(encode_reply(987_654, 1, 0), id="reply-to-no-request"),
    pytest.param(struct.pack("!i", 6) + b"\x00" * 6, id="reply-header-truncated"),
])
def test_garbage_from_the_server_drops_the_connection_and_the_client_reconnects(
        server: Server, garbage: bytes) -> None:
    async def scenario() -> None:
        proxy = CorruptingProxy(server.host_port)
        address = await proxy.start()
        zk, events = await connected(address, session_timeout=10)
        root = unique("garbage")
        try:
            await zk.create(root, b"fine")
            session = zk.session_id
            mark = len(events.items)
            proxy.corrupt(garbage)
            with pytest.raises(ConnectionLossError, match="malformed"):
                await zk.get(root)
            assert proxy.injected == 1
            suspended = await events.state(SessionState.SUSPENDED, start=mark)
            assert "malformed" in suspended.reason
            resumed = await events.state(SessionState.CONNECTED, start=mark)
            assert not resumed.new_session and zk.session_id == session
            assert (await zk.get(root))[0] == b"fine"
        finally:
            await zk.close()
            await proxy.stop()

    run(scenario)


def test_start_gives_up_when_no_server_answers() -> None:
    async def scenario() -> None:
        (port,) = free_ports(1)
        zk = ZkClient(f"127.0.0.1:{port}", session_timeout=2)
        with pytest.raises(ConnectionLossError, match="answered"):
            await zk.start(timeout=1.0)
        assert zk.state is SessionState.CLOSED

    run(scenario)


def test_heartbeats_keep_an_idle_session_past_its_timeout(server: Server) -> None:
    async def scenario() -> None:
        zk, events = await connected(server.address, session_timeout=2)
        try:
            session = zk.session_id
            await zk.create(unique("idle"), b"", ephemeral=True)
            await asyncio.sleep(3.0)  # idle for longer than the session timeout: only pings flow
            assert zk.session_id == session and zk.state is SessionState.CONNECTED
            assert [e.state for e in events.items] == [SessionState.CONNECTED]
            await round_trip(zk)
        finally:
            await zk.close()

    run(scenario)
