"""Who the console is to the keeper: Kafka's names for a ZooKeeper client's identity (the ones a
broker's settings use, docs/keeper-security.md) turned into kazoo's arguments.

    zookeeper.digest = "user:password"                 -> addauth digest
    zookeeper.sasl.client.username / .password         -> SASL DIGEST-MD5
    zookeeper.ssl.client.enable = true                 -> TLS, with
    zookeeper.ssl.truststore.location                  -> the CAs (else the system's)
    zookeeper.ssl.keystore.location                    -> a client certificate (x509 identity)
    zookeeper.ssl.keystore.password                    -> its key's password
    zookeeper.ssl.endpoint.identification.enable       -> check the server's name (default true)

Values arrive with secret references already resolved. Any other `zookeeper.` name is refused,
so a misspelt setting cannot silently leave the console unauthenticated.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any

KNOWN = ("zookeeper.digest", "zookeeper.sasl.client.username", "zookeeper.sasl.client.password",
         "zookeeper.ssl.client.enable", "zookeeper.ssl.truststore.location", "zookeeper.ssl.keystore.location",
         "zookeeper.ssl.keystore.password", "zookeeper.ssl.endpoint.identification.enable",
         "zookeeper.ssl.keystore.type", "zookeeper.ssl.truststore.type")
TRUE = ("true", "1", "yes")


def kazoo_identity(settings: Mapping[str, str]) -> dict[str, Any]:
    """kazoo.client.KazooClient keyword arguments; ValueError names a bad setting (never a value)."""
    unknown = sorted(set(settings) - set(KNOWN))
    if unknown:
        raise ValueError(f"unknown keeper setting(s) {', '.join(unknown)} (known: {', '.join(KNOWN)})")
    for name in ("zookeeper.ssl.keystore.type", "zookeeper.ssl.truststore.type"):
        if settings.get(name, "PEM").upper() != "PEM":
            raise ValueError(f"setting '{name}': only PEM files are read")
    options: dict[str, Any] = {}
    digest = settings.get("zookeeper.digest")
    if digest:
        if ":" not in digest:
            raise ValueError("setting 'zookeeper.digest' must be user:password")
        options["auth_data"] = [("digest", digest)]
    user = settings.get("zookeeper.sasl.client.username")
    if user:
        if "zookeeper.sasl.client.password" not in settings:
            raise ValueError("setting 'zookeeper.sasl.client.username' needs 'zookeeper.sasl.client.password'")
        options["sasl_options"] = {"mechanism": "DIGEST-MD5", "username": user,
                                   "password": settings["zookeeper.sasl.client.password"]}
    if settings.get("zookeeper.ssl.client.enable", "false").lower() in TRUE:
        keystore = settings.get("zookeeper.ssl.keystore.location")
        options.update(use_ssl=True, verify_certs=True, ca=settings.get("zookeeper.ssl.truststore.location"),
                       check_hostname=settings.get("zookeeper.ssl.endpoint.identification.enable",
                                                   "true").lower() in TRUE)
        if keystore:  # one PEM file with the key and the certificate chain, as the brokers' key stores
            options.update(certfile=keystore, keyfile=keystore,
                           keyfile_password=settings.get("zookeeper.ssl.keystore.password") or None)
    return options


def probe_context(identity: dict[str, Any]) -> ssl.SSLContext | None:
    """The TLS context for the four-letter-word probe (members' roles) that matches kazoo's
    connection, or None when the keeper is reached in plain text."""
    if not identity.get("use_ssl"):
        return None
    context = ssl.create_default_context(cafile=identity.get("ca"))
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = bool(identity.get("check_hostname"))
    if identity.get("certfile"):
        context.load_cert_chain(identity["certfile"], identity.get("keyfile"), identity.get("keyfile_password"))
    return context
