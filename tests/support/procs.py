"""Start and stop real `roost` processes for tests.

Every process a test starts is stopped by the fixture that started it; waits are bounded.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

# `name` is what listens: "kafka", "keeper", and under `roost up --brokers` "keeper 2",
# "broker 1 kafka".
LISTEN_LINE = re.compile(r"^roost: (?P<name>[a-z][a-z0-9 -]*?) listening on (?P<host>[0-9.]+):(?P<port>\d+)$")
ROOST = [sys.executable, "-m", "roost.cli.main"]


@dataclass
class RoostProcess:
    """A running `roost` command whose stdout is read in the background."""

    args: list[str]
    popen: subprocess.Popen[str]
    listeners: dict[str, tuple[str, int]] = field(default_factory=dict)
    output: list[str] = field(default_factory=list)
    _ready: threading.Event = field(default_factory=threading.Event)
    _expected: frozenset[str] = frozenset()

    def address(self, name: str) -> str:
        host, port = self.listeners[name]
        return f"{host}:{port}"

    def port(self, name: str) -> int:
        return self.listeners[name][1]

    def text(self) -> str:
        return "".join(self.output)

    def _pump(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.output.append(line)
            match = LISTEN_LINE.match(line.strip())
            if match:
                self.listeners[match["name"]] = (match["host"], int(match["port"]))
                if self._expected <= self.listeners.keys():
                    self._ready.set()
        self._ready.set()

    def wait_ready(self, timeout: float = 60.0) -> None:
        if not self._ready.wait(timeout) or not self._expected <= self.listeners.keys():
            self.stop()
            raise RuntimeError(f"roost did not start: {self.args}\n{self.text()}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        """Stop the process with `sig`, escalating to SIGKILL after `timeout` seconds."""
        return stop_process(self.popen, sig, timeout)

    def kill9(self) -> None:
        self.stop(signal.SIGKILL)


def free_ports(n: int) -> list[int]:
    """`n` distinct free loopback ports (all bound at once, so none repeats)."""
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def stop_process(popen: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
    """Stop `popen` with `sig` (if it still runs), escalating to SIGKILL after `timeout` seconds;
    returns its exit status."""
    if popen.poll() is None:
        popen.send_signal(sig)
        try:
            popen.wait(timeout)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait(timeout)
    return popen.returncode


def start_roost(args: Sequence[str], expect: Sequence[str] = ("kafka",), timeout: float = 60.0,
                env: dict[str, str] | None = None, new_session: bool = False, wait: bool = True,
                command: Sequence[str] = ROOST) -> RoostProcess:
    """Run `roost <args>` and wait until it has printed a listening line for each name in `expect`
    (with `wait=False`, return at once: call `wait_ready` later). `new_session` runs it in its own
    session and process group, so that a test can signal that group as a terminal's Ctrl-C would.
    `command` is how roost is run (e.g. under `tests.support.shifted_clock`)."""
    args = list(args)
    if args and args[0] == "up" and "--keeper-port" not in args and "--no-keeper" not in args:
        args += ["--keeper-port", "0"]  # tests never take the fixed default port 2181
    if args and args[0] == "up" and "--schema-registry-port" not in args and "--no-schema-registry" not in args:
        args += ["--no-schema-registry"]  # a registry child costs a process: only the tests that want one
    if args and args[0] == "up" and "--console-port" not in args and "--no-console" not in args:
        args += ["--no-console"]  # nor the web console's 8080: a test that wants it names a port
    full_env = dict(os.environ)
    full_env["PYTHONUNBUFFERED"] = "1"
    if env:
        full_env.update(env)
    popen = subprocess.Popen(
        [*command, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full_env,
        start_new_session=new_session,
    )
    proc = RoostProcess(list(args), popen, _expected=frozenset(expect))
    threading.Thread(target=proc._pump, daemon=True).start()
    if wait:
        proc.wait_ready(timeout)
    return proc


def process_alive(pid: int) -> bool:
    """Whether process `pid` runs (Linux /proc): a zombie has exited, its parent not yet told."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):  # gone, or going while its entry is read
        return False
    return state != "Z"


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.05, what: str = "condition"):
    """Poll `predicate` until it returns a truthy value; bounded by `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def retry(action: Callable[[], T], *, retry_on: tuple[type[BaseException], ...], attempts: int = 50,
          interval: float = 0.05, what: str = "the action") -> T:
    """Call `action` until it returns without raising one of `retry_on`; at most `attempts` calls.

    Returns what the first successful call returned. When every call failed this fails the test
    (AssertionError naming `what` and the last error): a retry loop never ends without its check.
    """
    assert attempts >= 1
    last: BaseException | None = None
    for attempt in range(attempts):
        try:
            return action()
        except retry_on as error:
            last = error
        if attempt + 1 < attempts:
            time.sleep(interval)
    raise AssertionError(f"{what} failed in all {attempts} attempts; the last error: {last!r}")


def data_dir(tmp_path: Path, name: str = "data") -> Path:
    path = tmp_path / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def run_this_checkout() -> None:
    """Make the `roost` processes a script starts run this checkout's code, not whichever roost
    the environment has installed (scripts/: they start brokers with `python -m roost...`)."""
    repo = Path(__file__).resolve().parent.parent.parent
    inherited = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(repo / "src"), str(repo), *inherited])
