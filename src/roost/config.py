"""Broker settings: one registry, Kafka's names, loaded from defaults, a TOML file and CLI flags.

Every setting has a type, a default and a check. The same registry drives the TOML loader, the
command-line flags (`--num.partitions 3` or `--num-partitions 3`) and the per-topic configs that
CreateTopics and DescribeConfigs use, so a name means one thing everywhere. A bad value is refused
with a message that names the setting.
"""

from __future__ import annotations

import argparse
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roost import message_format_version
from roost.authorization_settings import UnknownAuthorizerError, authorizer_enabled, parse_super_users
from roost.secret_ref import resolve_secret
from roost.zkclient.connect_string import parse_connect_string

INT64_MAX = 2**63 - 1
DAY_MS = 24 * 3600 * 1000


class ConfigError(ValueError):
    """A setting's name or value is not acceptable; the message names the setting."""


Check = Callable[[Any], str | None]  # returns a complaint, or None when the value is fine


def at_least(low: int) -> Check:
    return lambda value: None if value >= low else f"must be >= {low}"


def between(low: int, high: int) -> Check:
    return lambda value: None if low <= value <= high else f"must be between {low} and {high}"


_THROTTLED_ENTRY = re.compile(r"\s*\d+\s*:\s*-?\d+\s*")


def _throttled_replicas(value: str) -> str | None:
    """A throttled-replicas list: "", "*", or partition:broker pairs ("0:101,1:102")."""
    if value.strip() in ("", "*") or all(_THROTTLED_ENTRY.fullmatch(e) for e in value.split(",")):
        return None
    return "is not '*' nor a list of partition:broker pairs (like 0:101,0:102)"


def one_of(*choices: str) -> Check:
    return lambda value: None if value in choices else f"must be one of {', '.join(choices)}"


# compression.type's values, Kafka's names (BrokerCompressionType).
COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")

KNOWN_ASSIGNORS = ("uniform", "range")


def assignor_list(value: str) -> str | None:
    """`group.consumer.assignors`: a comma-separated, non-empty list of the known assignors."""
    names = [n.strip() for n in value.split(",")]
    if not value.strip() or any(n not in KNOWN_ASSIGNORS for n in names):
        return f"must list assignors among {', '.join(KNOWN_ASSIGNORS)}"
    return None


def fraction() -> Check:
    return lambda value: None if 0.0 <= value <= 1.0 else "must be between 0 and 1"


def minus_one_or_at_least(low: int) -> Check:
    return lambda value: None if value == -1 or value >= low else f"must be -1 or >= {low}"


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in SECURITY_PROTOCOLS)
LISTENER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class ListenerAddress:
    """One entry of `listeners` / `advertised.listeners`: NAME://host:port."""

    name: str  # upper case, as Kafka compares them
    host: str
    port: int


def parse_listeners(value: str, allow_port_zero: bool = False) -> list[ListenerAddress]:
    """Kafka's `listeners` list, `NAME://host:port[,NAME://host:port...]`; [] for "" (not set).

    Names are case-insensitive (kept upper case) and unique, and each maps to a security protocol
    through `listener.security.protocol.map` (checked with the other settings). An IPv6 host is
    written in brackets (`PLAINTEXT://[::1]:9092`). `allow_port_zero` is for the addresses to bind
    (`listeners`), where 0 picks a free port."""
    if value.strip() == "":
        return []
    low = 0 if allow_port_zero else 1
    found: list[ListenerAddress] = []
    for item in value.split(","):
        item = item.strip()
        problem = ValueError(f"must be listeners NAME://host:port separated by commas (port {low}-65535), "
                             f"not {item!r}")
        scheme, sep, address = item.partition("://")
        host, _, port = address.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        elif ":" in host:
            raise problem
        if not sep or not LISTENER_NAME.match(scheme) or not host or any(c in host for c in ",/ "):
            raise problem
        if not port.isdigit() or not low <= int(port) <= 65535:
            raise problem
        found.append(ListenerAddress(scheme.upper(), host, int(port)))
    names = [entry.name for entry in found]
    if len(set(names)) != len(names):
        raise ValueError(f"names a listener twice ({', '.join(names)}): each listener needs its own name")
    ports = [entry.port for entry in found if entry.port != 0]
    if len(set(ports)) != len(ports):
        raise ValueError("gives two listeners the same port")
    return found


def parse_listener(value: str, allow_port_zero: bool = False) -> tuple[str, int] | None:
    """The first listener of `value` as (host, port); None for the empty string (not set)."""
    found = parse_listeners(value, allow_port_zero)
    return (found[0].host, found[0].port) if found else None


def format_listener(name: str, host: str, port: int) -> str:
    """One listener as a listener setting writes it, the inverse of parse_listeners."""
    return f"{name}://[{host}]:{port}" if ":" in host else f"{name}://{host}:{port}"


def listener(allow_port_zero: bool = False) -> Check:
    def check(value: str) -> str | None:
        try:
            parse_listeners(value, allow_port_zero)
        except ValueError as problem:
            return str(problem)
        return None
    return check


def parse_protocol_map(value: str) -> dict[str, str]:
    """`listener.security.protocol.map`: `NAME:PROTOCOL,...` as {NAME: PROTOCOL} (names upper case)."""
    found: dict[str, str] = {}
    for item in value.split(","):
        name, sep, protocol = item.strip().partition(":")
        protocol = protocol.strip().upper()
        if not sep or not LISTENER_NAME.match(name.strip()) or protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"must be NAME:PROTOCOL pairs separated by commas, PROTOCOL one of "
                             f"{', '.join(SECURITY_PROTOCOLS)}; not {item.strip()!r}")
        found[name.strip().upper()] = protocol
    return found


def protocol_map() -> Check:
    def check(value: str) -> str | None:
        try:
            parse_protocol_map(value)
        except ValueError as problem:
            return str(problem)
        return None
    return check


def list_of(*choices: str) -> Check:
    """A comma-separated list of `choices` (empty allowed)."""
    def check(value: str) -> str | None:
        items = [item.strip() for item in value.split(",") if item.strip()]
        bad = [item for item in items if item not in choices]
        return f"may only list {', '.join(choices)}; not {', '.join(bad)}" if bad else None
    return check


def connect_string() -> Check:
    """Kafka's `zookeeper.connect`: `host:port[,host:port...][/chroot]`, or empty (none)."""
    def check(value: str) -> str | None:
        if value == "":
            return None
        try:
            parse_connect_string(value)
        except ValueError as problem:
            return f"must be host:port[,host:port...][/chroot]: {problem}"
        return None
    return check


def one_directory() -> Check:
    def check(value: str) -> str | None:
        if "," in value:
            return "must be one directory (log.dirs takes a list)"
        return None
    return check


def directory_list() -> Check:
    def check(value: str) -> str | None:
        entries = [entry.strip() for entry in value.split(",")] if value else []
        if any(not entry for entry in entries):
            return "must be directories separated by commas, none empty"
        if len(set(entries)) != len(entries):
            return "lists a directory twice"
        return None
    return check


