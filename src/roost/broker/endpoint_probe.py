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
from enum import Enum

CONNECT_TIMEOUT_S = 1.0  # an attempt that takes longer is no evidence either way
READ_BYTES = 4096


class Probe(Enum):
    REFUSED = "refused"  # a RST: nothing listens there
    CONNECTED = "connected"  # something listens (alive, paused, or a new process on that port)
    NO_ANSWER = "no answer"  # timed out, unreachable, or another error: no evidence


async def probe(host: str, port: int) -> tuple[Probe, asyncio.StreamReader | None, asyncio.StreamWriter | None]:
    """One connection attempt to every address `host` has: REFUSED only if each refused."""
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError):
        return Probe.NO_ANSWER, None, None
    refused = 0
    for family, _, _, _, address in infos:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(address[0], address[1], family=family),
                                                    CONNECT_TIMEOUT_S)
        except ConnectionRefusedError:
            refused += 1
            continue
        except (OSError, TimeoutError):
            continue
        return Probe.CONNECTED, reader, writer
    return (Probe.REFUSED if infos and refused == len(infos) else Probe.NO_ANSWER), None, None


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
