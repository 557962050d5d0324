"""Where a `roost` command serves Prometheus metrics: what `roost up`, `roost broker` and
`roost keeper` share."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from roost.metrics.endpoint import MetricsEndpoint


async def start_metrics(registries: Sequence[CollectorRegistry], host: str, port: int,
                        command: str, name: str = "metrics") -> MetricsEndpoint | None:
    """Serve `registries` on http://host:port/metrics and print `roost: {name} listening on
    HOST:PORT` (`name`: "metrics", or "broker 3 metrics" as `roost up --brokers` relays it); None
    (with an error line) when it cannot listen."""
    from roost.metrics.endpoint import MetricsEndpoint

    endpoint = MetricsEndpoint(registries)
    try:
        bound = await endpoint.start(host, port)
    except OSError as error:
        print(f"{command}: cannot serve metrics on {host}:{port}: {error}", file=sys.stderr)
        return None
    print(f"roost: {name} listening on {bound[0]}:{bound[1]}", flush=True)
    return endpoint