@dataclass(frozen=True)
class Setting:
    name: str
    kind: type
    default: Any
    help: str
    check: Check | None = None
    topic_name: str | None = None  # the per-topic override's name, where Kafka has one
    sensitive: bool = False  # a secret: never shown (DescribeConfigs answers null, IsSensitive)
    per_listener: bool = False  # may be set for one listener: listener.name.<l>.<name>

    def parse(self, raw: Any, source: str) -> Any:
        """Convert `raw` (from TOML or a flag string) to this setting's type and check it."""
        value = self._convert(raw, source)
        if self.check is not None:
            complaint = self.check(value)
            if complaint:
                shown = "(hidden)" if self.sensitive else repr(raw)  # a secret never goes into a message
                raise ConfigError(f"{source}: setting '{self.name}' = {shown} {complaint}")
        return value

    def _convert(self, raw: Any, source: str) -> Any:
        shown = f"a {type(raw).__name__}" if self.sensitive else repr(raw)
        problem = f"{source}: setting '{self.name}' expects {self.kind.__name__}, got {shown}"
        if self.kind is bool:
            if isinstance(raw, bool):
                return raw
            if isinstance(raw, str) and raw.lower() in ("true", "false"):
                return raw.lower() == "true"
            raise ConfigError(problem)
        if self.kind is int:
            if isinstance(raw, bool):
                raise ConfigError(problem)
            if isinstance(raw, int):
                return raw
            if isinstance(raw, str):
                try:
                    return int(raw.strip())
                except ValueError:
                    raise ConfigError(problem) from None
            raise ConfigError(problem)
        if self.kind is str:
            if isinstance(raw, str):
                return raw
            raise ConfigError(problem)
        if self.kind is float:
            if isinstance(raw, bool):
                raise ConfigError(problem)
            try:
                return float(raw)
            except (TypeError, ValueError):
                raise ConfigError(problem) from None
        raise AssertionError(f"unsupported setting kind {self.kind}")


def parse_ip_overrides(value: str) -> dict[str, int]:
    """max.connections.per.ip.overrides: `host:count,host:count` (Kafka's format)."""
    overrides: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ValueError(f"{item!r} is not host:count")
        overrides[host.strip()] = int(count)
    return overrides


def _ip_overrides(value: str) -> str | None:
    try:
        parse_ip_overrides(value)
    except ValueError as error:
        return f"is not a list of host:count ({error})"
    return None


# Who may do what (docs/acls.md): Kafka's names and defaults; the ACLs themselves live in
# ZooKeeper (or, for a broker without one, in its data directory).
def _authorizer_class(value: str) -> str | None:
    try:
        authorizer_enabled(value)
    except UnknownAuthorizerError as error:
        return "is " + str(error).split(" is ", 1)[1]
    return None


def _principal_list(value: str) -> str | None:
    try:
        parse_super_users(value)
    except ValueError as error:
        return f"is not a ';'-separated list of principals ({error})"
    return None


AUTHORIZER_SETTINGS: tuple[Setting, ...] = (
    Setting("authorizer.class.name", str, "",
            "switch ACLs on: kafka.security.authorizer.AclAuthorizer or roost.AclAuthorizer (empty: off)",
            _authorizer_class),
    Setting("super.users", str, "", "principals allowed everything, ';'-separated (User:admin;User:broker)",
            _principal_list),
    Setting("allow.everyone.if.no.acl.found", bool, False,
            "allow an operation on a resource that has no ACL at all (Kafka's default: deny)"),
)


def secret_reference() -> Check:
    def check(value: str) -> str | None:
        try:
            resolve_secret(value)
        except ValueError as problem:
            return str(problem)
        return None
    return check


def secret_reference_list() -> Check:
    """NAME:SECRET,... where each SECRET may be a ${env:}/${file:} reference (checked, never shown)."""
    def check(value: str) -> str | None:
        for item in filter(None, (part.strip() for part in value.split(","))):
            name, sep, secret = item.partition(":")
            if not sep or not name:
                return "is not a list of NAME:SECRET"
            try:
                resolve_secret(secret)
            except ValueError as problem:
                return str(problem)
        return None
    return check


def digest_credential() -> Check:
    def check(value: str) -> str | None:
        try:
            resolved = resolve_secret(value)
        except ValueError as problem:
            return str(problem)
        if value and ":" not in resolved[1:]:
            return "must be user:password"
        return None
    return check


# The brokers' link to ZooKeeper (docs/keeper-security.md): how they authenticate, whether
# their znodes get ACLs, TLS. Kafka's names where Kafka has a setting; Kafka configures SASL
# through a JAAS `Client` section, which Roost takes as the two zookeeper.sasl.client.* settings.
# Secrets may be written `${env:NAME}` or `${file:/path}` (roost.secret_ref).
ZOOKEEPER_SECURITY_SETTINGS: tuple[Setting, ...] = (
    Setting("zookeeper.set.acl", bool, False,
            "create the brokers' znodes with ACLs: the brokers' own identity all rights, everyone "
            "else read (Kafka's secure ACLs); needs an identity (digest, SASL or a TLS client certificate)"),
    Setting("zookeeper.digest", str, "",
            "authenticate to ZooKeeper with addauth digest user:password", digest_credential(), sensitive=True),
    Setting("zookeeper.sasl.client.username", str, "",
            "authenticate to ZooKeeper with SASL DIGEST-MD5 as this user (Kafka: the JAAS Client "
            "section's username)"),
    Setting("zookeeper.sasl.client.password", str, "",
            "the SASL user's password (Kafka: the JAAS Client section's password)", secret_reference(),
            sensitive=True),
    Setting("zookeeper.ssl.client.enable", bool, False, "connect to ZooKeeper over TLS"),
    Setting("zookeeper.clientCnxnSocket", str, "",
            "accepted for Kafka's configs (Netty is required there for TLS); Roost's client needs nothing"),
    Setting("zookeeper.ssl.keystore.location", str, "",
            "PEM file with this broker's private key and certificate chain (a TLS client certificate)"),
    Setting("zookeeper.ssl.keystore.type", str, "PEM", "format of the key store file: PEM only", one_of("PEM")),
    Setting("zookeeper.ssl.keystore.password", str, "", "the keystore's private key password",
            secret_reference(), sensitive=True),
    Setting("zookeeper.ssl.truststore.location", str, "",
            "PEM file with the CA certificates the ZooKeeper servers' certificates are checked against "
            "(empty: the system's)"),
    Setting("zookeeper.ssl.truststore.type", str, "PEM", "format of the trust store file: PEM only", one_of("PEM")),
    Setting("zookeeper.ssl.endpoint.identification.enable", bool, True,
            "check that the server's certificate names the host connected to"),
)


