"""`roost up`: a single Roost node in one process (the embedded default).

It prints one line per listener once it listens (`roost: kafka listening on HOST:PORT`), and on
SIGTERM or SIGINT it stops accepting, flushes and closes every log, and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from roost.broker.broker import Broker
from roost.config import BrokerConfig, ConfigError, add_setting_flags, flag_layer, load_toml
from roost.keeper.config import ConfigError as KeeperConfigError
from roost.keeper.embedded import KeeperHandle, start_embedded_keeper

log = logging.getLogger("roost.up")


def port_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be between 0 and 65535, got {value}")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "up", help="run a single Roost node (broker) in this process",
        description="Run a single Roost node. Settings come from defaults, then --config, then flags.")
    parser.add_argument("--config", type=Path, help="TOML file with settings (Kafka's names)")
    parser.add_argument("--data-dir", type=Path, default=Path("roost-data"), help="where data lives")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--kafka-port", type=port_number, default=9092,
                        help="Kafka protocol port (default 9092; 0 picks a free port)")
    parser.add_argument("--keeper-port", type=port_number, default=2181,
                        help="ZooKeeper protocol port of the embedded keeper (default 2181; 0 picks a free port)")
    parser.add_argument("--no-keeper", action="store_true", help="do not host a keeper in this process")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    add_setting_flags(parser)
    parser.set_defaults(func=run)


KEEPER_PREFIX = "keeper."


def build_config(args: argparse.Namespace) -> tuple[BrokerConfig, dict[str, Any]]:
    """The broker's settings, and the embedded keeper's (the TOML file's `[keeper]` table)."""
    layers = []
    keeper_settings: dict[str, Any] = {}
    if args.config is not None:
        from_file = load_toml(args.config)
        keeper_settings = {k.removeprefix(KEEPER_PREFIX): v for k, v in from_file.items()
                           if k.startswith(KEEPER_PREFIX)}
        layers.append((str(args.config), {k: v for k, v in from_file.items() if not k.startswith(KEEPER_PREFIX)}))
    layers.append(("command line", flag_layer(args)))
    return BrokerConfig.build(layers), keeper_settings


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config, keeper_settings = build_config(args)
    except ConfigError as error:
        print(f"roost up: {error}", file=sys.stderr)
        return 2
    try:
        import uvloop
    except ImportError:
        uvloop = None
    runner = uvloop.run if uvloop is not None else asyncio.run
    return runner(serve(config, keeper_settings, args))


async def serve(config: BrokerConfig, keeper_settings: dict[str, Any], args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    keeper: KeeperHandle | None = None
    if not args.no_keeper:
        try:
            keeper = await start_embedded_keeper(args.data_dir / "keeper", args.host, args.keeper_port,
                                                 keeper_settings)
        except KeeperConfigError as error:
            print(f"roost up: keeper: {error}", file=sys.stderr)
            return 2
        except OSError as error:
            print(f"roost up: cannot listen on {args.host}:{args.keeper_port}: {error}", file=sys.stderr)
            return 1
        keeper_host, keeper_port = keeper.address
        print(f"roost: keeper listening on {keeper_host}:{keeper_port}", flush=True)
    broker = Broker(config, args.data_dir, args.host, args.kafka_port)
    try:
        host, port = await broker.start()
    except OSError as error:
        print(f"roost up: cannot listen on {args.host}:{args.kafka_port}: {error}", file=sys.stderr)
        await broker.stop()
        if keeper is not None:
            await keeper.close()
        return 1
    print(f"roost: kafka listening on {host}:{port}", flush=True)
    await stop.wait()
    log.info("shutting down")
    await broker.stop()
    if keeper is not None:
        await keeper.close()
    print("roost: stopped", flush=True)
    return 0
