"""The web console `roost up` serves beside the node or cluster it starts (default
127.0.0.1:8080; --console-port, --console-host, --console-read-only, --no-console).

The console is a convenience of `roost up`, not part of the cluster: when its port is taken (a
second `roost up` on the same machine) the cluster still runs, and one line says why there is
no console. The web server is imported only when a console starts.
"""

from __future__ import annotations

import argparse
from typing import Protocol

from roost.console.settings import DEFAULT_CONSOLE_PORT


def announce(address: str, read_only: bool) -> None:
    """The listening line, in the form of the other listeners' (`roost: NAME listening on HOST:PORT`)."""
    print(f"roost: console listening on {address}", flush=True)
    if read_only:
        print("roost: console is read-only: it refuses every change", flush=True)


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
    from roost.console.settings import ConsoleSettings

    settings = ConsoleSettings(bootstrap=bootstrap, zookeeper=zookeeper, host=args.console_host,
                               port=args.console_port, read_only=args.console_read_only)
    try:
        running = await start_console(settings)
    except OSError as error:
        print(f"roost: console: cannot listen on {settings.host}:{settings.port} ({error.strerror or error}); "
              "running without it (choose another --console-port, or --no-console)", flush=True)
        return None
    announce(running.address, settings.read_only)
    return running