# The cluster: membership through ZooKeeper, replication, failover. Several defaults are shorter
# than Kafka's, so that a dead broker is noticed and its partitions move within about 2 seconds
# (Kafka's ZooKeeper-mode defaults take 18 s to notice one); the README lists them.
CLUSTER_SETTINGS: tuple[Setting, ...] = (
    Setting("zookeeper.connect", str, "",
            "ZooKeeper ensemble to join, host:port[,host:port...][/chroot] (empty: a standalone broker)",
            connect_string()),
    # The session timeout is how long a broker that went silent keeps its registration. A crashed
    # broker is noticed at once by its refused endpoint (controller/liveness.py), so the timeout
    # only bounds a machine gone or cut off; and a broker paused for longer loses its leaderships.
    # 4000 ms by measurement (scripts/pause_run.py, docs/cluster.md): at 2000 ms, 1.5 s pauses of
    # loaded brokers expired 4 sessions in 8 pauses (23 elections in 90 s); at 4000, none in 11.
    # A stock ZooKeeper (tickTime 2000) grants it: sessions of [2, 20] ticks.
    Setting("zookeeper.session.timeout.ms", int, 4000,
            "a broker silent this long is declared dead and its partitions fail over (Kafka: 18000); "
            "a crashed broker is noticed sooner, by its refused endpoint; the ensemble must allow it: "
            "tickTime <= timeout / 2",
            at_least(1)),
    Setting("zookeeper.connection.timeout.ms", int, 10000,
            "how long a broker tries to reach the ensemble before giving up at start", at_least(1)),
    *ZOOKEEPER_SECURITY_SETTINGS,
    Setting("listeners", str, "",
            "addresses to listen on, NAME://host:port separated by commas (e.g. "
            "INTERNAL://127.0.0.1:9093,EXTERNAL://0.0.0.0:9094); port 0 picks a free one "
            "(default: PLAINTEXT on roost up's --host and --kafka-port)", listener(allow_port_zero=True)),
    Setting("broker.rack", str, "", "this broker's rack; replicas of a partition are spread across racks"),
    Setting("log.dirs", str, "",
            "the directories this broker keeps its logs in, separated by commas; the first also holds "
            "the broker's own state (default: log.dir, else roost up's --data-dir)", directory_list()),
    Setting("log.dir", str, "", "the directory this broker keeps its logs in, when log.dirs is not set",
            one_directory()),
    Setting("log.dir.free.space.warn.ratio", float, 0.1,
            "a log directory whose disk has less than this share free is flagged in /metrics "
            "(roost_log_dir_free_space_low) and logged once, before a full disk takes it offline",
            fraction()),
    Setting("replica.alter.log.dirs.io.max.bytes.per.second", int, INT64_MAX,
            "how fast a partition moved between log directories (AlterReplicaLogDirs) is copied", at_least(1)),
    # Must exceed the session timeout (checked): a follower that stalls for less than the time it
    # takes to declare a broker dead should not leave the ISR.
    Setting("replica.lag.time.max.ms", int, 10000,
            "a follower that has not caught up for this long leaves the ISR (Kafka: 30000)", at_least(1)),
    Setting("replica.fetch.wait.max.ms", int, 500,
            "longest a follower's fetch waits at the leader for new data", at_least(0)),
    Setting("replica.fetch.min.bytes", int, 1, "bytes a follower's fetch waits for", at_least(1)),
    Setting("replica.fetch.max.bytes", int, 1024 * 1024,
            "bytes a follower fetches per partition per request (at least one batch)", at_least(0)),
    Setting("replica.fetch.response.max.bytes", int, 10 * 1024 * 1024,
            "bytes a follower fetches per request (at least one batch)", at_least(0)),
    Setting("replica.fetch.backoff.ms", int, 100,
            "a follower waits this long after a fetch error before fetching again (Kafka: 1000)", at_least(0)),
    Setting("replica.high.watermark.checkpoint.interval.ms", int, 5000,
            "how often each broker writes its high watermarks to disk", at_least(1)),
    Setting("controlled.shutdown.enable", bool, True,
            "on SIGTERM, move this broker's leaderships away before stopping"),
    Setting("controlled.shutdown.max.retries", int, 3,
            "attempts at a controlled shutdown before stopping anyway", at_least(0)),
    Setting("controlled.shutdown.retry.backoff.ms", int, 500,
            "wait between controlled shutdown attempts (Kafka: 5000)", at_least(0)),
    # The balancer (roost.broker.balance, docs/balancing.md): each broker's load sampling and
    # capacities (Cruise Control's capacity.json: DISK, NW_IN, NW_OUT, CPU; <= 0: unknown).
    Setting("balancer.load.sample.interval.ms", int, 30_000,
            "how often this broker samples its partitions' load for the balancer (one window)", at_least(100)),
    Setting("balancer.load.windows", int, 5, "windows the balancer's smoothed load is the mean of",
            between(1, 100)),
    Setting("balancer.capacity.disk.bytes", int, -1, "this broker's disk capacity for the balancer (<= 0: unknown)"),
    Setting("balancer.capacity.network.in.bytes.per.second", int, -1,
            "this broker's network inbound capacity for the balancer (<= 0: unknown)"),
    Setting("balancer.capacity.network.out.bytes.per.second", int, -1,
            "this broker's network outbound capacity for the balancer (<= 0: unknown)"),
    Setting("balancer.capacity.cpu.cores", float, -1.0, "this broker's CPU capacity for the balancer (<= 0: unknown)"),
    # The automatic balancer on the active controller (roost.broker.balance.auto; Redpanda's
    # partition_autobalancing_*). `roost up --brokers N` sets continuous.
    Setting("balancer.mode", str, "off",
            "off | node_add (a broker below its share of replicas gets it) | continuous (also heals brokers "
            "down past balancer.broker.unavailable.delay.ms and acts on skew)",
            one_of("off", "node_add", "continuous")),
    Setting("balancer.broker.unavailable.delay.ms", int, 300_000,
            "continuous: a broker down this long has its replicas re-created on live brokers", at_least(0)),
    Setting("balancer.check.interval.ms", int, 10_000,
            "how often the active controller's balancer decides whether to act", at_least(100)),
    Setting("balancer.imbalance.threshold", float, 0.10,
            "a broker's replicas (node_add, continuous), leaders or bytes in (continuous) this far from the mean "
            "triggers a plan (0.1: ten per cent)", at_least(0)),
    Setting("balancer.moves.per.broker", int, 5,
            "the automatic balancer's moves in progress at once per broker "
            "(num.concurrent.partition.movements.per.broker)", between(1, 1000)),
    Setting("balancer.throttle.bytes.per.second", int, -1,
            "the automatic balancer's replication throttle on the brokers a move touches (<= 0: none)"),
    Setting("balancer.max.actions", int, 1000, "at most this many moves in one automatic plan", between(1, 100_000)),
    Setting("auto.leader.rebalance.enable", bool, True,
            "move leadership back to each partition's preferred replica when it is in sync"),
    Setting("leader.imbalance.check.interval.seconds", int, 30,
            "how often the controller checks leader balance (Kafka: 300)", at_least(1)),
    Setting("leader.imbalance.per.broker.percentage", int, 10,
            "share of a broker's partitions led elsewhere that triggers a rebalance", between(0, 100)),
    Setting("unclean.leader.election.enable", bool, False,
            "elect a replica outside the ISR when none in it is alive (may lose acknowledged data)",
            topic_name="unclean.leader.election.enable"),
)

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

# Listeners' security: TLS (Kafka's ssl.* names, PEM and PKCS#12 key stores) and SASL. Each may be
# set for one listener as listener.name.<listener>.<name> (the listener's name in lower case).
SECURITY_SETTINGS: tuple[Setting, ...] = (
    Setting("listener.security.protocol.map", str, DEFAULT_PROTOCOL_MAP,
            "each listener's security protocol, NAME:PROTOCOL separated by commas "
            "(PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)", protocol_map()),
    Setting("inter.broker.listener.name", str, "",
            "the listener brokers use to talk to each other (default: the one of security.inter.broker.protocol)"),
    Setting("security.inter.broker.protocol", str, "PLAINTEXT",
            "the security protocol brokers use to talk to each other, when inter.broker.listener.name is unset",
            one_of(*SECURITY_PROTOCOLS)),
    Setting("ssl.keystore.type", str, "PEM", "PEM (key and certificate chain in one file) or PKCS12",
            one_of("PEM", "PKCS12"), per_listener=True),
    Setting("ssl.keystore.location", str, "", "the key store: the listener's private key and certificate chain",
            per_listener=True),
    Setting("ssl.keystore.password", str, "", "password of a PKCS12 key store", sensitive=True, per_listener=True),
    Setting("ssl.key.password", str, "", "password of the private key in a PEM key store", sensitive=True,
            per_listener=True),
    Setting("ssl.truststore.type", str, "PEM", "PEM (CA certificates) or PKCS12", one_of("PEM", "PKCS12"),
            per_listener=True),
    Setting("ssl.truststore.location", str, "",
            "CA certificates client certificates (and, for a broker's own links, the brokers') must chain to",
            per_listener=True),
    Setting("ssl.truststore.password", str, "", "password of a PKCS12 trust store", sensitive=True,
            per_listener=True),
    Setting("ssl.client.auth", str, "none", "ask TLS clients for a certificate: none, requested or required",
            one_of("none", "requested", "required"), per_listener=True),
    Setting("ssl.enabled.protocols", str, "TLSv1.2,TLSv1.3", "TLS versions accepted (1.2 and 1.3 only)",
            list_of("TLSv1.2", "TLSv1.3"), per_listener=True),
    Setting("ssl.cipher.suites", str, "", "OpenSSL cipher list for TLS 1.2 (empty: Python's defaults)",
            per_listener=True),
    Setting("ssl.principal.mapping.rules", str, "DEFAULT",
            "how a client certificate's subject becomes a principal: RULE:regex/replacement/[LU],... or DEFAULT",
            per_listener=True),
    Setting("ssl.endpoint.identification.algorithm", str, "https",
            "how this broker checks other brokers' certificates: https (name check) or empty (CA only)",
            one_of("https", ""), per_listener=True),
    Setting("ssl.handshake.timeout.ms", int, 10_000,
            "a TLS handshake not done in this time closes the connection (Roost's own setting)",
            at_least(1), per_listener=True),
    Setting("sasl.enabled.mechanisms", str, ",".join(SASL_MECHANISMS),
            "SASL mechanisms offered on SASL listeners (Kafka's default GSSAPI is not supported)",
            list_of(*SASL_MECHANISMS), per_listener=True),
    Setting("sasl.mechanism.inter.broker.protocol", str, "PLAIN",
            "the SASL mechanism brokers log in to each other with", one_of(*SASL_MECHANISMS)),
    Setting("sasl.jaas.config", str, "",
            "JAAS login: PlainLoginModule/ScramLoginModule required username=\"..\" password=\"..\" "
            "user_<name>=\"..\"; (usually per listener and mechanism: listener.name.<l>.<mech>.sasl.jaas.config)",
            sensitive=True, per_listener=True),
    Setting("sasl.server.max.receive.size", int, 524_288,
            "largest SASL token accepted before authentication (Kafka's cap)", at_least(512)),
    Setting("connection.failed.authentication.delay.ms", int, 100,
            "a failed login's connection is closed after this delay", at_least(0)),
    Setting("connections.max.reauth.ms", int, 0,
            "SASL sessions must log in again within this time, or their connection is closed (KIP-368; 0: never)",
            at_least(0), per_listener=True),
)


