"""Keeper configuration: a TOML file with ZooKeeper's setting names.

Example (a member of a three-keeper ensemble; drop the `server.N` lines for a standalone keeper):

    tickTime = 2000                  # ms; session timeouts are negotiated within [2, 20] ticks
    minSessionTimeout = 4000         # ms, default 2 * tickTime
    maxSessionTimeout = 40000        # ms, default 20 * tickTime
    dataDir = "/var/lib/roost/keeper"
    clientPort = 2181                # 0 picks a free port, -1 none (TLS clients only: secureClientPort)
    clientPortAddress = "127.0.0.1"  # default 0.0.0.0
    maxClientCnxns = 60              # connections per client IP address, 0 = unlimited
    "zookeeper.nio.sessionlessCnxnTimeout" = 10000  # ms a connection may stay without a session
    "jute.maxbuffer" = 1048575       # largest request frame in bytes (quote dotted names)
    myid = 1                         # this member's id: 1..127
    server.1 = "10.0.0.1:2888"       # the ensemble: member id -> "host:peerPort"
    server.2 = "10.0.0.2:2888"       #   (TOML reads `server.N` as the table [server] with key N)
    server.3 = "10.0.0.3:2888"
    server.4 = "10.0.0.4:2888:observer"  # an observer: replicates and serves, never votes
    snapCount = 20000                # applied log entries between two snapshots of the tree
    reconfigEnabled = false          # ZooKeeper's dynamic reconfiguration (`reconfig`), for...
    superDigest = "super:<b64 sha1>" # a client that adds this digest passes every ACL (and may reconfig)

SASL DIGEST-MD5 (what kazoo's `sasl_options` and Kafka brokers speak). ZooKeeper reads its users
from a JAAS file, `Server { org.apache.zookeeper.server.auth.DigestLoginModule required
user_bob="bob-secret"; };`; the keeper reads the same from a TOML table, each password given
inline, or by reference to an environment variable or a file (never printed or logged):

    [sasl.users]
    bob = "${env:ZK_BOB_PASSWORD}"
    kafka = "${file:/etc/roost/kafka-zk.password}"
    "zookeeper.superUser" = "admin"   # (top level) this SASL user passes every ACL, as ZooKeeper's

TLS, with ZooKeeper's names (PEM files; ZooKeeper's `serverCnxnFactory` and `ssl.*.type` = "PEM"
are accepted): clients on `secureClientPort` (beside or instead of `clientPort`), TLS 1.2+ only,
a handshake bounded by `ssl.handshakeTimeoutMillis`; `ssl.clientAuth` need (ZooKeeper's default),
want or none; a client certificate's subject becomes the client's `x509` id. `sslQuorum = true`
puts the members' own links (Raft) on mutual TLS with the `ssl.quorum.*` settings.

    secureClientPort = 2281
    "ssl.keyStore.location" = "/etc/roost/keeper.pem"      # private key + certificate chain
    "ssl.trustStore.location" = "/etc/roost/ca.pem"        # CAs that sign client certificates
    "ssl.clientAuth" = "need"

Roost's own settings (no ZooKeeper equivalent): `maxOutstandingRequests` (per connection; past it
the keeper stops reading that connection until replies drain), `maxWatchesPerSession`,
`extendedTypesEnabled` (TTL nodes, ZooKeeper's `zookeeper.extendedTypesEnabled`), `forceSync`
(fsync the log, default true). `"4lw.commands.whitelist"` is ZooKeeper's: comma-separated words, default
"srvr" alone (as ZooKeeper 3.5+), `*` for all; `envi`, `conf`, `cons`, `stat`, `mntr` tell a stranger
about the server and its clients, so they are opt-in (`mntr` is the usual first addition).

An invalid or unknown setting is refused with a `ConfigError` naming the setting.
"""

from __future__ import annotations

import base64
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roost.secret_ref import resolve_secret
from roost.wire.zk.constants import DEFAULT_MAX_BUFFER

