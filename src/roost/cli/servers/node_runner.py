"""What `roost up` and `roost broker` share: settings gathered from a TOML file, `--set` and flags;
where a broker listens and keeps its logs; the event loop; and serving a broker until SIGTERM or
SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roost.broker.broker import Broker
from roost.cli.servers.metrics_serving import metrics_guard, start_metrics
from roost.cli.servers.server_process import run_on_fast_loop
from roost.config import BrokerConfig, ConfigError, add_setting_flags, flag_layer, load_toml, parse_listener

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from roost.cli.servers.up_console import Stoppable
    from roost.metrics.endpoint import MetricsEndpoint

log = logging.getLogger("roost.cli")

KEEPER_PREFIX = "keeper."  # the TOML file's [keeper] table: settings of the keepers roost up starts


@dataclass(frozen=True)
class GivenSettings:
    """The settings a user gave, by source, before defaults: broker settings in layers (later
    layers win) and the `[keeper]` table of the TOML file."""

    layers: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    keeper: dict[str, Any] = field(default_factory=dict)

    def names(self) -> set[str]:
        """Every broker setting the user set somewhere."""
        return {name for _, layer in self.layers for name in layer}

    def build(self, *extra: tuple[str, Mapping[str, Any]]) -> BrokerConfig:
        """The checked config: defaults, the user's layers, then `extra` layers."""
        return BrokerConfig.build([*self.layers, *extra])


def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    """--config FILE, --set NAME=VALUE (repeatable) and one flag per setting."""
    parser.add_argument("--config", type=Path, help="TOML file with settings (Kafka's names)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", dest="set_items",
                        help="any setting by its Kafka name (repeatable); wins over --config")
    add_setting_flags(parser)


def given_settings(args: argparse.Namespace) -> GivenSettings:
    """The settings from --config, then --set, then the setting flags; raises ConfigError."""
    layers: list[tuple[str, dict[str, Any]]] = []
    keeper: dict[str, Any] = {}
    if args.config is not None:
        from_file = load_toml(args.config)
        keeper = {k.removeprefix(KEEPER_PREFIX): v for k, v in from_file.items() if k.startswith(KEEPER_PREFIX)}
        layers.append((str(args.config), {k: v for k, v in from_file.items() if not k.startswith(KEEPER_PREFIX)}))
    set_layer: dict[str, str] = {}
    for item in args.set_items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--set {item!r}: expected NAME=VALUE")
        set_layer[name.strip()] = value
    layers.append(("--set", set_layer))
    layers.append(("command line", flag_layer(args)))
    return GivenSettings(layers, keeper)


def listen_address(config: BrokerConfig, default_host: str, default_port: int) -> tuple[str, int]:
    """Where the broker binds: `listeners` when set, else the defaults (roost up's flags)."""
    return parse_listener(config["listeners"], allow_port_zero=True) or (default_host, default_port)


def log_directory(config: BrokerConfig, default: Path | None) -> Path:
    """The broker's data directory: the first of `log.dirs` when set, else `log.dir`, else
    `default`; raises ConfigError when there is none. (The other log directories are read from
    `log.dirs` by the broker's log manager.)"""
    if config["log.dirs"]:
        return Path(str(config["log.dirs"]).split(",")[0].strip())
    if config["log.dir"]:
        return Path(config["log.dir"])
    if default is None:
        raise ConfigError("setting 'log.dirs' is required: the directory where this broker keeps its logs")
    return default


def configure_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


# Tried when the hard limit is unlimited (a soft limit above the kernel's nr_open is refused).
UNLIMITED_OPEN_FILES_WANTED = 1_048_576


def raise_open_files_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit, as the JVM does for
    Kafka's brokers. A broker holds three descriptors per partition (its active segment's log and
    two indexes): under the common soft limit of 1,024 it fails near 300 partitions, and a failed
    open takes the whole log directory offline. Returns the soft limit in force (-1: unknown)."""
    try:
        import resource
    except ImportError:  # not on every platform
        return -1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = UNLIMITED_OPEN_FILES_WANTED if hard == resource.RLIM_INFINITY else hard
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    except (ValueError, OSError):
        return soft
    return wanted


def run_loop(coro: Coroutine[Any, Any, int]) -> int:
    """Run a broker's `coro` on the fast loop (roost.cli.servers.server_process), with the open-files limit raised
    first (see raise_open_files_limit)."""
    limit = raise_open_files_limit()
    logging.getLogger("roost").info("open files limit %d: about %d partitions per broker at three files each",
                                    limit, limit // 3)
    return run_on_fast_loop(coro)


def stop_signals() -> asyncio.Event:
    """An event set by the first SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return stop


