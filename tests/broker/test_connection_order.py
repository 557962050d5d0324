"""A connection's "where is it" answers (Metadata, FindCoordinator) are decided at their turn in
the response order, not when they arrive: behind a produce that waits (acks=all), a Metadata
answer decided at arrival reached librdkafka half a second late and naming the dead leader again.
Real loopback sockets, the broker's own connection class, a router that records when it decides."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import uvloop

from roost.broker.net.connection import ConnectionLimits, KafkaConnection
from roost.broker.net.request import Deferred
from roost.wire.kafka import ApiKey, RequestHeader, read_request_header

PRODUCE_V3, METADATA_V1 = (ApiKey.PRODUCE, 3), (ApiKey.METADATA, 1)


def frame(api: tuple[int, int], correlation_id: int) -> bytes:
    """A request frame of header v1 (no client id) and an empty body: the router below reads
    only the header."""
    body = struct.pack(">hhih", api[0], api[1], correlation_id, -1)
    return struct.pack(">i", len(body)) + body


class RecordingRouter:
    """Produce waits until released; Metadata answers with how many produces were released when
    it was decided (its body is that number, as 4 bytes after the correlation id)."""

    def __init__(self) -> None:
        self.released = 0
        self.waiting: list[asyncio.Future[Any]] = []
        self.decided_at: list[int] = []

    def route(self, header: RequestHeader, frame: bytearray, client_host: str, header_end: int = -1,
              principal: Any = None, listener: str = "", mute: Any = None, connection: object = None) -> Any:
        if header.api_key == ApiKey.PRODUCE:
            future = asyncio.get_running_loop().create_future()
            self.waiting.append(future)
            return Deferred(header, future)
        self.decided_at.append(self.released)
        answer = struct.pack(">ii", header.correlation_id, self.released)
        return [struct.pack(">i", len(answer)) + answer]

    def release(self) -> None:
        self.released += 1
        self.waiting.pop(0).set_result({"responses": [], "throttle_time_ms": 0})


async def a_metadata_behind_a_waiting_produce() -> tuple[list[int], list[int]]:
    router = RecordingRouter()
    limits = ConnectionLimits(max_frame_bytes=1 << 20, max_inflight_requests=100, max_buffered_bytes=1 << 20)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: KafkaConnection(router, limits, lambda _c: None), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        # A produce that waits, then a Metadata, then a Metadata on a connection with nothing owed.
        writer.write(frame(PRODUCE_V3, 1) + frame(METADATA_V1, 2))
        await writer.drain()
        for _ in range(100):
            if router.waiting:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # the Metadata has arrived (and must not be decided yet)
        decided_before_release = list(router.decided_at)
        router.release()
        correlations = []
        for _ in range(2):
            size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))[0]
            correlations.append(struct.unpack(">i", (await reader.readexactly(size))[:4])[0])
        assert correlations == [1, 2], correlations  # the response order is the request order
        writer.write(frame(METADATA_V1, 3))
        size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))[0]
        await reader.readexactly(size)
        return decided_before_release, router.decided_at
    finally:
        writer.close()
        server.close()


def test_a_metadata_request_behind_a_waiting_produce_is_decided_once_the_produce_is_answered() -> None:
    header, _ = read_request_header(bytearray(frame(METADATA_V1, 7)[4:]))  # the hand-made frames decode
    assert (header.api_key, header.api_version, header.correlation_id) == (ApiKey.METADATA, 1, 7)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:  # the broker's loop
        decided_before_release, decided_at = runner.run(a_metadata_behind_a_waiting_produce())
    assert decided_before_release == [], "the Metadata was decided while the produce ahead of it still waited"
    assert decided_at == [1, 1]  # both decided after the release: the held one and the one with nothing owed