FOUR_LETTER_DEFAULT = "srvr"  # ZooKeeper 3.5+'s default


class ConfigError(ValueError):
    """A setting is missing, unknown or invalid; the message names it."""


@dataclass(slots=True)
class PeerAddress:
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """One side's TLS settings, as ZooKeeper names them under `ssl.` or `ssl.quorum.`."""

    key_store: str  # PEM: private key and certificate chain
    key_password: str = field(default="", repr=False)
    trust_store: str = ""  # PEM CA certificates (empty: the system's)
    client_auth: str = "need"  # need | want | none
    handshake_timeout_ms: int = 5000


@dataclass(slots=True)
class KeeperConfig:
    data_dir: Path
    tick_time: int = 2000
    min_session_timeout: int = 0  # 0: 2 * tick_time
    max_session_timeout: int = 0  # 0: 20 * tick_time
    client_port: int = 2181
    client_port_address: str = "0.0.0.0"
    max_client_cnxns: int = 60
    # ZooKeeper's zookeeper.nio.sessionlessCnxnTimeout: a connection that has not asked for a
    # session within this many ms is closed (an idle or slow-loris client holds no slot for long).
    sessionless_cnxn_timeout: int = 10_000
    jute_max_buffer: int = DEFAULT_MAX_BUFFER
    myid: int = 1
    servers: dict[int, PeerAddress] = field(default_factory=dict)
    # Members marked `:observer` (ZooKeeper's syntax): they replicate the log and serve clients
    # but never vote or count toward a quorum.
    observers: frozenset[int] = frozenset()
    max_outstanding_requests: int = 1000
    max_watches_per_session: int = 100_000
    extended_types_enabled: bool = False
    force_sync: bool = True
    four_letter_whitelist: frozenset[str] | None = frozenset({"srvr"})  # None: every word
    # Log entries (batches of writes) applied between two snapshots; a snapshot is also taken
    # after 64 MiB of entries, whichever comes first.
    snap_count: int = 20_000
    # Dynamic reconfiguration (ZooKeeper 3.5+'s `reconfig`), allowed to a super user only: one
    # authenticated with the digest `superDigest` ("super:<base64 sha1>", ZooKeeper's
    # zookeeper.DigestAuthenticationProvider.superDigest), or anyone with `skipACL`.
    reconfig_enabled: bool = False
    super_digest: str = ""
    skip_acl: bool = False
    # SASL DIGEST-MD5 users (name -> password, references resolved); empty: SASL is refused.
    sasl_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    super_user: str = ""  # zookeeper.superUser: a SASL user that passes every ACL check
    # zookeeper.X509AuthenticationProvider.superUser: a client certificate subject (RFC 4514 DN)
    # that passes every ACL check
    x509_super_user: str = ""
    # TLS for clients (secure_client_port -1: none) and between members (ssl.quorum.*).
    secure_client_port: int = -1
    secure_client_port_address: str = ""  # default: clientPortAddress
    tls: TlsFiles | None = None
    quorum_tls: TlsFiles | None = None
    # ZooKeeper's Prometheus provider settings: where /metrics is served (-1: not served).
    metrics_port: int = -1
    metrics_host: str = "127.0.0.1"
    # A guarded /metrics: HTTPS (metricsProvider.httpsPort with metricsProvider.ssl.keyStore.*)
    # and Roost's own metricsProvider.bearerToken (resolved; "" for none).
    metrics_tls: TlsFiles | None = None
    metrics_token: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if self.min_session_timeout == 0:
            self.min_session_timeout = 2 * self.tick_time
        if self.max_session_timeout == 0:
            self.max_session_timeout = 20 * self.tick_time

    @property
    def is_ensemble(self) -> bool:
        return len(self.servers) > 1

    def describe(self) -> list[str]:
        """The `conf` four-letter word's lines."""
        lines = [
            f"clientPort={self.client_port}",
            f"clientPortAddress={self.client_port_address}",
            *([f"secureClientPort={self.secure_client_port}"] if self.secure_client_port >= 0 else []),
            f"dataDir={self.data_dir}",
            f"tickTime={self.tick_time}",
            f"maxClientCnxns={self.max_client_cnxns}",
            f"minSessionTimeout={self.min_session_timeout}",
            f"maxSessionTimeout={self.max_session_timeout}",
            f"jute.maxbuffer={self.jute_max_buffer}",
            f"serverId={self.myid}",
        ]
        lines += [f"server.{sid}={peer.host}:{peer.port}" + (":observer" if sid in self.observers else "")
                  for sid, peer in sorted(self.servers.items())]
        return lines

    @classmethod
    def load(cls, path: str | Path, overrides: Mapping[str, Any] | None = None) -> KeeperConfig:
        """Read a TOML config file; `overrides` (e.g. from command-line flags) win."""
        try:
            with open(path, "rb") as handle:
                raw = tomllib.load(handle)
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
        merged = dict(raw)
        merged.update(overrides or {})
        return cls.from_mapping(merged, base_dir=Path(path).resolve().parent)

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any], base_dir: Path | None = None) -> KeeperConfig:
        """Build a config from ZooKeeper-named settings, validating each one."""
        values = dict(settings)
        # TOML reads `jute.maxbuffer = N` (unquoted) as a table {"jute": {"maxbuffer": N}}.
        for prefix in ("jute", "4lw", "metricsProvider", "zookeeper"):
            nested = values.get(prefix)
            if isinstance(nested, dict):
                del values[prefix]
                for key, value in _flatten(prefix, nested).items():
                    values[key] = value
        servers_raw = values.pop("server", None)
        sasl_users = _sasl_users(values)
        for prefix in ("ssl",):
            nested = values.get(prefix)
            if isinstance(nested, dict):
                del values[prefix]
                values.update(_flatten(prefix, nested))
        unknown = sorted(set(values) - _KNOWN)
        if unknown:
            raise ConfigError(f"setting {unknown[0]!r}: unknown setting")
        if "dataDir" not in values:
            raise ConfigError("setting 'dataDir': required")
        data_dir = Path(_string(values, "dataDir"))
        if base_dir is not None and not data_dir.is_absolute():
            data_dir = base_dir / data_dir
        tick = _int(values, "tickTime", 2000, 1, 3_600_000)
        config = cls(
            data_dir=data_dir,
            tick_time=tick,
            min_session_timeout=_int(values, "minSessionTimeout", 2 * tick, 1, 2**31 - 1),
            max_session_timeout=_int(values, "maxSessionTimeout", 20 * tick, 1, 2**31 - 1),
            client_port=_int(values, "clientPort", 2181, -1, 65535),
            client_port_address=_string(values, "clientPortAddress", "0.0.0.0"),
            max_client_cnxns=_int(values, "maxClientCnxns", 60, 0, 1_000_000),
            sessionless_cnxn_timeout=_int(values, "zookeeper.nio.sessionlessCnxnTimeout", 10_000, 1, 2**31 - 1),
            jute_max_buffer=_int(values, "jute.maxbuffer", DEFAULT_MAX_BUFFER, 1024, 1 << 30),
            myid=_int(values, "myid", 1, 1, 127),
            max_outstanding_requests=_int(values, "maxOutstandingRequests", 1000, 1, 1_000_000),
            max_watches_per_session=_int(values, "maxWatchesPerSession", 100_000, 1, 100_000_000),
            extended_types_enabled=_bool(values, "extendedTypesEnabled", False),
            force_sync=_bool(values, "forceSync", True),
            four_letter_whitelist=_whitelist(values),
            snap_count=_int(values, "snapCount", 20_000, 1, 2**31 - 1),
            reconfig_enabled=_bool(values, "reconfigEnabled", False),
            super_digest=_super_digest(values),
            skip_acl=_bool(values, "skipACL", False),
            metrics_port=_metrics_port(values),
            metrics_tls=_metrics_tls(values),
            metrics_token=_metrics_token(values),
            metrics_host=_string(values, "metricsProvider.httpHost", "127.0.0.1"),
            sasl_users=sasl_users,
            super_user=_string(values, "zookeeper.superUser", ""),
            x509_super_user=_string(values, "zookeeper.X509AuthenticationProvider.superUser", ""),
            secure_client_port=_int(values, "secureClientPort", -1, -1, 65535),
            secure_client_port_address=_string(values, "secureClientPortAddress", ""),
            tls=_tls(values, "ssl.", "secureClientPort" in values),
            quorum_tls=_tls(values, "ssl.quorum.", _bool(values, "sslQuorum", False)),
        )
        if config.min_session_timeout > config.max_session_timeout:
            raise ConfigError(
                f"setting 'minSessionTimeout': {config.min_session_timeout} is above "
                f"maxSessionTimeout {config.max_session_timeout}"
            )
        if config.client_port < 0 and config.secure_client_port < 0:
            raise ConfigError("setting 'clientPort': -1 (no plain port) needs a 'secureClientPort'")
        if not config.client_port_address:
            raise ConfigError("setting 'clientPortAddress': must not be empty")
        if servers_raw is not None:
            config.servers, config.observers = _servers(servers_raw)
            if config.servers and config.myid not in config.servers:
                raise ConfigError(f"setting 'myid': {config.myid} is not one of the server.N entries")
            voters = len(config.servers) - len(config.observers)
            if voters not in (1, 3, 5, 7):
                raise ConfigError(f"setting 'server': an ensemble has 1, 3, 5 or 7 voting members "
                                  f"(observers aside), not {voters}")
        return config


