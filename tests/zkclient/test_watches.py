"""One-shot watches, against a keeper and a real ZooKeeper: each fires once, with the right
event, on the loop, before the caller of a later request resumes."""

from __future__ import annotations

import asyncio

from roost.wire.zk.constants import EventType, KeeperState
from roost.zkclient import WatchedEvent
from tests.zkclient.conftest import Server
from tests.zkclient.support import Events, connected, round_trip, run, unique


def _seen(events: Events) -> list[tuple[str, str]]:
    return [(e.type.name, e.path) for e in events.items]


def test_data_exist_and_child_watches_fire_once(server: Server) -> None:
    async def scenario() -> None:
        zk, _ = await connected(server.address)
        other, _ = await connected(server.address)
        root = unique("watch")
        try:
            await zk.create(root, b"")
            await zk.create(f"{root}/d", b"0")
            data, exist, child, missing = Events(), Events(), Events(), Events()
            await zk.get(f"{root}/d", watch=data)
            await zk.exists(f"{root}/d", watch=exist)
            await zk.get_children(root, watch=child)
            assert await zk.exists(f"{root}/later", watch=missing) is None

            await other.set(f"{root}/d", b"1")
            await other.set(f"{root}/d", b"2")  # the watches were one-shot: no second event
            await other.create(f"{root}/later")
            await other.create(f"{root}/more")
            await round_trip(other)
            await round_trip(zk)
            assert _seen(data) == [("NODE_DATA_CHANGED", f"{root}/d")]
            assert _seen(exist) == [("NODE_DATA_CHANGED", f"{root}/d")]
            assert _seen(missing) == [("NODE_CREATED", f"{root}/later")]
            assert _seen(child) == [("NODE_CHILDREN_CHANGED", root)]
            assert all(e.state is KeeperState.SYNC_CONNECTED for e in data.items + child.items)
        finally:
            await zk.close()
            await other.close()

    run(scenario)


def test_deletion_fires_data_and_child_watches(server: Server) -> None:
    async def scenario() -> None:
        zk, _ = await connected(server.address)
        other, _ = await connected(server.address)
        root = unique("watch-delete")
        try:
            await zk.create(root, b"")
            data, child = Events(), Events()
            await zk.get(root, watch=data)
            await zk.get_children(root, watch=child)
            await other.delete(root)
            await round_trip(zk)
            assert _seen(data) == [("NODE_DELETED", root)]
            assert _seen(child) == [("NODE_DELETED", root)]
        finally:
            await zk.close()
            await other.close()

    run(scenario)


def test_one_watcher_on_two_reads_fires_once_and_coroutines_and_queues_work(server: Server) -> None:
    async def scenario() -> None:
        zk, _ = await connected(server.address)
        root = unique("watch-kinds")
        try:
            await zk.create(root, b"")
            both = Events()
            await zk.get(root, watch=both)
            await zk.exists(root, watch=both)
            ran_in_task: list[WatchedEvent] = []

            async def coroutine_watcher(event: WatchedEvent) -> None:
                await asyncio.sleep(0)
                ran_in_task.append(event)

            await zk.get(root, watch=coroutine_watcher)
            queue: asyncio.Queue[WatchedEvent] = asyncio.Queue()
            await zk.exists(root, watch=queue.put_nowait)
            await zk.set(root, b"x")
            event = await asyncio.wait_for(queue.get(), 30)
            assert (event.type, event.path) == (EventType.NODE_DATA_CHANGED, root)
            await round_trip(zk)
            await asyncio.sleep(0)
            assert _seen(both) == [("NODE_DATA_CHANGED", root)]
            assert [(e.type, e.path) for e in ran_in_task] == [(EventType.NODE_DATA_CHANGED, root)]
        finally:
            await zk.close()

    run(scenario)


def test_watch_runs_before_the_writer_resumes(server: Server) -> None:
    """ZooKeeper sends a notification before the reply of the write that caused it; the client
    keeps that order on the loop, so a client that watches its own write has seen the event by
    the time its `await set(...)` returns."""

    async def scenario() -> None:
        zk, _ = await connected(server.address)
        root = unique("watch-order")
        try:
            await zk.create(root, b"")
            for round_ in range(20):
                events = Events()
                await zk.get(root, watch=events)
                await zk.set(root, f"{round_}".encode())
                assert _seen(events) == [("NODE_DATA_CHANGED", root)], round_
        finally:
            await zk.close()

    run(scenario)
