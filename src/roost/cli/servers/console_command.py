"""`roost console`: the web console, alone, against any cluster.

    roost console -b 10.0.0.5:9092 --zookeeper 10.0.0.5:2181 --port 8080 --read-only
    roost console --profile prod --login-user ops --login-password '${file:/etc/roost/console.password}' \\
        --tls-cert /etc/roost/console.pem --host 0.0.0.0

It talks to the cluster as the principal its client settings name: `-X key=value` and a profile's
settings, as every client command takes them (security.protocol, sasl.*, ssl.*; a value may be a
`${env:NAME}` or `${file:/path}` reference), passed to its confluent-kafka clients; the
`zookeeper.*` ones (zookeeper.sasl.client.username, zookeeper.digest, zookeeper.ssl.*: Kafka's
names) go to its keeper client. With --login-user/--login-password it asks for a login, and with
--tls-cert it serves HTTPS. A profile's `console` table may hold the same four
(`login-user`, `login-password`, `tls-cert`, `tls-key`).

It listens on 127.0.0.1 unless --host says otherwise, prints `roost: console listening on HOST:PORT`,
and runs until SIGINT or SIGTERM. The web server is imported only when the command runs.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import click

from roost.cli.client.client_options import CliError, load_profile, parse_settings
from roost.cli.servers.console_common import announce, login_of
from roost.console.settings import DEFAULT_CONSOLE_PORT, ConsoleSettings, ServerTls
from roost.console.slow_clients import DEFAULT_HEADER_TIMEOUT_S

KEEPER_PREFIX = "zookeeper."
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def security_settings(profile: dict[str, Any], pairs: tuple[str, ...], source: str) -> tuple[dict[str, str], dict[str, str]]:
    """The profile's settings, then -X, secret references resolved; split into the Kafka clients'
    settings and the keeper client's (zookeeper.*)."""
    from roost.config import ConfigError, resolve_secret_reference

    merged = {str(k): str(v) for k, v in dict(profile.get("settings", {})).items()}
    merged.update(parse_settings(pairs))
    try:
        merged = {key: resolve_secret_reference(value, key, source) for key, value in merged.items()}
    except ConfigError as error:
        raise CliError(str(error)) from None
    kafka = {k: v for k, v in merged.items() if not k.startswith(KEEPER_PREFIX)}
    keeper = {k: v for k, v in merged.items() if k.startswith(KEEPER_PREFIX)}
    return kafka, keeper


def console_settings(bootstrap: str | None, zookeeper: str | None, setting: tuple[str, ...], profile: str | None,
                     host: str, port: int, read_only: bool, login_user: str | None, login_password: str | None,
                     tls_cert: Path | None, tls_key: Path | None, broker_metrics: tuple[str, ...] = (),
                     schema_registry: str | None = None,
                     header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S) -> ConsoleSettings:
    """The command's options over the profile's values (its settings and `console` table)."""
    chosen = load_profile(profile) if profile else {}
    own = dict(chosen.get("console", {}))
    bootstrap = bootstrap or chosen.get("bootstrap")
    if not bootstrap:
        raise CliError("no brokers: give -b HOST:PORT (or ROOST_BOOTSTRAP, or a profile with bootstrap)")
    kafka, keeper = security_settings(chosen, setting, f"profile {profile}" if profile else "-X")
    tls_cert = tls_cert or (Path(own["tls-cert"]) if own.get("tls-cert") else None)
    tls_key = tls_key or (Path(own["tls-key"]) if own.get("tls-key") else None)
    if tls_key and not tls_cert:
        raise CliError("--tls-key needs --tls-cert")
    if keeper:
        from roost.console.keeper_identity import kazoo_identity

        try:
            kazoo_identity(keeper)
        except ValueError as error:
            raise CliError(str(error)) from None
    return ConsoleSettings(
        bootstrap=str(bootstrap), zookeeper=zookeeper or chosen.get("zookeeper"), host=host, port=port,
        read_only=read_only, client_settings=kafka, keeper_settings=keeper, header_timeout_s=header_timeout_s,
        login=login_of(login_user or own.get("login-user"), login_password or own.get("login-password")),
        tls=ServerTls(tls_cert, tls_key) if tls_cert else None,
        broker_metrics=tuple(broker_metrics or own.get("broker-metrics", ())),
        schema_registry=schema_registry or own.get("schema-registry"))