_KNOWN = frozenset({
    "tickTime", "minSessionTimeout", "maxSessionTimeout", "dataDir", "clientPort",
    "clientPortAddress", "maxClientCnxns", "zookeeper.nio.sessionlessCnxnTimeout", "jute.maxbuffer", "myid", "maxOutstandingRequests",
    "maxWatchesPerSession", "extendedTypesEnabled", "forceSync", "4lw.commands.whitelist",
    "snapCount", "reconfigEnabled", "superDigest", "skipACL",
    # Prometheus metrics (ZooKeeper 3.6+'s names): served only when a port is given; the
    # provider's class name is accepted for configs written for ZooKeeper, and means nothing here.
    "metricsProvider.httpPort", "metricsProvider.httpHost", "metricsProvider.className",
    "metricsProvider.httpsPort", "metricsProvider.ssl.keyStore.location", "metricsProvider.ssl.keyStore.password",
    "metricsProvider.ssl.keyStore.type", "metricsProvider.bearerToken",
    "zookeeper.superUser", "zookeeper.X509AuthenticationProvider.superUser", "secureClientPort", "secureClientPortAddress", "serverCnxnFactory", "sslQuorum",
    *(f"{prefix}{name}" for prefix in ("ssl.", "ssl.quorum.") for name in (
        "keyStore.location", "keyStore.password", "keyStore.type", "trustStore.location",
        "trustStore.type", "clientAuth", "handshakeTimeoutMillis", "protocol", "enabledProtocols")),
})


