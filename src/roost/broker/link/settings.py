"""A cluster link's settings: what `roost link create` writes to ZooKeeper at
/config/cluster-links/<name> (JSON, as Kafka's dynamic configs are stored) and every destination
broker reads. The client settings use librdkafka's names, as every Roost client command's `-X`
does (bootstrap.servers, security.protocol, sasl.mechanism, sasl.username, sasl.password,
ssl.ca.location, ...); the mirror settings use MM2's and Confluent Cluster Linking's names where
they have one. A password may be a reference (`${file:/path}`, `${env:NAME}`, roost.secret_ref),
resolved on each broker, so that ZooKeeper need not hold it.
"""

from __future__ import annotations

import json
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from roost.broker.link.configs import DEFAULT_CONFIG_EXCLUDE, config_exclusions
from roost.broker.link.filters import (
    DEFAULT_GROUPS,
    DEFAULT_GROUPS_EXCLUDE,
    DEFAULT_TOPICS,
    DEFAULT_TOPICS_EXCLUDE,
    FilterError,
    NameFilter,
    group_filter,
    topic_filter,
)
from roost.broker.security.listener import PeerSecurity
from roost.secret_ref import resolve_secret

LINKS_PATH = "/config/cluster-links"
SYNCED_ACLS_PATH = "/cluster-links-acls"  # <link>: the ACLs the link created on this cluster (JSON)
STATUS_PATH = "/cluster-links-status"  # each destination broker's mirrors: <link>/<broker id>, ephemeral JSON
LINK_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SECRETS = frozenset({"sasl.password", "ssl.key.password"})

# name -> (default, kind); kind: str, int, bool
DEFAULTS: dict[str, tuple[Any, type]] = {
    "bootstrap.servers": ("", str),
    "security.protocol": ("PLAINTEXT", str),
    "sasl.mechanism": ("PLAIN", str),
    "sasl.username": ("", str),
    "sasl.password": ("", str),
    "ssl.ca.location": ("", str),
    "ssl.certificate.location": ("", str),
    "ssl.key.location": ("", str),
    "ssl.key.password": ("", str),
    "ssl.endpoint.identification.algorithm": ("https", str),
    "cluster.link.prefix": ("", str),  # Confluent's name: mirror `t` as `<prefix>t`
    "topics": (DEFAULT_TOPICS, str),  # MM2's names and defaults
    "topics.exclude": (DEFAULT_TOPICS_EXCLUDE, str),
    "groups": (DEFAULT_GROUPS, str),
    "groups.exclude": (DEFAULT_GROUPS_EXCLUDE, str),
    "config.properties.exclude": (DEFAULT_CONFIG_EXCLUDE, str),
    "auto.create.mirror.topics.enable": (True, bool),  # Confluent's name
    "consumer.offset.sync.enable": (True, bool),  # Confluent's names
    "consumer.offset.sync.ms": (30_000, int),
    "topic.config.sync.ms": (60_000, int),
    "metadata.max.age.ms": (5_000, int),  # how often the source's topics and leaders are looked up
    "fetch.max.wait.ms": (500, int),
    "fetch.max.bytes": (52_428_800, int),
    # 8 MiB, not the consumer's 1 MiB: one round per source leader at a time, and at 1 MiB a link of four
    # partitions lagged ~10 s at 20 MB/s here; at 8 MiB under 0.25 s (bench/link_bench.py, bench/RESULTS.md).
    "max.partition.fetch.bytes": (8_388_608, int),
    "throttle.bytes.per.second": (-1, int),  # the link's fetches on each broker (-1: unlimited)
    "replication.factor": (-1, int),  # mirror topics' replicas (-1: the destination's default)
    "acl.sync.enable": (False, bool),  # Confluent's names: the source's topic ACLs copied (roost.broker.link.acls)
    "acl.sync.ms": (60_000, int),
    "paused": (False, bool),  # roost link pause/resume: nothing fetched or synced, mirrors stay read-only
}


class LinkSettingsError(ValueError):
    """A setting that cannot be used; the message names it (never a secret's value)."""


def _parse(name: str, raw: Any) -> Any:
    kind = DEFAULTS[name][1]
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.lower() in ("true", "false"):
            return raw.lower() == "true"
        raise LinkSettingsError(f"setting '{name}' expects true or false")
    if kind is int:
        try:
            value = int(raw)
        except (TypeError, ValueError):
            raise LinkSettingsError(f"setting '{name}' expects an integer, got {raw!r}") from None
        if value < -1 or (value < 1 and name.endswith((".ms", ".bytes")) and name != "fetch.max.wait.ms"):
            raise LinkSettingsError(f"setting '{name}' = {value} is out of range")
        return value
    if not isinstance(raw, str):
        raise LinkSettingsError(f"setting '{name}' expects a string")
    return raw


