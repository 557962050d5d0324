"""Runs a planned local cluster (roost.cli.servers.cluster_plan) as supervised child processes.

Keepers start first and the brokers once a keeper leads. Each child's stdout lines are relayed,
named (`roost: keeper 2 listening on ...`, `roost: broker 1 kafka listening on ...`); its stderr
(its log) goes to DIR/<name>.log. Nothing is restarted: a child that exits is reported
(`roost: broker 2 exited with status -9`) and the others keep running. SIGTERM, SIGINT or SIGHUP
stop the brokers one at a time (SIGTERM, so each does a controlled shutdown), then the keepers,
each with a bounded wait before SIGKILL; a second signal kills whatever is left at once. The
children run in process groups of their own, so a Ctrl-C in the terminal reaches only this
supervisor, which then stops them in that order; on Linux each child also gets SIGTERM should the
supervisor itself die.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from roost.cli.servers.cluster_plan import ChildSpec, ClusterPlan, hostport
from roost.cli.servers.launch import child_lines
from roost.cli.servers.up_console import Stoppable

# Starts a companion of the ready cluster (the web console) from its bootstrap servers and
# zookeeper.connect; what it returns is stopped before the children.
CompanionStarter = Callable[[str, str], Awaitable[Stoppable | None]]

STARTUP_TIMEOUT_S = 60.0  # per group of children, for their listening lines
QUORUM_TIMEOUT_S = 30.0
BROKER_STOP_TIMEOUT_S = 30.0  # a controlled shutdown retries, so give it time before SIGKILL
KEEPER_STOP_TIMEOUT_S = 10.0


def relabel(line: str, kind: str, ident: int) -> str:
    """A child's stdout line as the supervisor prints it: `roost: keeper listening on ...` becomes
    `roost: keeper 2 listening on ...`; a line that names the child already passes unchanged;
    anything else is prefixed with the child's name."""
    prefix = f"roost: {kind} "
    if line.startswith(prefix):
        rest = line[len(prefix):]
        if rest.split(" ", 1)[0] == str(ident):
            return line
        return f"{prefix}{ident} {rest}"
    return f"roost: {kind} {ident}: {line}"


