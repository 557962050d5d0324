"""Each broker's watch on /config/changes, against a keeper and a real ZooKeeper: it is told the
entities named by notifications written after it started, in order, once each; it skips what it
cannot read or apply without stopping; and it deletes notifications older than its expiry."""

from __future__ import annotations

import asyncio

from roost.broker.zk import layout
from roost.broker.zk.config_change_listener import ConfigChangeListener
from roost.zkclient import ZkClient
from tests.zkclient.conftest import Server, server  # noqa: F401 - the fixture, with both kinds of server
from tests.zkclient.support import run, unique

PREFIX = f"{layout.CONFIG_CHANGES}/{layout.CONFIG_CHANGE_PREFIX}"


async def notify(zk: ZkClient, entity_path: str) -> None:
    await zk.create(PREFIX, layout.encode_entity_change(entity_path), sequential=True)


def test_notifications_after_the_start_are_handled_in_order_once(server: Server) -> None:  # noqa: F811
    async def scenario() -> None:
        zk = ZkClient(server.address + unique("changes"), session_timeout=10)
        await zk.start()
        await zk.ensure_chroot()
        await zk.ensure_path(layout.CONFIG_CHANGES)
        seen: list[str] = []
        arrived = asyncio.Event()

        async def on_change(entity: str) -> None:
            seen.append(entity)
            arrived.set()
            if entity == "topics/unusable":
                raise ValueError("its configs cannot be used")

        listener = ConfigChangeListener(zk, on_change)
        try:
            await notify(zk, "topics/before")  # applied when partitions open: not replayed
            await listener.start()
            await notify(zk, "topics/a")
            await zk.create(PREFIX, b"not json", sequential=True)
            await notify(zk, "topics/unusable")
            await notify(zk, "brokers/<default>")
            await notify(zk, "topics/a")
            async with asyncio.timeout(30):
                while len(seen) < 4:
                    arrived.clear()
                    await arrived.wait()
            await listener.process()  # nothing new: nothing told again
            assert seen == ["topics/a", "topics/unusable", "brokers/<default>", "topics/a"]
            assert len(await zk.get_children(layout.CONFIG_CHANGES)) == 6  # young: all kept
        finally:
            await listener.stop()
            await zk.close()

    run(scenario)


def test_expired_notifications_are_deleted(server: Server) -> None:  # noqa: F811
    async def scenario() -> None:
        zk = ZkClient(server.address + unique("expiry"), session_timeout=10)
        await zk.start()
        await zk.ensure_chroot()
        await zk.ensure_path(layout.CONFIG_CHANGES)
        seen: list[str] = []

        async def on_change(entity: str) -> None:
            seen.append(entity)

        listener = ConfigChangeListener(zk, on_change, expiry_ms=-1)  # every notification is old
        try:
            await notify(zk, "topics/old")
            await listener.start()
            await notify(zk, "topics/new")
            await listener.process()
            assert seen == ["topics/new"]
            assert await zk.get_children(layout.CONFIG_CHANGES) == []
        finally:
            await listener.stop()
            await zk.close()

    run(scenario)
