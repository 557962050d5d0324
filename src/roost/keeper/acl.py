"""ZooKeeper ACLs: the schemes world, auth, digest and ip; fixing up and checking permissions.

Behaviour follows ZooKeeper's PrepRequestProcessor.fixupACL and ZooKeeperServer.checkACL: an ACL
list must be non-empty with well-formed ids; `auth` expands to the requester's authenticated ids;
a permission is granted when any ACL entry with that bit matches one of the requester's ids.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress

from roost.wire.zk.constants import Perms
from roost.wire.zk.records import ACL, Id

OPEN_ACL_UNSAFE = (ACL(Perms.ALL, "world", "anyone"),)
READ_ACL_UNSAFE = (ACL(Perms.READ, "world", "anyone"),)
# ZooKeeper's internal id that passes every check (superDigest, skipACL, zookeeper.superUser).
SUPER_ID = Id("super", "")
# ZooKeeper accepts `sasl` and `x509` ids in ACLs only on a server with those authentication
# providers configured. A keeper decides at apply time, on every member, so the proposing member's
# providers travel with the request: as this pseudo-id among the command's auth ids (never
# matched by an ACL, never shown by whoAmI; entries written without it accept neither scheme).
PROVIDERS_SCHEME = "roost:providers"


def providers_id(schemes: frozenset[str]) -> Id:
    return Id(PROVIDERS_SCHEME, ",".join(sorted(schemes)))


def _providers(auth_ids: tuple[Id, ...]) -> frozenset[str]:
    for ident in auth_ids:
        if ident.scheme == PROVIDERS_SCHEME:
            return frozenset(ident.id.split(","))
    return frozenset()

# Schemes a client may be authenticated with (addAuth digest, SASL, a TLS client certificate);
# `auth` ACL entries expand to these. ip is implicit for every connection.
AUTH_SCHEMES = frozenset({"digest", "sasl", "x509"})


class InvalidACL(ValueError):
    pass


def digest_id(user_password: str) -> str:
    """DigestAuthenticationProvider.generateDigest: "user:" + base64(sha1("user:password")).

    Like ZooKeeper, a credential without a colon is accepted: the whole string is the user.
    """
    user = user_password.split(":", 1)[0]
    sha = hashlib.sha1(user_password.encode("utf-8")).digest()
    return f"{user}:{base64.b64encode(sha).decode('ascii')}"


def authenticate(scheme: str, auth: bytes) -> Id | None:
    """The id an addAuth packet grants, or None if the scheme is unknown or the data invalid."""
    if scheme != "digest":
        return None
    try:
        return Id("digest", digest_id(auth.decode("utf-8")))
    except (UnicodeDecodeError, ValueError):
        return None


def _valid_ip_expr(expr: str) -> bool:
    address, _, bits = expr.partition("/")
    try:
        ip = ipaddress.ip_address(address)
        if bits:
            prefix = int(bits)
            return 0 <= prefix <= ip.max_prefixlen
        return True
    except ValueError:
        return False


def _valid_id(scheme: str, ident: str, providers: frozenset[str]) -> bool:
    if scheme == "digest":
        # Java's id.split(":") drops trailing empty strings and must give exactly two parts.
        parts = ident.split(":")
        while parts and parts[-1] == "":
            parts.pop()
        return len(parts) == 2
    if scheme == "ip":
        return _valid_ip_expr(ident)
    if scheme in ("sasl", "x509") and scheme in providers:
        return bool(ident)
    return False


def fixup_acl(acls: list[ACL] | tuple[ACL, ...], auth_ids: tuple[Id, ...]) -> tuple[ACL, ...]:
    """Validate `acls` and expand `auth` entries to the requester's ids; raise InvalidACL."""
    unique: list[ACL] = []
    for acl in acls:
        if acl not in unique:
            unique.append(acl)
    if not unique:
        raise InvalidACL("empty ACL")
    fixed: list[ACL] = []
    for acl in unique:
        if acl.scheme == "world" and acl.id == "anyone":
            fixed.append(acl)
        elif acl.scheme == "auth":
            expanded = [ACL(acl.perms, ident.scheme, ident.id) for ident in auth_ids
                        if ident.scheme in AUTH_SCHEMES or ident.scheme == "ip"]
            # ZooKeeper treats only authenticated (not merely addressed) ids as valid here.
            expanded = [e for e in expanded if e.scheme != "ip"]
            if not expanded:
                raise InvalidACL("auth scheme without authenticated ids")
            fixed.extend(expanded)
        elif _valid_id(acl.scheme, acl.id, _providers(auth_ids)):
            fixed.append(acl)
        else:
            raise InvalidACL(f"invalid ACL id {acl.scheme}:{acl.id}")
    return tuple(fixed)


def _ip_matches(client: str, expr: str) -> bool:
    address, _, bits = expr.partition("/")
    try:
        client_ip = ipaddress.ip_address(client)
        network = ipaddress.ip_network(f"{address}/{bits}" if bits else address, strict=False)
    except ValueError:
        return False
    return client_ip.version == network.version and client_ip in network


def check_acl(acls: tuple[ACL, ...], perm: int, auth_ids: tuple[Id, ...]) -> bool:
    """True if `auth_ids` hold `perm` (any of its bits) on a node with `acls`."""
    if not acls:
        return True
    for ident in auth_ids:
        if ident.scheme == "super":
            return True
    for acl in acls:
        if not acl.perms & perm:
            continue
        if acl.scheme == "world" and acl.id == "anyone":
            return True
        for ident in auth_ids:
            if ident.scheme != acl.scheme:
                continue
            if acl.scheme == "ip":
                if _ip_matches(ident.id, acl.id):
                    return True
            elif ident.id == acl.id:
                return True
    return False


def redact(acls: tuple[ACL, ...]) -> tuple[ACL, ...]:
    """getACL without ADMIN hides digest hashes (ZooKeeper shows "user:x")."""
    return tuple(
        ACL(acl.perms, acl.scheme, acl.id.split(":", 1)[0] + ":x") if acl.scheme == "digest" else acl
        for acl in acls
    )
