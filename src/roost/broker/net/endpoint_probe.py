"""One connection attempt to a broker's endpoint, and holding what connected until it ends.

What the attempt says is the evidence the fast failure detection (`controller/liveness.py`) and
the reachability hint (`metadata/reachability.py`) both read: a refusal means nothing listens
there (on a live machine: the process is gone); a connection means something does (alive, or
paused: the kernel accepts into the listen backlog); anything else is no evidence either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable
from enum import Enum
from typing import TypeVar

CONNECT_TIMEOUT_S = 1.0  # an attempt that takes longer is no evidence either way
READ_BYTES = 4096
T = TypeVar("T")


class Probe(Enum):
    REFUSED = "refused"  # a RST: nothing listens there
    CONNECTED = "connected"  # something listens (alive, paused, or a new process on that port)
    NO_ANSWER = "no answer"  # timed out, unreachable, or another error: no evidence


async def _attempt(host: str, port: int,
                   connect: Callable[[int, str, int], Awaitable[T]]) -> tuple[Probe, T | None]:
    """`connect(family, address, port)` to each address `host` has, until one connects: REFUSED
    only if each refused, NO_ANSWER if none connected otherwise."""
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError):
        return Probe.NO_ANSWER, None
    refused = 0
    for family, _, _, _, address in infos:
        try:
            host, port = str(address[0]), int(address[1])  # an IPv4 or IPv6 (host, port, ...) tuple
            return Probe.CONNECTED, await asyncio.wait_for(connect(family, host, port), CONNECT_TIMEOUT_S)
        except ConnectionRefusedError:
            refused += 1
        except (OSError, TimeoutError):
            pass
    return (Probe.REFUSED if infos and refused == len(infos) else Probe.NO_ANSWER), None


async def probe(host: str, port: int) -> tuple[Probe, asyncio.StreamReader | None, asyncio.StreamWriter | None]:
    """One connection attempt to every address `host` has: REFUSED only if each refused."""
    outcome, streams = await _attempt(host, port, lambda family, address, to: asyncio.open_connection(
        address, to, family=family))
    reader, writer = streams if streams is not None else (None, None)
    return outcome, reader, writer


async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Wait until the connection ends (EOF or reset); whatever arrives is ignored."""
    try:
        while await reader.read(READ_BYTES):
            pass
    except OSError:
        pass
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


class _HeldConnection(asyncio.Protocol):
    """An idle connection whose end is reported from the transport's own callback: the moment
    the kernel says so, with no task to wake first."""

    def __init__(self, on_end: Callable[[float], None]) -> None:
        self._on_end = on_end
        self._loop = asyncio.get_running_loop()
        self._made_at = self._loop.time()
        self.ended: asyncio.Future[None] = self._loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._made_at = self._loop.time()

    def data_received(self, data: bytes) -> None:
        pass  # nothing is expected; whatever arrives is ignored

    def eof_received(self) -> bool:
        self._end()
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()

    def _end(self) -> None:
        if not self.ended.done():
            self.ended.set_result(None)
            self._on_end(self._loop.time() - self._made_at)


async def hold_until_it_ends(host: str, port: int, on_connected: Callable[[], None],
                             on_end: Callable[[float], None]) -> Probe:
    """One connection attempt to every address of `host`; if one connects, call `on_connected()`,
    hold it idle, call `on_end(seconds it was held)` from the transport's callback the moment it
    ends (which may come before `on_connected`), and return CONNECTED once it has. REFUSED only
    if each address refused; anything else NO_ANSWER."""
    loop = asyncio.get_running_loop()
    outcome, made = await _attempt(host, port, lambda family, address, to: loop.create_connection(
        lambda: _HeldConnection(on_end), address, to, family=family))
    if made is None:
        return outcome
    transport, held = made
    assert isinstance(held, _HeldConnection), held
    on_connected()
    try:
        await held.ended
    finally:
        transport.close()
    return Probe.CONNECTED
