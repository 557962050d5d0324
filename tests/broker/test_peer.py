"""The broker's client for other brokers: a request on a connection that is closing fails as a
PeerError (the callers' retry path), never as an exception from the transport.

Found in a cluster test: a broker shutting down closed its connection to a leader while a replica
fetch waited for `_connected()`; the fetch then wrote to the aborted transport, uvloop raised
RuntimeError, and the broker's shutdown ended in a traceback with status 1."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import pytest
import uvloop

from roost.broker.net import peer as peer_module
from roost.broker.net.peer import KafkaPeer, PeerError
from roost.wire.kafka import FrameSplitter, decode_request, encode_response
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



def closing_the_first_connection_as_it_opens(real: type[peer_module._PeerProtocol]) -> Callable[[KafkaPeer], Any]:
    """A protocol factory whose first connection closes at once, so that connection_lost runs
    before `_connect` adopts the connection: what a listener accepting and closing at once does
    (a fault proxy cutting the path, a broker over max.connections, a process going down)."""
    left = [1]

    def factory(peer: KafkaPeer) -> peer_module._PeerProtocol:
        made = real(peer)
        if left[0]:
            left[0] -= 1
            connection_made = made.connection_made

            def made_and_aborted(transport: asyncio.BaseTransport) -> None:
                connection_made(transport)
                transport.abort()  # type: ignore[attr-defined]

            made.connection_made = made_and_aborted  # type: ignore[method-assign]
        return made

    return factory


async def answer_api_versions(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    frames = FrameSplitter(1 << 20)
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(65536):
            for frame in frames.split(data):
                header, _ = decode_request(frame)
                writer.writelines(encode_response(header, {"error_code": 0, "api_keys": []}))
    writer.close()


async def reconnect_after_a_connection_closed_as_it_opened() -> None:
    server = await asyncio.start_server(answer_api_versions, "127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()[:2]
    peer = KafkaPeer(1, host, port, "test-peer")
    try:
        with pytest.raises(PeerError):
            await peer.request(ApiKey.API_VERSIONS, 0, {}, 5.0)
        # The next requests open a new connection and are answered (they used to get the dead
        # connection back, forever: found by test_isolation, a controller re-sending
        # LeaderAndIsr every 100 ms to a healed broker it never reached again).
        for _ in range(3):
            answer = await peer.request(ApiKey.API_VERSIONS, 0, {}, 5.0)
            assert answer["error_code"] == 0
    finally:
        peer.close()
        server.close()
        await server.wait_closed()


def test_a_connection_closed_as_it_opened_is_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peer_module, "_PeerProtocol", closing_the_first_connection_as_it_opens(peer_module._PeerProtocol))
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:  # the broker's loop
        runner.run(reconnect_after_a_connection_closed_as_it_opened())
