"""What a connection needs to know of the listener it came in on: its name (Metadata answers with
that listener's endpoints), its TLS context and how it names certificate holders, and the SASL
mechanisms it offers with where their users come from."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass

from roost.broker.security.jaas import parse_jaas
from roost.broker.security.sasl import SaslSettings
from roost.broker.security.scram import ScramCredentialStore
from roost.broker.security.tls import ListenerTls, build_context
from roost.config import BrokerConfig, ConfigError
from roost.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal


@dataclass(frozen=True)
class PeerSecurity:
    """How this broker reaches the others: the inter-broker listener's protocol, as Kafka's
    inter-broker client does (TLS with the broker's trust store and, for mutual TLS, its own key
    store; SASL with sasl.mechanism.inter.broker.protocol and the JAAS username/password)."""

    tls: ssl.SSLContext | None = None
    check_hostname: bool = True
    mechanism: str | None = None
    username: str = ""
    password: str = ""

    def __repr__(self) -> str:  # never the password
        return f"PeerSecurity(tls={self.tls is not None}, mechanism={self.mechanism!r}, username={self.username!r})"

    @property
    def principal(self) -> KafkaPrincipal:
        """Who this broker is to the others: User:<username> after a SASL login; ANONYMOUS
        otherwise (a certificate-only identity is not worked out here)."""
        return KafkaPrincipal(USER_TYPE, self.username) if self.mechanism is not None else ANONYMOUS


@dataclass
class ListenerSecurity:
    name: str
    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    tls: ListenerTls | None = None
    sasl: SaslSettings | None = None
    failed_auth_delay_s: float = 0.1
    max_sasl_token_bytes: int = 524_288


PLAINTEXT_LISTENER = ListenerSecurity("PLAINTEXT", "PLAINTEXT")


def build_listener_security(config: BrokerConfig, name: str, protocol: str,
                            scram: ScramCredentialStore) -> ListenerSecurity:
    """The listener `name`'s security from the settings; ConfigError for a setting that cannot
    work (a missing key store, a JAAS text that does not parse)."""
    tls = ListenerTls(config, name) if protocol in ("SSL", "SASL_SSL") else None
    sasl = None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanisms = [m.strip() for m in str(config.for_listener(name, "sasl.enabled.mechanisms")).split(",")
                      if m.strip()]
        if not mechanisms:
            raise ConfigError(f"listener {name} uses {protocol} but 'sasl.enabled.mechanisms' is empty")
        try:
            plain = parse_jaas(config.jaas_config(name, "PLAIN"))
        except ValueError as error:
            raise ConfigError(f"listener {name}: PLAIN sasl.jaas.config: {error}") from None
        users = plain.plain_users()
        plain_users: Callable[[], dict[str, str]] = lambda: users  # noqa: E731
        sasl = SaslSettings(mechanisms, plain_users, scram.get,
                            int(config.for_listener(name, "connections.max.reauth.ms")))
    return ListenerSecurity(name, protocol, tls, sasl,
                            int(config["connection.failed.authentication.delay.ms"]) / 1000,
                            int(config["sasl.server.max.receive.size"]))


def peer_security(config: BrokerConfig, listener: str, protocol: str) -> PeerSecurity:
    """How this broker logs in to the others on the inter-broker `listener`: Kafka's
    sasl.mechanism.inter.broker.protocol with the username/password of that listener's JAAS
    login for the mechanism, and TLS with its trust store (and key store, for mutual TLS)."""
    tls = build_context(config, listener, server_side=False) if protocol in ("SSL", "SASL_SSL") else None
    check_hostname = config.for_listener(listener, "ssl.endpoint.identification.algorithm") == "https"
    if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return PeerSecurity(tls, check_hostname)
    mechanism = str(config["sasl.mechanism.inter.broker.protocol"])
    try:
        login = parse_jaas(config.jaas_config(listener, mechanism))
    except ValueError as error:
        raise ConfigError(f"listener {listener}: {mechanism} sasl.jaas.config: {error}") from None
    if not login.username or login.password is None:
        raise ConfigError(f"the inter-broker listener {listener} uses {protocol}: give the broker's own login as "
                          f"username=\"...\" password=\"...\" in 'listener.name.{listener.lower()}."
                          f"{mechanism.lower()}.sasl.jaas.config'")
    return PeerSecurity(tls, check_hostname, mechanism, login.username, login.password)
