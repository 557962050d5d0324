"""Keeper and broker processes, each in its own network namespace, started, killed, paused and
power-cut by the nemesis. Their output goes to `<out>/node-<i>.log` (appended across restarts)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roost.testing.faults.durability import SyncTracker
from roost.testing.faults.netns import Network

LISTENING = re.compile(r"^roost: (?P<name>[a-z][a-z0-9 -]*?) listening on (?P<host>[0-9.]+):(?P<port>\d+)$")
KEEPER_CLIENT_PORT = 2181
KEEPER_PEER_PORT = 2888
BROKER_PORT = 9092
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0


def toml(settings: dict[str, Any]) -> str:
    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return str(v)
        return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'
    return "".join(f"{k} = {value(v)}\n" for k, v in settings.items())


@dataclass
class Node:
    """One roost process (keeper or broker) in namespace `index` of `network`."""

    index: int
    kind: str  # "keeper" | "broker"
    network: Network
    config: Path
    data: Path
    log: Path
    ready_name: str
    python: str = sys.executable
    track_syncs: bool = False
    popen: subprocess.Popen[str] | None = None
    tracker: SyncTracker | None = None
    paused: bool = False
    _ready: threading.Event = field(default_factory=threading.Event)

    @property
    def address(self) -> str:
        return self.network.address(self.index)

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def start(self, wait: bool = True) -> None:
        assert not self.running, f"node {self.index} runs"
        self._ready = threading.Event()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.popen = subprocess.Popen(
            [*self.network.exec_prefix(self.index), self.python, "-m", "roost.cli.main", self.kind,
             "--config", str(self.config)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, errors="replace")
        if self.track_syncs:
            self.tracker = SyncTracker(self.popen.pid, self.data).start()
        threading.Thread(target=self._pump, args=(self.popen,), daemon=True).start()
        if wait:
            self.wait_ready()

    def _pump(self, popen: subprocess.Popen[str]) -> None:
        assert popen.stdout is not None
        with self.log.open("a") as sink:
            sink.write(f"--- started {time.strftime('%H:%M:%S')} pid {popen.pid}\n")
            for line in popen.stdout:
                sink.write(line)
                sink.flush()
                match = LISTENING.match(line.strip())
                if match and match["name"] == self.ready_name:
                    self._ready.set()
        self._ready.set()

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        if not self._ready.wait(timeout) or not self.running:
            raise RuntimeError(f"node {self.index} ({self.kind}) did not start; see {self.log}")

    def kill(self) -> None:
        """kill -9 (continuing it first if paused, so that it dies now)."""
        if self.popen is None:
            return
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            if self.paused:
                self.popen.send_signal(signal.SIGCONT)
        self.paused = False
        self.popen.wait(STOP_TIMEOUT_S)
        if self.tracker is not None:
            self.tracker.stop()

    def power_cut(self, rng: Any = None, torn: bool = False) -> dict[str, tuple[int, int]]:
        """kill -9, then lose what was not fsynced (needs track_syncs)."""
        self.kill()
        assert self.tracker is not None, "power cuts need track_syncs"
        return self.tracker.cut(rng, torn)

    def pause(self) -> None:
        if self.running and not self.paused:
            assert self.popen is not None
            self.popen.send_signal(signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        if self.running and self.paused:
            assert self.popen is not None
            self.popen.send_signal(signal.SIGCONT)
        self.paused = False

    def stop(self) -> None:
        if self.popen is None:
            return
        self.resume()
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(STOP_TIMEOUT_S)
        if self.tracker is not None:
            self.tracker.stop()


def keeper_nodes(network: Network, indexes: list[int], out: Path, tick_ms: int = 500,
                 track_syncs: bool = False) -> list[Node]:
    """A keeper ensemble on namespaces `indexes` (one member: standalone)."""
    nodes = []
    for myid, index in enumerate(indexes, start=1):
        data = out / f"node-{index}-data"
        settings: dict[str, Any] = {"tickTime": tick_ms, "dataDir": str(data), "clientPort": KEEPER_CLIENT_PORT,
                                    "clientPortAddress": network.address(index)}
        if len(indexes) > 1:
            settings["myid"] = myid
            for other_id, other in enumerate(indexes, start=1):
                settings[f"server.{other_id}"] = f"{network.address(other)}:{KEEPER_PEER_PORT}"
        config = out / f"node-{index}.toml"
        config.write_text(toml(settings))
        nodes.append(Node(index, "keeper", network, config, data, out / f"node-{index}.log", "keeper",
                          track_syncs=track_syncs))
    return nodes


BROKER_SETTINGS: dict[str, Any] = {
    # Failures noticed within seconds, as the tests' clusters do (tests/support/cluster.py).
    "zookeeper.session.timeout.ms": 4000,
    "replica.lag.time.max.ms": 8000,
    "replica.fetch.wait.max.ms": 200,
    "leader.imbalance.check.interval.seconds": 5,
    "controlled.shutdown.retry.backoff.ms": 200,
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.replication.factor": 3,
    "transaction.state.log.replication.factor": 3,
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    # A power cut may lose only what was never acknowledged: fsync before answering.
    "log.flush.interval.messages": 1,
}


def broker_nodes(network: Network, indexes: list[int], zookeeper: str, out: Path,
                 settings: dict[str, Any] | None = None, track_syncs: bool = False) -> list[Node]:
    nodes = []
    for broker_id, index in enumerate(indexes, start=1):
        data = out / f"node-{index}-data"
        config = out / f"node-{index}.toml"
        address = f"PLAINTEXT://{network.address(index)}:{BROKER_PORT}"
        config.write_text(toml({"broker.id": broker_id, "zookeeper.connect": zookeeper, "listeners": address,
                                "advertised.listeners": address, "log.dirs": str(data),
                                **BROKER_SETTINGS, **(settings or {})}))
        nodes.append(Node(index, "broker", network, config, data, out / f"node-{index}.log",
                          f"broker {broker_id} kafka", track_syncs=track_syncs))
    return nodes


def keeper_mode(node: Node, timeout: float = 1.0) -> str | None:
    """"leader", "follower", "standalone" (the four-letter word srvr), or None if it does not answer."""
    if not node.running or node.paused:
        return None
    try:
        with socket.create_connection((node.address, KEEPER_CLIENT_PORT), timeout=timeout) as conn:
            conn.sendall(b"srvr")
            answer = b""
            while chunk := conn.recv(4096):
                answer += chunk
    except OSError:
        return None
    match = re.search(rb"Mode: (\w+)", answer)
    return match.group(1).decode() if match else None
