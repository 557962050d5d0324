"""A `roost` child process that ends with its parent: its command line, and its output's lines.

On Linux the child runs a launcher first, which asks the kernel for SIGTERM when the parent dies,
even by SIGKILL, so that no orphan keeps its ports and directory (and exits at once should the
parent already be gone), then becomes the server by exec (same pid). A launcher rather than
Popen's preexec_fn, which may deadlock in a process with threads (librdkafka's in a test run, a
broker's I/O threads). The death signal survives exec; it comes when the thread that started the
child ends (callers start children from their main thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass

ROOST_COMMAND = (sys.executable, "-m", "roost.cli.main")

LAUNCHER = """\
import ctypes, os, sys
parent = int(sys.argv[1])
ctypes.CDLL(None).prctl(1, 15)  # PR_SET_PDEATHSIG, SIGTERM (libc's symbols are the interpreter's)
if os.getppid() != parent:
    sys.exit(1)
os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
"""


def child_command(args: Sequence[str]) -> list[str]:
    """The command line that runs `roost <args>` (through the launcher on Linux)."""
    roost = [*ROOST_COMMAND, *args]
    if not sys.platform.startswith("linux"):
        return roost
    return [sys.executable, "-S", "-c", LAUNCHER, str(os.getpid()), *roost[1:]]


async def child_lines(stream: asyncio.StreamReader) -> AsyncIterator[str]:
    """The lines a child writes to `stream`, decoded, until it closes. A line past the stream's
    limit is skipped (what was read of it is dropped), so the pipe is still read: a child whose
    pipe fills up blocks on its next write."""
    while True:
        try:
            raw = await stream.readline()
        except ValueError:
            continue
        if not raw:
            return
        yield raw.decode(errors="replace").rstrip("\n")


@dataclass(frozen=True)
class Refused:
    """Why a child did not start: its last error line without its `prefix`, or what it printed."""

    reason: str


async def start_listening_child(args: Sequence[str], *, listening: str, error_prefix: str, timeout_s: float,
                                env: Mapping[str, str] | None = None,
                                ) -> tuple[asyncio.subprocess.Process, str] | Refused:
    """Start `roost <args>` and wait for its first line, which must start with `listening` (a
    server's "listening on" line): the process and that line, or, killed and reaped, why not."""
    process = await asyncio.create_subprocess_exec(
        *child_command(args), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=dict(env if env is not None else os.environ, PYTHONUNBUFFERED="1"))
    assert process.stdout is not None and process.stderr is not None
    try:
        first = await asyncio.wait_for(process.stdout.readline(), timeout_s)
    except TimeoutError:
        first = b""
    line = first.decode(errors="replace").rstrip("\n")
    if line.startswith(listening):
        return process, line
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    errors = (await process.stderr.read()).decode(errors="replace").strip().splitlines()
    await process.wait()
    return Refused(errors[-1].removeprefix(error_prefix) if errors else line or "it did not start in time")
