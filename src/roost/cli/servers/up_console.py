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
import sys
from pathlib import Path
from typing import Protocol, TextIO

from roost.cli.servers.console_common import LISTENING, announce, login_of
from roost.cli.servers.launch import Refused, child_lines, start_listening_child
from roost.console.settings import DEFAULT_CONSOLE_PORT

CONSOLE_START_TIMEOUT_S = 60.0
CONSOLE_STOP_TIMEOUT_S = 10.0


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


def loopback_url(url: str) -> str:
    """A listener's URL as the console beside it reaches it (a wildcard host becomes loopback)."""
    scheme, _, rest = url.partition("://")
    host, _, port = rest.rpartition(":")
    if host in ("0.0.0.0", "::", "[::]", ""):
        host = "127.0.0.1"
    return f"{scheme}://{host}:{port}"


def console_extras(registry_listener: str | None, metrics: list[tuple[str, int]]) -> list[str]:
    """The flags that give `roost up`'s console the pages that need more than Kafka: the schema
    registry the brokers serve (a plain-HTTP one on a known port) and each broker's /metrics
    (the share groups' in-flight figures), when their ports are known before they start."""
    flags: list[str] = []
    if registry_listener and registry_listener.startswith("http://") and not registry_listener.endswith(":0"):
        flags += ["--schema-registry", loopback_url(registry_listener.split(",")[0].strip())]
    for host, port in metrics:
        if port > 0:
            flags += ["--broker-metrics", loopback_url(f"http://{host}:{port}") + "/metrics"]
    return flags


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
    from roost.console.server import start_console
    from roost.console.settings import ConsoleSettings, ServerTls
    from roost.secret_ref import resolve_secret

    client, flags = console_security(args)
    own = dict(zip(flags[::2], flags[1::2], strict=True))
    extras = getattr(args, "console_extras", [])
    settings = ConsoleSettings(
        bootstrap=bootstrap, zookeeper=zookeeper, host=args.console_host, port=args.console_port,
        read_only=args.console_read_only, client_settings={k: resolve_secret(v) for k, v in client.items()},
        login=login_of(own.get("--login-user"), own.get("--login-password")),
        tls=ServerTls(Path(own["--tls-cert"])) if "--tls-cert" in own else None,
        broker_metrics=tuple(value for flag, value in zip(extras[::2], extras[1::2], strict=True)
                             if flag == "--broker-metrics"),
        schema_registry=next((value for flag, value in zip(extras[::2], extras[1::2], strict=True)
                              if flag == "--schema-registry"), None))
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
    command += getattr(args, "console_extras", [])
    started = await start_listening_child(command, listening=LISTENING, error_prefix="roost console: ",
                                          timeout_s=CONSOLE_START_TIMEOUT_S)
    if isinstance(started, Refused):
        print(f"roost: console: {started.reason}; running without it (choose another --console-port, or "
              "--no-console)", flush=True)
        return None
    process, line = started
    print(line, flush=True)
    return ConsoleProcess(process)