async def start_unless_stopped(broker: Broker, stop: asyncio.Event) -> tuple[str, int] | None:
    """Start `broker`, or give up if a stop signal comes first (a broker may wait at start, e.g.
    for its ZooKeeper ensemble). None means stopped before it listened; start errors propagate."""
    starting = asyncio.ensure_future(broker.start())
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if starting.done():
        return starting.result()
    starting.cancel()
    try:
        await starting
    except asyncio.CancelledError:
        pass
    return None


async def serve_broker(config: BrokerConfig, data_dir: Path, host: str, port: int, command: str,
                       listening: str, stop: asyncio.Event,
                       extra_metrics: Sequence[CollectorRegistry] = (),
                       after_start: Callable[[tuple[str, int]], Awaitable[Stoppable | None]] | None = None) -> int:
    """Run one broker until `stop` is set; 0 once it has stopped, 1 if it could not start.
    Prints `roost: {listening} listening on HOST:PORT` once it listens (`listening` names it:
    "kafka", "broker 3 kafka"); `command` prefixes error lines. With `metrics.port` >= 0 it also
    serves the broker's Prometheus metrics, and `extra_metrics` beside them. `after_start(address)`
    runs once the broker listens and may return something to stop before the broker (a console)."""
    try:
        broker = Broker(config, data_dir, host, port)
    except OSError as error:
        print(f"{command}: cannot use the data directory {data_dir}: {error}", file=sys.stderr)
        return 1
    try:
        bound = await start_unless_stopped(broker, stop)
    except OSError as error:
        print(f"{command}: cannot listen on {host}:{port}: {error}", file=sys.stderr)
        await broker.stop()
        return 1
    except Exception as error:  # one line for the operator; the log has the traceback
        log.exception("broker %d failed to start", config["broker.id"])
        print(f"{command}: cannot start the broker: {error}", file=sys.stderr)
        await broker.stop()
        return 1
    if bound is None:
        await broker.stop()
        return 0
    print(f"roost: {listening} listening on {bound[0]}:{bound[1]}", flush=True)
    if len(broker.bound) > 1 or set(broker.bound) != {"PLAINTEXT"}:
        # One line per named listener too: `roost: kafka listener sasl-ssl listening on HOST:PORT`.
        for name, (host_, port_) in broker.bound.items():
            print(f"roost: {listening} listener {name.lower().replace('_', '-')} listening on {host_}:{port_}",
                  flush=True)
    metrics: MetricsEndpoint | None = None
    if config["metrics.port"] >= 0:
        from roost.metrics.broker_metrics import broker_registry

        # Named like the Kafka listener: "kafka" -> "metrics", "broker 3 kafka" -> "broker 3 metrics".
        name = " ".join([*listening.split()[:-1], "metrics"])
        try:
            token, context = metrics_guard(config)
        except (OSError, ValueError) as error:
            print(f"{command}: cannot serve metrics: {error}", file=sys.stderr)
            await broker.stop()
            return 1
        metrics = await start_metrics([broker_registry(broker), *extra_metrics], config["metrics.host"],
                                      config["metrics.port"], command, name, token, context)
        if metrics is None:
            await broker.stop()
            return 1
    companion = await after_start(bound) if after_start is not None else None
    from roost.cli.servers.registry_child import start_registry_child

    local = "127.0.0.1" if bound[0] in ("0.0.0.0", "::", "") else bound[0]
    label = " ".join(listening.split()[:-1])
    registry = await start_registry_child(config, f"{local}:{bound[1]}", f"{label} " if label else "")
    await stop.wait()
    log.info("shutting down")
    if registry is not None:
        await registry.stop()
    if companion is not None:
        await companion.stop()
    if metrics is not None:
        await metrics.stop()
    await broker.stop()
    return 0
