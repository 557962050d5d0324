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

from roost.broker.broker import Broker
from roost.config import BrokerConfig, ConfigError, add_setting_flags, flag_layer, load_toml

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
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    add_setting_flags(parser)
    parser.set_defaults(func=run)


def build_config(args: argparse.Namespace) -> BrokerConfig:
    layers = []
    if args.config is not None:
        layers.append((str(args.config), load_toml(args.config)))
    layers.append(("command line", flag_layer(args)))
    return BrokerConfig.build(layers)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = build_config(args)
    except ConfigError as error:
        print(f"roost up: {error}", file=sys.stderr)
        return 2
    try:
        import uvloop
    except ImportError:
        uvloop = None
    runner = uvloop.run if uvloop is not None else asyncio.run
    return runner(serve(config, args))


async def serve(config: BrokerConfig, args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    broker = Broker(config, args.data_dir, args.host, args.kafka_port)
    try:
        host, port = await broker.start()
    except OSError as error:
        print(f"roost up: cannot listen on {args.host}:{args.kafka_port}: {error}", file=sys.stderr)
        await broker.stop()
        return 1
    print(f"roost: kafka listening on {host}:{port}", flush=True)
    await stop.wait()
    log.info("shutting down")
    await broker.stop()
    print("roost: stopped", flush=True)
    return 0
