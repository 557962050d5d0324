"""Test helpers for the keeper: real ZooKeeper and keeper processes, a raw protocol client, and
the recording/normalising used by the differential tests.

Every process started here is stopped by the context manager that started it; every wait is
bounded.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.protocol.states import Callback, ZnodeStat
from kazoo.security import ACL as KazooACL

from roost.wire.zk.connection import ClientConnection, ConnectedEvent, ReplyEvent, WatchEvent
from roost.wire.zk.constants import OpCode
from roost.wire.zk.records import ConnectRequest, EmptyRequest, Request
from tests.support import referees
from tests.support.jvm import referee_classpath
from tests.support.procs import RoostProcess, free_ports, start_roost, stop_process, wait_for

ZK_JARS = ["/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-log4j12.jar",
           "/usr/share/java/log4j-1.2.jar"]
TICK_MS = 500  # both servers: session timeouts negotiated within [1000, 10000] ms


# The ZooKeepers the keeper is compared with: Debian's 3.8 and 3.9 from Maven Central (installed
# by scripts/setup.sh test into the referee cache, tests/support/jvm.py).
ZK_VERSIONS = ("3.8", "3.9")


def zookeeper_available(version: str = "3.8") -> bool:
    if version == "3.9":
        return referee_classpath("zookeeper-3.9") is not None
    return shutil.which("java") is not None and all(Path(jar).exists() for jar in ZK_JARS)


def require_zookeeper(version: str = "3.8") -> None:
    """Skip the running test as a missing referee unless ZooKeeper `version` is installed."""
    if not zookeeper_available(version):
        referees.skip(referees.ZOOKEEPER_39 if version == "3.9" else referees.ZOOKEEPER)


def zookeeper_jars(version: str = "3.8") -> list[str]:
    if version == "3.9":
        classpath = referee_classpath("zookeeper-3.9")
        assert classpath is not None, "ZooKeeper 3.9 is not installed (check zookeeper_available first)"
        return classpath.split(":")
    return ZK_JARS


def four_letter(address: str, word: str, timeout: float = 10.0) -> str:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(word.encode())
        chunks = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode()


def wait_until(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition",
               interval: float = 0.02) -> Any:
    """`tests.support.procs.wait_for` with the keeper tests' argument order and a finer poll."""
    return wait_for(predicate, timeout, interval, what)


# ------------------------------------------------------------------------- real ZooKeeper


@dataclass
class ZooKeeperProcess:
    popen: subprocess.Popen[bytes]
    address: str
    log_path: Path
    command: list[str] = field(default_factory=list)
    directory: Path | None = None

    def restart(self) -> None:
        """Start the same server again (same config, ports and data) after it stopped."""
        assert self.popen.poll() is not None, "stop it first"
        self.popen = subprocess.Popen(self.command, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, cwd=self.directory)

    def stop(self) -> None:
        stop_process(self.popen, timeout=20)

    def kill9(self) -> None:
        stop_process(self.popen, signal.SIGKILL, timeout=20)


def _zk_config(directory: Path, client_port: int, myid: int | None = None,
               ensemble: dict[int, tuple[int, int]] | None = None, tick_ms: int = TICK_MS,
               extra_lines: tuple[str, ...] = ()) -> Path:
    conf = directory / "conf"
    data = directory / "data"
    conf.mkdir(parents=True, exist_ok=True)
    data.mkdir(parents=True, exist_ok=True)
    lines = [
        f"tickTime={tick_ms}",
        f"dataDir={data}",
        f"clientPort={client_port}",
        "clientPortAddress=127.0.0.1",
        "4lw.commands.whitelist=*",
        "admin.enableServer=false",
        "initLimit=20",
        "syncLimit=10",
        "maxClientCnxns=0",
        *extra_lines,
    ]
    if ensemble:
        assert myid is not None
        (data / "myid").write_text(f"{myid}\n")
        for sid, (quorum_port, election_port) in sorted(ensemble.items()):
            lines.append(f"server.{sid}=127.0.0.1:{quorum_port}:{election_port}")
    (conf / "zoo.cfg").write_text("\n".join(lines) + "\n")
    (conf / "log4j.properties").write_text(
        "log4j.rootLogger=INFO, FILE\n"
        "log4j.appender.FILE=org.apache.log4j.FileAppender\n"
        f"log4j.appender.FILE.File={directory / 'zookeeper.log'}\n"
        "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.FILE.layout.ConversionPattern=%d %-5p [%t:%C{1}@%L] - %m%n\n"
    )
    return conf