def _parent_death_signal() -> Callable[[], None] | None:
    """A function for a child to run before exec (Linux only) so that the kernel sends it SIGTERM
    if this supervisor dies, even by SIGKILL: no orphan keeps a port or a data directory. prctl is
    looked up here, in the parent, so the child only calls it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    prctl = libc.prctl
    pr_set_pdeathsig, sigterm = 1, int(signal.SIGTERM)

    def arm() -> None:
        prctl(pr_set_pdeathsig, sigterm)

    return arm


@dataclass
class Child:
    spec: ChildSpec
    process: asyncio.subprocess.Process
    listening: asyncio.Event = field(default_factory=asyncio.Event)
    exited: asyncio.Event = field(default_factory=asyncio.Event)
    stopping: bool = False  # set when the supervisor stops it: its exit is then not news
    watcher: asyncio.Task[None] | None = None


class Supervisor:
    def __init__(self, plan: ClusterPlan, companion: CompanionStarter | None = None) -> None:
        self.plan = plan
        self.start_companion = companion
        self.children: list[Child] = []
        self.stop = asyncio.Event()
        self.force = asyncio.Event()  # a second signal: kill what is left at once
        self.running = False  # all started; from now on an exit is reported and tolerated
        self.an_exit = asyncio.Event()  # set whenever a child exits
        self._arm = _parent_death_signal()

    def on_signal(self) -> None:
        if self.stop.is_set():
            if not self.force.is_set():
                say("roost: second signal: killing every process now")
            self.force.set()
        self.stop.set()

    async def run(self) -> int:
        plan = self.plan
        plan.write_configs()
        names = [spec.name for spec in [*plan.keepers, *plan.brokers]]
        brokers = _count(len(plan.brokers), "broker")
        if plan.keepers:
            what = f"{_count(len(plan.keepers), 'keeper')} and {brokers}"
        else:
            what = f"{brokers} (ZooKeeper at {plan.zookeeper_connect})"
        companion: Stoppable | None = None
        say(f"roost: starting {what} in {plan.data_dir}; each one's log goes to {plan.data_dir}/<name>.log "
            f"({', '.join(names)})")
        try:
            if plan.keepers:
                if not await self._start_group(plan.keepers):
                    return 0 if self.stop.is_set() else 1
                await self._await_quorum()
            if not await self._start_group(plan.brokers):
                return 0 if self.stop.is_set() else 1
            self.running = True
            bootstrap = ",".join(hostport(*spec.address) for spec in plan.brokers)
            say(f"roost: cluster ready: bootstrap servers {bootstrap}; zookeeper.connect {plan.zookeeper_connect}")
            if self.start_companion is not None:
                companion = await self.start_companion(bootstrap, plan.zookeeper_connect)
            while not self.stop.is_set():
                if all(child.exited.is_set() for child in self.children):
                    say("roost: every process has exited")
                    return 1
                self.an_exit.clear()
                await first_of([self.stop, self.an_exit])
            return 0
        finally:
            self.running = False
            if companion is not None:
                await companion.stop()
            await self._stop_all()
            say("roost: stopped")

    async def _start_group(self, specs: Iterable[ChildSpec]) -> bool:
        """Start `specs` together and wait for each one's listening line. False if one exits
        first, a stop signal comes, or the wait runs out (the caller then stops everything)."""
        group = [await self._spawn(spec) for spec in specs]
        remaining = {asyncio.ensure_future(self._listening_or_exit(child)) for child in group}
        stopping = asyncio.ensure_future(self.stop.wait())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STARTUP_TIMEOUT_S
        try:
            while remaining:
                done, _ = await asyncio.wait({*remaining, stopping}, timeout=max(0.0, deadline - loop.time()),
                                             return_when=asyncio.FIRST_COMPLETED)
                if stopping in done:
                    return False
                if not done:
                    late = ", ".join(c.spec.label for c in group if not c.listening.is_set())
                    say(f"roost: {late} did not listen within {STARTUP_TIMEOUT_S:.0f} s; stopping")
                    return False
                for task in done:
                    remaining.discard(task)
                    if not task.result():
                        return False
            return True
        finally:
            stopping.cancel()
            for task in remaining:
                task.cancel()

    async def _listening_or_exit(self, child: Child) -> bool:
        await first_of([child.listening, child.exited])
        if child.listening.is_set():
            return True
        say(f"roost: {child.spec.label} exited with status {child.process.returncode} before listening; "
            f"its log is {child.spec.log_path}")
        for line in _tail(child.spec.log_path, 5):
            say(f"roost: {child.spec.label}: {line}", sys.stderr)
        return False

    async def _spawn(self, spec: ChildSpec) -> Child:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with spec.log_path.open("ab") as log_file:
            # Its own process group: a terminal's Ctrl-C reaches the supervisor only, which then
            # stops the children in order (brokers before the keepers they need to shut down).
            process = await asyncio.create_subprocess_exec(
                *spec.argv(self.plan.log_level), stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=log_file, env=env, process_group=0,
                preexec_fn=self._arm)
        child = Child(spec, process)
        child.watcher = asyncio.ensure_future(self._watch(child))
        self.children.append(child)
        return child

    async def _watch(self, child: Child) -> None:
        """Relay the child's stdout until it closes, then note its exit."""
        stream = child.process.stdout
        assert stream is not None
        async for line in child_lines(stream):
            say(relabel(line, child.spec.kind, child.spec.ident))
            if " listening on " in line:
                child.listening.set()
        status = await child.process.wait()
        if self.running and not child.stopping:
            say(f"roost: {child.spec.label} exited with status {status}")
        child.exited.set()
        self.an_exit.set()

    async def _await_quorum(self) -> None:
        """Wait until a keeper says it leads (or serves standalone), so the brokers' first
        sessions find a serving ensemble; after a bounded wait, go on (the brokers retry)."""
        addresses = [spec.address for spec in self.plan.keepers]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + QUORUM_TIMEOUT_S
        while loop.time() < deadline and not self.stop.is_set():
            for host, port in addresses:
                mode = await _keeper_mode(host, port)
                if mode in ("leader", "standalone"):
                    return
            await asyncio.sleep(0.05)
        if not self.stop.is_set():
            say(f"roost: no keeper leads after {QUORUM_TIMEOUT_S:.0f} s; starting the brokers anyway")

    async def _stop_all(self) -> None:
        """Brokers first, highest id first, one at a time (each may hand its leaderships over to
        the others), then the keepers together."""
        brokers = sorted((c for c in self.children if c.spec.kind == "broker"), key=lambda c: -c.spec.ident)
        for child in brokers:
            await self._stop_child(child, BROKER_STOP_TIMEOUT_S)
        keepers = [c for c in self.children if c.spec.kind == "keeper"]
        await asyncio.gather(*(self._stop_child(c, KEEPER_STOP_TIMEOUT_S) for c in keepers))
        # Their last lines ("... stopped") are printed before ours; bounded, as a killed child's
        # pipe closes at once.
        watchers = [child.watcher for child in self.children if child.watcher is not None]
        if watchers:
            await asyncio.wait(watchers, timeout=KEEPER_STOP_TIMEOUT_S)

    async def _stop_child(self, child: Child, timeout: float) -> None:
        child.stopping = True
        if child.exited.is_set():
            return
        if not self.force.is_set():
            _signal(child.process, signal.SIGTERM)
            await first_of([child.exited, self.force], timeout)
            if child.exited.is_set():
                return
            if not self.force.is_set():
                say(f"roost: {child.spec.label} did not stop within {timeout:.0f} s; killing it")
        _signal(child.process, signal.SIGKILL)
        # SIGKILL cannot be ignored; the bound only guards against a process stuck in the kernel.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(child.exited.wait(), KEEPER_STOP_TIMEOUT_S)


async def first_of(events: Iterable[asyncio.Event], timeout: float | None = None) -> None:
    """Wait until one of `events` is set, or `timeout` seconds."""
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


def _signal(process: asyncio.subprocess.Process, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signum)


async def _keeper_mode(host: str, port: int) -> str | None:
    """The `Mode:` a keeper (or ZooKeeper) reports to the `srvr` four-letter word, or None."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 2.0)
    except (OSError, TimeoutError):
        return None
    try:
        writer.write(b"srvr")
        answer = await asyncio.wait_for(reader.read(), 2.0)  # the server closes after answering
    except (OSError, TimeoutError):
        return None
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    for line in answer.decode(errors="replace").splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return None


def say(line: str, stream: TextIO | None = None) -> None:
    """Print a line (on stdout unless told) at once; a reader that went away must not stop the
    supervising."""
    with contextlib.suppress(OSError):
        print(line, file=stream or sys.stdout, flush=True)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _tail(path: Path, count: int) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-count:]
    except OSError:
        return []


async def supervise(plan: ClusterPlan, companion: CompanionStarter | None = None) -> int:
    supervisor = Supervisor(plan, companion)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(signum, supervisor.on_signal)
    status = await supervisor.run()
    return 1 if supervisor.force.is_set() else status  # killed, not stopped cleanly
