"""The reachability hint (metadata/reachability.py) on real loopback sockets: a peer whose
endpoint goes away is answered as "no leader" in Metadata (and as no coordinator) at once, a
peer that is back (or that only ends connections quickly while alive) is not, and a peer the
controller no longer lists is forgotten."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

import pytest
import uvloop

from roost.broker.handlers.metadata import partition_entry
from roost.broker.metadata import reachability
from roost.broker.metadata.cache import BrokerEndpoint, MetadataCache, PartitionInfo
from roost.broker.metadata.reachability import PeerReachability
from roost.wire.kafka.errors import ErrorCode

OWN_ID, PEER_ID = 1, 2


class CountingSet(set[int]):
    """The hint's set, remembering every addition (a peer counted as gone even for a moment)."""

    def __init__(self) -> None:
        super().__init__()
        self.added: list[int] = []

    def add(self, item: int) -> None:
        self.added.append(item)
        super().add(item)


class Peer:
    """A listening endpoint that can die as a killed process does (its listener gone, its
    connections closed by the kernel) and come back on the same port."""

    def __init__(self, port: int = 0, close_at_once: bool = False) -> None:
        self.port = port
        self.close_at_once = close_at_once
        self.accepted: list[asyncio.StreamWriter] = []
        self.accepted_count = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> None:
        def accept(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.accepted_count += 1
            if self.close_at_once:
                writer.close()
            else:
                self.accepted.append(writer)
        self.server = await asyncio.start_server(accept, "127.0.0.1", self.port, reuse_address=True)
        self.port = self.server.sockets[0].getsockname()[1]

    async def die(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.accepted:
            writer.transport.abort()
        self.accepted.clear()
        await self.server.wait_closed()


def cache_with(peer_port: int) -> MetadataCache:
    cache = MetadataCache()
    cache.set_brokers([BrokerEndpoint(OWN_ID, "127.0.0.1", 1), BrokerEndpoint(PEER_ID, "127.0.0.1", peer_port)],
                      OWN_ID)
    cache.set_partition("t", 0, PartitionInfo(PEER_ID, 7, (PEER_ID, OWN_ID), (PEER_ID, OWN_ID)))
    return cache


async def until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def watching(peer: Peer, cache: MetadataCache) -> AsyncIterator[None]:
    """The hint's watch of `peer` runs inside; afterwards it is stopped and the peer gone."""
    watch = PeerReachability(OWN_ID, cache)
    watch.start()
    try:
        yield
    finally:
        await watch.stop()
        await peer.die()


async def held_long(peer: Peer) -> None:
    """Until the watch has held its connection longer than MIN_HOLD_S: an end from then on is a
    gone peer, not a quick close."""
    await until(lambda: len(peer.accepted) == 1, 5, "the watch connected")
    await asyncio.sleep(reachability.MIN_HOLD_S + 0.1)


async def a_peer_dies_and_comes_back() -> None:
    peer = Peer()
    await peer.start()
    cache = cache_with(peer.port)
    async with watching(peer, cache):
        await held_long(peer)
        entry = partition_entry(cache, "t", 0)
        assert (entry["error_code"], entry["leader_id"]) == (ErrorCode.NONE, PEER_ID)

        await peer.die()
        await until(lambda: PEER_ID in cache.unreachable, 2, "the gone peer noticed")
        entry = partition_entry(cache, "t", 0)
        assert (entry["error_code"], entry["leader_id"]) == (ErrorCode.LEADER_NOT_AVAILABLE, -1), entry
        assert entry["leader_epoch"] == 7 and entry["replica_nodes"] == [PEER_ID, OWN_ID]  # Kafka's shape
        assert cache.coordinator_endpoint("t", 0) is None  # FindCoordinator: COORDINATOR_NOT_AVAILABLE
        # While it refuses, it stays gone (attempts every REFUSED_RETRY_S).
        await asyncio.sleep(3 * reachability.REFUSED_RETRY_S)
        assert PEER_ID in cache.unreachable

        await peer.start()  # the same port: a restart
        await until(lambda: PEER_ID not in cache.unreachable, 2, "the peer that is back reachable again")
        assert partition_entry(cache, "t", 0)["leader_id"] == PEER_ID
        endpoint = cache.coordinator_endpoint("t", 0)
        assert endpoint is not None and endpoint.node_id == PEER_ID


async def a_peer_that_ends_connections_at_once_is_alive() -> None:
    peer = Peer(close_at_once=True)  # a live broker over its connection limit, for example
    await peer.start()
    cache = cache_with(peer.port)
    cache.unreachable = counted = CountingSet()
    async with watching(peer, cache):
        await asyncio.sleep(2.5 * reachability.MIN_HOLD_S)  # more than two rounds of reconnects
        assert peer.accepted_count >= 2, "the watch did not try again"
        assert counted.added == [], "a live peer that ends connections quickly was counted as gone"


async def a_peer_no_longer_listed_is_forgotten() -> None:
    peer = Peer()
    await peer.start()
    cache = cache_with(peer.port)
    async with watching(peer, cache):
        await held_long(peer)
        await peer.die()
        await until(lambda: PEER_ID in cache.unreachable, 2, "the gone peer noticed")
        # The controller's verdict: the broker is no longer live, its partitions led elsewhere.
        cache.apply_update_metadata({
            "controller_epoch": 1, "controller_id": OWN_ID, "topic_states": [],
            "live_brokers": [{"id": OWN_ID, "endpoints": [{"listener": "", "host": "127.0.0.1", "port": 1}]}]})
        assert PEER_ID not in cache.unreachable
        await asyncio.sleep(3 * reachability.REFUSED_RETRY_S)
        assert PEER_ID not in cache.unreachable, "a forgotten peer's watch still runs"


def run(coroutine: Callable[[], object]) -> None:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:  # the broker's loop
        runner.run(coroutine())  # type: ignore[arg-type]


def test_a_leader_whose_endpoint_goes_away_is_answered_as_no_leader_until_it_is_back() -> None:
    run(a_peer_dies_and_comes_back)


def test_a_live_peer_that_ends_connections_at_once_is_never_counted_as_gone() -> None:
    run(a_peer_that_ends_connections_at_once_is_alive)


def test_a_peer_the_controller_no_longer_lists_is_forgotten() -> None:
    run(a_peer_no_longer_listed_is_forgotten)


def test_a_departed_broker_stays_in_metadatas_broker_list_for_a_moment(monkeypatch: pytest.MonkeyPatch) -> None:
    """librdkafka drops a broker missing from a Metadata answer, and doing so in the very answer
    that names a dead leader's successors undid the move (a second of silence): a dead broker
    (seen refusing) stays listed a moment (DEPARTED_LISTED_S), in Metadata only, while
    DescribeCluster and the live set drop it at once. One cut off is dropped at once: librdkafka's
    requests stuck in flight to it end only when it drops it."""
    from roost.broker.metadata import cache as cache_module
    monkeypatch.setattr(cache_module, "DEPARTED_LISTED_S", 0.2)
    cache = MetadataCache()
    cache.set_brokers([BrokerEndpoint(b, "127.0.0.1", 9000 + b) for b in (1, 2, 3)], 1)
    cache.set_brokers([BrokerEndpoint(b, "127.0.0.1", 9000 + b) for b in (1, 2)], 1)  # 3 left, not seen gone
    assert [b.node_id for b in cache.metadata_brokers("")] == [1, 2]  # cut off, not dead: dropped at once
    cache.set_brokers([BrokerEndpoint(b, "127.0.0.1", 9000 + b) for b in (1, 2, 3)], 1)
    cache.unreachable.add(2)  # its port refused: a dead process
    cache.set_brokers([BrokerEndpoint(b, "127.0.0.1", 9000 + b) for b in (1, 3)], 1)  # broker 2 left
    cache.unreachable.discard(2)  # (the hint forgets a broker no longer listed)
    assert [b.node_id for b in cache.metadata_brokers("")] == [1, 2, 3]
    assert [b.node_id for b in cache.client_brokers("")] == [1, 3] and cache.live_broker_ids() == [1, 3]
    time.sleep(0.3)
    assert [b.node_id for b in cache.metadata_brokers("")] == [1, 3]
    cache.set_brokers([BrokerEndpoint(b, "127.0.0.1", 9000 + b) for b in (1, 2, 3)], 1)  # back
    cache.set_brokers([BrokerEndpoint(b, "127.0.0.1", 9000 + b) for b in (1, 2, 3)], 1)
    assert [b.node_id for b in cache.metadata_brokers("")] == [1, 2, 3] and not cache.departed
