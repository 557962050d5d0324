"""A small fault-injecting TCP proxy for tests (loopback only), for any protocol over TCP.

`FaultProxy` listens on 127.0.0.1 and forwards every connection to a target address. On command it
can `blackhole()` (connections stay open but bytes vanish both ways: a silent partition), `cut()`
(close every connection and refuse new ones: a loud partition) and `heal()` (forward again).

`lose_reply(marker)` is a one-shot fault for request/response protocols: the first client request
whose bytes contain `marker` reaches the server, but the server's next bytes on that connection
(its answer, when one request is in flight) are swallowed and the connection is closed. The server
did the work; the client never learns it, and retries if it does so. `marker_seen` counts the
client chunks that carried the marker, so a test can tell that the retry came.

`delay_s` holds every chunk that long in each direction before it goes on (a wide-area link:
the round trip grows by twice the delay), keeping the order and the stream's back-pressure: at
most `MAX_DELAYED_CHUNKS` chunks wait per direction, then the proxy stops reading. tc netem
does not work on the project's machines; this is how two "regions" get a distance between them.

`ThreadedFaultProxy` runs one in a background thread with blocking methods, for synchronous tests
that drive server processes. Run as a program (`python -m tests.support.faultproxy --pair
LISTEN=TARGET ... --delay-ms N`), it forwards each pair until killed: scripts in network
namespaces start it there (scripts/link_chaos.py).
"""

from __future__ import annotations

import argparse
import asyncio
import enum
import threading
from collections.abc import Coroutine
from typing import Any

Address = tuple[str, int]

MAX_DELAYED_CHUNKS = 256  # per direction of a delayed connection: at most 16 MiB of 64 KiB chunks


class Mode(enum.Enum):
    PASS = "pass"
    BLACKHOLE = "blackhole"
    CUT = "cut"


class _Link:
    """One proxied connection: its two writers and its pending one-shot fault."""

    def __init__(self, client: asyncio.StreamWriter, server: asyncio.StreamWriter) -> None:
        self.client = client
        self.server = server
        self.lose_next_reply = False
        self.tail = b""  # the end of the last client chunk: a marker may straddle two chunks

    def abort(self) -> None:
        for writer in (self.client, self.server):
            writer.transport.abort()


class FaultProxy:
    def __init__(self, target: Address, listen: Address = ("127.0.0.1", 0), chunk: int = 1 << 16,
                 delay_s: float = 0.0) -> None:
        assert delay_s >= 0, delay_s
        self.target = target
        self.delay_s = delay_s
        self.listen = listen
        self.chunk = chunk
        self.mode = Mode.PASS
        self.bytes_forwarded = 0
        self.bytes_dropped = 0
        self.connections = 0
        self.replies_lost = 0
        self.marker_seen = 0
        self._marker: bytes | None = None  # seen in a client chunk: count it
        self._armed = False  # ... and lose the server's answer to it, once
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def address(self) -> Address:
        assert self._server is not None and self._server.sockets
        host, port = self._server.sockets[0].getsockname()[:2]
        return host, port

    async def start(self) -> Address:
        self._server = await asyncio.start_server(self._accept, self.listen[0], self.listen[1])
        return self.address

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        self._close_all()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    def blackhole(self) -> None:
        self.mode = Mode.BLACKHOLE

    def cut(self) -> None:
        self.mode = Mode.CUT
        self._close_all()

    def heal(self) -> None:
        self.mode = Mode.PASS

    def lose_reply(self, marker: bytes) -> None:
        """Arm the one-shot fault (see the module docstring) for the next request carrying `marker`."""
        assert marker, "an empty marker would match every request"
        self._marker = marker
        self._armed = True

    def _close_all(self) -> None:
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        if self.mode is Mode.CUT:
            client_writer.transport.abort()
            return
        try:
            async with asyncio.timeout(5.0):
                server_reader, server_writer = await asyncio.open_connection(*self.target)
        except (OSError, TimeoutError):
            client_writer.transport.abort()
            return
        self.connections += 1
        self._writers |= {client_writer, server_writer}
        link = _Link(client_writer, server_writer)
        pumps = [asyncio.create_task(self._pump(client_reader, server_writer, link, from_client=True)),
                 asyncio.create_task(self._pump(server_reader, client_writer, link, from_client=False))]
        self._tasks.update(pumps)
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in pumps:
                task.cancel()
                self._tasks.discard(task)
            for writer in (client_writer, server_writer):
                writer.transport.abort()
                self._writers.discard(writer)

    def _watch_request(self, link: _Link, data: bytes) -> None:
        marker = self._marker
        if marker is None:
            return
        window = link.tail + data
        link.tail = window[-(len(marker) - 1):] if len(marker) > 1 else b""
        if marker in window:
            self.marker_seen += 1
            if self._armed:
                # Armed before the request is forwarded, so its answer cannot slip past.
                self._armed = False
                link.lose_next_reply = True

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link,
                    from_client: bool) -> None:
        loop = asyncio.get_running_loop()
        delayed: asyncio.Queue[tuple[float, bytes]] | None = None
        sender: asyncio.Task[None] | None = None
        if self.delay_s > 0:
            delayed = asyncio.Queue(MAX_DELAYED_CHUNKS)
            sender = asyncio.create_task(self._send_delayed(delayed, writer))
        try:
            while True:
                data = await reader.read(self.chunk)
                if not data:
                    if delayed is not None and sender is not None:  # what is on its way still arrives
                        await delayed.put((loop.time() + self.delay_s, b""))
                        await sender
                    return
                if from_client:
                    self._watch_request(link, data)
                elif link.lose_next_reply and self.mode is Mode.PASS:
                    link.lose_next_reply = False
                    self.replies_lost += 1
                    self.bytes_dropped += len(data)
                    link.abort()
                    return
                if self.mode is not Mode.PASS:
                    self.bytes_dropped += len(data)
                elif delayed is not None:
                    await delayed.put((loop.time() + self.delay_s, data))
                else:
                    writer.write(data)
                    self.bytes_forwarded += len(data)
                    await writer.drain()
        except (OSError, ConnectionError):
            return
        finally:
            if sender is not None:
                sender.cancel()

    async def _send_delayed(self, delayed: asyncio.Queue[tuple[float, bytes]], writer: asyncio.StreamWriter) -> None:
        """The far end of a delay line: each chunk written once its time has come, in order."""
        loop = asyncio.get_running_loop()
        try:
            while True:
                due, data = await delayed.get()
                if not data:  # the end of the stream, after everything before it
                    return
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if self.mode is not Mode.PASS:  # cut or blackholed while it was on its way
                    self.bytes_dropped += len(data)
                    continue
                writer.write(data)
                self.bytes_forwarded += len(data)
                await writer.drain()
        except (OSError, ConnectionError):
            writer.transport.abort()


