"""`roost schema-registry`: the Confluent-compatible schema registry (and REST proxy), alone,
against any Roost or Kafka cluster (docs/schema-registry.md):

    roost schema-registry -b 10.0.0.5:9092 --listeners http://0.0.0.0:8081
    roost schema-registry -b kafka1:9092 --config broker.toml -X security.protocol=SASL_SSL ...

Settings (`schema.registry.*`, `kafka.rest.enable`) come from --config (a TOML file: a broker's
own config file works, its other settings are ignored), then --set NAME=VALUE, then --listeners.
-X KEY=VALUE are the Kafka client settings it reaches the cluster with (`${env:}`/`${file:}`
references allowed). Every broker with `schema.registry.listeners` set runs this command as its
child. Prints `roost: schema registry listening on HOST:PORT` once it serves, and runs until
SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import sys
from pathlib import Path
from typing import Any

COMMAND = "roost schema-registry"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("schema-registry", help="run the schema registry and REST proxy",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-b", "--bootstrap-servers", required=True, help="the cluster's brokers, HOST:PORT,...")
    parser.add_argument("--listeners", help="http(s)://HOST:PORT to serve on (default http://127.0.0.1:8081)")
    parser.add_argument("--config", type=Path, help="a TOML file with schema.registry.* settings")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a setting")
    parser.add_argument("-X", action="append", default=[], metavar="KEY=VALUE", dest="client",
                        help="a Kafka client setting for the registry's producer and consumers")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.set_defaults(func=run)


def gathered_settings(args: argparse.Namespace) -> dict[str, Any]:
    import json
    import os

    from roost.config import ConfigError, flatten_toml, load_toml

    given: dict[str, Any] = {}
    inherited = os.environ.pop("ROOST_REGISTRY_SETTINGS", None)  # from the broker that started it
    if inherited:
        given.update(json.loads(inherited))
    if args.config is not None:
        table = flatten_toml(load_toml(args.config))
        given.update({k: v for k, v in table.items() if k.startswith("schema.registry.") or k == "kafka.rest.enable"})
    for pair in args.set:
        name, sep, value = pair.partition("=")
        if not sep:
            raise ConfigError(f"--set {pair!r}: expected NAME=VALUE")
        given[name.strip()] = value
    if args.listeners:
        given["schema.registry.listeners"] = args.listeners
    given.setdefault("schema.registry.listeners", "http://127.0.0.1:8081")
    return given


def client_settings(pairs: list[str]) -> dict[str, str]:
    from roost.config import ConfigError, resolve_secret_reference

    settings = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ConfigError(f"-X {pair!r}: expected KEY=VALUE")
        settings[key.strip()] = resolve_secret_reference(value, key.strip(), "-X")
    return settings


def run(args: argparse.Namespace) -> int:
    from roost.cli.servers.node_runner import configure_logging
    from roost.config import ConfigError
    from roost.registry.server import registry_settings

    configure_logging(args.log_level)
    # A crash in a C extension (librdkafka, protobuf) prints every thread's Python stack on stderr,
    # which the broker passes on: otherwise the registry would end without a word.
    faulthandler.enable()
    try:
        values = registry_settings(gathered_settings(args), "roost schema-registry")
        client = client_settings(args.client)
    except (ConfigError, ValueError) as error:
        print(f"{COMMAND}: {error}", file=sys.stderr)
        return 2
    return asyncio.run(serve(values, args.bootstrap_servers, client))


async def serve(values: dict[str, Any], bootstrap: str, client: dict[str, str]) -> int:
    from roost.cli.servers.node_runner import stop_signals
    from roost.registry.server import LISTENING, start_registry

    stop = stop_signals()
    try:
        running = await start_registry(values, bootstrap, client)
    except TimeoutError:
        print(f"{COMMAND}: cannot start: the cluster did not answer in time", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"{COMMAND}: cannot listen on {values['schema.registry.listeners']}: {error}", file=sys.stderr)
        return 1
    except Exception as error:
        print(f"{COMMAND}: cannot start: {error}", file=sys.stderr)
        return 1
    hostport = running.url.split("://", 1)[1]
    print(f"{LISTENING}{hostport}", flush=True)
    print(f"roost: schema registry at {running.url}", flush=True)
    await stop.wait()
    await running.stop()
    print("roost: schema registry stopped", flush=True)
    return 0
