"""ZooKeeper calls as effects: what an activity (a generator that decides and does no I/O, see
`roost.broker.activity.effects`) yields to read or write ZooKeeper, and how a broker performs them
on its `ZkClient`.

An activity is resumed with the call's result, or has the `ZkError` thrown in. The replication
simulation performs the same effects on its simulated ZooKeeper (tests/sim/replication/shell.py).
A watch is a callback called once with an event that has the watched `path`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from roost.zkclient import Op, ZkClient, ZkError

WatchCallback = Callable[[Any], None]


@dataclass(slots=True)
class ZkGet:
    """Resumed with (data, stat)."""

    path: str
    watch: WatchCallback | None = None


@dataclass(slots=True)
class ZkChildren:
    """Resumed with the child names."""

    path: str
    watch: WatchCallback | None = None


@dataclass(slots=True)
class ZkExists:
    """Resumed with the stat, or None."""

    path: str
    watch: WatchCallback | None = None


@dataclass(slots=True)
class ZkCreate:
    path: str
    data: bytes = b""
    ephemeral: bool = False


@dataclass(slots=True)
class ZkDelete:
    path: str
    version: int = -1


@dataclass(slots=True)
class ZkMulti:
    """All or none; the failing op's error is thrown in."""

    ops: list[Op]


ZkCall = ZkGet | ZkChildren | ZkExists | ZkCreate | ZkDelete | ZkMulti


@dataclass(slots=True)
class ZkBatch:
    """Independent calls the shell may make concurrently (a broker pipelines them); resumed with
    one outcome per call, in order: its result, or the ZkError it failed with."""

    calls: list[ZkCall]


ZkEffect = ZkCall | ZkBatch
ZK_EFFECTS = (ZkGet, ZkChildren, ZkExists, ZkCreate, ZkDelete, ZkMulti, ZkBatch)  # for isinstance


async def perform_zk(zk: ZkClient, effect: ZkEffect) -> Any:
    """A broker's ZooKeeper client makes the call (ZkError raised as the client raises it)."""
    if isinstance(effect, ZkBatch):
        outcomes = await asyncio.gather(*(perform_zk(zk, call) for call in effect.calls), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not isinstance(outcome, ZkError):
                raise outcome
        return outcomes
    if isinstance(effect, ZkGet):
        return await zk.get(effect.path, watch=effect.watch)
    if isinstance(effect, ZkChildren):
        return await zk.get_children(effect.path, watch=effect.watch)
    if isinstance(effect, ZkExists):
        return await zk.exists(effect.path, watch=effect.watch)
    if isinstance(effect, ZkCreate):
        return await zk.create(effect.path, effect.data, ephemeral=effect.ephemeral)
    if isinstance(effect, ZkDelete):
        return await zk.delete(effect.path, effect.version)
    if isinstance(effect, ZkMulti):
        return await zk.multi(effect.ops)
    raise AssertionError(f"unknown ZooKeeper effect {effect!r}")
