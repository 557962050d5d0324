"""The broker's ZooKeeper client, chosen by measurement: (A) kazoo with its threads bridged into the
asyncio loop against (B) roost.zkclient, asyncio on Roost's jute codec. Both run on uvloop, in
the same process, against the same servers (a keeper and, if installed, Apache ZooKeeper 3.8).

Prints figures and never passes or fails:
  * watch-to-action: another process (a raw codec client) writes a watched znode; time from just
    before its write to the watch callback running on our loop (CLOCK_MONOTONIC across processes);
  * request latency p50/p99 for get, create and multi(check + set), one request at a time;
  * pipelined gets (W concurrent coroutines): the most each client does, and its CPU per op;
  * gets at a fixed rate both clients sustain: their latency, CPU per op, and the loop's lag
    meanwhile (how late a 5 ms timer fires: p50 shows the timer's granularity, max the worst
    stall of the loop);
  * session expiry: the client's connection blackholed by a fault proxy: time to SUSPENDED and to
    EXPIRED; after healing, time to a new session;
  * member kill: kill -9 of the ensemble member the client is connected to: time to the session
    resumed elsewhere and to the first successful write.

    python bench/zkclient_bench.py              # everything (a few minutes)
    python bench/zkclient_bench.py --quick      # smaller counts
    python bench/zkclient_bench.py --skip-zookeeper --skip-ensemble

CPU time is the whole process's (kazoo's threads included), per op. Conditions are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import uvloop
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.protocol.states import KazooState
from kazoo.retry import KazooRetry
from tests.keeper.zkharness import (
    RawClient,
    four_letter,
    keeper_ensemble,
    keeper_process,
    wait_serving,
    zookeeper_available,
    zookeeper_ensemble,
    zookeeper_standalone,
)
from tests.support.faultproxy import FaultProxy
from tests.support.procs import start_roost

from roost.wire.zk.records import SetDataRequest
from roost.zkclient import Check, SessionEvent, SetData, ZkClient, ZkError

TICK_MS = 500  # lets sessions be as short as 1 s, so the expiry runs stay short
SESSION_TIMEOUT = 4.0
EXPIRY_TIMEOUT = 2.0


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# ------------------------------------------------------------------------- the two candidates


class KazooBridge:
    """(A) kazoo, as the field uses it, with each result and callback handed to the loop with
    call_soon_threadsafe. kazoo's own threads do the socket work and call our callbacks."""

    name = "A kazoo+bridge"

    def __init__(self, hosts: str, session_timeout: float) -> None:
        retry = KazooRetry(max_tries=-1, delay=0.02, backoff=2, max_delay=1.0)
        self.zk = KazooClient(hosts=hosts, timeout=session_timeout, connection_retry=retry)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.listeners: list[Callable[[str], None]] = []

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.zk.add_listener(self._on_state)
        await self.loop.run_in_executor(None, self.zk.start, 30)

    async def close(self) -> None:
        assert self.loop is not None
        await self.loop.run_in_executor(None, self._stop)

    def _stop(self) -> None:
        self.zk.stop()
        self.zk.close()

    @property
    def session_id(self) -> int:
        return self.zk.client_id[0] if self.zk.client_id else 0

    @property
    def server(self) -> str:
        try:
            host, port = self.zk._connection._socket.getpeername()[:2]
        except (OSError, AttributeError):
            return ""
        return f"{host}:{port}"

    def _on_state(self, state: str) -> None:  # kazoo's thread
        assert self.loop is not None
        for listener in self.listeners:
            self.loop.call_soon_threadsafe(listener, {KazooState.CONNECTED: "connected",
                                                      KazooState.SUSPENDED: "suspended",
                                                      KazooState.LOST: "expired"}[state])

    def _bridge(self, async_result: Any) -> asyncio.Future[Any]:
        loop = self.loop
        assert loop is not None
        future = loop.create_future()

        def done(result: Any) -> None:  # kazoo's completion thread
            try:
                value = result.get_nowait()
            except Exception as exc:
                loop.call_soon_threadsafe(_settle, future, None, exc)
            else:
                loop.call_soon_threadsafe(_settle, future, value, None)

        async_result.rawlink(done)
        return future

    def _watch(self, callback: Callable[[Any], None]) -> Callable[[Any], None]:
        loop = self.loop
        assert loop is not None
        return lambda event: loop.call_soon_threadsafe(callback, event)

    async def get(self, path: str, watch: Callable[[Any], None] | None = None) -> Any:
        return await self._bridge(self.zk.get_async(path, watch=self._watch(watch) if watch else None))

    async def exists(self, path: str, watch: Callable[[Any], None] | None = None) -> Any:
        return await self._bridge(self.zk.exists_async(path, watch=self._watch(watch) if watch else None))

    async def create(self, path: str, data: bytes = b"", ephemeral: bool = False) -> Any:
        return await self._bridge(self.zk.create_async(path, data, ephemeral=ephemeral))

    async def set(self, path: str, data: bytes, version: int = -1) -> Any:
        return await self._bridge(self.zk.set_async(path, data, version))

    async def check_and_set(self, path: str, data: bytes) -> Any:
        transaction = self.zk.transaction()
        transaction.check(path, -1)
        transaction.set_data(path, data)
        return await self._bridge(transaction.commit_async())