@dataclass(frozen=True)
class LinkSettings:
    name: str
    values: Mapping[str, Any]
    topics: NameFilter = field(compare=False)
    groups: NameFilter = field(compare=False)
    config_exclude: NameFilter = field(compare=False)

    def __repr__(self) -> str:  # never a secret
        shown = {k: ("(hidden)" if k in SECRETS and v else v) for k, v in self.values.items()}
        return f"LinkSettings({self.name!r}, {shown})"

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @classmethod
    def parse(cls, name: str, raw: Mapping[str, Any]) -> LinkSettings:
        if not LINK_NAME.match(name):
            raise LinkSettingsError(f"link name {name!r}: use letters, digits, '.', '_' and '-' (at most 249)")
        unknown = sorted(set(raw) - set(DEFAULTS))
        if unknown:
            raise LinkSettingsError(f"unknown link setting(s): {', '.join(unknown)}")
        values = {key: default for key, (default, _) in DEFAULTS.items()}
        for key, value in raw.items():
            values[key] = _parse(key, value)
        if not values["bootstrap.servers"]:
            raise LinkSettingsError("setting 'bootstrap.servers' is required: the source cluster's brokers")
        for address in values["bootstrap.servers"].split(","):
            host, sep, port = address.strip().rpartition(":")
            if not sep or not host or not port.isdigit():
                raise LinkSettingsError(f"setting 'bootstrap.servers': {address.strip()!r} is not host:port")
        protocol = values["security.protocol"] = values["security.protocol"].upper()
        if protocol not in PROTOCOLS:
            raise LinkSettingsError(f"setting 'security.protocol' must be one of {', '.join(PROTOCOLS)}")
        mechanism = values["sasl.mechanism"] = values["sasl.mechanism"].upper()
        if mechanism not in MECHANISMS:
            raise LinkSettingsError(f"setting 'sasl.mechanism' must be one of {', '.join(MECHANISMS)}")
        if protocol.startswith("SASL") and not (values["sasl.username"] and values["sasl.password"]):
            raise LinkSettingsError(f"security.protocol {protocol} needs 'sasl.username' and 'sasl.password'")
        try:
            topics = topic_filter(values["topics"], values["topics.exclude"])
            groups = group_filter(values["groups"], values["groups.exclude"])
            exclude = config_exclusions(values["config.properties.exclude"])
        except FilterError as error:
            raise LinkSettingsError(str(error)) from None
        return cls(name, values, topics, groups, exclude)

    # ZooKeeper ----------------------------------------------------------------------------------
    def encode(self) -> bytes:
        given = {k: v for k, v in self.values.items() if v != DEFAULTS[k][0]}
        return json.dumps({"version": 1, "config": given}, sort_keys=True).encode()

    @classmethod
    def decode(cls, name: str, data: bytes) -> LinkSettings:
        try:
            document = json.loads(data.decode())
            raw = document["config"]
            assert isinstance(raw, dict)
        except (ValueError, KeyError, AssertionError, UnicodeDecodeError):
            raise LinkSettingsError(f"{LINKS_PATH}/{name} is not a link's settings") from None
        return cls.parse(name, raw)

    # the source -------------------------------------------------------------------------------
    def bootstrap(self) -> list[tuple[str, int]]:
        out = []
        for address in self.values["bootstrap.servers"].split(","):
            host, _, port = address.strip().rpartition(":")
            out.append((host.strip("[]"), int(port)))
        return out

    def mirror_name(self, source_topic: str) -> str:
        return f"{self.values['cluster.link.prefix']}{source_topic}"

    def source_name(self, mirror_topic: str) -> str | None:
        prefix = self.values["cluster.link.prefix"]
        return mirror_topic[len(prefix):] if mirror_topic.startswith(prefix) else None

    def security(self) -> PeerSecurity:
        """How the link's client reaches the source (TLS, SASL), secrets resolved here."""
        values = self.values
        protocol = values["security.protocol"]
        tls = None
        if protocol in ("SSL", "SASL_SSL"):
            try:
                tls = ssl.create_default_context(cafile=values["ssl.ca.location"] or None)
                if values["ssl.certificate.location"]:
                    key_password = resolve_secret(values["ssl.key.password"]) or None
                    tls.load_cert_chain(values["ssl.certificate.location"], values["ssl.key.location"] or None,
                                        key_password)
            except (OSError, ssl.SSLError, ValueError) as error:
                raise LinkSettingsError(f"link {self.name}: TLS settings: {error}") from None
            tls.check_hostname = values["ssl.endpoint.identification.algorithm"] == "https"
        check_hostname = values["ssl.endpoint.identification.algorithm"] == "https"
        if not protocol.startswith("SASL"):
            return PeerSecurity(tls, check_hostname)
        try:
            password = resolve_secret(values["sasl.password"])
        except ValueError as error:
            raise LinkSettingsError(f"link {self.name}: sasl.password: {error}") from None
        return PeerSecurity(tls, check_hostname, values["sasl.mechanism"], values["sasl.username"], password)


def link_path(name: str) -> str:
    return f"{LINKS_PATH}/{name}"
