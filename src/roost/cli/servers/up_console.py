"""The web console `roost up` serves beside the node or cluster it starts (default
127.0.0.1:8080; --console-port, --console-host, --console-read-only, --no-console).

The console is a convenience of `roost up`, not part of the cluster: when its port is taken (a
second `roost up` on the same machine) the cluster still runs, and one line says why there is
no console. The web server is imported only when a console starts.

Beside a single node the console runs in a process of its own (`roost console`, ended with its
parent), not on the broker's event loop: there its page rendering, JSON and client threads held
the broker's loop and GIL. Measured (2026-11-24, this 2-core VM, `roost up` with 300 topics, a
viewer fetching the overview, the topic list and their pages every 0.5 s): the broker's
ApiVersions round trip went from p99 0.31 ms, max 0.5 ms without a viewer to p99 2.8-4.0 ms, max
45-65 ms with one. `roost up --brokers N` runs it in the supervisor, apart from the brokers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from pathlib import Path
from typing import Any, Protocol, TextIO

from roost.cli.servers.launch import child_command, child_lines
from roost.console.settings import DEFAULT_CONSOLE_PORT

LISTENING = "roost: console listening on "
CONSOLE_START_TIMEOUT_S = 60.0
CONSOLE_STOP_TIMEOUT_S = 10.0


def announce(address: str, read_only: bool, url: str | None = None, login: Any = None) -> None:
    """The listening line, in the form of the other listeners' (`roost: NAME listening on HOST:PORT`),
    then how to reach it when it serves HTTPS or asks for a login (the user's name, never the password)."""
    print(f"{LISTENING}{address}", flush=True)
    if read_only:
        print("roost: console is read-only: it refuses every change", flush=True)
    if url is not None and (url.startswith("https:") or login is not None):
        print(f"roost: console at {url}" + (f", log in as {login.username}" if login is not None else ""), flush=True)


def console_security(args: argparse.Namespace) -> tuple[dict[str, str], list[str]]:
    """With `roost up --security`: the console's client settings (the admin user; its password as
    a ${file:} reference, resolved by the console) and its own flags (a login as that user, and
    HTTPS with the brokers' development certificate when the mode has TLS). Empty otherwise."""
    security = getattr(args, "dev_security", None)
    if security is None:
        return {}, []
    settings = security.client_settings(with_password=False)
    password_ref = "${file:" + str(security.directory / "admin.password") + "}"
    if "sasl.password" in settings:
        settings["sasl.password"] = password_ref
    flags = ["--login-user", security.admin_user, "--login-password", password_ref]
    if security.tls:
        flags += ["--tls-cert", str(security.directory / "broker.pem")]
    return settings, flags


class Stoppable(Protocol):
    async def stop(self) -> None: ...


def add_console_arguments(parser: argparse.ArgumentParser, port_type: object) -> None:
    flags = parser.add_argument_group("web console")
    flags.add_argument("--console-port", type=port_type, default=DEFAULT_CONSOLE_PORT,  # type: ignore[arg-type]
                       help=f"port of the web console (default {DEFAULT_CONSOLE_PORT}; 0 picks a free port)")
    flags.add_argument("--console-host", default="127.0.0.1",
                       help="address the web console listens on (default 127.0.0.1)")
    flags.add_argument("--console-read-only", action="store_true",
                       help="the web console refuses every change")
    flags.add_argument("--no-console", action="store_true", help="serve no web console")


async def start_up_console(args: argparse.Namespace, bootstrap: str, zookeeper: str | None) -> Stoppable | None:
    """Start the console for `bootstrap` (and the keeper `zookeeper`), printing where it listens;
    None when --no-console or when it cannot listen (said on one line)."""
    if args.no_console:
        return None
    from roost.cli.servers.console_command import login_of
    from roost.console.server import start_console
    from roost.console.settings import ConsoleSettings, ServerTls
    from roost.secret_ref import resolve_secret

    client, flags = console_security(args)
    own = dict(zip(flags[::2], flags[1::2], strict=True))
    settings = ConsoleSettings(
        bootstrap=bootstrap, zookeeper=zookeeper, host=args.console_host, port=args.console_port,
        read_only=args.console_read_only, client_settings={k: resolve_secret(v) for k, v in client.items()},
        login=login_of(own.get("--login-user"), own.get("--login-password")),
        tls=ServerTls(Path(own["--tls-cert"])) if "--tls-cert" in own else None)
    try:
        running = await start_console(settings)
    except OSError as error:
        print(f"roost: console: cannot listen on {settings.host}:{settings.port} ({error.strerror or error}); "
              "running without it (choose another --console-port, or --no-console)", flush=True)
        return None
    announce(running.address, settings.read_only, running.url, settings.login)
    return running


class ConsoleProcess:
    """A `roost console` child: its output is passed on line by line until it is stopped."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        assert process.stdout is not None and process.stderr is not None
        self._relays = [asyncio.ensure_future(_relay(process.stdout, sys.stdout)),
                        asyncio.ensure_future(_relay(process.stderr, sys.stderr))]

    async def stop(self) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.terminate()
            try:
                await asyncio.wait_for(self.process.wait(), CONSOLE_STOP_TIMEOUT_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.process.kill()
                await self.process.wait()
        # Its pipes end with it: the relays pass on the last lines ("console stopped") and finish.
        await asyncio.gather(*self._relays, return_exceptions=True)


async def _relay(stream: asyncio.StreamReader, out: TextIO) -> None:
    async for line in child_lines(stream):
        print(line, file=out, flush=True)


async def start_console_process(args: argparse.Namespace, bootstrap: str, zookeeper: str | None) -> Stoppable | None:
    """`start_up_console` in a child process: returns once it listens (its listening line passed
    on), or None, with one line saying why, when --no-console or when it cannot start."""
    if args.no_console:
        return None
    command = ["console", "-b", bootstrap, "--host", args.console_host, "--port", str(args.console_port)]
    if zookeeper:
        command += ["--zookeeper", zookeeper]
    if args.console_read_only:
        command.append("--read-only")
    client, flags = console_security(args)  # references to the password file, never the password
    command += [item for key, value in client.items() for item in ("-X", f"{key}={value}")] + flags
    process = await asyncio.create_subprocess_exec(
        *child_command(command), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    assert process.stdout is not None and process.stderr is not None
    try:
        first = await asyncio.wait_for(process.stdout.readline(), CONSOLE_START_TIMEOUT_S)
    except TimeoutError:
        first = b""
    line = first.decode(errors="replace").rstrip("\n")
    if not line.startswith(LISTENING):
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        errors = (await process.stderr.read()).decode(errors="replace").strip().splitlines()
        await process.wait()
        reason = errors[-1].removeprefix("roost console: ") if errors else line or "it did not start in time"
        print(f"roost: console: {reason}; running without it (choose another --console-port, or --no-console)",
              flush=True)
        return None
    print(line, flush=True)
    return ConsoleProcess(process)