def _tls(values: Mapping[str, Any], prefix: str, wanted: bool) -> TlsFiles | None:
    """The TLS settings under `prefix`, when `wanted` (a secure port, sslQuorum)."""
    given = [key for key in values if key.startswith(prefix) and (prefix != "ssl." or not key.startswith("ssl.quorum."))]
    if not wanted:
        if given:
            raise ConfigError(f"setting {given[0]!r}: needs " +
                              ("'secureClientPort'" if prefix == "ssl." else "'sslQuorum' = true"))
        return None
    for kind in ("keyStore.type", "trustStore.type"):
        if _string(values, prefix + kind, "PEM").upper() != "PEM":
            raise ConfigError(f"setting '{prefix}{kind}': only PEM files are supported")
    for name in ("protocol", "enabledProtocols"):
        for protocol in _string(values, prefix + name, "TLSv1.2").split(","):
            if protocol.strip() not in ("TLSv1.2", "TLSv1.3"):
                raise ConfigError(f"setting '{prefix}{name}': only TLSv1.2 and TLSv1.3, not {protocol.strip()!r}")
    key_store = _string(values, prefix + "keyStore.location", "")
    if not key_store:
        raise ConfigError(f"setting '{prefix}keyStore.location': required for TLS (a PEM file with the "
                          "private key and the certificate chain)")
    client_auth = _string(values, prefix + "clientAuth", "need").lower()
    if client_auth not in ("need", "want", "none"):
        raise ConfigError(f"setting '{prefix}clientAuth': must be need, want or none")
    trust_store = _string(values, prefix + "trustStore.location", "")
    if prefix == "ssl.quorum." and client_auth != "need":
        raise ConfigError("setting 'ssl.quorum.clientAuth': the members' links are mutual TLS (need)")
    for path in (key_store, trust_store):
        if path and not Path(path).is_file():
            raise ConfigError(f"setting '{prefix}{'keyStore' if path == key_store else 'trustStore'}.location': "
                              f"no such file {path}")
    try:
        password = resolve_secret(_string(values, prefix + "keyStore.password", ""))
    except ValueError as exc:
        raise ConfigError(f"setting '{prefix}keyStore.password': {exc}") from None
    return TlsFiles(key_store, password, trust_store, client_auth,
                    _int(values, prefix + "handshakeTimeoutMillis", 5000, 1, 600_000))


