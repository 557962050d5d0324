"""Who is calling, and what they may do to which subject: pure decisions, no I/O.

Authentication, as confluent-kafka's SchemaRegistryClient sends it:
- `Authorization: Basic base64(user:password)` (`basic.auth.user.info`, or user:password in the
  URL), checked against `schema.registry.basic.auth.users` (`user:password,...`; each password
  may be a `${env:NAME}` / `${file:/path}` reference, resolved once at start-up);
- `Authorization: Bearer <token>` (`bearer.auth.credentials.source=STATIC_TOKEN`), checked against
  `schema.registry.bearer.tokens` (`principal:token,...`, tokens by reference likewise).
Passwords and tokens are compared in constant time and never logged or echoed.

Authorization, per subject, in Roost's ACL words: rules `User:NAME:OPERATION:PATTERN` separated by
`;` in `schema.registry.subject.acls`, OPERATION READ or WRITE (WRITE includes READ), PATTERN a
subject name, or a prefix ending in `*`, or `*`. With no rule at all every authenticated caller
may do everything; once rules exist a caller needs one (or to be a super user). Global endpoints
(config, mode, the list of schemas) need a rule on `*` to write.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from dataclasses import dataclass, field

from roost.secret_ref import resolve_secret

READ, WRITE = "READ", "WRITE"
GLOBAL = "*"


@dataclass(frozen=True)
class Rule:
    principal: str
    operation: str
    pattern: str

    def covers(self, principal: str, operation: str, subject: str) -> bool:
        if self.principal not in (principal, "User:*"):
            return False
        if operation == WRITE and self.operation != WRITE:
            return False
        if self.pattern == "*":
            return True
        if self.pattern.endswith("*"):
            return subject.startswith(self.pattern[:-1])
        return subject == self.pattern


@dataclass
class Security:
    users: dict[str, str] = field(default_factory=dict)  # user -> password
    tokens: dict[str, str] = field(default_factory=dict)  # token -> principal
    rules: list[Rule] = field(default_factory=list)
    super_users: set[str] = field(default_factory=set)

    @property
    def enabled(self) -> bool:
        return bool(self.users or self.tokens)

    def authenticate(self, authorization: str | None) -> str | None:
        """The caller's principal (`User:NAME`), or None when the header proves nobody."""
        if not self.enabled:
            return "User:ANONYMOUS"
        if not authorization:
            return None
        scheme, _, credentials = authorization.partition(" ")
        if scheme.lower() == "basic":
            try:
                user, _, password = base64.b64decode(credentials.strip(), validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError, ValueError):
                return None
            expected = self.users.get(user)
            if expected is not None and hmac.compare_digest(expected.encode(), password.encode()):
                return f"User:{user}"
            return None
        if scheme.lower() == "bearer":
            token = credentials.strip().encode()
            for known, principal in self.tokens.items():
                if hmac.compare_digest(known.encode(), token):
                    return principal
        return None

    def allowed(self, principal: str, operation: str, subject: str) -> bool:
        if not self.rules or principal in self.super_users:
            return True
        return any(rule.covers(principal, operation, subject) for rule in self.rules)


def _pairs(text: str, what: str) -> list[tuple[str, str]]:
    pairs = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, secret = item.partition(":")
        if not sep or not name:
            raise ValueError(f"{what}: an entry is not NAME:SECRET")
        pairs.append((name, resolve_secret(secret)))
    return pairs


def parse_rules(text: str) -> list[Rule]:
    rules = []
    for item in filter(None, (part.strip() for part in text.split(";"))):
        parts = item.split(":")
        if len(parts) != 4 or parts[0] != "User" or parts[2].upper() not in (READ, WRITE):
            raise ValueError(f"schema.registry.subject.acls: {item!r} is not User:NAME:READ|WRITE:PATTERN")
        rules.append(Rule(f"User:{parts[1]}", parts[2].upper(), parts[3]))
    return rules


def security_of(users: str, tokens: str, acls: str, super_users: str) -> Security:
    """From the settings' strings; ValueError (naming the setting, never a secret) when malformed."""
    token_pairs = _pairs(tokens, "schema.registry.bearer.tokens")
    return Security(
        users=dict(_pairs(users, "schema.registry.basic.auth.users")),
        tokens={token: (p if p.startswith("User:") else f"User:{p}") for p, token in token_pairs},
        rules=parse_rules(acls),
        super_users={u.strip() for u in super_users.split(";") if u.strip()},
    )
