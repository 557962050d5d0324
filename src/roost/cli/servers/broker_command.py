"""`roost broker --config FILE`: one broker of a cluster that spans machines, configured the way a
Kafka broker in ZooKeeper mode is (`broker.properties` becomes a TOML file with the same names):

    broker.id = 1
    zookeeper.connect = "zk1:2181,zk2:2181,zk3:2181"   # required: the ensemble the brokers share
    listeners = "PLAINTEXT://10.0.0.1:9092"            # where it binds; port 0 picks a free one
    advertised.listeners = "PLAINTEXT://kafka1.example.com:9092"   # where clients are sent, if not there
    broker.rack = "eu-west-1a"
    log.dirs = "/var/lib/roost/broker-1"                # required: one directory or several, comma-separated

Any setting can also be given as `--set NAME=VALUE` or as its own flag (`--broker.id 2`); flags
win over --set, which wins over the file. Prints `roost: broker ID kafka listening on HOST:PORT`
once clients can connect. SIGTERM or SIGINT stop it (with a controlled shutdown first when
`controlled.shutdown.enable` is on) and it prints `roost: broker ID stopped`. A bad setting is
refused with a message naming it, exit status 2.
"""

from __future__ import annotations

import argparse
import sys

from roost.cli.servers.node_runner import (
    add_settings_arguments,
    configure_logging,
    given_settings,
    listen_address,
    log_directory,
    run_loop,
    serve_broker,
    stop_signals,
)
from roost.config import BrokerConfig, ConfigError

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 9092  # when `listeners` is not set, as for roost up
COMMAND = "roost broker"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "broker", help="run one broker of a multi-machine cluster (Kafka-style config)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    add_settings_arguments(parser)
    parser.set_defaults(func=run)


def cluster_member_config(args: argparse.Namespace) -> BrokerConfig:
    """The checked settings of a cluster member; raises ConfigError naming what is wrong."""
    config = given_settings(args).build()
    if not config["zookeeper.connect"]:
        # Without it the broker would run alone, silently outside the cluster it was meant for;
        # `roost up` is the way to run a standalone broker.
        raise ConfigError("setting 'zookeeper.connect' is required: the ZooKeeper ensemble (keepers or "
                          "Apache ZooKeeper) that the cluster's brokers share, host:port[,host:port...]")
    log_directory(config, None)
    return config


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    try:
        config = cluster_member_config(args)
    except ConfigError as error:
        print(f"{COMMAND}: {error}", file=sys.stderr)
        return 2
    return run_loop(serve(config))


async def serve(config: BrokerConfig) -> int:
    stop = stop_signals()
    host, port = listen_address(config, DEFAULT_HOST, DEFAULT_PORT)
    broker_id = config["broker.id"]
    status = await serve_broker(config, log_directory(config, None), host, port, COMMAND,
                                f"broker {broker_id} kafka", stop)
    if status == 0:
        print(f"roost: broker {broker_id} stopped", flush=True)
    return status
