"""The controller's asyncio shell: it runs the controller's activities (`events.py`: election,
watches, the event worker, the per-broker channels, the ticker) on the broker's event loop,
performing their effects with the broker's ZooKeeper client (`roost.broker.zk.effects`) and its
peers (`roost.broker.activity.effects.AsyncioShell`). It decides nothing: everything that does is
in `events.py`, `election.py` and `core.py`, which the replication simulation runs as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roost.broker.activity.effects import AsyncioShell, Effect
from roost.broker.controller.core import ControllerCore, ControllerSettings
from roost.broker.controller.events import ControllerEvents, ControllerMoved
from roost.broker.controller.liveness import Connect, perform_connect
from roost.broker.net.peer import PeerPool
from roost.broker.replica.waits import AsyncioWaits
from roost.broker.zk.effects import ZK_EFFECTS, perform_zk
from roost.clock import Clock, now_ms
from roost.zkclient import SessionEvent, SessionState, ZkClient

__all__ = ["ControllerMoved", "ControllerShell"]


class _ControllerIo(AsyncioShell):
    """The broker's peers and event loop, plus its ZooKeeper client. Every error of an effect is
    thrown into the activity: the event worker decides what a failed event means."""

    thrown_in = (Exception,)

    def __init__(self, zk: ZkClient, peer_for: Callable[[int], Any]) -> None:
        super().__init__(peer_for)
        self._zk = zk

    async def perform(self, effect: Effect | Any, wakeup: Any) -> Any:
        if isinstance(effect, ZK_EFFECTS):
            return await perform_zk(self._zk, effect)
        if isinstance(effect, Connect):
            return await perform_connect(effect)
        return await super().perform(effect, wakeup)


class ControllerShell:
    def __init__(self, zk: ZkClient, broker_id: int, settings: ControllerSettings, peers: PeerPool,
                 on_controller: Callable[[int], None] | None = None, clock_ms: Clock = now_ms) -> None:
        self.zk = zk
        self.peers = peers
        self._io = _ControllerIo(zk, self._peer_for)
        self.events = ControllerEvents(broker_id, settings, self._io.spawn, AsyncioWaits(), clock_ms,
                                       lambda: zk.session_id, on_controller, drop_peer=peers.drop)
        zk.add_listener(self._on_session)

    @property
    def core(self) -> ControllerCore | None:
        return self.events.core

    @property
    def active(self) -> bool:
        return self.events.active

    @property
    def controller_id(self) -> int:
        return self.events.controller_id

    @property
    def epoch(self) -> int:
        return self.events.epoch

    def _peer_for(self, broker_id: int) -> Any:
        registration = self.events.registration(broker_id)
        if registration is None:
            return None
        return self.peers.get(broker_id, registration.host, registration.port)

    def _on_session(self, event: SessionEvent) -> None:
        if event.state == SessionState.EXPIRED:
            self.events.session_expired()
        elif event.state == SessionState.CONNECTED:
            self.events.session_connected(event.new_session)

    async def start(self) -> None:
        self.events.start()

    async def stop(self) -> None:
        stopping = self._io.spawn(self.events.stop(), "controller-stop")
        await stopping.finished()
        for task in (self.events.worker, self.events.ticker):
            if task is not None:
                await task.close()

    async def call(self, action: Callable[[ControllerCore, int], None]) -> dict[str, Any]:
        """Run `action(core, token)` as a controller event and wait for the reply it produces."""
        reply: dict[str, Any] = await self.events.submit(action)
        return reply
