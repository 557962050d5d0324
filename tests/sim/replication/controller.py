"""The controller of a simulated broker: Roost's real controller activities
(`roost.broker.controller.events.ControllerEvents`: election, watches, the event worker, the
per-broker channels, the ticker, around the real `ControllerCore`), run on the simulation's shell
(shell.py: their ZooKeeper calls on the simulated ZooKeeper, their requests on the simulated
network, their sleeps and timers on the simulated clock). Like the broker's `ControllerShell`,
this adapter decides nothing. An exception the real worker would log and resign on (an assertion
in the core, say) is raised here instead: the simulation stops and reports it as a bug.

The fast failure detection's connections (liveness.py's `Connect`) are made on the simulated
network (`Network.connect`: refused where no process of that broker runs, held until the cluster
ends them when the process dies); it runs only where the cluster simulates its signals
(`Cluster.fast_detection`), so that the other seeds keep their histories.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from roost.broker.controller.core import ControllerCore, ControllerSettings
from roost.broker.controller.events import ControllerEvents, ControllerMoved
from roost.broker.zk.layout import BrokerRegistration
from tests.sim.replication.runtime import PeerError, Rpc, SimWaits, Wait
from tests.sim.replication.shell import SimShell

if TYPE_CHECKING:
    from tests.sim.replication.broker import BrokerProcess

__all__ = ["ControllerMoved", "PeerError", "Rpc", "SimControllerShell"]

REQUEST_TIMEOUT_MS = 1000  # the real channel's 30 s, scaled to the simulation's clock

Gen = Generator[Any, Any, Any]


def _reraise(error: BaseException) -> None:
    raise error


class SimControllerShell:
    def __init__(self, proc: BrokerProcess, settings: ControllerSettings) -> None:
        zk = proc.zk
        self._shell = SimShell(proc.loop, lambda broker: True, zk=zk,
                               connect=lambda broker: proc.cluster.network.connect(proc.broker_id, broker))
        self.events = ControllerEvents(proc.broker_id, settings, self._shell.spawn, SimWaits(proc.world),
                                       proc.cluster.world_clock, lambda: zk.session_id)
        self.events.request_timeout_ms = REQUEST_TIMEOUT_MS
        self.events.on_bug = _reraise
        self.events.fast_detection = proc.cluster.fast_detection
        zk.listeners.append(self._on_session)

    @property
    def active(self) -> bool:
        return self.events.active

    @property
    def controller_id(self) -> int:
        return self.events.controller_id

    def suspect(self, broker: BrokerRegistration, evidence: str) -> None:
        """A verdict "dead" on `broker` (the cluster's false signals)."""
        self.events.suspect(broker, evidence)

    def give_up_controller(self, evidence: str) -> None:
        """A verdict "dead" on the watched controller (the cluster's false signals)."""
        self.events.give_up_controller(evidence)

    @property
    def core(self) -> ControllerCore | None:
        return self.events.core

    def _on_session(self, state: str, session: int, new_session: bool) -> None:
        if state == "expired":
            self.events.session_expired()
        elif state == "connected":
            self.events.session_connected(new_session)

    def start(self) -> None:
        self.events.start()

    def stop(self) -> Gen:
        """ControllerShell.stop, inside the calling task."""
        yield from self._shell.drive(self.events.stop())

    def call(self, action: Callable[[ControllerCore, int], None]) -> Gen:
        """ControllerShell.call: the reply, or ControllerMoved."""
        return (yield Wait(self.events.submit(action)))
