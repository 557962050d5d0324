"""SCRAM credentials as Kafka keeps them in ZooKeeper, and the per-user credential store.

`/config/users/<sanitized name>` holds `{"version":1,"config":{"SCRAM-SHA-256":
"salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=4096"}}` (Kafka's
ScramCredentialUtils); a change also writes `/config/changes/config_change_<seq>` naming
`users/<sanitized name>`. This module is the format and the in-memory store; the ZooKeeper reads
are in `scram_zk`. Keys are derived with `scramp` (RFC 5802), not by hand.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import urllib.parse
from dataclasses import dataclass

from scramp import ScramMechanism

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MIN_ITERATIONS = 4096  # Kafka refuses to store or use fewer
MAX_ITERATIONS = 16384
MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}  # AlterUserScramCredentials' int8
MECHANISM_BY_CODE = {code: name for name, code in MECHANISM_CODES.items()}
HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def encode(self) -> str:
        b64 = lambda raw: base64.b64encode(raw).decode()  # noqa: E731
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},server_key={b64(self.server_key)},"
                f"iterations={self.iterations}")

    @classmethod
    def decode(cls, text: str) -> ScramCredential:
        """ValueError when `text` is not Kafka's credential string."""
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            return cls(base64.b64decode(fields["salt"], validate=True),
                       base64.b64decode(fields["stored_key"], validate=True),
                       base64.b64decode(fields["server_key"], validate=True), int(fields["iterations"]))
        except (KeyError, ValueError) as error:
            raise ValueError(f"not a SCRAM credential ({error})") from None


def make_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    salt_, stored, server, count = ScramMechanism(mechanism).make_auth_info(password, iterations, salt)
    return ScramCredential(salt_, stored, server, count)


def credential_from_salted_password(mechanism: str, salt: bytes, salted_password: bytes,
                                    iterations: int) -> ScramCredential:
    """What AlterUserScramCredentials sends (the client salts the password): the stored and
    server keys derived from it (RFC 5802 section 3). scramp 1.5 derives them only from the
    password itself, so these two HMACs and a hash are done here."""
    digest = HASHES[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    server_key = hmac.new(salted_password, b"Server Key", digest).digest()
    return ScramCredential(salt, digest(client_key).digest(), server_key, iterations)


def sanitize(user: str) -> str:
    """Kafka's Sanitizer: URL-encoding, with `*` as %2A and space as %20."""
    return urllib.parse.quote(user, safe="").replace("*", "%2A")


def desanitize(node: str) -> str:
    return urllib.parse.unquote(node)


def encode_user_node(credentials: dict[str, ScramCredential], other: dict[str, str] | None = None) -> bytes:
    config = dict(other or {})
    config.update({mech: cred.encode() for mech, cred in sorted(credentials.items())})
    return json.dumps({"version": 1, "config": config}).encode()


def decode_user_node(data: bytes | None) -> tuple[dict[str, ScramCredential], dict[str, str]]:
    """(SCRAM credentials by mechanism, the user's other configs (quotas)) of a /config/users node;
    ValueError for a node that is not Kafka's JSON."""
    value = json.loads(data or b"{}")
    config = value.get("config") if isinstance(value, dict) else None
    if not isinstance(config, dict):
        raise ValueError("no config object")
    credentials = {mech: ScramCredential.decode(str(config[mech])) for mech in SCRAM_MECHANISMS if mech in config}
    other = {k: str(v) for k, v in config.items() if k not in SCRAM_MECHANISMS}
    return credentials, other


class ScramCredentialStore:
    """Every user's SCRAM credentials as this broker knows them (filled from ZooKeeper)."""

    def __init__(self) -> None:
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def set_user(self, user: str, credentials: dict[str, ScramCredential]) -> None:
        if credentials:
            self._users[user] = dict(credentials)
        else:
            self._users.pop(user, None)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        return {user: dict(creds) for user, creds in self._users.items()}
