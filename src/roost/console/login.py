"""The console's login, without I/O: checking a user and password, and the sessions a login opens.

A browser logs in with the form at /login and then carries a session cookie (an unguessable
token, HttpOnly, SameSite=Strict, Secure over HTTPS); a script may send HTTP basic auth on every
request instead. The password is compared in constant time (user and password both, always), so
a guessed user is not told from a guessed password by the answer or its timing; the web layer
delays every refusal by FAILED_LOGIN_DELAY_S.

Sessions live in memory only (a restarted console asks again); at most MAX_SESSIONS are kept,
the one closest to expiry dropped first, so logging in in a loop cannot grow the console.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from collections.abc import Callable

from roost.console.settings import Login

COOKIE = "roost_console_session"
MAX_SESSIONS = 1000
FAILED_LOGIN_DELAY_S = 0.5
MAX_CREDENTIAL_BYTES = 1024  # of a user name or a password: longer ones are refused unread


class LoginGate:
    def __init__(self, login: Login, clock: Callable[[], float]) -> None:
        self.login = login
        self.clock = clock
        self._sessions: dict[str, float] = {}  # token -> when it expires (clock time)

    def password_ok(self, username: str, password: str) -> bool:
        user_ok = hmac.compare_digest(username.encode()[:MAX_CREDENTIAL_BYTES], self.login.username.encode())
        password_ok = hmac.compare_digest(password.encode()[:MAX_CREDENTIAL_BYTES], self.login.password.encode())
        return user_ok and password_ok and len(password.encode()) <= MAX_CREDENTIAL_BYTES

    def basic_ok(self, authorization: str | None) -> bool:
        """Whether an `Authorization: Basic ...` header names the user and its password."""
        if not authorization:
            return False
        scheme, _, encoded = authorization.partition(" ")
        if scheme.lower() != "basic" or len(encoded) > 4 * MAX_CREDENTIAL_BYTES:
            return False
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return False
        username, sep, password = decoded.partition(":")
        return bool(sep) and self.password_ok(username, password)

    def open_session(self) -> str:
        now = self.clock()
        self._drop_expired(now)
        while len(self._sessions) >= MAX_SESSIONS:
            del self._sessions[min(self._sessions, key=self._sessions.__getitem__)]
        token = secrets.token_urlsafe(32)
        self._sessions[token] = now + self.login.session_s
        return token

    def session_ok(self, token: str | None) -> bool:
        if not token:
            return False
        expires = self._sessions.get(token)
        if expires is None:
            return False
        if expires <= self.clock():
            del self._sessions[token]
            return False
        return True

    def close_session(self, token: str | None) -> None:
        if token:
            self._sessions.pop(token, None)

    def _drop_expired(self, now: float) -> None:
        for token in [t for t, expires in self._sessions.items() if expires <= now]:
            del self._sessions[token]

    @property
    def sessions(self) -> int:
        return len(self._sessions)


def safe_next(target: str | None) -> str:
    """Where to go after logging in: a path of this console only (never another site's URL)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target