# The schema registry and REST proxy a broker serves beside itself (docs/schema-registry.md), in a
# child process of its own: Confluent's names under the prefix `schema.registry.` (Confluent's
# `listeners`, `kafkastore.topic`, `schema.registry.group.id`, `leader.eligibility`, ...).
REGISTRY_SETTINGS: tuple[Setting, ...] = (
    Setting("schema.registry.listeners", str, "",
            "serve the schema registry on this URL (http://HOST:PORT or https://HOST:PORT; port 0 picks a free "
            "one; empty: off; roost up turns it on)"),
    Setting("schema.registry.advertised.url", str, "",
            "the URL other registry nodes forward writes to (default: the bound listener)"),
    Setting("schema.registry.kafkastore.topic", str, "_schemas", "the compacted topic the schemas are stored in"),
    Setting("schema.registry.kafkastore.topic.replication.factor", int, 3,
            "replicas of the schemas topic (fewer when fewer brokers are up after 30 s)", between(1, 32)),
    Setting("schema.registry.group.id", str, "schema-registry", "the consumer group the writer is elected in"),
    Setting("schema.registry.leader.eligibility", bool, True, "may this node be elected the writer"),
    Setting("schema.registry.group.session.timeout.ms", int, 6000,
            "how soon a dead writer's membership ends and another node takes over writing", at_least(1000)),
    Setting("schema.registry.kafkastore.timeout.ms", int, 30_000,
            "how long a write waits to be acknowledged and read back (Confluent: 500)", at_least(100)),
    Setting("schema.registry.basic.auth.users", str, "",
            "HTTP basic users, user:password,... (each password may be ${env:NAME} or ${file:/path}); "
            "empty with no bearer tokens: no authentication", secret_reference_list(), sensitive=True),
    Setting("schema.registry.bearer.tokens", str, "",
            "bearer tokens, principal:token,... (tokens best by ${file:/path} reference)",
            secret_reference_list(), sensitive=True),
    Setting("schema.registry.subject.acls", str, "",
            "who may read or write which subject: User:NAME:READ|WRITE:PATTERN;... (PATTERN a subject, a "
            "prefix ending in *, or *); empty: every authenticated caller may do everything"),
    Setting("schema.registry.super.users", str, "", "principals allowed every subject, ';'-separated"),
    Setting("schema.registry.ssl.keystore.location", str, "",
            "serve HTTPS with this PEM file (private key and certificate chain)"),
    Setting("schema.registry.ssl.key.password", str, "", "password of the key in schema.registry.ssl.keystore.location",
            secret_reference(), sensitive=True),
    Setting("schema.registry.ssl.truststore.location", str, "",
            "CA file the registry trusts when it forwards a write to the writer over HTTPS"),
    Setting("kafka.rest.enable", bool, True,
            "serve the REST proxy (Confluent REST Proxy v2 and v3) on the schema registry's listener"),
)


