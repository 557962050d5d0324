"""Test helpers: raft ensembles of RaftReplicators in one event loop over loopback sockets."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from roost.raft.core import RaftConfig
from roost.raft.node import RaftReplicator, ReplicatorConfig
from tests.support.faultproxy import FaultProxy

T = TypeVar("T")

FAST = ReplicatorConfig(tick_interval=0.02, election_ticks=10, heartbeat_ticks=2, fsync=False)


def run(coroutine: Coroutine[Any, Any, T], timeout: float = 120.0, loop: str = "asyncio") -> T:
    """Run a test coroutine with a generous overall bound against hangs, on asyncio's own loop or
    on uvloop (which the servers use)."""
    factory = None
    if loop == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(asyncio.wait_for(coroutine, timeout))


async def eventually(predicate: Callable[[], object], timeout: float = 20.0, what: str = "condition") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.01)


@dataclass
class ListMachine:
    """The state machine under test: the list of applied (index, entry)."""

    applied: list[tuple[int, bytes]] = field(default_factory=list)
    restores: int = 0

    def apply(self, index: int, entry: bytes) -> None:
        assert not self.applied or index > self.applied[-1][0]
        self.applied.append((index, entry))

    def snapshot(self) -> bytes:
        return json.dumps([[i, e.hex()] for i, e in self.applied]).encode()

    def restore(self, index: int, blob: bytes) -> None:
        self.applied = [(i, bytes.fromhex(e)) for i, e in json.loads(blob)]
        assert not self.applied or self.applied[-1][0] <= index
        self.restores += 1

    def entries(self) -> list[bytes]:
        return [e for _, e in self.applied]


@dataclass
class Ensemble:
    base: Path
    size: int
    config: ReplicatorConfig = FAST
    with_proxies: bool = False
    members: dict[int, RaftReplicator] = field(default_factory=dict)
    machines: dict[int, ListMachine] = field(default_factory=dict)
    addresses: dict[int, tuple[str, int]] = field(default_factory=dict)
    proxies: dict[tuple[int, int], FaultProxy] = field(default_factory=dict)  # (from, to) -> proxy
    leader_news: dict[int, list[tuple[bool, int | None]]] = field(default_factory=dict)

    @property
    def ids(self) -> list[int]:
        return list(range(1, self.size + 1))

    def _dial_address(self, src: int, dst: int) -> tuple[str, int]:
        if self.with_proxies:
            return self.proxies[(src, dst)].address
        return self.addresses[dst]

    async def start(self) -> None:
        placeholder = {i: ("127.0.0.1", 1) for i in self.ids}
        for i in self.ids:
            await self._start_member(i, placeholder, listen=("127.0.0.1", 0))
        for i in self.ids:
            self.addresses[i] = self.members[i].peer_address  # type: ignore[assignment]
        if self.with_proxies:
            for src in self.ids:
                for dst in self.ids:
                    if src != dst:
                        proxy = FaultProxy(self.addresses[dst])
                        await proxy.start()
                        self.proxies[(src, dst)] = proxy
        for src in self.ids:
            for dst in self.ids:
                if src != dst:
                    self.members[src].set_peer_address(dst, self._dial_address(src, dst))

    async def _start_member(self, i: int, peers: dict[int, tuple[str, int]], listen: tuple[str, int]) -> None:
        import dataclasses

        config = dataclasses.replace(self.config, listen=listen, seed=i * 7919)
        member = RaftReplicator(i, peers, self.base / f"m{i}", config)
        machine = ListMachine()
        member.set_state_machine(machine.apply, machine.snapshot, machine.restore)
        news = self.leader_news.setdefault(i, [])
        member.set_leadership_handler(lambda is_leader, leader, news=news: news.append((is_leader, leader)))
        self.members[i], self.machines[i] = member, machine
        await member.start()

    async def stop_member(self, i: int) -> None:
        await self.members[i].stop()

    async def restart_member(self, i: int) -> None:
        peers = {j: self._dial_address(i, j) for j in self.ids if j != i}
        await self._start_member(i, peers, listen=self.addresses[i])

    async def stop(self) -> None:
        for member in self.members.values():
            await member.stop()
        for proxy in self.proxies.values():
            await proxy.stop()

    def isolate(self, i: int) -> None:
        for (src, dst), proxy in self.proxies.items():
            if i in (src, dst):
                proxy.blackhole()

    def heal(self) -> None:
        for proxy in self.proxies.values():
            proxy.heal()

    async def wait_leader(self, among: list[int] | None = None, timeout: float = 20.0) -> int:
        among = among or self.ids
        found: list[int] = []

        def one_leader() -> bool:
            leaders = [i for i in among if self.members[i].is_leader]
            agreed = leaders and all(self.members[i].leader_id == leaders[0] for i in among)
            found[:] = leaders
            return bool(agreed)

        await eventually(one_leader, timeout, "one leader that every member knows")
        return found[0]


async def with_ensemble(base: Path, size: int, body: Callable[[Ensemble], Awaitable[None]],
                        config: ReplicatorConfig = FAST, with_proxies: bool = False) -> None:
    ensemble = Ensemble(base, size, config, with_proxies)
    try:
        await ensemble.start()
        await body(ensemble)
    finally:
        await ensemble.stop()


def small_snapshots(config: ReplicatorConfig = FAST) -> ReplicatorConfig:
    import dataclasses

    return dataclasses.replace(config, snapshot_entries=20, keep_entries=5,
                               raft=RaftConfig(election_ticks=10, heartbeat_ticks=2, max_append_entries=8))
