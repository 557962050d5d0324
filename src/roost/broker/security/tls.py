"""TLS for a listener: the server's SSLContext from Kafka's ssl.* settings (PEM or PKCS#12 key
and trust stores, ssl.client.auth), the client context a broker uses to reach other brokers, and
the principal a client certificate proves.

PKCS#12 stores are read with `cryptography` and handed to `ssl` as PEM (a key store through a
private temporary file, since `ssl` loads a certificate chain only from a file).
"""

from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path
from typing import Any

from roost.broker.security.principal_mapping import MappingRule, map_subject, parse_rules
from roost.config import BrokerConfig, ConfigError
from roost.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal

CLIENT_AUTH_MODES = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class ListenerTls:
    """A listener's TLS: its server context and how it names clients by their certificates."""

    def __init__(self, config: BrokerConfig, listener: str) -> None:
        self.listener = listener
        self.context = build_context(config, listener, server_side=True)
        self.handshake_timeout_s = int(config.for_listener(listener, "ssl.handshake.timeout.ms")) / 1000
        try:
            self.rules: list[MappingRule] = parse_rules(str(config.for_listener(listener, "ssl.principal.mapping.rules")))
        except ValueError as error:
            raise ConfigError(f"listener {listener}: {error}") from None

    def principal(self, ssl_object: Any) -> KafkaPrincipal | None:
        """User:<mapped subject> of the client's verified certificate, ANONYMOUS without one, None
        when no mapping rule matches the subject (the client is refused)."""
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if not der:
            return ANONYMOUS
        from cryptography import x509
        subject = x509.load_der_x509_certificate(der).subject.rfc4514_string()
        name = map_subject(self.rules, subject)
        return KafkaPrincipal(USER_TYPE, name) if name else None


def build_context(config: BrokerConfig, listener: str, server_side: bool) -> ssl.SSLContext:
    """An SSLContext from `listener`'s ssl.* settings: TLS 1.2/1.3 only. A server context holds the
    listener's key store and asks for client certificates as ssl.client.auth says; a client
    context (a broker reaching another) trusts the trust store and shows the key store if set."""
    setting = lambda name: config.for_listener(listener, name)  # noqa: E731
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server_side else ssl.PROTOCOL_TLS_CLIENT)
    versions = sorted(TLS_VERSIONS[v.strip()] for v in str(setting("ssl.enabled.protocols")).split(",") if v.strip())
    if not versions:
        raise ConfigError(f"listener {listener}: 'ssl.enabled.protocols' names no TLS version")
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    if setting("ssl.cipher.suites"):
        try:
            context.set_ciphers(str(setting("ssl.cipher.suites")))
        except ssl.SSLError as error:
            raise ConfigError(f"listener {listener}: 'ssl.cipher.suites': {error}") from None
    keystore = str(setting("ssl.keystore.location"))
    if keystore:
        _load_keystore(context, listener, keystore, str(setting("ssl.keystore.type")),
                       str(setting("ssl.keystore.password")), str(setting("ssl.key.password")))
    elif server_side:
        raise ConfigError(f"listener {listener}: TLS needs 'ssl.keystore.location'")
    truststore = str(setting("ssl.truststore.location"))
    if truststore:
        _load_truststore(context, listener, truststore, str(setting("ssl.truststore.type")),
                         str(setting("ssl.truststore.password")))
    if server_side:
        mode = str(setting("ssl.client.auth"))
        if mode != "none" and not truststore:
            raise ConfigError(f"listener {listener}: 'ssl.client.auth' = {mode} needs 'ssl.truststore.location'")
        context.verify_mode = CLIENT_AUTH_MODES[mode]
    else:
        context.check_hostname = setting("ssl.endpoint.identification.algorithm") == "https"
        if not truststore:
            context.load_default_certs()
    return context


def _load_keystore(context: ssl.SSLContext, listener: str, location: str, kind: str, store_password: str,
                   key_password: str) -> None:
    try:
        if kind == "PEM":
            context.load_cert_chain(location, location, key_password or None)
            return
        from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, pkcs12
        key, cert, chain = pkcs12.load_key_and_certificates(Path(location).read_bytes(),
                                                            store_password.encode() or None)
        if key is None or cert is None:
            raise ConfigError(f"listener {listener}: key store {location} holds no private key and certificate")
        pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()) + cert.public_bytes(Encoding.PEM)
        pem += b"".join(c.public_bytes(Encoding.PEM) for c in chain or ())
        with tempfile.TemporaryDirectory() as private:  # mode 0700: the key never sits readable by others
            path = os.path.join(private, "keystore.pem")
            with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as handle:
                handle.write(pem)
            context.load_cert_chain(path)
    except (OSError, ssl.SSLError, ValueError) as error:
        raise ConfigError(f"listener {listener}: cannot load key store {location} ({kind}): {error}") from None


def _load_truststore(context: ssl.SSLContext, listener: str, location: str, kind: str, password: str) -> None:
    try:
        if kind == "PEM":
            context.load_verify_locations(cafile=location)
            return
        from cryptography.hazmat.primitives.serialization import Encoding, pkcs12
        _, cert, chain = pkcs12.load_key_and_certificates(Path(location).read_bytes(), password.encode() or None)
        certs = [c for c in [cert, *(chain or ())] if c is not None]
        if not certs:
            raise ConfigError(f"listener {listener}: trust store {location} holds no certificate")
        context.load_verify_locations(cadata="".join(c.public_bytes(Encoding.PEM).decode() for c in certs))
    except (OSError, ssl.SSLError, ValueError) as error:
        raise ConfigError(f"listener {listener}: cannot load trust store {location} ({kind}): {error}") from None
