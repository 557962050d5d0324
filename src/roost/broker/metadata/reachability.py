"""Which peers this broker has just seen go: a hint in the Metadata it answers, before the
controller has moved their leaderships.

A broker process that dies on a machine that lives on shows it at once (see
`controller/liveness.py`): a connection to it ends and the next attempt is refused. The
controller waits for two refusals 50 ms apart and then elects; a client that lost its connection
to the dead leader asks for metadata within a millisecond, before any of that, and is told the
dead leader again. librdkafka then waits for its once-a-second timer before it asks again, which
was most of its silence after a kill.

So every broker holds one idle connection to each live peer's registered endpoint (it sends
nothing on it) and, from the moment that connection ends until a new attempt connects, and while
attempts are refused, counts the peer as unreachable. Metadata answered here then says
LEADER_NOT_AVAILABLE with leader -1 for the partitions that peer leads: Kafka's answer for a
leader that is not alive. Clients ask again after their short retry backoff (librdkafka 100 ms,
doubling; kafka-python and aiokafka 100 ms) and find the controller's new leader.

Why it cannot mislead for long: an attempt that connects (a live broker, a paused one: the kernel
accepts into the listen backlog) or that neither connects nor is refused (a machine or a network
gone: no evidence) ends the hint at once; a peer that ends connections quickly while alive (a
connection limit, a TLS handshake timeout) is not counted as gone. Its cost when wrong: a client
asks again 100 ms later. It changes only what clients are told, never who leads: the leader
epochs and the ISR rules are untouched, so no safety argument depends on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from enum import Enum

from roost.broker.metadata.cache import MetadataCache
from roost.broker.net.endpoint_probe import Probe, hold_until_it_ends

log = logging.getLogger("roost.broker.reachability")

REFUSED_RETRY_S = 0.1  # a refused attempt is cheap (one RST on a live machine): ask again soon
NO_ANSWER_RETRY_S = 1.0
MIN_HOLD_S = 1.0  # a connection the peer ends sooner than this was ended by a live peer


class Seen(Enum):
    REACHABLE = "reachable"
    GONE = "gone"


def after_attempt(outcome: Probe) -> Seen:
    """What one connection attempt says: only a refusal (nothing listens there) is "gone"."""
    return Seen.GONE if outcome is Probe.REFUSED else Seen.REACHABLE


def after_connection_ended(held_s: float) -> Seen:
    """A held connection ended: gone until an attempt says otherwise, unless the peer ended it so
    soon that a live peer did (a limit, a handshake timeout)."""
    return Seen.GONE if held_s >= MIN_HOLD_S else Seen.REACHABLE


class PeerReachability:
    """Keeps `metadata.unreachable` (a hint) for the peers the metadata lists as live."""

    def __init__(self, own_id: int, metadata: MetadataCache) -> None:
        self._own_id = own_id
        self._metadata = metadata
        self._watches: dict[int, tuple[tuple[str, int], asyncio.Task[None]]] = {}
        self._stopped = False

    def start(self) -> None:
        self._metadata.listeners.append(self._follow_live_brokers)
        self._follow_live_brokers()

    def _follow_live_brokers(self) -> None:
        """After each UpdateMetadata: watch the live peers; forget the ones no longer listed (the
        controller moved their leaderships) and those whose address changed (a restart)."""
        if self._stopped:
            return
        live = {b.node_id: (b.host, b.port) for b in self._metadata.brokers.values() if b.node_id != self._own_id}
        for broker_id, (address, task) in list(self._watches.items()):
            if live.get(broker_id) != address:
                task.cancel()
                del self._watches[broker_id]
                self._metadata.unreachable.discard(broker_id)
        for broker_id, address in live.items():
            if broker_id not in self._watches:
                task = asyncio.get_running_loop().create_task(self._watch(broker_id, *address),
                                                              name=f"reachability-{broker_id}")
                self._watches[broker_id] = (address, task)

    def _note(self, broker_id: int, seen: Seen) -> None:
        unreachable = self._metadata.unreachable
        if seen is Seen.GONE and broker_id not in unreachable:
            unreachable.add(broker_id)
            log.info("broker %d is unreachable from here: Metadata answers no leader for its partitions "
                     "until it answers again or the controller moves them", broker_id)
        elif seen is Seen.REACHABLE and broker_id in unreachable:
            unreachable.discard(broker_id)
            log.info("broker %d is reachable again", broker_id)

    async def _watch(self, broker_id: int, host: str, port: int) -> None:
        last_connected = float("-inf")
        while True:
            since_last = time.monotonic() - last_connected
            if since_last < MIN_HOLD_S:
                # At most one connection a MIN_HOLD_S: a peer that ends them at once gets no tight
                # loop of reconnects.
                await asyncio.sleep(MIN_HOLD_S - since_last)
            connected_at = time.monotonic()

            def connected() -> None:
                self._note(broker_id, Seen.REACHABLE)

            def ended(held_s: float) -> None:
                # From the transport's callback: the hint is in place before this loop turn ends.
                self._note(broker_id, after_connection_ended(held_s))

            outcome = await hold_until_it_ends(host, port, connected, ended)
            if outcome is Probe.CONNECTED:
                last_connected = connected_at
                continue  # it ended (`ended` said what that means): try again
            self._note(broker_id, after_attempt(outcome))
            await asyncio.sleep(REFUSED_RETRY_S if outcome is Probe.REFUSED else NO_ANSWER_RETRY_S)

    async def stop(self) -> None:
        self._stopped = True
        with contextlib.suppress(ValueError):
            self._metadata.listeners.remove(self._follow_live_brokers)
        tasks = [task for _, task in self._watches.values()]
        self._watches.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._metadata.unreachable.clear()
