"""The broker's ZooKeeper identity and its znodes' ACLs, from the broker's settings.

Kafka (ZooKeeper mode) authenticates its ZooKeeper client with SASL (a JAAS `Client` section) or
a TLS client certificate, and with `zookeeper.set.acl=true` creates every znode with
`ZkData.defaultAcls`: the creator all rights (`auth`, expanded by the server to the session's
ids) and everyone else read, except the sensitive paths (SCRAM credentials, broker configs,
delegation tokens), which only the creator may read, and the old consumers' `/consumers`, which
stays open. Roost does the same, with the identity from `zookeeper.sasl.client.*`,
`zookeeper.digest` or `zookeeper.ssl.*` (see docs/keeper-security.md).
"""

from __future__ import annotations

import ssl
from typing import Any

from roost.config import BrokerConfig
from roost.secret_ref import resolve_secret
from roost.wire.zk.constants import Perms
from roost.wire.zk.records import ACL
from roost.zkclient import OPEN_ACL_UNSAFE, SaslCredentials

CREATOR_ALL_ACL = (ACL(Perms.ALL, "auth", ""),)
READ_ACL_UNSAFE = (ACL(Perms.READ, "world", "anyone"),)
# ZkData.SensitiveRootPaths: readable by the brokers only.
SENSITIVE_ROOTS = ("/config/users", "/config/brokers", "/delegation_token/tokens")
CONSUMERS = "/consumers"  # the old consumers write there themselves: left open, as Kafka does


def secure_acls(path: str) -> tuple[ACL, ...]:
    """Kafka's ZkData.defaultAcls(isSecure = true, path), for a path below the chroot."""
    if path == CONSUMERS:
        return OPEN_ACL_UNSAFE
    if any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOTS):
        return CREATOR_ALL_ACL
    return CREATOR_ALL_ACL + READ_ACL_UNSAFE


def zk_client_options(config: BrokerConfig) -> dict[str, Any]:
    """Keyword arguments for the broker's ZkClient: credentials, TLS, and the ACL provider."""
    options: dict[str, Any] = {}
    digest = config["zookeeper.digest"]
    if digest:
        options["auth_data"] = [("digest", resolve_secret(digest).encode("utf-8"))]
    user = config["zookeeper.sasl.client.username"]
    if user:
        options["sasl"] = SaslCredentials(user, resolve_secret(config["zookeeper.sasl.client.password"]))
    if config["zookeeper.ssl.client.enable"]:
        options["ssl_context"] = client_ssl_context(config)
    if config["zookeeper.set.acl"]:
        options["acl_provider"] = secure_acls
    return options


def client_ssl_context(config: BrokerConfig) -> ssl.SSLContext:
    """TLS 1.2+ towards the ensemble: the trust store's CAs (else the system's), and this
    broker's certificate when a key store is given."""
    context = ssl.create_default_context(cafile=config["zookeeper.ssl.truststore.location"] or None)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = bool(config["zookeeper.ssl.endpoint.identification.enable"])
    keystore = config["zookeeper.ssl.keystore.location"]
    if keystore:
        password = config["zookeeper.ssl.keystore.password"]
        context.load_cert_chain(keystore, password=resolve_secret(password) if password else None)
    return context