BROKER_SETTINGS: tuple[Setting, ...] = (
    Setting("broker.id", int, 0, "this broker's node id", at_least(0)),
    # Where clients are told to connect (Metadata, FindCoordinator), when that is not where the
    # broker listens: behind a NAT, a container's port mapping or a proxy.
    Setting("advertised.listeners", str, "",
            "addresses given to clients, NAME://host:port per listener (default: the listening addresses)",
            listener()),
    Setting("num.partitions", int, 1, "partitions of an auto-created topic", between(1, 10000)),
    Setting("default.replication.factor", int, 1, "replicas of an auto-created topic", between(1, 32)),
    Setting("auto.create.topics.enable", bool, True, "create a topic on first Metadata/Produce for it"),
    Setting("delete.topic.enable", bool, True, "allow DeleteTopics"),
    Setting("min.insync.replicas", int, 1, "replicas that must have a write for acks=all",
            at_least(1), topic_name="min.insync.replicas"),
    Setting("log.retention.ms", int, 7 * DAY_MS, "delete segments older than this (-1: keep)",
            minus_one_or_at_least(1), topic_name="retention.ms"),
    Setting("log.retention.bytes", int, -1, "delete old segments past this size per partition (-1: no limit)",
            minus_one_or_at_least(0), topic_name="retention.bytes"),
    Setting("log.segment.bytes", int, 1 << 30, "roll a segment at this size",
            between(100, 2**31 - 1), topic_name="segment.bytes"),
    Setting("log.roll.ms", int, 7 * DAY_MS, "roll a segment at this age", at_least(1), topic_name="segment.ms"),
    Setting("log.index.interval.bytes", int, 4096, "bytes between sparse index entries",
            at_least(0), topic_name="index.interval.bytes"),
    Setting("log.flush.interval.messages", int, INT64_MAX,
            "fsync after this many appended batches; 1 means fsync before every acknowledgement",
            at_least(1), topic_name="flush.messages"),
    Setting("log.flush.interval.ms", int, INT64_MAX, "fsync dirty logs at least this often",
            at_least(0), topic_name="flush.ms"),
    Setting("log.cleanup.policy", str, "delete", "delete or compact old data",
            one_of("delete", "compact", "compact,delete", "delete,compact"), topic_name="cleanup.policy"),
    Setting("log.retention.check.interval.ms", int, 300_000, "how often retention runs", at_least(1)),
    Setting("log.cleaner.backoff.ms", int, 15_000, "how often the cleaner looks for a compacted log to clean",
            at_least(1)),
    Setting("log.cleaner.delete.retention.ms", int, 86_400_000,
            "how long tombstones stay in a compacted topic", at_least(0), topic_name="delete.retention.ms"),
    Setting("log.cleaner.min.cleanable.ratio", float, 0.5,
            "share of a compacted log not yet cleaned before the cleaner rewrites it", fraction(),
            topic_name="min.cleanable.dirty.ratio"),
    Setting("log.cleaner.min.compaction.lag.ms", int, 0,
            "a compacted record stays uncompacted at least this long", at_least(0),
            topic_name="min.compaction.lag.ms"),
    Setting("log.cleaner.max.compaction.lag.ms", int, INT64_MAX,
            "a compacted record is compacted at most this long after it is written (whatever the dirty ratio)",
            at_least(1), topic_name="max.compaction.lag.ms"),
    Setting("log.roll.jitter.ms", int, 0, "a random amount up to this taken off each segment's segment.ms, so "
            "that partitions do not all roll at once", at_least(0), topic_name="segment.jitter.ms"),
    Setting("log.index.size.max.bytes", int, 10 * 1024 * 1024,
            "a segment rolls once its offset or time index would pass this size", at_least(4),
            topic_name="segment.index.bytes"),
    # Kafka's file-layout and tiered-storage topic configs, taken so that tools copying a Kafka
    # topic's configs (MirrorMaker 2, Connect) can create it here. Roost has no tiered storage:
    # remote.storage.enable=true is refused as Kafka refuses it on a broker without it, and the
    # local.* retentions (which only mean something with it) are kept, as Kafka keeps them.
    Setting("remote.storage.enable", bool, False, "topic-level: tiered storage (not available in Roost)",
            lambda value: "is not possible: Tiered Storage functionality is disabled in the broker. Topic cannot "
                          "be configured with remote log storage." if value else None,
            topic_name="remote.storage.enable"),
    Setting("remote.log.copy.disable", bool, False, "topic-level: tiered storage (not available in Roost)",
            topic_name="remote.log.copy.disable"),
    Setting("remote.log.delete.on.disable", bool, False, "topic-level: tiered storage (not available in Roost)",
            topic_name="remote.log.delete.on.disable"),
    Setting("log.local.retention.ms", int, -2, "with tiered storage, the local part of retention.ms (-2: all of "
            "it); kept, as Kafka keeps it without tiered storage", at_least(-2), topic_name="local.retention.ms"),
    Setting("log.local.retention.bytes", int, -2, "with tiered storage, the local part of retention.bytes (-2: "
            "all of it); kept, as Kafka keeps it without tiered storage", at_least(-2),
            topic_name="local.retention.bytes"),
    # A deleted segment is unlinked at once: its readers hold maps of it, which outlive the name,
    # so the delay Kafka waits for its readers is not needed (the value is kept and shown).
    Setting("log.segment.delete.delay.ms", int, 60_000, "Kafka's delay before a deleted segment's files go; "
            "Roost unlinks them at once (open maps outlive the name)", at_least(0),
            topic_name="file.delete.delay.ms"),
    # Fetch is served from v4, whose answers carry v2 batches as stored: nothing is ever
    # down-converted, so the setting has nothing to turn off (kept and shown).
    Setting("log.message.downconversion.enable", bool, True, "Kafka's down-conversion for Fetch v0-3, which "
            "Roost does not serve (nothing is ever down-converted)", topic_name="message.downconversion.enable"),
    # Deprecated in Kafka and ignored by it since 3.0; taken (with Kafka's validation) so that
    # configs copied from a Kafka topic apply here: Roost always writes v2 batches.
    Setting("log.message.format.version", str, message_format_version.DEFAULT,
            "deprecated, no effect: Kafka's message format version (Roost always writes v2 batches)",
            message_format_version.complaint, topic_name="message.format.version"),
    Setting("log.preallocate", bool, False, "Kafka's preallocation of segment files (refused: Roost's recovery "
            "reads a segment to its file's end)",
            lambda value: "is not supported: Roost does not preallocate segment files" if value else None,
            topic_name="preallocate"),
    Setting("log.message.timestamp.type", str, "CreateTime", "timestamp stored with records",
            one_of("CreateTime", "LogAppendTime"), topic_name="message.timestamp.type"),
    # KIP-937's bounds on a CreateTime record's timestamp against the broker's clock (a record
    # outside them is refused, INVALID_TIMESTAMP); difference.max.ms is the deprecated pair of
    # both, used for a bound left at its default (roost.broker.replica.timestamps).
    Setting("log.message.timestamp.before.max.ms", int, INT64_MAX,
            "refuse CreateTime records stamped more than this before the broker's clock", at_least(0),
            topic_name="message.timestamp.before.max.ms"),
    Setting("log.message.timestamp.after.max.ms", int, INT64_MAX,
            "refuse CreateTime records stamped more than this after the broker's clock", at_least(0),
            topic_name="message.timestamp.after.max.ms"),
    Setting("log.message.timestamp.difference.max.ms", int, INT64_MAX,
            "deprecated: both timestamp bounds, where before.max.ms or after.max.ms is not set", at_least(0),
            topic_name="message.timestamp.difference.max.ms"),
    Setting("message.max.bytes", int, 1048588, "largest record batch accepted",
            at_least(0), topic_name="max.message.bytes"),
    # Kafka's codec of stored batches: `producer` keeps what the producer sent; a codec makes the
    # leader recompress every produced batch that uses another one (KIP-390 gives the levels).
    Setting("compression.type", str, "producer", "codec of stored batches: producer keeps the producer's",
            one_of(*COMPRESSION_TYPES), topic_name="compression.type"),
    Setting("compression.gzip.level", int, -1, "gzip level of recompressed batches (-1: zlib's default)",
            lambda value: None if value == -1 or 1 <= value <= 9 else "must be -1 or between 1 and 9",
            topic_name="compression.gzip.level"),
    Setting("compression.lz4.level", int, 9, "lz4 level of recompressed batches", between(1, 17),
            topic_name="compression.lz4.level"),
    Setting("compression.zstd.level", int, 3, "zstd level of recompressed batches", between(-131072, 22),
            topic_name="compression.zstd.level"),
    # Roost's own topic config (vendor-prefixed, as Confluent's `confluent.*` ones): the cluster link
    # whose mirror this topic is. A mirror takes writes only from that link; removing the config
    # promotes it (docs/cluster-links.md). Meant per topic: the broker-wide value stays empty.
    Setting("roost.mirror.link", str, "",
            "topic-level: the cluster link this topic mirrors (set by `roost link`; empty: a writable topic)",
            topic_name="roost.mirror.link"),
    Setting("roost.mirror.source.topic.id", str, "",
            "topic-level: the id of the source topic a mirror copies (set by its link; a source topic recreated "
            "with another id stops the mirror)", topic_name="roost.mirror.source.topic.id"),
    # Kafka's replication throttles (KIP-73; roost.broker.replica.throttle): the two rates are
    # dynamic broker configs, the two lists topic configs (meant per topic: the broker-wide value
    # stays empty). The balancer's executor sets them for a move and removes them after.
    Setting("leader.replication.throttled.rate", int, 2**63 - 1,
            "bytes/s this broker sends to out-of-ISR followers of its throttled partitions", at_least(1)),
    Setting("follower.replication.throttled.rate", int, 2**63 - 1,
            "bytes/s this broker fetches for its out-of-ISR throttled follower partitions", at_least(1)),
    Setting("replication.quota.window.num", int, 11, "windows the replication throttle rate is measured over",
            between(2, 1000)),
    Setting("replication.quota.window.size.seconds", int, 1, "length of each replication throttle window",
            at_least(1)),
    Setting("leader.replication.throttled.replicas", str, "",
            "topic-level: partition:broker pairs (or *) whose leader replication is throttled",
            _throttled_replicas, topic_name="leader.replication.throttled.replicas"),
    Setting("follower.replication.throttled.replicas", str, "",
            "topic-level: partition:broker pairs (or *) whose follower replication is throttled",
            _throttled_replicas, topic_name="follower.replication.throttled.replicas"),
    Setting("socket.request.max.bytes", int, 100 * 1024 * 1024, "largest request frame accepted",
            between(1024, 2**31 - 1)),
    Setting("max.connections", int, 1000, "client connections accepted at once", at_least(1)),
    # Kafka's per-IP limits (SocketServer's ConnectionQuotas): past them a new connection from that
    # address is closed at once, with one log line per address and minute.
    Setting("max.connections.per.ip", int, 2**31 - 1, "client connections accepted at once from one address",
            at_least(0)),
    Setting("max.connections.per.ip.overrides", str, "",
            "per-address exceptions to max.connections.per.ip: host:count,host:count", _ip_overrides),
    # Client quotas (docs/quotas.md): rates are measured over quota.window.num windows of
    # quota.window.size.seconds, as Kafka's quota managers do.
    Setting("quota.window.num", int, 11, "windows a client quota's rate is measured over", at_least(2)),
    Setting("quota.window.size.seconds", int, 1, "length of one client quota window", at_least(1)),
    Setting("queued.max.requests", int, 100, "requests in flight per connection before reading pauses",
            at_least(1)),
    Setting("connection.max.buffered.bytes", int, 256 * 1024 * 1024,
            "response bytes queued per connection before reading pauses", at_least(1024)),
    # Abusive clients (docs/hostile-input.md): Kafka's idle timeout, and Roost's own bound on how
    # long one request's bytes may take to arrive (a slow-loris client).
    Setting("connections.max.idle.ms", int, 600_000,
            "a client connection with nothing read or taken for this long is closed (-1: never)", at_least(-1)),
    Setting("request.receive.timeout.ms", int, 30_000,
            "a request must be whole this long after its first byte, plus a second for each "
            "request.receive.min.bytes.per.second of it received, or the connection is closed (Roost's own; -1: never)",
            at_least(-1)),
    Setting("queued.max.request.bytes", int, -1,
            "bytes of requests being received, broker-wide, before connections wait to read more (-1: no limit)",
            at_least(-1)),
    Setting("request.receive.min.bytes.per.second", int, 65_536,
            "each this many bytes of a request received earn it one more second (Roost's own)",
            at_least(1)),
    Setting("group.min.session.timeout.ms", int, 6000, "smallest consumer session timeout", at_least(1)),
    Setting("group.max.session.timeout.ms", int, 1_800_000, "largest consumer session timeout", at_least(1)),
    Setting("group.initial.rebalance.delay.ms", int, 3000,
            "wait this long for more members before the first rebalance of an empty group", at_least(0)),
    Setting("group.max.size", int, 10000, "members per consumer group", at_least(1)),
    # KIP-848's consumer groups (ConsumerGroupHeartbeat), with Kafka's names and defaults.
    Setting("group.consumer.heartbeat.interval.ms", int, 5000,
            "how often members of a consumer-protocol group heartbeat", at_least(1)),
    Setting("group.consumer.session.timeout.ms", int, 45000,
            "a consumer-protocol member silent this long leaves the group", at_least(1)),
    Setting("group.consumer.max.size", int, 2**31 - 1, "members per consumer-protocol group", at_least(1)),
    Setting("group.consumer.assignors", str, "uniform,range",
            "server-side assignors, the first is the default", assignor_list),
    Setting("group.consumer.migration.policy", str, "bidirectional",
            "online migration of a live group between the classic and the consumer protocol "
            "(KIP-848): disabled, upgrade, downgrade or bidirectional",
            one_of("disabled", "upgrade", "downgrade", "bidirectional")),
    # KIP-932's share groups, with Kafka 4.2's names, defaults and bounds (ShareGroupConfig,
    # GroupCoordinatorConfig). The group configs of the same names without "group." (set with
    # IncrementalAlterConfigs on a GROUP resource) must lie within the min/max given here.
    Setting("group.share.enable", bool, True, "serve share groups (Kafka's internal switch; 4.2 clusters have "
            "them on through share.version 1)"),
    Setting("group.share.partition.max.record.locks", int, 2000,
            "in-flight (acquired or available-again) records per share-partition", between(100, 10000)),
    Setting("group.share.delivery.count.limit", int, 5,
            "deliveries of a record before it is archived", between(2, 10)),
    Setting("group.share.record.lock.duration.ms", int, 30000,
            "how long an acquired record stays locked to its consumer", between(1000, 3600000)),
    Setting("group.share.min.record.lock.duration.ms", int, 15000,
            "the least share.record.lock.duration.ms a group may set", between(1000, 30000)),
    Setting("group.share.max.record.lock.duration.ms", int, 60000,
            "the most share.record.lock.duration.ms a group may set", between(30000, 3600000)),
    Setting("group.share.max.share.sessions", int, 2000, "share sessions per broker", at_least(1)),
    Setting("group.share.max.size", int, 200, "members per share group", between(1, 1000)),
    Setting("group.share.session.timeout.ms", int, 45000,
            "a share group member silent this long leaves the group", at_least(1)),
    Setting("group.share.min.session.timeout.ms", int, 45000,
            "the least share.session.timeout.ms a group may set", at_least(1)),
    Setting("group.share.max.session.timeout.ms", int, 60000,
            "the most share.session.timeout.ms a group may set", at_least(1)),
    Setting("group.share.heartbeat.interval.ms", int, 5000,
            "how often share group members heartbeat", at_least(1)),
    Setting("group.share.min.heartbeat.interval.ms", int, 5000,
            "the least share.heartbeat.interval.ms a group may set", at_least(1)),
    Setting("group.share.max.heartbeat.interval.ms", int, 15000,
            "the most share.heartbeat.interval.ms a group may set", at_least(1)),
    Setting("group.share.assignors", str, "simple", "the share groups' server-side assignor", one_of("simple")),
    Setting("offsets.topic.num.partitions", int, 10, "partitions of __consumer_offsets", between(1, 1000)),
    # Smaller than Kafka's 100 MiB: cleaning runs on the event loop, and a closed segment is what
    # a pass rewrites, so small segments keep each pass (and its pause) short.
    Setting("offsets.topic.segment.bytes", int, 16 * 1024 * 1024, "segment size of __consumer_offsets",
            at_least(1024)),
    Setting("offsets.retention.minutes", int, 7 * 24 * 60, "keep committed offsets of empty groups this long",
            at_least(1)),
    Setting("offsets.retention.check.interval.ms", int, 60_000,
            "how often committed offsets are checked for expiry", at_least(1)),
    Setting("offsets.commit.timeout.ms", int, 5000, "how long an offset commit waits to be durable", at_least(1)),
    # Kafka's default is 3, which a one- or two-broker cluster cannot host: group commits would
    # fail until enough brokers exist. `roost up --brokers N` sets min(3, N).
    Setting("offsets.topic.replication.factor", int, 1,
            "replicas of __consumer_offsets (Kafka: 3; roost up --brokers N sets min(3, N))", between(1, 32)),
    Setting("offsets.commit.required.acks", int, -1,
            "acks an offset commit waits for (-1: every in-sync replica)", minus_one_or_at_least(1)),
    Setting("transaction.state.log.num.partitions", int, 50, "partitions of __transaction_state",
            between(1, 1000)),
    Setting("transaction.state.log.replication.factor", int, 1,
            "replicas of __transaction_state (Kafka: 3; roost up --brokers N sets min(3, N))", between(1, 32)),
    Setting("transaction.state.log.min.isr", int, 1, "min.insync.replicas of __transaction_state (Kafka: 2)",
            at_least(1)),
    Setting("transaction.state.log.segment.bytes", int, 16 * 1024 * 1024, "segment size of __transaction_state",
            at_least(1024)),
    # The share coordinator and `__share_group_state` (KIP-932), with Kafka 4.2's names and
    # defaults (ShareCoordinatorConfig); the replication factor and min.isr are capped at the
    # cluster's size when the topic is created.
    Setting("share.coordinator.state.topic.num.partitions", int, 50, "partitions of __share_group_state",
            between(1, 1000)),
    Setting("share.coordinator.state.topic.replication.factor", int, 3,
            "replicas of __share_group_state (capped at the number of brokers)", between(1, 32)),
    Setting("share.coordinator.state.topic.min.isr", int, 2,
            "min.insync.replicas of __share_group_state (capped at its replication factor)", at_least(1)),
    Setting("share.coordinator.state.topic.segment.bytes", int, 100 * 1024 * 1024,
            "segment size of __share_group_state", at_least(1024)),
    Setting("share.coordinator.state.topic.prune.interval.ms", int, 300_000,
            "how often the share coordinator deletes the state records no share-partition needs", at_least(1)),
    Setting("share.coordinator.snapshot.update.records.per.snapshot", int, 500,
            "state updates of a share-partition between two snapshots of it", between(0, 500)),
    Setting("share.coordinator.write.timeout.ms", int, 5000,
            "how long a share state write waits to be replicated", at_least(1)),
    Setting("transaction.max.timeout.ms", int, 900_000, "largest transaction.timeout.ms a producer may ask for",
            at_least(1)),
    Setting("transaction.abort.timed.out.transaction.cleanup.interval.ms", int, 10_000,
            "how often the coordinator aborts transactions past their timeout", at_least(1)),
    Setting("transactional.id.expiration.ms", int, 604_800_000,
            "forget a transactional id idle this long (its tombstone is written)", at_least(1)),
    Setting("transaction.remove.expired.transaction.cleanup.interval.ms", int, 3_600_000,
            "how often idle transactional ids are looked for", at_least(1)),
    *CLUSTER_SETTINGS,
    *AUTHORIZER_SETTINGS,
    *SECURITY_SETTINGS,
    *REGISTRY_SETTINGS,
    # Off unless asked for, like Kafka (which has no metrics port of its own): a fixed default
    # port would clash between the brokers of one machine.
    Setting("metrics.port", int, -1,
            "serve Prometheus metrics on http://metrics.host:PORT/metrics (0 picks a free port; -1: off)",
            between(-1, 65535)),
    Setting("metrics.host", str, "127.0.0.1", "address the Prometheus metrics endpoint listens on"),
    # Roost's own (Kafka has no metrics endpoint): a guarded /metrics (roost.metrics.endpoint).
    Setting("metrics.ssl.keystore.location", str, "",
            "serve /metrics over HTTPS only, with this PEM file (private key and certificate chain)"),
    Setting("metrics.ssl.key.password", str, "", "password of the private key in metrics.ssl.keystore.location",
            secret_reference(), sensitive=True),
    Setting("metrics.bearer.token", str, "",
            "a scrape must send 'Authorization: Bearer <token>' (else 401); best ${file:/path} or ${env:NAME}",
            secret_reference(), sensitive=True),
)

