"""`roost up --brokers N [--keepers K | --zookeeper HOST:PORT,...]`: a local cluster in one command.

This process supervises children: K keepers (`roost keeper --config DIR/keeper-I.toml`) forming
one ensemble, then N brokers (`roost broker --config DIR/broker-I.toml`, ids 1..N, logs in
DIR/broker-I) that join it; with --zookeeper no keeper is started and the brokers use that
ensemble. Every port is chosen before anything starts, so each config is complete when written.

Each child's stdout lines are relayed, named (`roost: keeper 2 listening on ...`,
`roost: broker 1 kafka listening on ...`); its stderr (its log) goes to DIR/<name>.log. Nothing is
restarted: a child that exits is reported (`roost: broker 2 exited with status -9`) and the others
keep running. SIGTERM, SIGINT or SIGHUP stop the brokers one at a time (SIGTERM, so each does a
controlled shutdown), then the keepers, each with a bounded wait before SIGKILL; a second signal
kills whatever is left at once. The children run in their own process group, so a Ctrl-C in the
terminal reaches only this supervisor, which then stops them in that order; on Linux each child
also gets SIGTERM should the supervisor itself die.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import ctypes.util
import os
import signal
import socket
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from roost.cli.node import GivenSettings
from roost.config import ConfigError
from roost.keeper.config import ConfigError as KeeperConfigError
from roost.keeper.config import KeeperConfig
from roost.zkclient.connect_string import parse_connect_string

# Keepers tick every 500 ms so that the ensemble grants sessions from 1 s: the brokers' short
# zookeeper.session.timeout.ms (2 s) is what makes failover fast.
KEEPER_TICK_MS = 500
MAX_REPLICATION = 3  # offsets.topic.replication.factor and default.replication.factor: min(3, N)
STARTUP_TIMEOUT_S = 60.0  # per group of children, for their listening lines
QUORUM_TIMEOUT_S = 30.0
BROKER_STOP_TIMEOUT_S = 30.0  # a controlled shutdown retries, so give it time before SIGKILL
KEEPER_STOP_TIMEOUT_S = 10.0
ENSEMBLE_SIZES = (1, 3, 5, 7)

# Set per broker by the supervisor; a user's value would make the brokers collide.
PER_BROKER_SETTINGS = {
    "broker.id": "the brokers get ids 1..N",
    "listeners": "each broker gets its own port (--host and --kafka-port choose them)",
    "advertised.listeners": "each broker advertises its own listener",
    "log.dirs": "each broker keeps its logs in DATA_DIR/broker-ID (--data-dir chooses DATA_DIR)",
    "zookeeper.connect": "give --zookeeper HOST:PORT[,...] to use an existing ensemble",
}
PER_KEEPER_SETTINGS = ("myid", "server", "dataDir", "clientPort", "clientPortAddress")


@dataclass(frozen=True)
class ChildSpec:
    """One child process: what it is, its config file's content, and where it listens."""

    kind: str  # "keeper" or "broker"
    ident: int
    config: dict[str, Any]
    data_dir: Path  # the cluster's directory, where the config and log files go
    address: tuple[str, int]

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.ident}"

    @property
    def label(self) -> str:
        return f"{self.kind} {self.ident}"

    @property
    def config_path(self) -> Path:
        return self.data_dir / f"{self.name}.toml"

    @property
    def log_path(self) -> Path:
        return self.data_dir / f"{self.name}.log"

    def argv(self, log_level: str) -> list[str]:
        return [sys.executable, "-m", "roost.cli.main", self.kind, "--config", str(self.config_path),
                "--log-level", log_level]


