"""`roost up --brokers N [--keepers K | --zookeeper HOST:PORT,...]`: a local cluster in one command.

This module plans it: it checks the flags and settings, chooses every port before anything
starts, and describes each child process (`roost keeper` or `roost broker`) with its complete
config, so that each config is whole when written. roost.cli.servers.supervisor runs the plan.

K keepers (`roost keeper --config DIR/keeper-I.toml`) form one ensemble; N brokers
(`roost broker --config DIR/broker-I.toml`, ids 1..N, logs in DIR/broker-I) join it. With
--zookeeper no keeper is started and the brokers use that ensemble.
"""

from __future__ import annotations

import argparse
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from roost.cli.servers.dev_security import DevSecurity
from roost.cli.servers.node_runner import GivenSettings
from roost.config import ConfigError
from roost.keeper.config import ConfigError as KeeperConfigError
from roost.keeper.config import KeeperConfig
from roost.zkclient.connect_string import parse_connect_string

# Keepers tick every 500 ms so that the ensemble grants sessions from 1 s: a user may shorten the
# brokers' zookeeper.session.timeout.ms (4 s by default) for a faster failover after a network cut.
KEEPER_TICK_MS = 500
# The four-letter words roost up's own keepers answer unless the user chose: ZooKeeper's default
# (srvr, which `roost cluster status` reads) plus ruok and mntr for health checks and monitoring.
# Not envi, conf, cons or stat: they describe the host and every connected client.
LOCAL_FOUR_LETTER_WORDS = "srvr,ruok,mntr"
MAX_REPLICATION = 3  # the internal topics' and default.replication.factor: min(3, N)
REGISTRY_REPLICATION = "schema.registry.kafkastore.topic.replication.factor"
ENSEMBLE_SIZES = (1, 3, 5, 7)

# Set per broker by the supervisor; a user's value would make the brokers collide.
PER_BROKER_SETTINGS = {
    "broker.id": "the brokers get ids 1..N",
    "listeners": "each broker gets its own port (--host and --kafka-port choose them)",
    "advertised.listeners": "each broker advertises its own listener",
    "log.dirs": "each broker keeps its logs in DATA_DIR/broker-ID (--data-dir chooses DATA_DIR)",
    "zookeeper.connect": "give --zookeeper HOST:PORT[,...] to use an existing ensemble",
}
PER_KEEPER_SETTINGS = ("myid", "server", "dataDir", "clientPort", "clientPortAddress")


@dataclass(frozen=True)
class ChildSpec:
    """One child process: what it is, its config file's content, and where it listens."""

    kind: str  # "keeper" or "broker"
    ident: int
    config: dict[str, Any]
    data_dir: Path  # the cluster's directory, where the config and log files go
    address: tuple[str, int]

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.ident}"

    @property
    def label(self) -> str:
        return f"{self.kind} {self.ident}"

    @property
    def config_path(self) -> Path:
        return self.data_dir / f"{self.name}.toml"

    @property
    def log_path(self) -> Path:
        return self.data_dir / f"{self.name}.log"

    def argv(self, log_level: str) -> list[str]:
        return [sys.executable, "-m", "roost.cli.main", self.kind, "--config", str(self.config_path),
                "--log-level", log_level]


@dataclass(frozen=True)
class ClusterPlan:
    data_dir: Path
    keepers: list[ChildSpec]
    brokers: list[ChildSpec]
    zookeeper_connect: str
    log_level: str = "INFO"

    def write_configs(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for spec in [*self.keepers, *self.brokers]:
            spec.config_path.write_text(
                f"# written by roost up for {spec.label}; rewritten at every start\n" + tomli_w.dumps(spec.config))


# ----------------------------------------------------------------------------------- planning


def plan_from_args(args: argparse.Namespace, settings: GivenSettings,
                   security: DevSecurity | None = None) -> ClusterPlan:
    """Check roost up's cluster flags and settings and choose every port; raises ConfigError."""
    if args.no_keeper:
        raise ConfigError("--no-keeper: with --brokers, give --zookeeper HOST:PORT[,...] to start no keeper")
    if args.zookeeper is not None and args.keepers is not None:
        raise ConfigError("--keepers and --zookeeper exclude each other: --zookeeper uses an existing ensemble")
    keepers = 0 if args.zookeeper is not None else (args.keepers or (3 if args.brokers > 1 else 1))
    if keepers and keepers not in ENSEMBLE_SIZES:
        raise ConfigError(f"--keepers {keepers}: an ensemble has 1, 3, 5 or 7 members")
    if args.zookeeper is not None:
        try:
            parse_connect_string(args.zookeeper)
        except ValueError as problem:
            raise ConfigError(f"--zookeeper {args.zookeeper!r}: {problem}") from None
    data_dir = args.data_dir.absolute()
    peers = keepers if keepers > 1 else 0  # a single keeper runs standalone: no peer port
    ports = choose_ports(args.host, [*consecutive(args.keeper_port, keepers), *[None] * peers,
                                     *consecutive(args.kafka_port, args.brokers)])
    keeper_ports, peer_ports, broker_ports = ports[:keepers], ports[keepers:keepers + peers], ports[keepers + peers:]
    keeper_specs = plan_keepers(data_dir, args.host, keeper_ports, peer_ports, settings)
    connect = args.zookeeper or ",".join(f"{hostport(*spec.address)}" for spec in keeper_specs)
    broker_specs = plan_brokers(data_dir, args.host, broker_ports, connect, settings, security)
    return ClusterPlan(data_dir, keeper_specs, broker_specs, connect, args.log_level)


def plan_brokers(data_dir: Path, host: str, ports: list[int], connect: str,
                 settings: GivenSettings, security: DevSecurity | None = None) -> list[ChildSpec]:
    given = settings.names()
    for name, why in PER_BROKER_SETTINGS.items():
        if name in given:
            raise ConfigError(f"setting '{name}' is chosen per broker by roost up --brokers: {why}")
    count = len(ports)
    replicated = ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                  "default.replication.factor", REGISTRY_REPLICATION)
    replication = {name: min(MAX_REPLICATION, count)
                   for name in replicated
                   if name not in given}
    shared = settings.build()
    for name in replicated:
        if name in given and shared[name] > count:  # the rest are min(3, N) above
            raise ConfigError(f"setting '{name}' = {shared[name]} needs at least {shared[name]} brokers; "
                              f"--brokers is {count}")
    # The user's settings with their checked values, the same in every broker's file.
    common = {name: shared[name] for name in sorted(given)}
    if "balancer.mode" not in given and security is None:
        # A local cluster balances itself (docs/balancing.md): a broker added takes its share, one
        # gone past balancer.broker.unavailable.delay.ms is healed. Not with --security: the
        # automatic balancer talks to its broker over a PLAINTEXT listener.
        common["balancer.mode"] = "continuous"
    metrics_ports = consecutive(shared["metrics.port"], count) if shared["metrics.port"] > 0 else [None] * count
    specs = []
    for broker_id, port in enumerate(ports, start=1):
        listener = security.listener(hostport(host, port)) if security else f"PLAINTEXT://{hostport(host, port)}"
        own = {"broker.id": broker_id, "listeners": listener, **(security.settings if security else {}),
               "log.dirs": str(data_dir / f"broker-{broker_id}"), "zookeeper.connect": connect,
               **replication}
        if metrics_ports[broker_id - 1] is not None:
            # A metrics port counts up from broker to broker, as --kafka-port does.
            own["metrics.port"] = metrics_ports[broker_id - 1]
        settings.build(("roost up --brokers", own))  # the child would refuse what this refuses
        specs.append(ChildSpec("broker", broker_id, {**common, **own}, data_dir, (host, port)))
    return specs


