"""One `roost zk` connection: a kazoo session opened on first use, every call bounded by
--timeout, kazoo's errors turned into one-line `CliError`s, and watch events either printed as
they fire (in the shell) or collected for a one-shot command to print before it exits."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import click

from roost.cli.client.client_options import CliError
from roost.cli.zk.node_format import error_for, event_line


def quiet_kazoo() -> None:
    """kazoo logs connection trouble as warnings, which Python would print on stderr beside
    our one-line error."""
    logger = logging.getLogger("kazoo")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False


def split_auth(value: str) -> tuple[str, str]:
    """`digest:user:password` into ("digest", "user:password")."""
    scheme, sep, credential = value.partition(":")
    if not (sep and scheme and credential):
        raise CliError(f"bad --auth {value!r}: expected SCHEME:CREDENTIAL (e.g. digest:user:password)")
    return scheme, credential


@dataclass
class ZkSession:
    server: str
    timeout: float
    auth: list[tuple[str, str]] = field(default_factory=list)
    interactive: bool = False
    _client: Any = None
    _events: queue.Queue[str] = field(default_factory=queue.Queue)
    # Persistent watches (addWatch): path -> recursive?
    _persistent: dict[str, bool] = field(default_factory=dict)
    # The shell: events that fire while a command runs wait for its output (else they could
    # print in the middle of it); between commands they print at once, as zkCli's do.
    _print_lock: threading.Lock = field(default_factory=threading.Lock)
    _held: list[str] | None = None

    @property
    def client(self) -> Any:
        """The connected kazoo client (connecting on first use)."""
        if self._client is None:
            from kazoo.client import KazooClient

            quiet_kazoo()
            try:
                client = KazooClient(hosts=self.server, timeout=self.timeout, auth_data=list(self.auth))
            except (ValueError, TypeError) as error:
                raise CliError(f"bad --server {self.server!r}: {error}") from None
            try:
                client.start(timeout=self.timeout)
            except Exception:
                with contextlib.suppress(Exception):
                    client.stop()
                    client.close()
                raise CliError(f"cannot connect to {self.server} within {self.timeout:g}s") from None
            self._client = client
            self._hook_watch_events()
        return self._client

    def server_path(self, path: str) -> str:
        """`path` under the --server's chroot (`host:port/chroot`), for the requests that
        kazoo does not prefix itself."""
        chroot = self.client.chroot or ""
        return (chroot + path if path != "/" else chroot) or "/"

    def close(self) -> None:
        if self._client is not None:
            self._persistent.clear()  # closing deletes our ephemerals: not news to report
            client, self._client = self._client, None
            with contextlib.suppress(Exception):
                client.stop()
                client.close()

    def wait(self, async_result: Any, path: str) -> Any:
        """The result of a kazoo async call, within --timeout (kazoo's own blocking calls wait
        for ever while a connection is being re-established)."""
        with self.errors(path):
            return async_result.get(timeout=self.timeout)

    @contextlib.contextmanager
    def errors(self, path: str) -> Iterator[None]:
        """Turns kazoo's errors (and timeouts) into a one-line CliError naming `path`."""
        from kazoo.exceptions import KazooException
        from kazoo.handlers.threading import KazooTimeoutError

        try:
            yield
        except KazooTimeoutError:
            raise CliError(f"no reply from {self.server} within {self.timeout:g}s: {path}") from None
        except KazooException as error:
            raise error_for(error, path) from None

    # ------------------------------------------------------------------------------ watches

    def watcher(self) -> Any:
        """A kazoo watch callback that reports the event the zkCli way."""

        def on_event(event: Any) -> None:
            self.report(event_line(event.type, event.path))

        return on_event

    @contextlib.contextmanager
    def command_running(self) -> Iterator[None]:
        """The shell runs each command in this: the watch events that fire meanwhile print
        after its output, in the order they came."""
        with self._print_lock:
            self._held = []
        try:
            yield
        finally:
            self._settle()
            with self._print_lock:
                held, self._held = self._held or [], None
                for line in held:
                    self._print_event(line)

    def _settle(self) -> None:
        """Wait until kazoo has run the watch callbacks it already holds (the server sends a
        notification before the reply that follows it, so a command's own events are among
        them)."""
        if self._client is None:
            return
        from kazoo.protocol.states import Callback

        done = threading.Event()
        self._client.handler.dispatch_callback(Callback("watch", done.set, ()))
        done.wait(self.timeout)

    def report(self, line: str) -> None:
        if not self.interactive:
            self._events.put(line)
            return
        with self._print_lock:
            if self._held is not None:
                self._held.append(line)
            else:
                self._print_event(line)

    @staticmethod
    def _print_event(line: str) -> None:
        click.echo(f"\nWATCHER::\n\n{line}")

    def print_events(self, limit: int, timeout: float | None = None) -> int:
        """One-shot mode: print watch events as they come until `limit` were printed (0: no
        limit) or `timeout` (default --timeout) seconds passed; returns how many."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        printed = 0
        while not limit or printed < limit:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                line = self._events.get(timeout=left)
            except queue.Empty:
                break
            click.echo(line)
            printed += 1
        return printed

    def add_persistent_watch(self, path: str, recursive: bool) -> None:
        self._persistent[path] = recursive

    def _hook_watch_events(self) -> None:
        """Sees every watch notification the connection reads, for the persistent watches
        (kazoo 2.11 dispatches only its own one-shot watchers, by exact path)."""
        from kazoo.protocol.serialization import Watch

        client = self._client
        connection = client._connection
        original = connection._read_watch_event

        def read_watch_event(buffer: bytes, offset: int) -> None:
            watch, _ = Watch.deserialize(buffer, offset)
            path = client.unchroot(watch.path)
            if self._persistent_covers(path):
                self.report(event_line(watch.type, path))
            original(buffer, offset)

        connection._read_watch_event = read_watch_event

    def _persistent_covers(self, path: str) -> bool:
        for watched, recursive in list(self._persistent.items()):
            if path == watched or (recursive and path.startswith(watched.rstrip("/") + "/")):
                return True
        return False