@dataclass(frozen=True)
class ClusterPlan:
    data_dir: Path
    keepers: list[ChildSpec]
    brokers: list[ChildSpec]
    zookeeper_connect: str
    log_level: str = "INFO"

    def write_configs(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for spec in [*self.keepers, *self.brokers]:
            spec.config_path.write_text(
                f"# written by roost up for {spec.label}; rewritten at every start\n" + tomli_w.dumps(spec.config))


# ----------------------------------------------------------------------------------- planning


def plan_from_args(args: argparse.Namespace, settings: GivenSettings) -> ClusterPlan:
    """Check roost up's cluster flags and settings and choose every port; raises ConfigError."""
    if args.no_keeper:
        raise ConfigError("--no-keeper: with --brokers, give --zookeeper HOST:PORT[,...] to start no keeper")
    if args.zookeeper is not None and args.keepers is not None:
        raise ConfigError("--keepers and --zookeeper exclude each other: --zookeeper uses an existing ensemble")
    keepers = 0 if args.zookeeper is not None else (args.keepers or (3 if args.brokers > 1 else 1))
    if keepers and keepers not in ENSEMBLE_SIZES:
        raise ConfigError(f"--keepers {keepers}: an ensemble has 1, 3, 5 or 7 members")
    if args.zookeeper is not None:
        try:
            parse_connect_string(args.zookeeper)
        except ValueError as problem:
            raise ConfigError(f"--zookeeper {args.zookeeper!r}: {problem}") from None
    data_dir = args.data_dir.absolute()
    peers = keepers if keepers > 1 else 0  # a single keeper runs standalone: no peer port
    ports = choose_ports(args.host, [*consecutive(args.keeper_port, keepers), *[None] * peers,
                                     *consecutive(args.kafka_port, args.brokers)])
    keeper_ports, peer_ports, broker_ports = ports[:keepers], ports[keepers:keepers + peers], ports[keepers + peers:]
    keeper_specs = plan_keepers(data_dir, args.host, keeper_ports, peer_ports, settings)
    connect = args.zookeeper or ",".join(f"{hostport(*spec.address)}" for spec in keeper_specs)
    broker_specs = plan_brokers(data_dir, args.host, broker_ports, connect, settings)
    return ClusterPlan(data_dir, keeper_specs, broker_specs, connect, args.log_level)


def plan_brokers(data_dir: Path, host: str, ports: list[int], connect: str,
                 settings: GivenSettings) -> list[ChildSpec]:
    given = settings.names()
    for name, why in PER_BROKER_SETTINGS.items():
        if name in given:
            raise ConfigError(f"setting '{name}' is chosen per broker by roost up --brokers: {why}")
    count = len(ports)
    replication = {name: min(MAX_REPLICATION, count)
                   for name in ("offsets.topic.replication.factor", "default.replication.factor")
                   if name not in given}
    shared = settings.build()
    for name in ("offsets.topic.replication.factor", "default.replication.factor"):
        if shared[name] > count:
            raise ConfigError(f"setting '{name}' = {shared[name]} needs at least {shared[name]} brokers; "
                              f"--brokers is {count}")
    # The user's settings with their checked values, the same in every broker's file.
    common = {name: shared[name] for name in sorted(given)}
    specs = []
    for broker_id, port in enumerate(ports, start=1):
        own = {"broker.id": broker_id, "listeners": f"PLAINTEXT://{hostport(host, port)}",
               "log.dirs": str(data_dir / f"broker-{broker_id}"), "zookeeper.connect": connect,
               **replication}
        settings.build(("roost up --brokers", own))  # the child would refuse what this refuses
        specs.append(ChildSpec("broker", broker_id, {**common, **own}, data_dir, (host, port)))
    return specs


def plan_keepers(data_dir: Path, host: str, client_ports: list[int], peer_ports: list[int],
                 settings: GivenSettings) -> list[ChildSpec]:
    for name in settings.keeper:
        if name.split(".", 1)[0] in PER_KEEPER_SETTINGS:
            raise ConfigError(f"keeper setting '{name}' is chosen per keeper by roost up --brokers")
    session_ms = settings.build()["zookeeper.session.timeout.ms"]
    raw_tick = settings.keeper.get("tickTime", KEEPER_TICK_MS)
    try:
        tick = int(raw_tick)
    except (TypeError, ValueError):
        raise ConfigError(f"keeper setting 'tickTime': must be an integer, got {raw_tick!r}") from None
    # The ensemble must grant the brokers' session timeout, whatever the user chose.
    common: dict[str, Any] = {"tickTime": tick, "minSessionTimeout": min(2 * tick, session_ms),
                              "maxSessionTimeout": max(20 * tick, session_ms), **settings.keeper}
    servers = {str(sid): hostport(host, port) for sid, port in enumerate(peer_ports, start=1)}
    specs = []
    for myid, port in enumerate(client_ports, start=1):
        config = {**common, "myid": myid, "dataDir": str(data_dir / f"keeper-{myid}"),
                  "clientPort": port, "clientPortAddress": host}
        if servers:
            config["server"] = servers
        try:
            KeeperConfig.from_mapping(config)  # the child would refuse what this refuses
        except KeeperConfigError as error:
            raise ConfigError(f"keeper {myid}: {error}") from None
        specs.append(ChildSpec("keeper", myid, config, data_dir, (host, port)))
    return specs


def consecutive(first: int | None, count: int) -> list[int | None]:
    """`first`, first + 1, ... when a first port is given (not 0); else `count` free ones (None)."""
    if not first:
        return [None] * count
    if first + count - 1 > 65535:
        raise ConfigError(f"port {first}: {count} consecutive ports do not fit below 65536")
    return [first + i for i in range(count)]


def choose_ports(host: str, wanted: list[int | None]) -> list[int]:
    """One port per entry of `wanted`: that port, or a free one for None. All are bound at once,
    so no free port repeats or equals a given one, and a given port in use is refused here,
    before anything starts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sockets: list[socket.socket] = []
    try:
        for port in wanted:
            sock = socket.socket(family)
            sockets.append(sock)
            # As the servers bind: a port left in TIME_WAIT by an earlier run is free.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port or 0))
            except OSError as error:
                raise ConfigError(f"cannot listen on {hostport(host, port or 0)}: {error}") from None
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


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


# -------------------------------------------------------------------------------- supervising


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
    def __init__(self, plan: ClusterPlan) -> None:
        self.plan = plan
        self.children: list[Child] = []
        self.stop = asyncio.Event()
        self.force = asyncio.Event()  # a second signal: kill what is left at once
        self.running = False  # all started; from now on an exit is reported and tolerated
        self.an_exit = asyncio.Event()  # set whenever a child exits
        self._arm = _parent_death_signal()

    def on_signal(self) -> None:
        if self.stop.is_set():
            if not self.force.is_set():
                print("roost: second signal: killing every process now", flush=True)
            self.force.set()
        self.stop.set()

    async def run(self) -> int:
        plan = self.plan
        plan.write_configs()
        names = [spec.name for spec in [*plan.keepers, *plan.brokers]]
        what = f"{_count(len(plan.brokers), 'broker')}"
        what = f"{_count(len(plan.keepers), 'keeper')} and {what}" if plan.keepers else f"{what} (ZooKeeper at {plan.zookeeper_connect})"
        print(f"roost: starting {what} in {plan.data_dir}; each one's log goes to {plan.data_dir}/<name>.log "
              f"({', '.join(names)})", flush=True)
        try:
            if plan.keepers:
                if not await self._start_group(plan.keepers):
                    return 0 if self.stop.is_set() else 1
                await self._await_quorum()
            if not await self._start_group(plan.brokers):
                return 0 if self.stop.is_set() else 1
            self.running = True
            bootstrap = ",".join(hostport(*spec.address) for spec in plan.brokers)
            print(f"roost: cluster ready: bootstrap servers {bootstrap}; zookeeper.connect {plan.zookeeper_connect}",
                  flush=True)
            while not self.stop.is_set():
                if all(child.exited.is_set() for child in self.children):
                    print("roost: every process has exited", flush=True)
                    return 1
                self.an_exit.clear()
                await first_of([self.stop, self.an_exit])
            return 0
        finally:
            self.running = False
            await self._stop_all()
            print("roost: stopped", flush=True)

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
                    print(f"roost: {late} did not listen within {STARTUP_TIMEOUT_S:.0f} s; stopping", flush=True)
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
        print(f"roost: {child.spec.label} exited with status {child.process.returncode} before listening; "
              f"its log is {child.spec.log_path}", flush=True)
        for line in _tail(child.spec.log_path, 5):
            print(f"roost: {child.spec.label}: {line}", file=sys.stderr, flush=True)
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
        while True:
            try:
                raw = await stream.readline()
            except ValueError:  # a line past the stream's limit: skip what was read of it
                continue
            if not raw:
                break
            line = raw.decode(errors="replace").rstrip("\n")
            print(relabel(line, child.spec.kind, child.spec.ident), flush=True)
            if " listening on " in line:
                child.listening.set()
        status = await child.process.wait()
        if self.running and not child.stopping:
            print(f"roost: {child.spec.label} exited with status {status}", flush=True)
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
            print(f"roost: no keeper leads after {QUORUM_TIMEOUT_S:.0f} s; starting the brokers anyway", flush=True)

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
                print(f"roost: {child.spec.label} did not stop within {timeout:.0f} s; killing it", flush=True)
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
        answer = await asyncio.wait_for(reader.read(4096), 2.0)
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


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _tail(path: Path, count: int) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-count:]
    except OSError:
        return []


async def supervise(plan: ClusterPlan) -> int:
    supervisor = Supervisor(plan)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(signum, supervisor.on_signal)
    return await supervisor.run()