def _settle(future: asyncio.Future[Any], value: Any, exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(value)


class AsyncioClient:
    """(B) roost.zkclient.ZkClient, with the small surface the bench drives."""

    name = "B asyncio/jute"

    def __init__(self, hosts: str, session_timeout: float) -> None:
        self.zk = ZkClient(hosts, session_timeout=session_timeout)
        self.listeners: list[Callable[[str], None]] = []

    async def start(self) -> None:
        self.zk.add_listener(self._on_state)
        await self.zk.start()

    async def close(self) -> None:
        await self.zk.close()

    @property
    def session_id(self) -> int:
        return self.zk.session_id

    @property
    def server(self) -> str:
        return self.zk.server or ""

    def _on_state(self, event: SessionEvent) -> None:
        for listener in self.listeners:
            listener(event.state.value)

    async def get(self, path: str, watch: Callable[[Any], None] | None = None) -> Any:
        return await self.zk.get(path, watch)

    async def exists(self, path: str, watch: Callable[[Any], None] | None = None) -> Any:
        return await self.zk.exists(path, watch)

    async def create(self, path: str, data: bytes = b"", ephemeral: bool = False) -> Any:
        return await self.zk.create(path, data, ephemeral=ephemeral)

    async def set(self, path: str, data: bytes, version: int = -1) -> Any:
        return await self.zk.set(path, data, version)

    async def check_and_set(self, path: str, data: bytes) -> Any:
        return await self.zk.multi([Check(path, -1), SetData(path, data)])


Candidate = KazooBridge | AsyncioClient
CANDIDATES: list[type[KazooBridge] | type[AsyncioClient]] = [KazooBridge, AsyncioClient]
OPERATION_ERRORS = (ZkError, KazooException, OSError)


# ------------------------------------------------------------------------------- loop lag


class LagMonitor:
    """How late a 5 ms timer fires, sampled continuously while it runs."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.samples: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(self.interval)
            self.samples.append(time.perf_counter() - start - self.interval)

    def __enter__(self) -> LagMonitor:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()

    def summary(self) -> str:
        if not self.samples:
            return "no samples"
        ms = [s * 1000 for s in self.samples]
        return f"lag p50 {percentile(ms, 0.5):.2f} / p99 {percentile(ms, 0.99):.2f} / max {max(ms):.2f} ms"


# ---------------------------------------------------------------------------- measurements


async def request_latency(client: Candidate, root: str, count: int) -> dict[str, tuple[list[float], float]]:
    """Per op: latencies (ms) of `count` sequential requests and the process CPU seconds spent."""
    await client.create(f"{root}/g", b"x" * 100)
    await client.create(f"{root}/m", b"")
    figures: dict[str, tuple[list[float], float]] = {}
    ops: dict[str, Callable[[int], Awaitable[Any]]] = {
        "get": lambda i: client.get(f"{root}/g"),
        "create": lambda i: client.create(f"{root}/c{i}", b"y" * 100),
        "multi": lambda i: client.check_and_set(f"{root}/m", b"z" * 100),
    }
    for name, op in ops.items():
        for i in range(min(100, count)):  # warm up
            await op(-1 - i) if name != "create" else await op(count + i)
        samples = []
        cpu = time.process_time()
        for i in range(count):
            start = time.perf_counter()
            await op(i)
            samples.append((time.perf_counter() - start) * 1000)
        figures[name] = (samples, time.process_time() - cpu)
    return figures


async def pipelined_gets(client: Candidate, root: str, total: int, window: int) -> tuple[float, float, str]:
    """(ops/s, CPU µs per op, loop lag summary) for `total` gets from `window` coroutines."""
    path = f"{root}/g"
    remaining = [total]

    async def worker() -> None:
        while remaining[0] > 0:
            remaining[0] -= 1
            await client.get(path)

    with LagMonitor() as lag:
        cpu = time.process_time()
        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(window)))
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu
    return total / elapsed, cpu / total * 1e6, lag.summary()


async def paced_gets(client: Candidate, root: str, rate: float, seconds: float) -> tuple[list[float], float, str]:
    """Gets issued at a fixed `rate` (each as its own task) for `seconds`: (latencies in ms,
    CPU µs per op, loop lag). The same offered load for both clients, below either one's limit."""
    path = f"{root}/g"
    loop = asyncio.get_running_loop()
    samples: list[float] = []
    tasks: set[asyncio.Task[None]] = set()

    async def one() -> None:
        start = time.perf_counter()
        await client.get(path)
        samples.append((time.perf_counter() - start) * 1000)

    with LagMonitor() as lag:
        cpu = time.process_time()
        began = time.perf_counter()
        issued = 0
        while (elapsed := time.perf_counter() - began) < seconds:
            for _ in range(int(elapsed * rate) - issued):
                task = loop.create_task(one())
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                issued += 1
            await asyncio.sleep(0.002)
        async with asyncio.timeout(60):
            while tasks:
                await asyncio.sleep(0.01)
        cpu = time.process_time() - cpu
    return samples, cpu / max(issued, 1) * 1e6, lag.summary()


class Writer:
    """Another client, in another process: writes a path on request and reports when it began."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> Writer:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--writer", self.address,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.close()
        async with asyncio.timeout(30):
            await self.proc.wait()

    async def write(self, path: str) -> int:
        """Have the other process set `path`; returns its CLOCK_MONOTONIC (ns) just before."""
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(path.encode() + b"\n")
        await self.proc.stdin.drain()
        async with asyncio.timeout(30):
            line = await self.proc.stdout.readline()
        return int(line)


def writer_main(address: str) -> None:
    client = RawClient(address)
    for line in sys.stdin:
        path = line.strip()
        began = time.monotonic_ns()
        client.request(SetDataRequest(path, b"w", -1))
        sys.stdout.write(f"{began}\n")
        sys.stdout.flush()


async def watch_to_action(client: Candidate, address: str, root: str, rounds: int) -> tuple[list[float], str]:
    """Latencies (ms) from another process's write to our watch callback running on the loop."""
    path = f"{root}/w"
    await client.create(path, b"")
    loop = asyncio.get_running_loop()
    samples = []
    async with Writer(address) as writer:
        with LagMonitor() as lag:
            for _ in range(rounds):
                fired: asyncio.Future[int] = loop.create_future()

                def on_event(_event: Any, fired: asyncio.Future[int] = fired) -> None:
                    if not fired.done():
                        fired.set_result(time.monotonic_ns())

                await client.exists(path, watch=on_event)
                began = await writer.write(path)
                async with asyncio.timeout(30):
                    ran = await fired
                samples.append((ran - began) / 1e6)
    return samples, lag.summary()


class StateLog:
    """Session state changes with their times (monotonic seconds)."""

    def __init__(self, client: Candidate) -> None:
        self.events: list[tuple[float, str]] = []
        client.listeners.append(lambda state: self.events.append((time.monotonic(), state)))

    async def wait(self, state: str, after: float, timeout: float) -> float | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for at, seen in self.events:
                if seen == state and at >= after:
                    return at
            await asyncio.sleep(0.002)
        return None


async def session_expiry(factory: type[KazooBridge] | type[AsyncioClient], address: str, root: str) -> dict[str, Any]:
    """Blackhole the client's only connection until the server has expired the session, heal,
    and time what the client reports."""
    host, port = address.rsplit(":", 1)
    proxy = FaultProxy((host, int(port)))
    listen = await proxy.start()
    client = factory(f"{listen[0]}:{listen[1]}", EXPIRY_TIMEOUT)
    states = StateLog(client)
    await client.start()
    figures: dict[str, Any] = {}
    try:
        await client.create(root, b"")
        await client.create(f"{root}/eph", b"", ephemeral=True)
        old_session = client.session_id
        cut = time.monotonic()
        proxy.blackhole()
        suspended = await states.wait("suspended", cut, 10)
        expired_early = await states.wait("expired", cut, EXPIRY_TIMEOUT + 1.0)
        # The server expires the session within a tick or two past the timeout; then heal.
        await asyncio.sleep(max(0.0, cut + EXPIRY_TIMEOUT + 3 * TICK_MS / 1000 - time.monotonic()))
        proxy.cut()  # drop the blackholed connections, then let new ones through
        proxy.heal()
        healed = time.monotonic()
        expired = expired_early or await states.wait("expired", cut, 20)
        connected = await states.wait("connected", healed, 20)
        first_write = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                await client.create(f"{root}/eph", b"", ephemeral=True)
                first_write = time.monotonic()
                break
            except OPERATION_ERRORS:
                await asyncio.sleep(0.01)
        figures = {
            "cut -> SUSPENDED": _since(cut, suspended),
            "cut -> EXPIRED": _since(cut, expired),
            "EXPIRED before heal": expired_early is not None,
            "heal -> new session CONNECTED": _since(healed, connected),
            "heal -> first write in the new session": _since(healed, first_write),
            "new session id": client.session_id not in (0, old_session),
        }
    finally:
        await client.close()
        await proxy.stop()
    return figures


def _since(start: float, end: float | None) -> float | None:
    return None if end is None else end - start


def _mode(address: str) -> str:
    try:
        for line in four_letter(address, "srvr", timeout=2).splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "down"


async def member_kill(factory: type[KazooBridge] | type[AsyncioClient], addresses: list[str],
                      kill: Callable[[int], None], restart: Callable[[int], None], kills: int,
                      root: str) -> list[dict[str, Any]]:
    """kill -9 of the member the client is connected to: time to the session resumed (same id)
    and to the first successful write."""
    loop = asyncio.get_running_loop()
    client = factory(",".join(addresses), SESSION_TIMEOUT)
    states = StateLog(client)
    await client.start()
    runs = []
    try:
        await client.create(root, b"")
        await client.create(f"{root}/eph", b"", ephemeral=True)
        for round_ in range(kills):
            await _wait_healthy(addresses)
            # A member refuses a client that has seen more than it has applied: let all catch up.
            await asyncio.sleep(0.3)
            server = client.server
            index = addresses.index(server)
            role = _mode(server)
            session = client.session_id
            killed = time.monotonic()
            await loop.run_in_executor(None, kill, index)
            reconnected = await states.wait("connected", killed, 30)
            wrote = None
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    await client.set(root, f"{round_}".encode())
                    wrote = time.monotonic()
                    break
                except OPERATION_ERRORS:
                    await asyncio.sleep(0.005)
            kept = client.session_id == session and await client.exists(f"{root}/eph") is not None
            runs.append({"role": role, "reconnect": _since(killed, reconnected),
                         "first write": _since(killed, wrote), "session kept": kept})
            await loop.run_in_executor(None, restart, index)
    finally:
        await client.close()
    return runs


async def _wait_healthy(addresses: list[str], timeout: float = 120) -> None:
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + timeout
    while True:
        modes = await loop.run_in_executor(None, lambda: [_mode(a) for a in addresses])
        if "leader" in modes and modes.count("follower") == len(addresses) - 1:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"ensemble not healthy: {modes}")
        await asyncio.sleep(0.1)