SETTINGS_BY_NAME: dict[str, Setting] = {s.name: s for s in BROKER_SETTINGS}
LISTENER_PREFIX = "listener.name."
JAAS_SETTING = SETTINGS_BY_NAME["sasl.jaas.config"]


def setting_for(name: str) -> Setting | None:
    """The setting `name` sets: a broker setting, or a per-listener one
    (listener.name.<l>.<setting>, listener.name.<l>.<mechanism>.sasl.jaas.config); None if none."""
    if name in SETTINGS_BY_NAME:
        return SETTINGS_BY_NAME[name]
    if not name.startswith(LISTENER_PREFIX):
        return None
    listener, _, rest = name.removeprefix(LISTENER_PREFIX).partition(".")
    if not LISTENER_NAME.match(listener) or listener != listener.lower():
        return None
    setting = SETTINGS_BY_NAME.get(rest)
    if setting is not None and setting.per_listener:
        return setting
    mechanism, _, tail = rest.partition(".")
    if tail == "sasl.jaas.config" and mechanism.upper() in SASL_MECHANISMS:
        return JAAS_SETTING
    return None


def is_sensitive(name: str) -> bool:
    setting = setting_for(name)
    return setting is not None and setting.sensitive


def resolve_secret_reference(raw: Any, name: str, source: str) -> Any:
    """A config value may name where a secret is rather than hold it (`${env:NAME}`,
    `${file:/path}`: roost.secret_ref); other values are returned unchanged."""
    if not isinstance(raw, str):
        return raw
    try:
        return resolve_secret(raw)
    except ValueError as problem:
        raise ConfigError(f"{source}: setting '{name}': {problem}") from None


