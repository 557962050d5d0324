"""Fast failure detection: has a broker's process gone, before its ZooKeeper session says so?

A broker process that dies on a machine that lives on (kill -9, a crash, the OOM killer) shows it
at once: the kernel closes its sockets (a connection to it ends) and nothing listens on its port
any more (a connection attempt is refused with a RST). A session timeout is needed only where
nothing answers at all (the machine is gone, the network is cut): that stays the session's job.

So the controller keeps one idle TCP connection to each broker's registered endpoint (it sends
nothing on it) and, when that connection ends, tries to connect again: **refused twice in a row,
CONFIRM_AFTER_S apart**, is the verdict "dead". Anything else is no verdict: a connection that
succeeds (a paused process, SIGSTOP, a long GC pause or a busy loop: the kernel still accepts
connections into the listen backlog), a connection attempt that times out or fails otherwise (a
machine or network gone: the session timeout's case), a refusal followed by a success (a restart
that was quick). The other brokers watch the controller's endpoint the same way.

The decision is `verdict` (pure); `watch_endpoint` is an activity (see `controller/events.py`)
around it, yielding `Connect` effects (one attempt, the connection then held idle until it ends)
and sleeps; the broker's shell performs a `Connect` with `perform_connect`, the replication
simulation on its simulated network. Cost: one idle
connection per broker from the controller (and one from every broker to the controller), and two
connection attempts when one ends. Why a wrong verdict is still safe: see
ControllerCore.broker_suspected_dead and docs/cluster.md ("Fast failure detection").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from roost.broker.activity.effects import Sleep
from roost.broker.net.endpoint_probe import Probe, hold, probe

log = logging.getLogger("roost.controller")

CONFIRMATIONS = 2  # refusals in a row that make the verdict
CONFIRM_AFTER_S = 0.05  # between two attempts after a refusal
NO_ANSWER_RETRY_S = 1.0  # after an attempt that neither connected nor was refused
MIN_HOLD_S = 1.0  # a connection that the broker ends sooner than this is not re-made sooner


def verdict(outcomes: Sequence[Probe]) -> bool:
    """Dead only if the last CONFIRMATIONS attempts, in a row, were all refused."""
    recent = list(outcomes)[-CONFIRMATIONS:]
    return len(recent) == CONFIRMATIONS and all(o is Probe.REFUSED for o in recent)


@dataclass(slots=True)
class Connect:
    """An effect: one connection attempt to a broker's endpoint; if it connects, the connection is
    held idle until it ends. Resumed with the attempt's Probe outcome."""

    broker: int
    host: str
    port: int


async def perform_connect(effect: Connect) -> Probe:
    """The broker's shell performs a Connect: `probe`, then hold what it connected."""
    outcome, reader, writer = await probe(effect.host, effect.port)
    if reader is not None and writer is not None:
        await hold(reader, writer)
    return outcome


def watch_endpoint(broker: int, host: str, port: int, clock_ms: Callable[[], float]) -> Generator[Any, Any, str]:
    """An activity: hold an idle connection to host:port; returns the evidence once the verdict is
    dead. Runs until cancelled otherwise."""
    outcomes: list[Probe] = []
    last_connected = float("-inf")
    while True:
        connected = clock_ms()
        outcome = yield Connect(broker, host, port)
        outcomes = [*outcomes[-(CONFIRMATIONS - 1):], outcome]
        if verdict(outcomes):
            return (f"connection to {host}:{port} refused {CONFIRMATIONS} times in a row, "
                    f"{CONFIRM_AFTER_S * 1000:.0f} ms apart")
        if outcome is Probe.REFUSED:
            yield Sleep(CONFIRM_AFTER_S * 1000)
            continue
        if outcome is Probe.NO_ANSWER:
            yield Sleep(NO_ANSWER_RETRY_S * 1000)
            continue
        too_soon = connected - last_connected < MIN_HOLD_S * 1000
        last_connected = connected
        if too_soon:
            # The broker keeps ending these connections quickly: no tight loop of reconnects.
            yield Sleep(MIN_HOLD_S * 1000)
