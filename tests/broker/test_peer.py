"""The broker's client for other brokers: a request on a connection that is closing fails as a
PeerError (the callers' retry path), never as an exception from the transport.

Found in a cluster test: a broker shutting down closed its connection to a leader while a replica
fetch waited for `_connected()`; the fetch then wrote to the aborted transport, uvloop raised
RuntimeError, and the broker's shutdown ended in a traceback with status 1."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from roost.broker.peer import KafkaPeer, PeerError
from roost.wire.kafka.apis import ApiKey


class BreakingPeer(KafkaPeer):
    """A peer whose connection breaks just as a request got it: between `_connected()` and the
    write, where the shutdown's close (or a reset by the other side) can land."""

    async def _connected(self):  # type: ignore[no-untyped-def]
        protocol = await super()._connected()
        assert protocol.transport is not None
        protocol.transport.abort()
        return protocol


async def request_on_a_breaking_connection() -> None:
    accepted: list[asyncio.StreamWriter] = []
    server = await asyncio.start_server(lambda _reader, writer: accepted.append(writer), "127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()[:2]
    peer = BreakingPeer(1, host, port, "test-peer")
    try:
        with pytest.raises(PeerError, match="connection closed"):
            await peer.request(ApiKey.API_VERSIONS, 0, {}, 5.0)
    finally:
        peer.close()
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()


def test_a_request_on_a_closing_connection_is_a_peer_error() -> None:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:  # the broker's loop
        runner.run(request_on_a_breaking_connection())
