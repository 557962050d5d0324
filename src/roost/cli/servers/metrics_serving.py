"""Where a `roost` command serves Prometheus metrics: what `roost up`, `roost broker` and
`roost keeper` share."""

from __future__ import annotations

import ssl
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from roost.config import BrokerConfig
    from roost.metrics.endpoint import MetricsEndpoint


def metrics_guard(config: BrokerConfig) -> tuple[str | None, ssl.SSLContext | None]:
    """The bearer token (resolved from its reference) and the TLS context the broker's settings
    ask /metrics to require (metrics.bearer.token, metrics.ssl.keystore.location); None for each
    not asked for. OSError/ssl.SSLError when the key store cannot be read, ValueError when the
    token is empty."""
    from roost.secret_ref import resolve_secret

    token = resolve_secret(config["metrics.bearer.token"]) if config["metrics.bearer.token"] else None
    if token is not None and not token.strip():  # e.g. ${env:NAME} of an empty variable: not "no guard"
        raise ValueError("setting 'metrics.bearer.token' resolves to an empty token")
    context = None
    keystore = config["metrics.ssl.keystore.location"]
    if keystore:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        password = config["metrics.ssl.key.password"]
        context.load_cert_chain(keystore, password=resolve_secret(password) if password else None)
    return token, context


async def start_metrics(registries: Sequence[CollectorRegistry], host: str, port: int,
                        command: str, name: str = "metrics", token: str | None = None,
                        ssl_context: ssl.SSLContext | None = None) -> MetricsEndpoint | None:
    """Serve `registries` on http(s)://host:port/metrics and print `roost: {name} listening on
    HOST:PORT` (`name`: "metrics", or "broker 3 metrics" as `roost up --brokers` relays it); None
    (with an error line) when it cannot listen. With `token`, a scrape must send it as a bearer
    token; with `ssl_context`, only HTTPS is served."""
    from roost.metrics.endpoint import MetricsEndpoint

    endpoint = MetricsEndpoint(registries, token, ssl_context)
    try:
        bound = await endpoint.start(host, port)
    except OSError as error:
        print(f"{command}: cannot serve metrics on {host}:{port}: {error}", file=sys.stderr)
        return None
    print(f"roost: {name} listening on {bound[0]}:{bound[1]}", flush=True)
    return endpoint