# Per-topic configs (CreateTopics, DescribeConfigs): Kafka's topic-level names and the broker
# setting that supplies each default.
TOPIC_SETTINGS: dict[str, Setting] = {s.topic_name: s for s in BROKER_SETTINGS if s.topic_name}


THROTTLE_RATE_CONFIGS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
THROTTLED_REPLICAS_CONFIGS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")

# Broker settings an operator may change while the brokers run (AlterConfigs on a broker resource:
# Kafka's dynamic log configs): the defaults of topic configs. unclean.leader.election.enable is
# left out because the controller reads it once, at start.
DYNAMIC_BROKER_SETTINGS: frozenset[str] = frozenset(
    s.name for s in BROKER_SETTINGS
    if s.topic_name and s.name not in ("unclean.leader.election.enable", "roost.mirror.link",
                                       "roost.mirror.source.topic.id", *THROTTLED_REPLICAS_CONFIGS)) \
    | frozenset(THROTTLE_RATE_CONFIGS)


@dataclass
class DynamicLayers:
    """Dynamic broker configs over the static ones: the cluster-wide default
    (/config/brokers/<default>) and this broker's own (/config/brokers/<id>), which wins."""

    cluster_default: dict[str, Any] = field(default_factory=dict)
    this_broker: dict[str, Any] = field(default_factory=dict)