def _metrics_port(values: Mapping[str, Any]) -> int:
    http = _int(values, "metricsProvider.httpPort", -1, -1, 65535)
    https = _int(values, "metricsProvider.httpsPort", -1, -1, 65535)
    if http >= 0 and https >= 0:
        raise ConfigError("setting 'metricsProvider.httpsPort': Roost serves one metrics port; "
                          "leave 'metricsProvider.httpPort' unset")
    return https if https >= 0 else http


def _metrics_tls(values: Mapping[str, Any]) -> TlsFiles | None:
    """HTTPS for /metrics: metricsProvider.httpsPort needs a PEM key store, and a key store
    without httpsPort would serve nothing over TLS (refused rather than ignored)."""
    prefix = "metricsProvider.ssl."
    key_store = _string(values, prefix + "keyStore.location", "")
    if "metricsProvider.httpsPort" not in values:
        if key_store:
            raise ConfigError(f"setting '{prefix}keyStore.location': needs 'metricsProvider.httpsPort'")
        return None
    if _string(values, prefix + "keyStore.type", "PEM").upper() != "PEM":
        raise ConfigError(f"setting '{prefix}keyStore.type': only PEM files are supported")
    if not key_store or not Path(key_store).is_file():
        raise ConfigError(f"setting '{prefix}keyStore.location': a PEM file with the private key and the "
                          f"certificate chain is required for metricsProvider.httpsPort")
    try:
        password = resolve_secret(_string(values, prefix + "keyStore.password", ""))
    except ValueError as exc:
        raise ConfigError(f"setting '{prefix}keyStore.password': {exc}") from None
    return TlsFiles(key_store, password, "", "none")


def _metrics_token(values: Mapping[str, Any]) -> str:
    if "metricsProvider.bearerToken" not in values:
        return ""
    try:
        token = resolve_secret(_string(values, "metricsProvider.bearerToken"))
    except ValueError as exc:
        raise ConfigError(f"setting 'metricsProvider.bearerToken': {exc}") from None
    if not token.strip():  # an empty variable must not mean "no guard"
        raise ConfigError("setting 'metricsProvider.bearerToken': the token is empty")
    return token


