"""The seeds' master election (examples/master_election) against a keeper, step by step:
three storage machines race for the ephemeral /clusterx/master_ip, app servers watch it; kill -9
the master, its znode goes because its session expires (the keeper logs the expiry of exactly
that session), the app servers are told and see no master meanwhile, a new master is elected,
and the old master, restarted, becomes a follower. How long the failover takes is measured, not
asserted: `bench/keeper_bench.py` (owner kill -9 -> ephemeral gone)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.keeper.zkharness import kazoo, wait_until
from tests.support.procs import RoostProcess, stop_process

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "master_election"
SESSION_TIMEOUT = 2.0  # seconds; the test keeper's tickTime is 500 ms
MASTER = "/clusterx/master_ip"
WAIT = 60.0


class LineProcess:
    """A child process whose stdout lines are collected (with arrival times) in the background."""

    def __init__(self, args: list[str]) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.popen = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, env=env)
        self.lines: list[tuple[float, str]] = []
        self._changed = threading.Condition()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            with self._changed:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                self._changed.notify_all()

    def texts(self) -> list[str]:
        with self._changed:
            return [text for _, text in self.lines]

    def wait_line(self, predicate: Callable[[str], bool], timeout: float = WAIT, after: int = 0) -> str:
        """The first line (from index `after`) matching `predicate`; waits up to `timeout`."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for _, text in self.lines[after:]:
                    if predicate(text):
                        return text
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"no matching line; output: {[t for _, t in self.lines]}")
                self._changed.wait(min(remaining, 0.5))

    def stop(self) -> None:
        stop_process(self.popen, timeout=20)

    def kill9(self) -> None:
        stop_process(self.popen, signal.SIGKILL, timeout=20)


@contextlib.contextmanager
def processes() -> Iterator[list[LineProcess]]:
    started: list[LineProcess] = []
    try:
        yield started
    finally:
        for proc in started:
            proc.stop()


def storage(keeper: str, name: str) -> list[str]:
    return [str(EXAMPLE / "storage_machine.py"), "--zk", keeper, "--name", name,
            "--address", f"{name}.example:7000", "--session-timeout", str(SESSION_TIMEOUT)]


def app(keeper: str, name: str) -> list[str]:
    return [str(EXAMPLE / "app_server.py"), "--zk", keeper, "--name", name,
            "--session-timeout", str(SESSION_TIMEOUT)]


@pytest.mark.slow
def test_master_election(keeper: str, keeper_proc: RoostProcess) -> None:
    observer = kazoo(keeper)
    try:
        if observer.exists(MASTER):  # a previous run's master must be gone first
            wait_until(lambda: observer.exists(MASTER) is None, WAIT, "a stale master to expire")
        with processes() as started:
            machines = {}
            for name in ("storage-1", "storage-2", "storage-3"):
                machines[name] = LineProcess(storage(keeper, name))
                started.append(machines[name])
            for proc in machines.values():
                proc.wait_line(lambda line: ": master" in line or ": follower of" in line)
            masters = [name for name, proc in machines.items() if f"{name}: master" in proc.texts()]
            assert len(masters) == 1, {name: proc.texts() for name, proc in machines.items()}
            master = masters[0]
            master_address = f"{master}.example:7000"
            for name, proc in machines.items():
                if name != master:
                    proc.wait_line(lambda line, name=name: line == f"{name}: follower of {master_address}")
            data, stat = observer.get(MASTER)
            assert data.decode() == master_address and stat.ephemeralOwner != 0
            old_owner, old_czxid = stat.ephemeralOwner, stat.czxid

            apps = [LineProcess(app(keeper, name)) for name in ("app-1", "app-2")]
            started.extend(apps)
            for proc, name in zip(apps, ("app-1", "app-2"), strict=True):
                proc.wait_line(lambda line, name=name: line == f"{name}: master is {master_address}")

            # kill -9: no closeSession is sent; only the session timeout can remove the znode.
            gone = threading.Event()
            observer.exists(MASTER, watch=lambda event: gone.set())
            lines_before = {id(proc): len(proc.texts()) for proc in apps}
            machines[master].kill9()
            assert gone.wait(WAIT), "the master's ephemeral znode never went"
            # It went because the session expired (not, say, because its connection dropped).
            wait_until(lambda: f"session 0x{old_owner:x} expired" in keeper_proc.text(), WAIT,
                       "the keeper to log the expiry of the old master's session")

            for proc, name in zip(apps, ("app-1", "app-2"), strict=True):
                proc.wait_line(lambda line, name=name: line == f"{name}: no master")
            survivors = {name: proc for name, proc in machines.items() if name != master}
            for proc in survivors.values():
                proc.wait_line(lambda line: line.endswith(": master") or "follower of storage" in line,
                               after=1)
            new_masters = [name for name, proc in survivors.items() if f"{name}: master" in proc.texts()]
            assert len(new_masters) == 1, {name: proc.texts() for name, proc in survivors.items()}
            new_master = new_masters[0]
            new_address = f"{new_master}.example:7000"
            data, stat = observer.get(MASTER)
            assert data.decode() == new_address
            # A new znode of another session, created after the old one.
            assert stat.ephemeralOwner not in (0, old_owner) and stat.czxid > old_czxid
            for proc, name in zip(apps, ("app-1", "app-2"), strict=True):
                line = proc.wait_line(lambda line, name=name: line == f"{name}: master is {new_address}")
                texts = proc.texts()[lines_before[id(proc)]:]
                # Told of the loss first, then of the new master: never a stale master meanwhile.
                assert texts.index(f"{name}: no master") < texts.index(line)
                assert not any(master_address in text for text in texts)

            restarted = LineProcess(storage(keeper, master))
            started.append(restarted)
            restarted.wait_line(lambda line: line == f"{master}: follower of {new_address}")
            assert observer.get(MASTER)[0].decode() == new_address
    finally:
        observer.stop()
        observer.close()