# ------------------------------------------------------------------------------- reporting


def header(title: str) -> None:
    print(f"\n== {title} ==", flush=True)


def fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:.3f}{unit}"
    return f"{value}{unit}"


async def bench_server(server: str, address: str, args: argparse.Namespace) -> None:
    stamp = time.monotonic_ns()
    header(f"{server}: request latency, one request at a time ({args.ops} each), ms")
    print(f"{'client':<16} {'op':<7} {'p50':>7} {'p99':>7} {'max':>7} {'CPU µs/op':>10}")
    for order in range(args.rounds):
        for factory in CANDIDATES if order % 2 == 0 else list(reversed(CANDIDATES)):
            client = factory(address, SESSION_TIMEOUT)
            await client.start()
            root = f"/zkc-bench-{stamp}-{order}-{factory.__name__}"
            try:
                await client.create(root, b"")
                figures = await request_latency(client, root, args.ops)
            finally:
                await client.close()
            for op, (samples, cpu) in figures.items():
                print(f"{factory.name:<16} {op:<7} {percentile(samples, 0.5):7.3f} "
                      f"{percentile(samples, 0.99):7.3f} {max(samples):7.3f} {cpu / len(samples) * 1e6:10.0f}")

    header(f"{server}: pipelined gets ({args.pipeline_ops} from {args.window} coroutines)")
    for order in range(args.rounds):
        for factory in CANDIDATES if order % 2 == 0 else list(reversed(CANDIDATES)):
            client = factory(address, SESSION_TIMEOUT)
            await client.start()
            root = f"/zkc-bench-p-{stamp}-{order}-{factory.__name__}"
            try:
                await client.create(root, b"")
                await client.create(f"{root}/g", b"x" * 100)
                with LagMonitor() as idle:
                    await asyncio.sleep(0.5)
                rate, cpu_us, lag = await pipelined_gets(client, root, args.pipeline_ops, args.window)
            finally:
                await client.close()
            print(f"{factory.name:<16} {rate:8.0f} ops/s  CPU {cpu_us:5.0f} µs/op  {lag}  "
                  f"(idle: {idle.summary()})")

    header(f"{server}: gets at a fixed {args.rate:.0f}/s for {args.paced_seconds} s: latency (ms), loop lag")
    for order in range(args.rounds):
        for factory in CANDIDATES if order % 2 == 0 else list(reversed(CANDIDATES)):
            client = factory(address, SESSION_TIMEOUT)
            await client.start()
            root = f"/zkc-bench-r-{stamp}-{order}-{factory.__name__}"
            try:
                await client.create(root, b"")
                await client.create(f"{root}/g", b"x" * 100)
                samples, cpu_us, lag = await paced_gets(client, root, args.rate, args.paced_seconds)
            finally:
                await client.close()
            print(f"{factory.name:<16} p50 {percentile(samples, 0.5):6.3f}  p99 {percentile(samples, 0.99):6.3f}  "
                  f"max {max(samples):6.3f}  CPU {cpu_us:5.0f} µs/op  {lag}")

    header(f"{server}: watch-to-action, another process writes -> callback on our loop ({args.watch_rounds} rounds), ms")
    for order in range(args.rounds):
        for factory in CANDIDATES if order % 2 == 0 else list(reversed(CANDIDATES)):
            client = factory(address, SESSION_TIMEOUT)
            await client.start()
            root = f"/zkc-bench-w-{stamp}-{order}-{factory.__name__}"
            try:
                await client.create(root, b"")
                cpu = time.process_time()
                samples, lag = await watch_to_action(client, address, root, args.watch_rounds)
                cpu = time.process_time() - cpu
            finally:
                await client.close()
            print(f"{factory.name:<16} p50 {percentile(samples, 0.5):6.3f}  p99 {percentile(samples, 0.99):6.3f}  "
                  f"max {max(samples):6.3f}  CPU {cpu / len(samples) * 1e6:5.0f} µs/round  {lag}")

    header(f"{server}: session expiry (session timeout {EXPIRY_TIMEOUT} s, connection blackholed), s")
    for factory in CANDIDATES:
        for run in range(args.expiry_runs):
            figures = await session_expiry(factory, address, f"/zkc-bench-x-{stamp}-{factory.__name__}-{run}")
            print(f"{factory.name:<16} " + "  ".join(f"{k}: {fmt(v)}" for k, v in figures.items()))


