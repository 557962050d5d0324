"""SASL DIGEST-MD5 (RFC 2831) as ZooKeeper speaks it, both sides, sans-IO.

ZooKeeper's DIGEST-MD5 uses the service `zookeeper`, the fixed realm and server name
`zk-sasl-md5` (so the digest-uri is `zookeeper/zk-sasl-md5`), qop `auth` and md5-sess; the
server's users come from the JAAS `Server` section's `user_<name>="password"` entries. The
exchange, over opcode-102 packets right after the session handshake:

    client: empty token  ->  server: challenge (realm, nonce, qop, charset, algorithm)
    client: digest-response (username, nonce, cnonce, nc, digest-uri, response)
    server: `rspauth=<hex>` (proves the server knows the password too)  ->  client: done

Written here because no maintained Python package serves DIGEST-MD5 (pure-sasl, which kazoo
uses, is a client only); the formulas are RFC 2831's section 2.1.2.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable

SERVICE = "zookeeper"
REALM = "zk-sasl-md5"
DIGEST_URI = f"{SERVICE}/{REALM}"
MAX_TOKEN = 4096  # a digest-response is a few hundred bytes


class SaslFailure(Exception):
    """The exchange failed; the message says why without any secret."""


def parse_directives(token: bytes) -> dict[str, str]:
    """`key=value,key="quoted \\"value\\""` into a dict (RFC 2831's directive list)."""
    if len(token) > MAX_TOKEN:
        raise SaslFailure(f"token of {len(token)} bytes")
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslFailure("token is not UTF-8") from None
    out: dict[str, str] = {}
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t,":
            i += 1
        if i >= n:
            break
        eq = text.find("=", i)
        if eq < 0:
            raise SaslFailure("malformed directive")
        key = text[i:eq].strip().lower()
        if not key:
            raise SaslFailure("empty directive name")
        i = eq + 1
        if i < n and text[i] == '"':
            i += 1
            value = []
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                value.append(text[i])
                i += 1
            if i >= n:
                raise SaslFailure("unterminated quoted value")
            i += 1
            out[key] = "".join(value)
        else:
            end = text.find(",", i)
            end = n if end < 0 else end
            out[key] = text[i:end].strip()
            i = end
    return out


def _md5_hex(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def response_value(username: str, password: str, realm: str, nonce: str, cnonce: str, nc: str,
                   qop: str, digest_uri: str, a2_prefix: str, authzid: str | None = None) -> str:
    """RFC 2831's response-value: `a2_prefix` "AUTHENTICATE" for the client's response, "" for
    the server's rspauth."""
    key = hashlib.md5(f"{username}:{realm}:{password}".encode()).digest()
    a1 = key + f":{nonce}:{cnonce}".encode() + (f":{authzid}".encode() if authzid else b"")
    a2 = f"{a2_prefix}:{digest_uri}".encode()
    return _md5_hex(f"{_md5_hex(a1)}:{nonce}:{nc}:{cnonce}:{qop}:{_md5_hex(a2)}".encode())


class DigestMd5Server:
    """One server-side exchange. `password_of(user)` gives a user's password or None; `nonce`
    must be fresh and unpredictable (the shell passes random bytes, hex-encoded here)."""

    def __init__(self, password_of: Callable[[str], str | None], nonce: bytes) -> None:
        self._password_of = password_of
        self._nonce = nonce.hex()
        self._step = 0
        self.username: str | None = None  # set once the client proved its password
        self.complete = False

    def challenge(self) -> bytes:
        return (f'realm="{REALM}",nonce="{self._nonce}",qop="auth",charset=utf-8,'
                f'algorithm=md5-sess').encode()

    def step(self, token: bytes) -> bytes:
        """The reply to the client's next token; raises SaslFailure."""
        self._step += 1
        if self._step == 1:
            # The client's first token is empty (DIGEST-MD5 has no initial response).
            return self.challenge()
        if self._step != 2 or self.complete:
            raise SaslFailure("unexpected token after the exchange")
        d = parse_directives(token)
        username = d.get("username", "")
        if d.get("nonce") != self._nonce:
            raise SaslFailure("nonce mismatch")
        if d.get("qop", "auth") != "auth":
            raise SaslFailure(f"qop {d.get('qop')!r} not offered")
        if d.get("nc", "") != "00000001":
            raise SaslFailure("nonce count is not 1")
        if d.get("digest-uri") != DIGEST_URI:
            raise SaslFailure(f"digest-uri {d.get('digest-uri')!r} is not {DIGEST_URI!r}")
        realm = d.get("realm", REALM)
        cnonce = d.get("cnonce", "")
        authzid = d.get("authzid") or None
        if not username or not cnonce or "response" not in d:
            raise SaslFailure("incomplete digest-response")
        if authzid is not None and authzid != username:
            raise SaslFailure("authorization id differs from the user")
        password = self._password_of(username)
        # An unknown user costs the same work as a wrong password, so neither is told apart.
        expected = response_value(username, password if password is not None else "\x00unknown",
                                  realm, self._nonce, cnonce, "00000001", "auth", DIGEST_URI,
                                  "AUTHENTICATE", authzid)
        if not hmac.compare_digest(expected.encode(), d["response"].encode()) or password is None:
            raise SaslFailure("wrong password or unknown user")
        self.username = username
        self.complete = True
        rspauth = response_value(username, password, realm, self._nonce, cnonce, "00000001", "auth",
                                 DIGEST_URI, "", authzid)
        return f"rspauth={rspauth}".encode()


class DigestMd5Client:
    """One client-side exchange (what the broker's ZooKeeper client sends): `step(None)` gives
    the first (empty) token, then `step(server_token)` until `complete`."""

    def __init__(self, username: str, password: str, cnonce: bytes) -> None:
        self._username = username
        self._password = password
        self._cnonce = cnonce.hex()
        self._expected_rspauth: str | None = None
        self.complete = False

    def step(self, challenge: bytes | None) -> bytes | None:
        if challenge is None:
            return b""
        d = parse_directives(challenge)
        if "rspauth" in d:
            if self._expected_rspauth is None or not hmac.compare_digest(
                    d["rspauth"].encode(), self._expected_rspauth.encode()):
                raise SaslFailure("the server's rspauth does not prove it knows the password")
            self.complete = True
            return None
        nonce, realm = d.get("nonce"), d.get("realm", REALM)
        if not nonce:
            raise SaslFailure("challenge without a nonce")
        if "auth" not in [q.strip() for q in d.get("qop", "auth").split(",")]:
            raise SaslFailure("the server offers no qop=auth")
        args = (self._username, self._password, realm, nonce, self._cnonce, "00000001", "auth", DIGEST_URI)
        response = response_value(*args, "AUTHENTICATE")
        self._expected_rspauth = response_value(*args, "")
        return (f'charset=utf-8,username="{_quote(self._username)}",realm="{_quote(realm)}",'
                f'nonce="{_quote(nonce)}",nc=00000001,cnonce="{self._cnonce}",'
                f'digest-uri="{DIGEST_URI}",maxbuf=65536,response={response},qop=auth').encode()


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')