def _sasl_users(values: dict[str, Any]) -> dict[str, str]:
    """Pop the `[sasl.users]` table (or flat "sasl.users.NAME" keys) and resolve each password."""
    table = values.pop("sasl", None)
    raw: dict[str, Any] = {}
    if table is not None:
        if not isinstance(table, dict) or set(table) - {"users"}:
            raise ConfigError("setting 'sasl': write users as [sasl.users] name = \"password\"")
        users = table.get("users", {})
        if not isinstance(users, dict):
            raise ConfigError("setting 'sasl.users': must be a table of name = \"password\"")
        raw.update(users)
    for key in [k for k in values if k.startswith("sasl.users.")]:
        raw[key.removeprefix("sasl.users.")] = values.pop(key)
    resolved: dict[str, str] = {}
    for name, password in raw.items():
        where = f"setting 'sasl.users.{name}'"
        if not name or not isinstance(password, str):
            raise ConfigError(f"{where}: must be a password string (or ${{env:NAME}}, ${{file:/path}})")
        try:
            resolved[name] = resolve_secret(password)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if not resolved[name]:
            raise ConfigError(f"{where}: the password is empty")
    return resolved


def _flatten(prefix: str, table: dict[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}.{key}"
        if isinstance(value, dict):
            flat.update(_flatten(name, value))
        else:
            flat[name] = value
    return flat


def _int(values: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = values.get(name, default)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"setting {name!r}: must be an integer, got {value!r}")
    if not low <= value <= high:
        raise ConfigError(f"setting {name!r}: {value} is outside [{low}, {high}]")
    return value


def _bool(values: Mapping[str, Any], name: str, default: bool) -> bool:
    value = values.get(name, default)
    if isinstance(value, str) and value.lower() in ("true", "yes", "false", "no"):
        value = value.lower() in ("true", "yes")
    if not isinstance(value, bool):
        raise ConfigError(f"setting {name!r}: must be true or false, got {value!r}")
    return value


def _string(values: Mapping[str, Any], name: str, default: str | None = None) -> str:
    value = values.get(name, default)
    if isinstance(value, Path):
        value = str(value)
    if not isinstance(value, str):
        raise ConfigError(f"setting {name!r}: must be a string, got {value!r}")
    return value


def _super_digest(values: Mapping[str, Any]) -> str:
    value = _string(values, "superDigest", "")
    user, _, hashed = value.partition(":")
    if value and not (user and _is_sha1_base64(hashed)):
        # The value is a hash, not a password, but it is still not echoed back.
        raise ConfigError("setting 'superDigest': must be \"user:<base64 of SHA-1(user:password)>\", "
                          "as ZooKeeper's DigestAuthenticationProvider prints it")
    return value


def _is_sha1_base64(text: str) -> bool:
    try:
        return len(base64.b64decode(text, validate=True)) == 20
    except ValueError:
        return False


def _whitelist(values: Mapping[str, Any]) -> frozenset[str] | None:
    raw = _string(values, "4lw.commands.whitelist", FOUR_LETTER_DEFAULT)
    words = [word.strip() for word in raw.split(",") if word.strip()]
    if "*" in words:
        return None
    for word in words:
        if len(word) != 4 or not word.isalpha():
            raise ConfigError(f"setting '4lw.commands.whitelist': {word!r} is not a four-letter word")
    return frozenset(words)


def _servers(raw: Any) -> tuple[dict[int, PeerAddress], frozenset[int]]:
    if not isinstance(raw, dict):
        raise ConfigError("setting 'server': write members as server.N = \"host:peerPort\"")
    servers: dict[int, PeerAddress] = {}
    observers: set[int] = set()
    for key, value in raw.items():
        name = f"server.{key}"
        try:
            sid = int(key)
        except ValueError:
            raise ConfigError(f"setting {name!r}: the member id must be an integer") from None
        if not 1 <= sid <= 127:
            raise ConfigError(f"setting {name!r}: the member id must be in [1, 127]")
        if not isinstance(value, str):
            raise ConfigError(f"setting {name!r}: must be a \"host:peerPort\" string")
        try:
            spec = parse_server_spec(value)
        except ValueError as exc:
            raise ConfigError(f"setting {name!r}: {exc}") from None
        servers[sid] = PeerAddress(spec.host, spec.peer_port)
        if spec.observer:
            observers.add(sid)
    return servers, frozenset(observers)


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """One member as ZooKeeper writes it: "host:quorumPort[:electionPort][:role][;[clientHost:]clientPort]".
    Roost uses one peer port (the first); an election port is accepted and ignored."""

    host: str
    peer_port: int
    election_port: int | None = None
    observer: bool = False
    client: str | None = None  # "host:port" or "port", as written

    def zk_line(self) -> str:
        """The spec in ZooKeeper's `/zookeeper/config` form."""
        election = self.election_port if self.election_port is not None else self.peer_port
        role = "observer" if self.observer else "participant"
        line = f"{self.host}:{self.peer_port}:{election}:{role}"
        if self.client is not None:
            client = self.client if ":" in self.client else f"0.0.0.0:{self.client}"
            line += f";{client}"
        return line


def parse_server_spec(value: str) -> ServerSpec:
    """Parse a member spec (ValueError names what is wrong)."""
    address, _, client = value.partition(";")
    parts = address.split(":")
    role = "participant"
    if parts and parts[-1] in ("observer", "participant"):
        role = parts.pop()
    if len(parts) not in (2, 3) or not parts[0]:
        raise ValueError(f"{value!r} is not \"host:peerPort[:electionPort][:observer]\"")
    ports = []
    for text in parts[1:]:
        if not text.isdigit() or not 0 < int(text) < 65536:
            raise ValueError(f"{value!r}: {text!r} is not a port")
        ports.append(int(text))
    client_spec: str | None = None
    if client:
        client_spec = client.strip()
        client_port = client_spec.rsplit(":", 1)[-1]
        if not client_port.isdigit() or not 0 < int(client_port) < 65536:
            raise ValueError(f"{value!r}: client address {client_spec!r} has no valid port")
    return ServerSpec(parts[0], ports[0], ports[1] if len(ports) > 1 else None, role == "observer",
                      client_spec)


# Every setting a keeper's config accepts: name -> (the KeeperConfig field holding its value, or
# None; what it means). The documentation's settings reference is generated from it, with each
# default read from a KeeperConfig built from nothing but a dataDir; a test holds it equal to _KNOWN.
SETTINGS_HELP: dict[str, tuple[str | None, str]] = {
    "dataDir": ("data_dir", "directory of the Raft log and the snapshots (required; relative to the config file)"),
    "tickTime": ("tick_time", "the basic time unit in ms; session timeouts are granted within [2, 20] ticks"),
    "minSessionTimeout": ("min_session_timeout", "smallest session timeout granted, ms (default 2 ticks)"),
    "maxSessionTimeout": ("max_session_timeout", "largest session timeout granted, ms (default 20 ticks)"),
    "clientPort": ("client_port", "port clients connect to; 0 picks a free one"),
    "clientPortAddress": ("client_port_address", "address clients connect to"),
    "maxClientCnxns": ("max_client_cnxns", "connections per client IP address (0: unlimited)"),
    "zookeeper.nio.sessionlessCnxnTimeout": (
        "sessionless_cnxn_timeout", "a connection that has asked for no session within this many ms is closed"),
    "jute.maxbuffer": ("jute_max_buffer", "largest request frame in bytes"),
    "myid": ("myid", "this member's id, 1..127, one of the server.N entries"),
    "server.N": (None, "a member of the ensemble: \"host:peerPort[:electionPort][:observer]\" "
                       "(members talk Raft on peerPort; an election port is accepted and ignored)"),
    "maxOutstandingRequests": ("max_outstanding_requests",
                               "requests in flight per connection before the keeper stops reading it"),
    "maxWatchesPerSession": ("max_watches_per_session", "watches one session may set"),
    "extendedTypesEnabled": ("extended_types_enabled", "allow TTL znodes (ZooKeeper's zookeeper.extendedTypesEnabled)"),
    "forceSync": ("force_sync", "fsync the log before acknowledging a write"),
    "4lw.commands.whitelist": ("four_letter_whitelist", "four-letter words answered, comma-separated (default srvr, as ZooKeeper; * for all)"),
    "snapCount": ("snap_count", "applied log entries between two snapshots of the tree (or 64 MiB of entries)"),
    "reconfigEnabled": ("reconfig_enabled", "allow dynamic reconfiguration (`reconfig`) by a super user"),
    "superDigest": ("super_digest", "\"super:<base64 sha1>\": a client authenticated with it is a super user"),
    "skipACL": ("skip_acl", "skip every ACL check (and let anyone reconfigure)"),
    "metricsProvider.httpPort": ("metrics_port", "serve Prometheus metrics on this port (-1: off; 0 picks one)"),
    "metricsProvider.httpHost": ("metrics_host", "address the Prometheus metrics endpoint listens on"),
    "metricsProvider.className": (None, "accepted for configs written for ZooKeeper; means nothing here"),
    "metricsProvider.httpsPort": (None, "serve Prometheus metrics over HTTPS only, on this port (instead of httpPort)"),
    "metricsProvider.ssl.keyStore.location": (None, "PEM file with the metrics endpoint's private key and certificate chain"),
    "metricsProvider.ssl.keyStore.password": (None, "password of that private key (may be ${env:NAME} or ${file:/path})"),
    "metricsProvider.ssl.keyStore.type": (None, "format of the key store: PEM only"),
    "metricsProvider.bearerToken": (None, "Roost's own: a scrape must send 'Authorization: Bearer <token>' "
                                          "(else 401); best ${file:/path} or ${env:NAME}"),
    # Security (docs/keeper-security.md).
    "zookeeper.superUser": ("super_user", "a SASL user that passes every ACL check"),
    "zookeeper.X509AuthenticationProvider.superUser": (
        "x509_super_user", "a client certificate subject (RFC 4514) that passes every ACL check"),
    "secureClientPort": ("secure_client_port", "port TLS clients connect to (-1: none; 0 picks a free one)"),
    "secureClientPortAddress": ("secure_client_port_address", "address TLS clients connect to (default: clientPortAddress)"),
    "serverCnxnFactory": (None, "accepted for configs written for ZooKeeper (Netty there); means nothing here"),
    "sslQuorum": (None, "put the members' Raft links on mutual TLS with the ssl.quorum.* settings"),
    **{f"{prefix}{name}": (None, f"{what}{side}") for prefix, side in (
        ("ssl.", " (client TLS, on secureClientPort)"), ("ssl.quorum.", " (the members' links, with sslQuorum)"))
       for name, what in (
           ("keyStore.location", "PEM file with the private key and the certificate chain"),
           ("keyStore.password", "password of the key in the key store, or ${env:NAME} / ${file:PATH}"),
           ("keyStore.type", "format of the key store: PEM only"),
           ("trustStore.location", "PEM file with the CA certificates peers' certificates are checked against"),
           ("trustStore.type", "format of the trust store: PEM only"),
           ("clientAuth", "client certificates: need (ZooKeeper's default), want or none"),
           ("handshakeTimeoutMillis", "longest a TLS handshake may take, ms (default 5000)"),
           ("protocol", "TLS version: TLSv1.2 or TLSv1.3"),
           ("enabledProtocols", "TLS versions accepted, comma-separated: TLSv1.2, TLSv1.3"),
       )},
}