async def bench_ensemble(server: str, addresses: list[str], kill: Callable[[int], None],
                         restart: Callable[[int], None], args: argparse.Namespace) -> None:
    header(f"{server} 3-member ensemble: kill -9 of the member the client is on "
           f"(session timeout {SESSION_TIMEOUT} s), s")
    stamp = time.monotonic_ns()
    for factory in CANDIDATES:
        runs = await member_kill(factory, addresses, kill, restart, args.kills,
                                 f"/zkc-bench-k-{stamp}-{factory.__name__}")
        for run in runs:
            print(f"{factory.name:<16} killed a {run['role']:<8} reconnect {fmt(run['reconnect'])}  "
                  f"first write {fmt(run['first write'])}  session and ephemeral kept: {fmt(run['session kept'])}")
        for role in sorted({run["role"] for run in runs}):
            mine = [r for r in runs if r["role"] == role]
            reconnects = [r["reconnect"] for r in mine if r["reconnect"] is not None]
            writes = [r["first write"] for r in mine if r["first write"] is not None]
            if reconnects and writes:
                print(f"{factory.name:<16} {role} killed ({len(mine)}x): median reconnect "
                      f"{statistics.median(reconnects):.3f}  median first write {statistics.median(writes):.3f}")


def conditions(args: argparse.Namespace) -> None:
    print("zkclient bench: (A) kazoo + call_soon_threadsafe bridge vs (B) roost.zkclient (asyncio on wire/zk)")
    print(f"  {platform.python_implementation()} {platform.python_version()}, uvloop {uvloop.__version__}, "
          f"kazoo {__import__('kazoo').__version__}, {os.cpu_count()} CPUs, load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"  servers on loopback with tickTime {TICK_MS} ms, no fsync (keeper forceSync=false; ZooKeeper "
          f"on tmpfs-like defaults); client, servers and writer share the machine's cores")
    print(f"  rounds alternate the order of A and B: {args.rounds}; session timeout {SESSION_TIMEOUT} s")


@contextlib.contextmanager
def standalone_servers(work: Path, with_zookeeper: bool) -> Iterator[dict[str, str]]:
    with contextlib.ExitStack() as stack:
        servers = {"keeper": stack.enter_context(keeper_process(work / "keeper")).address("keeper")}
        if with_zookeeper:
            servers["zookeeper"] = stack.enter_context(zookeeper_standalone(work / "zk")).address
        yield servers


async def run(args: argparse.Namespace) -> None:
    with_zookeeper = not args.skip_zookeeper and zookeeper_available()
    conditions(args)
    with tempfile.TemporaryDirectory(prefix="zkclient-bench-") as tmp:
        work = Path(tmp)
        if not args.skip_standalone:
            with standalone_servers(work / "standalone", with_zookeeper) as servers:
                for server, address in servers.items():
                    await bench_server(server, address, args)
        if args.skip_ensemble:
            return
        with keeper_ensemble(work / "keepers", fixed_client_ports=True) as keepers:
            def kill_keeper(index: int) -> None:
                keepers[index].kill9()

            def restart_keeper(index: int) -> None:
                keepers[index] = start_roost(keepers[index].args, expect=("keeper",))

            try:
                await bench_ensemble("keeper", [p.address("keeper") for p in keepers], kill_keeper,
                                     restart_keeper, args)
            finally:
                for proc in keepers:
                    proc.stop()
        if with_zookeeper:
            with zookeeper_ensemble(work / "zks") as zks:
                def kill_zk(index: int) -> None:
                    zks[index].kill9()

                def restart_zk(index: int) -> None:
                    zks[index].restart()
                    wait_serving(zks[index])

                await bench_ensemble("zookeeper", [z.address for z in zks], kill_zk, restart_zk, args)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writer", help=argparse.SUPPRESS)  # the other-process writer's mode
    parser.add_argument("--quick", action="store_true", help="smaller counts")
    parser.add_argument("--skip-zookeeper", action="store_true")
    parser.add_argument("--skip-ensemble", action="store_true")
    parser.add_argument("--skip-standalone", action="store_true")
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pipeline-ops", type=int, default=20000)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--watch-rounds", type=int, default=500)
    parser.add_argument("--rate", type=float, default=1500.0, help="gets per second in the paced phase")
    parser.add_argument("--paced-seconds", type=float, default=5.0)
    parser.add_argument("--expiry-runs", type=int, default=2)
    parser.add_argument("--kills", type=int, default=6)
    args = parser.parse_args()
    if args.writer:
        writer_main(args.writer)
        return 0
    if args.quick:
        args.ops, args.pipeline_ops, args.watch_rounds = 300, 3000, 100
        args.expiry_runs, args.kills, args.rounds, args.paced_seconds = 1, 2, 1, 2.0
    logging.basicConfig(level=logging.WARNING, format="  [log] %(name)s: %(message)s")
    uvloop.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