@click.command("console")
@click.option("-b", "--bootstrap", "--bootstrap-server", "bootstrap", metavar="HOST:PORT[,...]",
              envvar="ROOST_BOOTSTRAP", help="the cluster's brokers (env ROOST_BOOTSTRAP, or the profile's)")
@click.option("--zookeeper", metavar="HOST:PORT[,...]", envvar="ROOST_ZOOKEEPER",
              help="the keeper (ZooKeeper) ensemble, for the keeper page and member roles (env ROOST_ZOOKEEPER)")
@click.option("-X", "setting", multiple=True, metavar="KEY=VALUE",
              help="a client setting (confluent-kafka's; zookeeper.* ones for the keeper client), repeatable")
@click.option("--profile", envvar="ROOST_PROFILE", metavar="NAME",
              help="bootstrap, zookeeper, settings and console login from the profiles file (env ROOST_PROFILE)")
@click.option("--host", default="127.0.0.1", show_default=True, help="address to listen on")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_CONSOLE_PORT, show_default=True,
              help="port to listen on (0: a free one)")
@click.option("--read-only", is_flag=True, help="refuse every change (create, produce, reset, delete, ...)")
@click.option("--login-user", envvar="ROOST_CONSOLE_USER", metavar="NAME",
              help="ask for a login as this user (env ROOST_CONSOLE_USER)")
@click.option("--login-password", envvar="ROOST_CONSOLE_PASSWORD", metavar="SECRET",
              help="its password, best as ${env:NAME} or ${file:/path} (env ROOST_CONSOLE_PASSWORD)")
@click.option("--tls-cert", type=click.Path(dir_okay=False, path_type=Path),
              help="serve HTTPS with this PEM certificate chain (and key, if --tls-key is not given)")
@click.option("--tls-key", type=click.Path(dir_okay=False, path_type=Path), help="the PEM private key of --tls-cert")
@click.option("--broker-metrics", "broker_metrics", multiple=True, metavar="URL",
              help="a broker's Prometheus /metrics URL (repeatable): the share group page's in-flight figures")
@click.option("--schema-registry", metavar="URL", envvar="ROOST_SCHEMA_REGISTRY",
              help="a schema registry's URL, for the schema pages (env ROOST_SCHEMA_REGISTRY)")
@click.option("--header-timeout", "header_timeout_s", type=click.FloatRange(min=0), default=DEFAULT_HEADER_TIMEOUT_S,
              show_default=True, metavar="SECONDS",
              help="close a connection that sends no whole request head this long after it opened or after its "
                   "last answer, and a TLS handshake not done in it (slow clients; 0: never)")
def command(bootstrap: str | None, zookeeper: str | None, setting: tuple[str, ...], profile: str | None,
            host: str, port: int, read_only: bool, login_user: str | None, login_password: str | None,
            tls_cert: Path | None, tls_key: Path | None, broker_metrics: tuple[str, ...],
            schema_registry: str | None, header_timeout_s: float) -> int:
    """Serve the web console: overview, topics, messages, consumer groups, share groups, links, schemas, keeper."""
    settings = console_settings(bootstrap, zookeeper, setting, profile, host, port, read_only,
                                login_user, login_password, tls_cert, tls_key, broker_metrics, schema_registry,
                                header_timeout_s)
    # Its own log lines (logins, refusals, failed requests) at INFO; other libraries' at WARNING.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("roost.console").setLevel(logging.INFO)
    return asyncio.run(serve(settings))


async def serve(settings: ConsoleSettings) -> int:
    from roost.console.server import start_console

    try:
        running = await start_console(settings)
    except OSError as error:
        click.echo(f"roost console: cannot listen on {settings.host}:{settings.port}: {error}", err=True)
        return 1
    announce(running.address, settings.read_only, running.url, settings.login)
    if settings.login is None and settings.host not in LOOPBACK:
        click.echo(f"roost: console: no login asked, and it listens on {settings.host}: whoever reaches the port "
                   "can use it (--login-user and --login-password ask for one)", err=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await running.stop()
    click.echo("roost: console stopped")
    return 0