def plan_keepers(data_dir: Path, host: str, client_ports: list[int], peer_ports: list[int],
                 settings: GivenSettings) -> list[ChildSpec]:
    for name in settings.keeper:
        if name.split(".", 1)[0] in PER_KEEPER_SETTINGS:
            raise ConfigError(f"keeper setting '{name}' is chosen per keeper by roost up --brokers")
    session_ms = settings.build()["zookeeper.session.timeout.ms"]
    raw_tick = settings.keeper.get("tickTime", KEEPER_TICK_MS)
    try:
        tick = int(raw_tick)
    except (TypeError, ValueError):
        raise ConfigError(f"keeper setting 'tickTime': must be an integer, got {raw_tick!r}") from None
    # The ensemble must grant the brokers' session timeout, whatever the user chose.
    common: dict[str, Any] = {"tickTime": tick, "minSessionTimeout": min(2 * tick, session_ms),
                              "maxSessionTimeout": max(20 * tick, session_ms),
                              **local_keeper_defaults(settings.keeper), **settings.keeper}
    if settings.build()["metrics.port"] >= 0 and "metricsProvider" not in settings.keeper \
            and "metricsProvider.httpPort" not in settings.keeper:
        # Metrics asked for: the keepers serve theirs too, on free ports (printed as they bind).
        common["metricsProvider.httpPort"] = 0
    servers = {str(sid): hostport(host, port) for sid, port in enumerate(peer_ports, start=1)}
    specs = []
    for myid, port in enumerate(client_ports, start=1):
        config = {**common, "myid": myid, "dataDir": str(data_dir / f"keeper-{myid}"),
                  "clientPort": port, "clientPortAddress": host}
        if servers:
            config["server"] = servers
        try:
            KeeperConfig.from_mapping(config)  # the child would refuse what this refuses
        except KeeperConfigError as error:
            raise ConfigError(f"keeper {myid}: {error}") from None
        specs.append(ChildSpec("keeper", myid, config, data_dir, (host, port)))
    return specs


def local_keeper_defaults(given: dict[str, Any]) -> dict[str, Any]:
    """Settings roost up adds to its own keepers' unless the user set them (see
    LOCAL_FOUR_LETTER_WORDS)."""
    if "4lw.commands.whitelist" in given or "4lw" in given:
        return {}
    return {"4lw.commands.whitelist": LOCAL_FOUR_LETTER_WORDS}


def consecutive(first: int | None, count: int) -> list[int | None]:
    """`first`, first + 1, ... when a first port is given (not 0); else `count` free ones (None)."""
    if not first:
        return [None] * count
    if first + count - 1 > 65535:
        raise ConfigError(f"port {first}: {count} consecutive ports do not fit below 65536")
    return [first + i for i in range(count)]


def choose_ports(host: str, wanted: list[int | None]) -> list[int]:
    """One port per entry of `wanted`: that port, or a free one for None. All are bound at once,
    so no free port repeats or equals a given one, and a given port in use is refused here,
    before anything starts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sockets: list[socket.socket] = []
    try:
        for port in wanted:
            sock = socket.socket(family)
            sockets.append(sock)
            # As the servers bind: a port left in TIME_WAIT by an earlier run is free.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port or 0))
            except OSError as error:
                raise ConfigError(f"cannot listen on {hostport(host, port or 0)}: {error}") from None
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
