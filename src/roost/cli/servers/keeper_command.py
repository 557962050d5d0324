"""`roost keeper --config FILE`: run one keeper (standalone, or a member of an ensemble).

Every config setting can also be given on the command line with `--set NAME=VALUE` (ZooKeeper
names, e.g. `--set tickTime=500`); common ones have their own flags. Prints
`roost: keeper listening on HOST:PORT` once clients can connect; SIGTERM or SIGINT stop it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import Any

from roost.cli.servers.server_process import run_on_fast_loop
from roost.keeper.config import ConfigError, KeeperConfig


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("keeper", help="run a ZooKeeper-compatible keeper",
                                   description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="TOML config file (see roost.keeper.config)")
    parser.add_argument("--data-dir", help="dataDir")
    parser.add_argument("--client-port", type=int, help="clientPort (0 picks a free port)")
    parser.add_argument("--client-port-address", help="clientPortAddress")
    parser.add_argument("--tick-time", type=int, help="tickTime in ms")
    parser.add_argument("--myid", type=int, help="this member's id")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="any config setting by its ZooKeeper name (repeatable)")
    parser.add_argument("--metrics-port", type=int,
                        help="metricsProvider.httpPort: serve Prometheus metrics on http://HOST:PORT/metrics "
                             "(0 picks a free port; default -1: off)")
    parser.add_argument("--metrics-host", help="metricsProvider.httpHost: address of the metrics endpoint "
                                               "(default 127.0.0.1)")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    parser.set_defaults(func=run)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, attribute in (("dataDir", "data_dir"), ("clientPort", "client_port"),
                            ("clientPortAddress", "client_port_address"), ("tickTime", "tick_time"),
                            ("myid", "myid"), ("metricsProvider.httpPort", "metrics_port"),
                            ("metricsProvider.httpHost", "metrics_host")):
        value = getattr(args, attribute)
        if value is not None:
            values[name] = value
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: expected NAME=VALUE")
        if name.startswith("server."):
            values.setdefault("server", {})[name.split(".", 1)[1]] = value
        else:
            values[name] = value
    return values


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        overrides = _overrides(args)
        if args.config:
            config = KeeperConfig.load(args.config, overrides)
        else:
            config = KeeperConfig.from_mapping(overrides)
    except ConfigError as exc:
        print(f"roost keeper: invalid configuration: {exc}", file=sys.stderr)
        return 2
    # uvloop for standalone keepers and ensemble members alike: the client protocol and the raft
    # peer transport only use the transport methods that uvloop's transports share with asyncio's.
    return run_on_fast_loop(_serve(config))


async def _serve(config: KeeperConfig) -> int:
    from roost.cli.servers.metrics_serving import start_metrics
    from roost.keeper.server import KeeperServer
    from roost.metrics.keeper_metrics import keeper_registry

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    logging.getLogger("roost.keeper").info("event loop: %s.%s", type(loop).__module__, type(loop).__name__)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = KeeperServer(config)
    try:
        host, port = await server.start()
    except OSError as exc:
        print(f"roost keeper: cannot start: {exc}", file=sys.stderr)
        await server.stop()
        return 1
    if config.client_port >= 0:
        print(f"roost: keeper listening on {host}:{port}", flush=True)
    if server.secure_address is not None:
        print(f"roost: keeper secure listening on {server.secure_address[0]}:{server.secure_address[1]}", flush=True)
    metrics = None
    if config.metrics_port >= 0:
        # "keeper metrics": under roost up --brokers the supervisor relays it as "keeper 2 metrics".
        from roost.keeper.tls import server_context

        try:
            context = server_context(config.metrics_tls) if config.metrics_tls else None
        except OSError as error:  # ssl.SSLError among them: a key store that does not load
            print(f"roost keeper: cannot serve metrics over TLS: {error}", file=sys.stderr)
            await server.stop()
            return 1
        metrics = await start_metrics([keeper_registry(server)], config.metrics_host, config.metrics_port,
                                      "roost keeper", "keeper metrics", config.metrics_token or None, context)
        if metrics is None:
            await server.stop()
            return 1
    try:
        await stop.wait()
    finally:
        if metrics is not None:
            await metrics.stop()
        await server.stop()
    print("roost: keeper stopped", flush=True)
    return 0
