"""Kafka Connect (3.9) in distributed mode on a Roost cluster: workers (ConnectDistributed, one JVM
each, REST on a loopback port) sharing their config, offset and status topics on Roost, and the
FileStream source and sink connectors copying a file through a topic into another file. A worker
killed with SIGKILL leaves the group; after scheduled.rebalance.max.delay.ms its connectors and
tasks are assigned to the workers left, which resume from the offsets committed on Roost.

Shared by tests/jvm/test_connect.py (two workers, one kill, in CI) and scripts/connect_failover.py
(more workers, more kills and restarts).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.jvm.programs import JavaProcess
from tests.support.procs import free_ports, wait_for

SOURCE_CLASS = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK_CLASS = "org.apache.kafka.connect.file.FileStreamSinkConnector"


@dataclass
class Worker:
    name: str
    port: int
    config: Path
    process: JavaProcess | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def worker_id(self) -> str:  # what the status API calls it: its advertised REST address
        return f"127.0.0.1:{self.port}"


def worker_properties(bootstrap: str, group: str, port: int, prefix: str) -> str:
    settings = {
        "bootstrap.servers": bootstrap, "group.id": group,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "config.storage.topic": f"{prefix}-configs", "offset.storage.topic": f"{prefix}-offsets",
        "status.storage.topic": f"{prefix}-status",
        "config.storage.replication.factor": "3", "offset.storage.replication.factor": "3",
        "status.storage.replication.factor": "3", "offset.storage.partitions": "5", "status.storage.partitions": "3",
        "offset.flush.interval.ms": "500",
        "listeners": f"http://127.0.0.1:{port}", "rest.advertised.host.name": "127.0.0.1",
        "rest.advertised.port": str(port),
        # A dead worker's tasks move after this long (the default waits five minutes for it).
        "scheduled.rebalance.max.delay.ms": "3000",
        "session.timeout.ms": "6000", "heartbeat.interval.ms": "1000",
        "task.shutdown.graceful.timeout.ms": "2000",
        # The plugins (FileStream, MirrorMaker's) are found through their ServiceLoader manifests,
        # instead of a reflective scan of every jar on the classpath (half a minute here).
        "plugin.discovery": "service_load",
    }
    return "".join(f"{k}={v}\n" for k, v in settings.items())


def rest(method: str, url: str, body: dict[str, Any] | None = None, timeout: float = 15.0) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        text = answer.read()
    return json.loads(text) if text else None


def answers(url: str) -> bool:
    try:
        rest("GET", url + "/", timeout=3)
        return True
    except (urllib.error.URLError, OSError, ValueError):
        return False


class ConnectCluster:
    """Connect workers of one group; `close` stops every one still running."""

    def __init__(self, classes: Path, root: Path, bootstrap: str, count: int, group: str = "roost-connect") -> None:
        self.classes, self.root = classes, root
        self.workers = []
        for index, port in enumerate(free_ports(count)):
            config = root / f"worker-{index}.properties"
            config.write_text(worker_properties(bootstrap, group, port, group))
            self.workers.append(Worker(f"worker-{index}", port, config))

    def start(self, worker: Worker) -> None:
        worker.process = JavaProcess(self.classes, "org.apache.kafka.connect.cli.ConnectDistributed",
                                     [str(worker.config)], self.root / f"{worker.name}.log")

    def start_all(self, timeout: float = 120.0) -> None:
        for worker in self.workers:
            self.start(worker)
        for worker in self.workers:
            self.await_up(worker, timeout)

    def await_up(self, worker: Worker, timeout: float = 120.0) -> None:
        assert worker.process is not None
        wait_for(lambda: answers(worker.url) or not worker.process.running, timeout, interval=0.5,
                 what=f"Connect {worker.name}'s REST API")
        assert worker.process.running, f"{worker.name} ended:\n{worker.process.tail()}"

    def alive(self) -> list[Worker]:
        return [w for w in self.workers if w.process is not None and w.process.running]

    def status(self, connector: str) -> dict[str, Any] | None:
        for worker in self.alive():
            try:
                return rest("GET", f"{worker.url}/connectors/{connector}/status")
            except (urllib.error.URLError, OSError, ValueError):
                continue
        return None

    def placed_on(self, connectors: list[str], workers: list[Worker]) -> dict[str, list[str]] | None:
        """connector -> the worker ids of its connector instance and tasks, once every one is
        RUNNING on one of `workers` (None until then)."""
        allowed = {w.worker_id for w in workers}
        placed: dict[str, list[str]] = {}
        for name in connectors:
            status = self.status(name)
            if status is None or not status.get("tasks"):
                return None
            parts = [status["connector"], *status["tasks"]]
            if any(p["state"] != "RUNNING" or p["worker_id"] not in allowed for p in parts):
                return None
            placed[name] = [p["worker_id"] for p in parts]
        return placed

    def create(self, name: str, config: dict[str, str]) -> None:
        worker = self.alive()[0]
        deadline = time.monotonic() + 60
        while True:  # a worker that has just joined answers 409 (rebalancing) for a moment
            try:
                rest("POST", f"{worker.url}/connectors", {"name": name, "config": config})
                return
            except urllib.error.HTTPError as error:
                if error.code != 409 or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def close(self) -> None:
        for worker in self.workers:
            if worker.process is not None:
                worker.process.stop(timeout=5)  # a test has no use for a graceful stop


def copy_lines(cluster: ConnectCluster, source: Path, sink: Path, topic: str) -> None:
    """The FileStream source (source file -> topic) and sink (topic -> sink file) connectors."""
    source.touch()
    cluster.create("file-source", {"connector.class": SOURCE_CLASS, "tasks.max": "1", "file": str(source),
                                   "topic": topic})
    cluster.create("file-sink", {"connector.class": SINK_CLASS, "tasks.max": "1", "file": str(sink),
                                 "topics": topic})


def append_lines(path: Path, start: int, count: int) -> list[str]:
    lines = [f"line-{i:06d}" for i in range(start, start + count)]
    with path.open("a") as handle:
        handle.write("".join(line + "\n" for line in lines))
    return lines


def sink_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []
