"""One `roost` server process run by the fixtures: started, awaited, stopped, all bounded.

Its stdout and stderr go to one log file in its data directory; the `roost: ... listening on
HOST:PORT` lines it prints once clients can connect are read back from that file. A file rather
than a pipe: nobody has to drain it, so a chatty server can never block on a full pipe, and the
user has the whole log to read when a test fails.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from roost.cli.servers.launch import child_command

# `name` is what listens: "kafka" and "keeper" (roost up), "keeper" (roost keeper),
# "broker 1 kafka" (roost broker).
LISTEN_LINE = re.compile(r"^roost: (?P<name>[a-z][a-z0-9 -]*?) listening on (?P<host>\S+):(?P<port>\d+)$",
                         re.MULTILINE)
POLL_INTERVAL_S = 0.01
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


class RoostStartError(RuntimeError):
    """A server did not start: it exited, or printed no listening line in time."""

    def __init__(self, message: str, log_tail: str, port_taken: bool) -> None:
        super().__init__(f"{message}\n--- last lines of its log ---\n{log_tail}")
        self.port_taken = port_taken  # it could not bind a port chosen for it: try other ports


@dataclass
class ServerProcess:
    """A running (or finished) `roost` subcommand."""

    args: list[str]
    popen: subprocess.Popen[bytes]
    log_path: Path

    @classmethod
    def launch(cls, args: Sequence[str], log_path: Path) -> ServerProcess:
        """Start `roost <args>`; its output is appended to `log_path`."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with log_path.open("ab") as log_file:
            popen = subprocess.Popen(child_command(args), stdin=subprocess.DEVNULL, stdout=log_file,
                                     stderr=subprocess.STDOUT, env=env)
        return cls(list(args), popen, log_path)

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    def log_size(self) -> int:
        """The log's length in bytes: give it as `since` to read only what a restart adds."""
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def log_text(self, since: int = 0) -> str:
        try:
            with self.log_path.open("rb") as log_file:
                log_file.seek(since)
                return log_file.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def listeners(self, since: int = 0) -> dict[str, tuple[str, int]]:
        """What it has said it listens on (in the log from byte `since`): name -> (host, port)."""
        text = self.log_text(since)
        return {m["name"]: (m["host"], int(m["port"])) for m in LISTEN_LINE.finditer(text)}

    def wait_listening(self, names: Collection[str], timeout: float = START_TIMEOUT_S,
                       since: int = 0) -> dict[str, tuple[str, int]]:
        """Wait until it has printed a listening line for each of `names`, and return its
        listeners. If it exits first or the time runs out, it is stopped and RoostStartError
        says why, with the end of its log."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.listeners(since)
            if set(names) <= found.keys():
                return found
            status = self.popen.poll()
            if status is not None or time.monotonic() > deadline:
                self.stop()
                tail = "\n".join(self.log_text(since).splitlines()[-20:])
                what = (f"exited with status {status}" if status is not None
                        else f"printed no listening line for {sorted(set(names) - found.keys())} in {timeout:.0f} s")
                raise RoostStartError(f"`roost {' '.join(self.args)}` {what} (log: {self.log_path})",
                                      tail, port_taken="already in use" in tail.lower())
            time.sleep(POLL_INTERVAL_S)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM (a clean stop), then SIGKILL if it is still running after `timeout` seconds;
        returns its exit status."""
        return self._end(signal.SIGTERM, timeout)

    def kill(self) -> int:
        """SIGKILL: no flush, no controlled shutdown, as a power cut or the OOM killer would."""
        return self._end(signal.SIGKILL, STOP_TIMEOUT_S)

    def pause(self) -> None:
        """SIGSTOP: it holds its sockets but answers nothing, as a stalled VM or disk would."""
        if self.running:
            self.popen.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.running:
            self.popen.send_signal(signal.SIGCONT)

    def _end(self, sig: signal.Signals, timeout: float) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            if sig != signal.SIGKILL:
                self.popen.send_signal(signal.SIGCONT)  # a paused process must run to handle SIGTERM
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout)
        return self.popen.returncode