def _launch_zk(directory: Path, client_port: int, jvm_args: tuple[str, ...] = (), version: str = "3.8",
               **kwargs: Any) -> ZooKeeperProcess:
    conf = _zk_config(directory, client_port, **kwargs)
    classpath = ":".join([str(conf), *zookeeper_jars(version)])
    command = ["java", "-Xmx256m", "-XX:+UseSerialGC", *jvm_args, "-cp", classpath,
               "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(conf / "zoo.cfg")]
    popen = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=directory)
    return ZooKeeperProcess(popen, f"127.0.0.1:{client_port}", directory / "zookeeper.log", command,
                            directory)


def serving(address: str) -> bool:
    """Whether the member at `address` (ZooKeeper or keeper) is in a quorum and serves clients."""
    try:
        answer = four_letter(address, "srvr", timeout=2.0)
    except OSError:
        return False
    return "Mode:" in answer and "not currently serving" not in answer


def wait_serving(process: ZooKeeperProcess, timeout: float = 90.0) -> None:
    def ready() -> bool:
        if process.popen.poll() is not None:
            raise AssertionError(f"ZooKeeper exited: {process.log_path.read_text()[-3000:]}")
        return serving(process.address)

    wait_until(ready, timeout, f"ZooKeeper at {process.address}", interval=0.2)


@contextlib.contextmanager
def zookeeper_standalone(directory: Path, tick_ms: int = TICK_MS, version: str = "3.8") -> Iterator[ZooKeeperProcess]:
    (client_port,) = free_ports(1)
    process = _launch_zk(directory, client_port, tick_ms=tick_ms, version=version)
    try:
        wait_serving(process)
        yield process
    finally:
        process.stop()


@contextlib.contextmanager
def zookeeper_secured(directory: Path, sasl_users: dict[str, str], extra_lines: tuple[str, ...] = (),
                      jvm_args: tuple[str, ...] = (), tick_ms: int = TICK_MS) -> Iterator[ZooKeeperProcess]:
    """A standalone ZooKeeper with SASL DIGEST-MD5 users, configured as ZooKeeper's docs say: a
    JAAS `Server` section with DigestLoginModule and the SASL authentication provider."""
    directory.mkdir(parents=True, exist_ok=True)
    jaas = directory / "jaas.conf"
    entries = "\n".join(f'    user_{name}="{password}"' for name, password in sasl_users.items())
    jaas.write_text(f"Server {{\n    org.apache.zookeeper.server.auth.DigestLoginModule required\n{entries};\n}};\n")
    (client_port,) = free_ports(1)
    process = _launch_zk(directory, client_port, tick_ms=tick_ms,
                         extra_lines=("authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
                                      *extra_lines),
                         jvm_args=(f"-Djava.security.auth.login.config={jaas}", *jvm_args))
    try:
        wait_serving(process)
        yield process
    finally:
        process.stop()


@contextlib.contextmanager
def zookeeper_reconfigurable(directory: Path, super_digest: str, tick_ms: int = TICK_MS,
                             version: str = "3.8") -> Iterator[ZooKeeperProcess]:
    """One ZooKeeper in quorum mode (`standaloneEnabled=false`: a one-member ensemble, the
    smallest that takes `reconfig`) with `reconfigEnabled` and a super user's digest."""
    quorum_port, election_port, client_port = free_ports(3)
    process = _launch_zk(directory, client_port, myid=1, ensemble={1: (quorum_port, election_port)},
                         tick_ms=tick_ms, extra_lines=("standaloneEnabled=false", "reconfigEnabled=true"),
                         version=version,
                         jvm_args=(f"-Dzookeeper.DigestAuthenticationProvider.superDigest={super_digest}",))
    try:
        wait_serving(process)
        yield process
    finally:
        process.stop()


