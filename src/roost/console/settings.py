"""What a console runs with: the cluster it shows, where it listens, and the bounds that keep one
request from stalling a broker (every browse and search stops at the first bound it reaches and
says which)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from roost.console.slow_clients import DEFAULT_HEADER_TIMEOUT_S

DEFAULT_CONSOLE_PORT = 8080


@dataclass(frozen=True)
class Bounds:
    max_messages: int = 500  # returned by one browse or search
    max_scan_bytes: int = 64 * 1024 * 1024  # key + value bytes read by one browse or search
    max_scan_messages: int = 200_000  # records read by one search
    max_seconds: float = 5.0  # wall time of one browse or search
    display_bytes: int = 4096  # of a key or value shown; the rest is cut (and said to be)
    produce_bytes: int = 1024 * 1024  # of a value produced from the UI
    page_size_limit: int = 500  # rows of one page of topics


@dataclass(frozen=True)
class Login:
    """Who may use the console: one user and its password (already resolved from a secret
    reference; never shown: the repr leaves it out)."""

    username: str
    password: str = field(repr=False)
    session_s: float = 8 * 3600.0  # a login lasts this long


@dataclass(frozen=True)
class ServerTls:
    """The console's own HTTPS: a PEM certificate chain and its private key (one file may hold both)."""

    certificate: Path
    key: Path | None = None
    key_password: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class ConsoleSettings:
    bootstrap: str
    zookeeper: str | None = None
    host: str = "127.0.0.1"
    port: int = DEFAULT_CONSOLE_PORT
    read_only: bool = False
    request_timeout_s: float = 10.0
    # A connection that sends no whole request head this long after it opened or after its last
    # answer is closed, and a TLS handshake not done in it (roost.console.slow_clients); <= 0: never.
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    bounds: Bounds = Bounds()
    # confluent-kafka settings for every client the console makes (security.protocol, sasl.*,
    # ssl.*: the principal it acts as), secret references already resolved; never shown.
    client_settings: Mapping[str, str] = field(default_factory=dict, repr=False)
    # Kafka's names for a ZooKeeper client's identity (zookeeper.digest, zookeeper.sasl.client.*,
    # zookeeper.ssl.*), for the keeper page's kazoo client; never shown.
    keeper_settings: Mapping[str, str] = field(default_factory=dict, repr=False)
    login: Login | None = None  # None: no login (only sensible on loopback)
    tls: ServerTls | None = None  # None: plain HTTP
    # The brokers' Prometheus /metrics URLs: the share-partitions' in-flight figures live only on
    # their leaders (roost.console.share_view). Empty: the share group page shows what the
    # group coordinator knows and says why the rest is missing.
    broker_metrics: tuple[str, ...] = ()
    # A Confluent-compatible schema registry's URL (the registry pages; None: those say so).
    schema_registry: str | None = None