class ThreadedFaultProxy:
    """A FaultProxy on its own event loop thread, controlled with blocking calls."""

    def __init__(self, target: Address, listen: Address = ("127.0.0.1", 0), delay_s: float = 0.0) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        self.proxy = FaultProxy(target, listen, delay_s=delay_s)
        self.address = self._call(self.proxy.start())

    def _call(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=30)

    async def _run(self, name: str) -> None:
        getattr(self.proxy, name)()

    def blackhole(self) -> None:
        self._call(self._run("blackhole"))

    def cut(self) -> None:
        self._call(self._run("cut"))

    def heal(self) -> None:
        self._call(self._run("heal"))

    def lose_reply(self, marker: bytes) -> None:
        async def arm() -> None:
            self.proxy.lose_reply(marker)

        self._call(arm())

    def close(self) -> None:
        try:
            self._call(self.proxy.stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
            self._loop.close()

    def __enter__(self) -> ThreadedFaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _address(text: str) -> Address:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"not HOST:PORT: {text!r}")
    return host, int(port)


def _pair(text: str) -> tuple[Address, Address]:
    listen, equals, target = text.partition("=")
    if not equals:
        raise argparse.ArgumentTypeError(f"not LISTEN=TARGET: {text!r}")
    return _address(listen), _address(target)


async def _serve(pairs: list[tuple[Address, Address]], delay_s: float) -> None:
    proxies = [FaultProxy(target, listen, delay_s=delay_s) for listen, target in pairs]
    for proxy in proxies:
        await proxy.start()
    print(f"forwarding {len(proxies)} addresses with {delay_s * 1000:g} ms each way", flush=True)
    await asyncio.Event().wait()  # until killed


def main() -> None:
    parser = argparse.ArgumentParser(description="Forward TCP addresses, each way delayed (see the module docstring).")
    parser.add_argument("--pair", type=_pair, action="append", required=True, metavar="LISTEN=TARGET",
                        help="HOST:PORT to listen on = HOST:PORT to forward to (repeatable)")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="added to each direction (default 0)")
    args = parser.parse_args()
    if args.delay_ms < 0:
        parser.error("--delay-ms must be 0 or more")
    asyncio.run(_serve(args.pair, args.delay_ms / 1000))


if __name__ == "__main__":
    main()