def flatten_toml(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """TOML turns `log.retention.ms = 5` into nested tables; Kafka names are dotted strings."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten_toml(value, f"{name}."))
        else:
            flat[name] = value
    return flat


@dataclass(frozen=True)
class BrokerConfig:
    """A complete, checked set of broker settings (`values`: the static ones, from defaults, the
    file and flags), with the dynamic layers an AlterConfigs may change over them."""

    values: Mapping[str, Any]
    dynamic: DynamicLayers = field(default_factory=DynamicLayers, compare=False)
    # The settings the operator gave (file, --set, flags) or `roost up` derived from its own flags:
    # DescribeConfigs reports these as STATIC_BROKER_CONFIG even when equal to the default, as Kafka does.
    given: frozenset[str] = field(default=frozenset(), compare=False)

    def __getitem__(self, name: str) -> Any:
        dynamic = self.dynamic
        if name in dynamic.this_broker:
            return dynamic.this_broker[name]
        if name in dynamic.cluster_default:
            return dynamic.cluster_default[name]
        return self.values[name]

    @classmethod
    def build(cls, layers: Iterable[tuple[str, Mapping[str, Any]]]) -> BrokerConfig:
        """Apply (source, {name: raw}) layers over the defaults, later layers winning."""
        values = {s.name: s.default for s in BROKER_SETTINGS}
        given: set[str] = set()
        for source, layer in layers:
            for name, raw in layer.items():
                setting = setting_for(name)
                if setting is None:
                    raise ConfigError(f"{source}: unknown setting '{name}'")
                values[name] = setting.parse(resolve_secret_reference(raw, name, source), source)
                given.add(name)
        config = cls(values, given=frozenset(given))
        config._check_relations()
        return config

    def for_listener(self, listener: str, name: str) -> Any:
        """`name` as one listener sees it: listener.name.<listener>.<name> when set, else `name`."""
        specific = f"{LISTENER_PREFIX}{listener.lower()}.{name}"
        return self.values[specific] if specific in self.values else self[name]

    def jaas_config(self, listener: str, mechanism: str) -> str:
        """The JAAS login of `mechanism` on `listener`: Kafka's
        listener.name.<l>.<mechanism>.sasl.jaas.config, else the listener's or the broker's
        sasl.jaas.config."""
        specific = f"{LISTENER_PREFIX}{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        return str(self.values.get(specific) or self.for_listener(listener, "sasl.jaas.config"))

    def protocol_map(self) -> dict[str, str]:
        return parse_protocol_map(self["listener.security.protocol.map"])

    def inter_broker_listener(self) -> str:
        """The inter-broker listener's name: inter.broker.listener.name, else the listener named
        after security.inter.broker.protocol (Kafka's rule)."""
        return str(self["inter.broker.listener.name"]).upper() or str(self["security.inter.broker.protocol"])

    def _check_relations(self) -> None:
        self._check_listeners()
        if self["group.min.session.timeout.ms"] > self["group.max.session.timeout.ms"]:
            raise ConfigError(
                "setting 'group.min.session.timeout.ms' must not exceed 'group.max.session.timeout.ms'"
            )
        # A follower that stalls for less than the time ZooKeeper takes to declare its broker dead
        # must keep its ISR place: otherwise a short pause shrinks the ISR (and acks=all writes
        # fail with NOT_ENOUGH_REPLICAS) sooner than a real failure would even be noticed.
        lag, session = self["replica.lag.time.max.ms"], self["zookeeper.session.timeout.ms"]
        if lag <= session:
            raise ConfigError(
                f"setting 'replica.lag.time.max.ms' = {lag} must exceed 'zookeeper.session.timeout.ms' "
                f"= {session}: a follower would leave the ISR sooner than a dead broker is noticed"
            )
        # Kafka's own rule: a follower's long poll must end well within the lag limit, or an idle
        # but healthy follower would look stuck.
        if self["replica.fetch.wait.max.ms"] >= lag:
            raise ConfigError(
                f"setting 'replica.fetch.wait.max.ms' = {self['replica.fetch.wait.max.ms']} must be "
                f"below 'replica.lag.time.max.ms' = {lag}"
            )
        self._check_zookeeper_security()

    def _check_listeners(self) -> None:
        bound = parse_listeners(self["listeners"], allow_port_zero=True)
        advertised = {entry.name: entry for entry in parse_listeners(self["advertised.listeners"])}
        protocols = self.protocol_map()
        for entry in bound:
            if entry.name not in protocols:
                raise ConfigError(f"setting 'listeners': listener {entry.name} has no security protocol in "
                                  f"'listener.security.protocol.map' = {self['listener.security.protocol.map']!r}")
            shown = advertised.get(entry.name, entry)
            if shown.host in ("0.0.0.0", "::"):
                raise ConfigError(
                    f"setting 'advertised.listeners' is required when 'listeners' = {self['listeners']!r}: "
                    "clients cannot connect to the wildcard address, so advertise a routable one"
                )
        names = {entry.name for entry in bound}
        if bound and set(advertised) - names:
            raise ConfigError(f"setting 'advertised.listeners' names listeners that 'listeners' does not: "
                              f"{', '.join(sorted(set(advertised) - names))}")
        if self["inter.broker.listener.name"] and self.values["security.inter.broker.protocol"] != "PLAINTEXT":
            raise ConfigError("settings 'inter.broker.listener.name' and 'security.inter.broker.protocol' "
                              "must not both be set (Kafka's rule)")
        inter = self.inter_broker_listener()
        if bound and inter not in names:
            raise ConfigError(f"the inter-broker listener {inter} is not one of 'listeners' ({', '.join(sorted(names))}):"
                              " set 'inter.broker.listener.name'")
        for name in (entry.name for entry in bound):
            if protocols[name] in ("SSL", "SASL_SSL") and not self.for_listener(name, "ssl.keystore.location"):
                raise ConfigError(f"listener {name} uses {protocols[name]}: set 'ssl.keystore.location' "
                                  f"(or 'listener.name.{name.lower()}.ssl.keystore.location')")

    def _check_zookeeper_security(self) -> None:
        user, password = self["zookeeper.sasl.client.username"], self["zookeeper.sasl.client.password"]
        if bool(user) != bool(password):
            raise ConfigError("settings 'zookeeper.sasl.client.username' and 'zookeeper.sasl.client.password' "
                              "go together: set both or neither")
        for name in ("zookeeper.ssl.keystore.location", "zookeeper.ssl.truststore.location"):
            if self[name] and not Path(self[name]).is_file():
                raise ConfigError(f"setting '{name}': no such file {self[name]}")
        tls_identity = self["zookeeper.ssl.client.enable"] and self["zookeeper.ssl.keystore.location"]
        if self["zookeeper.set.acl"] and not (user or self["zookeeper.digest"] or tls_identity):
            raise ConfigError(
                "setting 'zookeeper.set.acl' = true needs an identity for the brokers: "
                "'zookeeper.sasl.client.username'/'password', 'zookeeper.digest', or "
                "'zookeeper.ssl.client.enable' with 'zookeeper.ssl.keystore.location'")

    def topic_defaults(self) -> dict[str, Any]:
        """The topic-level configs a new topic gets when it overrides nothing."""
        return {topic_name: self[s.name] for topic_name, s in TOPIC_SETTINGS.items()}


def parse_topic_configs(raw: Mapping[str, str | None], source: str) -> dict[str, Any]:
    """Check per-topic overrides from CreateTopics; raise ConfigError naming a bad one."""
    parsed: dict[str, Any] = {}
    for name, value in raw.items():
        setting = TOPIC_SETTINGS.get(name)
        if setting is None:
            raise ConfigError(f"{source}: unknown topic config '{name}'")
        if value is None:
            continue
        parsed[name] = setting.parse(value, source)
    return parsed


def parse_dynamic_broker_configs(raw: Mapping[str, str | None], source: str) -> dict[str, Any]:
    """Check dynamic broker configs (AlterConfigs, /config/brokers); raise ConfigError naming a
    bad one (NotDynamicError for a setting that only a restart can change)."""
    parsed: dict[str, Any] = {}
    for name, value in raw.items():
        setting = SETTINGS_BY_NAME.get(name)
        if setting is None:
            raise ConfigError(f"{source}: unknown broker config '{name}'")
        if name not in DYNAMIC_BROKER_SETTINGS:
            raise NotDynamicError(f"{source}: broker config '{name}' cannot be updated dynamically: set it in "
                                  "the broker's config file or flags and restart the broker")
        if value is None:
            continue
        parsed[name] = setting.parse(value, source)
    return parsed


class NotDynamicError(ConfigError):
    """A broker setting that only a restart can change."""


def load_toml(path: Path) -> dict[str, Any]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    return parse_toml_text(data, f"config file {path}")


def parse_toml_text(data: bytes, source: str) -> dict[str, Any]:
    """A settings file's bytes as flat Kafka names; ConfigError for anything that is not TOML
    (bad UTF-8 included), the one error a settings reader raises (tests/fuzz fuzzes it)."""
    try:
        return flatten_toml(tomllib.loads(data.decode("utf-8")))
    except UnicodeDecodeError as error:
        raise ConfigError(f"{source} is not UTF-8: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{source} is not valid TOML: {error}") from None


def add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per setting, spelled with dots (Kafka's name) or dashes."""
    group = parser.add_argument_group("broker settings (Kafka's names; also accepted in the TOML file)")
    for setting in BROKER_SETTINGS:
        dashed = setting.name.replace(".", "-")
        group.add_argument(
            f"--{setting.name}", f"--{dashed}", dest=f"setting:{setting.name}", metavar="VALUE",
            default=None, help=f"{setting.help} (default {setting.default})",
        )


def flag_layer(args: argparse.Namespace) -> dict[str, str]:
    return {
        name.removeprefix("setting:"): value
        for name, value in vars(args).items()
        if name.startswith("setting:") and value is not None
    }