@contextlib.contextmanager
def zookeeper_ensemble(directory: Path, size: int = 3, tick_ms: int = TICK_MS) -> Iterator[list[ZooKeeperProcess]]:
    # Every port at once: ports picked one at a time can repeat (each is free when picked).
    ports = free_ports(3 * size)
    sids = range(1, size + 1)
    ensemble = {sid: (ports[3 * i], ports[3 * i + 1]) for i, sid in enumerate(sids)}
    client_ports = {sid: ports[3 * i + 2] for i, sid in enumerate(sids)}
    processes: list[ZooKeeperProcess] = []
    try:
        for sid in ensemble:
            processes.append(_launch_zk(directory / f"zk{sid}", client_ports[sid], myid=sid, ensemble=ensemble,
                                        tick_ms=tick_ms))
        for process in processes:
            wait_serving(process)
        yield processes
    finally:
        for process in processes:
            process.stop()


# ---------------------------------------------------------------------------------- keepers


def keeper_config(directory: Path, client_port: int = 0, extra: dict[str, Any] | None = None,
                  servers: dict[int, int] | None = None, myid: int = 1,
                  observers: frozenset[int] = frozenset()) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    settings: dict[str, Any] = {
        "tickTime": TICK_MS,
        "dataDir": str(directory / "data"),
        "clientPort": client_port,
        "clientPortAddress": "127.0.0.1",
        "maxClientCnxns": 0,
        "myid": myid,
        "forceSync": False,
        # Every word, as the ZooKeeper referee above (and kazoo's own test harness) are set up:
        # the tests read mntr, conf, envi and stat. The default (srvr alone) has its own test.
        "4lw.commands.whitelist": "*",
    }
    settings.update(extra or {})
    settings = {key: value for key, value in settings.items() if value is not None}  # None: unset
    lines = []
    for key, value in settings.items():
        if isinstance(value, bool):
            rendered = "true" if value else "false"
        elif isinstance(value, str):
            rendered = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
        else:
            rendered = str(value)
        lines.append(f'"{key}" = {rendered}')
    for sid, port in sorted((servers or {}).items()):
        role = ":observer" if sid in observers else ""
        lines.append(f'server.{sid} = "127.0.0.1:{port}{role}"')
    path = directory / "keeper.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@contextlib.contextmanager
def keeper_process(directory: Path, extra: dict[str, Any] | None = None) -> Iterator[RoostProcess]:
    proc = start_roost(["keeper", "--config", str(keeper_config(directory, extra=extra))],
                       expect=("keeper",))
    try:
        yield proc
    finally:
        proc.stop()


@contextlib.contextmanager
def keeper_ensemble(directory: Path, size: int = 3, extra: dict[str, Any] | None = None,
                    fixed_client_ports: bool = False,
                    observers: frozenset[int] = frozenset()) -> Iterator[list[RoostProcess]]:
    """Three (or `size`) keeper processes forming an ensemble, members `observers` among them
    being observers. With `fixed_client_ports` each member keeps its client port across restarts
    (`start_roost(proc.args, ...)`)."""
    ports = free_ports(2 * size)  # all at once, so that none repeats
    peer_ports = {sid: ports[sid - 1] for sid in range(1, size + 1)}
    client_ports = {sid: ports[size + sid - 1] if fixed_client_ports else 0 for sid in peer_ports}
    procs: list[RoostProcess] = []
    try:
        for sid in peer_ports:
            config = keeper_config(directory / f"keeper{sid}", servers=peer_ports, myid=sid, extra=extra,
                                   client_port=client_ports[sid], observers=observers)
            procs.append(start_roost(["keeper", "--config", str(config)], expect=("keeper",)))
        yield procs
    finally:
        for proc in procs:
            proc.stop()


# ------------------------------------------------------------------------------ raw client


