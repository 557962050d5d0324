"""`roost up`: a Roost node in one process (the embedded default), or a local cluster.

Without --brokers: one broker and, beside it in the same process, a standalone keeper. It prints one
line per listener once it listens (`roost: kafka listening on HOST:PORT`; with --metrics-port,
`roost: metrics listening on HOST:PORT` for the broker's and keeper's Prometheus metrics), and on SIGTERM or SIGINT
it stops accepting, flushes and closes every log, and exits 0. Beside it, the web console
(roost.cli.servers.up_console: http://127.0.0.1:8080/ unless --console-port or --no-console).

With --brokers N: a cluster of child processes supervised by this one (roost.cli.servers.cluster_plan): a
keeper ensemble (or an existing ZooKeeper ensemble given with --zookeeper) and N brokers.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roost.cli.servers import cluster_plan, dev_security, supervisor
from roost.cli.servers.node_runner import (
    GivenSettings,
    add_settings_arguments,
    configure_logging,
    given_settings,
    listen_address,
    log_directory,
    run_loop,
    serve_broker,
    stop_signals,
)
from roost.cli.servers.up_console import (
    Stoppable,
    add_console_arguments,
    console_extras,
    start_console_process,
    start_up_console,
)
from roost.config import BrokerConfig, ConfigError
from roost.keeper.config import ConfigError as KeeperConfigError
from roost.keeper.embedded import KeeperHandle, start_embedded_keeper

log = logging.getLogger("roost.up")

DEFAULT_KAFKA_PORT = 9092
DEFAULT_KEEPER_PORT = 2181
DEFAULT_REGISTRY_PORT = 8081  # Confluent Schema Registry's
COMMAND = "roost up"


def port_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be between 0 and 65535, got {value}")
    return value


def positive_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "up", help="run a Roost node in this process, or a local cluster with --brokers N",
        description="Run a single Roost node, or with --brokers N a local cluster of processes. "
                    "Settings come from defaults, then --config, then --set, then flags.")
    parser.add_argument("--data-dir", type=Path, default=Path("roost-data"), help="where data lives")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--kafka-port", type=port_number, default=None,
                        help=f"Kafka protocol port (default {DEFAULT_KAFKA_PORT}; 0 picks a free port). "
                             "With --brokers: the first broker's port, the next ones count up "
                             "(default: free ports)")
    parser.add_argument("--keeper-port", type=port_number, default=None,
                        help=f"ZooKeeper protocol port of the embedded keeper (default {DEFAULT_KEEPER_PORT}; "
                             "0 picks a free port). With --brokers: the first keeper's client port, the next "
                             "ones count up (default: free ports)")
    parser.add_argument("--no-keeper", action="store_true", help="do not host a keeper in this process")
    cluster_flags = parser.add_argument_group("local cluster (child processes)")
    cluster_flags.add_argument("--brokers", type=positive_count, metavar="N",
                               help="run N brokers (ids 1..N) as child processes, data in DATA_DIR/broker-ID")
    cluster_flags.add_argument("--keepers", type=positive_count, metavar="K",
                               help="run a keeper ensemble of K members (1, 3, 5 or 7; default 3 with "
                                    "more than one broker, else 1)")
    cluster_flags.add_argument("--zookeeper", metavar="HOST:PORT[,...]",
                               help="use this ZooKeeper ensemble (keepers or Apache ZooKeeper) and start no keeper")
    parser.add_argument("--security", choices=dev_security.MODES, default="plaintext",
                        help="for development: ssl, sasl_plaintext or sasl_ssl with a throw-away CA and an admin "
                             "user made in DATA_DIR/security (prints how to connect; default plaintext)")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    add_console_arguments(parser, port_number)
    registry = parser.add_argument_group("schema registry and REST proxy")
    registry.add_argument("--schema-registry-port", type=port_number, default=DEFAULT_REGISTRY_PORT,
                          help=f"port of the schema registry and REST proxy (default {DEFAULT_REGISTRY_PORT}; with "
                               "--brokers N one each, counting up; 0 picks free ports)")
    registry.add_argument("--no-schema-registry", action="store_true", help="serve no schema registry")
    add_settings_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    security: dev_security.DevSecurity | None = None
    try:
        settings = given_settings(args)
        security = dev_security.prepare(args.data_dir, args.security, args.host)
        if security is not None and "listeners" in settings.names():
            raise ConfigError("--security chooses the listeners itself: leave 'listeners' unset")
        wants_registry = not args.no_schema_registry and "schema.registry.listeners" not in settings.names()
        if args.brokers is not None:
            plan = cluster_plan.plan_from_args(args, settings, security)
            if wants_registry:
                for spec, port in zip(plan.brokers, cluster_plan.consecutive(args.schema_registry_port or None,
                                                                              len(plan.brokers)), strict=True):
                    spec.config["schema.registry.listeners"] = f"http://{cluster_plan.hostport(args.host, port or 0)}"
        else:
            refuse_cluster_flags(args)
            extra = []
            if wants_registry:
                registry: dict[str, Any] = {"schema.registry.listeners": f"http://{cluster_plan.hostport(args.host, args.schema_registry_port)}"}
                if cluster_plan.REGISTRY_REPLICATION not in settings.names():
                    # One broker: the registry would otherwise wait 30 s for the two more its default wants.
                    registry[cluster_plan.REGISTRY_REPLICATION] = 1
                extra.append(("--schema-registry-port", registry))
            if security is not None:
                kafka_port = DEFAULT_KAFKA_PORT if args.kafka_port is None else args.kafka_port
                extra.append(("--security", {**security.settings,
                                             "listeners": security.listener(cluster_plan.hostport(args.host, kafka_port))}))
            config = settings.build(*extra)
    except ConfigError as error:
        print(f"{COMMAND}: {error}", file=sys.stderr)
        return 2
    args.dev_security = security
    if args.brokers is not None:
        args.console_extras = console_extras(
            plan.brokers[0].config.get("schema.registry.listeners") if plan.brokers else None,
            [plain_metrics(spec.config) for spec in plan.brokers])
    else:
        args.console_extras = console_extras(config["schema.registry.listeners"] or None, [plain_metrics(config.values)])
    if args.brokers is not None:
        if security is not None:
            for line in security.hints(",".join(cluster_plan.hostport(*spec.address) for spec in plan.brokers)):
                print(line, flush=True)
        # Plain asyncio: the supervisor does little I/O and needs Popen's process_group and preexec_fn.
        return asyncio.run(supervisor.supervise(
            plan, lambda bootstrap, connect: start_up_console(args, bootstrap, connect)))
    return run_loop(serve(config, settings, args))


def plain_metrics(config: Mapping[str, Any]) -> tuple[str, int]:
    """Where a broker serves /metrics to a scrape without TLS or a token (port -1: not so)."""
    if config.get("metrics.ssl.keystore.location") or config.get("metrics.bearer.token"):
        return "", -1
    return str(config.get("metrics.host") or "127.0.0.1"), int(config.get("metrics.port", -1))


def refuse_cluster_flags(args: argparse.Namespace) -> None:
    for flag, value in (("--keepers", args.keepers), ("--zookeeper", args.zookeeper)):
        if value is not None:
            raise ConfigError(f"{flag} needs --brokers N (a cluster of child processes)")


async def serve(config: BrokerConfig, settings: GivenSettings, args: argparse.Namespace) -> int:
    stop = stop_signals()
    print(f"roost: data in {args.data_dir.resolve()}", flush=True)
    keeper: KeeperHandle | None = None
    if not args.no_keeper:
        keeper_port = DEFAULT_KEEPER_PORT if args.keeper_port is None else args.keeper_port
        try:
            keeper = await start_embedded_keeper(
                args.data_dir / "keeper", args.host, keeper_port,
                {**cluster_plan.local_keeper_defaults(settings.keeper), **settings.keeper})
        except KeeperConfigError as error:
            print(f"{COMMAND}: keeper: {error}", file=sys.stderr)
            return 2
        except OSError as error:
            print(f"{COMMAND}: cannot listen on {args.host}:{keeper_port}: {error}", file=sys.stderr)
            return 1
        keeper_host, keeper_port = keeper.address
        print(f"roost: keeper listening on {keeper_host}:{keeper_port}", flush=True)
        if not config["zookeeper.connect"]:
            # The node is a one-broker cluster coordinated by its own keeper: the same code path
            # as a cluster of many (registration, controller, leaders), only smaller.
            local = "127.0.0.1" if keeper_host in ("0.0.0.0", "::", "") else keeper_host
            config = BrokerConfig({**config.values, "zookeeper.connect": f"{local}:{keeper_port}"},
                                  given=config.given | {"zookeeper.connect"})
    kafka_port = DEFAULT_KAFKA_PORT if args.kafka_port is None else args.kafka_port
    host, port = listen_address(config, args.host, kafka_port)
    # The embedded keeper's series are served beside the broker's, on the one metrics endpoint.
    extra_metrics = []
    if keeper is not None and config["metrics.port"] >= 0:
        from roost.metrics.keeper_metrics import keeper_registry

        extra_metrics.append(keeper_registry(keeper.server))

    async def console_beside(bound: tuple[str, int]) -> Stoppable | None:
        local = "127.0.0.1" if bound[0] in ("0.0.0.0", "::", "") else bound[0]
        if args.dev_security is not None:
            for line in args.dev_security.hints(cluster_plan.hostport(local, bound[1])):
                print(line, flush=True)
        return await start_console_process(args, cluster_plan.hostport(local, bound[1]), config["zookeeper.connect"] or None)

    status = await serve_broker(config, log_directory(config, args.data_dir), host, port, COMMAND, "kafka", stop,
                                extra_metrics, after_start=console_beside)
    if keeper is not None:
        await keeper.close()
    if status == 0:
        print("roost: stopped", flush=True)
    return status