class RawClient:
    """A minimal synchronous ZooKeeper client on our codec, for what kazoo cannot do: abandon a
    session without closing it, reconnect with chosen credentials, see frame order."""

    def __init__(self, address: str, timeout_ms: int = 2000, session_id: int = 0,
                 passwd: bytes = bytes(16), last_zxid_seen: int = 0, io_timeout: float = 10.0):
        self.address = address
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=io_timeout)
        self.codec = ClientConnection()
        self.frames: list[object] = []  # every event received, in order
        self._claimed: set[int] = set()
        self.sock.sendall(self.codec.connect(
            ConnectRequest(0, last_zxid_seen, timeout_ms, session_id, passwd, False)))
        connected = self._next(lambda e: isinstance(e, ConnectedEvent))
        assert isinstance(connected, ConnectedEvent)
        self.response = connected.response

    def _next(self, wanted: Callable[[object], bool]) -> object:
        while True:
            for index, event in enumerate(self.frames):
                if index not in self._claimed and wanted(event):
                    self._claimed.add(index)
                    return event
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("server closed the connection")
            self.frames.extend(self.codec.receive_data(data))

    def request(self, request: Request) -> ReplyEvent:
        xid, data = self.codec.send(request)
        self.sock.sendall(data)
        reply = self._next(lambda e: isinstance(e, ReplyEvent) and e.xid == xid)
        assert isinstance(reply, ReplyEvent)
        return reply

    def order(self) -> list[str]:
        """The kinds of frames received so far, in order ("watch", "reply")."""
        kinds = []
        for event in self.frames:
            if isinstance(event, WatchEvent):
                kinds.append(f"watch {event.event.type} {event.event.path}")
            elif isinstance(event, ReplyEvent):
                kinds.append(f"reply {event.opcode}")
        return kinds

    def watch_events(self) -> list[tuple[int, str]]:
        found = []
        for event in self.frames:
            if isinstance(event, WatchEvent):
                found.append((event.event.type, event.event.path))
        return found

    def closed_by_server(self, timeout: float = 10.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
                self.frames.extend(self.codec.receive_data(data))
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def abandon(self) -> None:
        """Drop the socket without closing the session (as a crashed client would)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        if self.response.timeout > 0:
            remember_abandoned(self.address, self.response.session_id, self.response.passwd)


# Sessions dropped without closeSession, by server address. Left alone they would expire later,
# during some other scenario, and their closeSession would take a zxid there: differential runs
# reap them at the end of the scenario that made them, so every scenario sees only its own zxids.
_ABANDONED: dict[str, list[tuple[int, bytes]]] = {}
_ABANDONED_LOCK = threading.Lock()


def remember_abandoned(address: str, session_id: int, passwd: bytes) -> None:
    """Note a session left open on `address`, for `reap_abandoned` to close."""
    with _ABANDONED_LOCK:
        _ABANDONED.setdefault(address, []).append((session_id, passwd))


def global_sessions(address: str) -> int:
    """The server's count of open sessions (`mntr`'s zk_global_sessions; ZooKeeper has it too)."""
    rows = dict(line.split("\t", 1) for line in four_letter(address, "mntr").splitlines() if "\t" in line)
    return int(rows["zk_global_sessions"])


def reap_abandoned(address: str) -> None:
    """Close (by reconnecting with their credentials) the sessions abandoned on `address`."""
    with _ABANDONED_LOCK:
        sessions = _ABANDONED.pop(address, [])
    for session_id, passwd in sessions:
        try:
            client = RawClient(address, session_id=session_id, passwd=passwd)
        except (OSError, ConnectionError):
            continue
        try:
            if client.response.timeout > 0:  # still alive (else it expired already)
                client.request(EmptyRequest(OpCode.CLOSE_SESSION))
        except (OSError, ConnectionError):
            pass
        finally:
            client.sock.close()


# ------------------------------------------------------------------------ differential runs


@dataclass
class Recorder:
    """Runs kazoo calls and records their outcomes, normalised so that two servers compare:
    zxids relative to a base, times as relations, session ids as roles, paths under the
    scenario root as "<root>"."""

    zk: KazooClient
    root: str
    records: list[tuple[str, Any]] = field(default_factory=list)
    base_zxid: int = 0
    base_time: int = 0
    sessions: dict[int, str] = field(default_factory=dict)
    events: list[Any] = field(default_factory=list)

    def start(self, data: bytes = b"") -> None:
        """Create the scenario root; its czxid is the zxid base."""
        self.zk.create(self.root, data)
        stat = self.zk.exists(self.root)
        self.base_zxid = stat.czxid
        self.base_time = stat.ctime
        self.name_session(self.zk, "self")

    def name_session(self, zk: KazooClient, name: str) -> None:
        self.sessions[zk.client_id[0]] = name

    def zxid(self, value: int) -> Any:
        if value in (0, -1):
            return value
        return f"z{value - self.base_zxid:+d}"

    def time(self, value: int) -> Any:
        if value in (0, -1):
            return value
        return "t" if value >= self.base_time else "before"

    def stat(self, stat: ZnodeStat) -> dict[str, Any]:
        owner = stat.ephemeralOwner
        return {
            "czxid": self.zxid(stat.czxid), "mzxid": self.zxid(stat.mzxid),
            "pzxid": self.zxid(stat.pzxid), "ctime": self.time(stat.ctime),
            # Not ">": a set right after a create lands in the same millisecond on a fast server
            # (a CI run saw the keeper do so where ZooKeeper did not); never earlier is the rule.
            "mtime_not_before_ctime": stat.mtime >= stat.ctime,
            "version": stat.version, "cversion": stat.cversion, "aversion": stat.aversion,
            "owner": self.sessions.get(owner, "other") if owner else 0,
            "dataLength": stat.dataLength, "numChildren": stat.numChildren,
        }

    def norm(self, value: Any) -> Any:
        if isinstance(value, ZnodeStat):
            return self.stat(value)
        if isinstance(value, BaseException):
            return f"raised {type(value).__name__}"
        if isinstance(value, str):
            return value.replace(self.root, "<root>")
        if isinstance(value, KazooACL):
            return ("acl", value.perms, value.id.scheme, value.id.id)
        if isinstance(value, tuple) and hasattr(value, "_fields") and hasattr(value, "type"):
            return ("event", value.type, self.norm(value.path))  # a kazoo WatchedEvent
        if isinstance(value, list | tuple):
            return [self.norm(item) for item in value]
        if isinstance(value, dict):
            return {key: self.norm(item) for key, item in value.items()}
        return value

    def do(self, label: str, call: Callable[[], Any]) -> Any:
        try:
            result = call()
        except Exception as exc:
            self.records.append((label, self.norm(exc)))
            return exc
        self.records.append((label, self.norm(result)))
        return result

    def note(self, label: str, value: Any) -> None:
        self.records.append((label, self.norm(value)))

    def watcher(self, tag: str) -> Callable[[Any], None]:
        def record(event: Any) -> None:
            self.events.append((tag, event))

        return record

    def flush_events(self, label: str, zk: KazooClient | None = None, expect: int = 0,
                     timeout: float = 15.0, sort: bool = False) -> None:
        """Record the watch events received so far.

        Waits for at least `expect` callbacks, makes a read round trip (a server sends a
        connection's watch events before the replies that follow them), then drains kazoo's FIFO
        callback queue. Events of one notification that kazoo hands to several watchers come in
        set order, so runs of the same (type, path) are sorted by tag; `sort` sorts everything
        (for servers that may fire in any order, such as a session's ephemerals)."""
        client = zk or self.zk
        wait_until(lambda: len(self.events) >= expect, timeout, f"{expect} watch events")
        client.exists("/")
        drained = threading.Event()
        client.handler.dispatch_callback(Callback("watch", drained.set, ()))
        assert drained.wait(timeout), "kazoo's callback queue did not drain"
        events, self.events = self.events, []
        normalised = [(self.norm(event), tag) for tag, event in events]
        if sort:
            normalised.sort(key=repr)
        else:
            grouped: list[list[tuple[Any, str]]] = []
            for item in normalised:
                if grouped and grouped[-1][0][0] == item[0]:
                    grouped[-1].append(item)
                else:
                    grouped.append([item])
            normalised = [item for group in grouped for item in sorted(group, key=lambda i: i[1])]
        self.records.append((label, normalised))


def kazoo(address: str, timeout: float = 10.0, **kwargs: Any) -> KazooClient:
    client = KazooClient(hosts=address, timeout=timeout, **kwargs)
    client.start(timeout=30)
    return client


def unique_root(prefix: str) -> str:
    return f"/{prefix}-{os.getpid()}-{time.monotonic_ns()}"
