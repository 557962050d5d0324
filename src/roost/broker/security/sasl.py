"""SASL on a Kafka connection, sans I/O: the frame order of Kafka's SaslServerAuthenticator and the
PLAIN and SCRAM-SHA-256/512 servers.

Order: ApiVersions (at most once), then SaslHandshake naming a mechanism; after a v1 handshake
each token comes in a SaslAuthenticate request and gets a SaslAuthenticate answer, after a v0
handshake tokens come raw (4-byte length, bytes) and go back the same way. Anything else before
the login is done closes the connection. A failed login answers SASL_AUTHENTICATION_FAILED with
Kafka's generic message (v1) or nothing (v0), and the connection closes after
`connection.failed.authentication.delay.ms`; an unknown user and a wrong password look the same
(SCRAM answers an unknown user with a made-up salt and fails at the proof, as for a bad password).

`SaslAuthenticator.on_frame` takes one whole frame and says what to do: route it (ApiVersions),
reply, fail, or close; the connection does it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum, auto

from roost.broker.security.scram import HASHES, MIN_ITERATIONS, SCRAM_MECHANISMS, ScramCredential
from roost.principal import USER_TYPE, KafkaPrincipal
from roost.wire.kafka import ApiKey, KafkaCodecError, encode_response, read_request_header
from roost.wire.kafka.errors import ErrorCode

AUTH_FAILED_MESSAGE = "Authentication failed: Invalid username or password"
_DUMMY_SECRET = os.urandom(32)  # made-up salts for unknown users, stable within this process


class AuthenticationFailed(Exception):
    """The client's credentials were refused; str(error) is for the log and never holds a secret."""


class MechanismServer:
    """One login with one mechanism: tokens in, tokens out."""

    complete = False
    user = ""

    def step(self, token: bytes) -> bytes:
        raise NotImplementedError


class PlainServer(MechanismServer):
    """RFC 4616: one token `authzid NUL user NUL password`."""

    def __init__(self, users: Callable[[], dict[str, str]]) -> None:
        self._users = users

    def step(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed("PLAIN token is not authzid\\0user\\0password")
        authzid, user_bytes, password = parts
        try:
            user, authz = user_bytes.decode(), authzid.decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed("PLAIN token is not UTF-8") from None
        if authz and authz != user:
            raise AuthenticationFailed(f"PLAIN authorization id differs from user {user!r}")
        known = self._users().get(user)
        # Compare against something even for an unknown user, so both take the same time.
        expected = (known if known is not None else "\0unknown").encode()
        if not hmac.compare_digest(hashlib.sha256(password).digest(), hashlib.sha256(expected).digest()) \
                or known is None:
            raise AuthenticationFailed(f"PLAIN login of user {user!r} refused (unknown user or wrong password)")
        self.user, self.complete = user, True
        return b""


class ScramServer(MechanismServer):
    """RFC 5802 (SCRAM-SHA-256/512) as Kafka's ScramSaslServer checks it.

    Written here rather than with scramp's server: Kafka accepts a client-final nonce that only
    *ends with* the server's nonce, and librdkafka up to 2.x (Debian's kcat) sends
    client-nonce + server-nonce there; scramp demands equality and would refuse those clients.
    scramp still derives the stored credentials (`scram.make_credential`)."""

    def __init__(self, mechanism: str, credentials: Callable[[str, str], ScramCredential | None]) -> None:
        assert mechanism in SCRAM_MECHANISMS
        self._mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._credentials = credentials
        self._stage = 0
        self._known = False
        self._credential: ScramCredential | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def _lookup(self, user: str) -> ScramCredential:
        found = self._credentials(user, self._mechanism)
        if found is not None and found.iterations >= MIN_ITERATIONS:
            self._known = True
            return found
        # A made-up credential: the exchange goes on and fails at the proof, as for a bad password.
        salt = hmac.new(_DUMMY_SECRET, user.encode(), hashlib.sha256).digest()[:16]
        return ScramCredential(salt, os.urandom(64), os.urandom(64), MIN_ITERATIONS)

    def step(self, token: bytes) -> bytes:
        try:
            text = token.decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed(f"{self._mechanism} message is not UTF-8") from None
        if self._stage == 0:
            self._stage = 1
            return self._client_first(text).encode()
        if self._stage == 1:
            self._stage = 2
            return self._client_final(text).encode()
        raise AuthenticationFailed(f"{self._mechanism}: a message after the exchange ended")

    def _client_first(self, text: str) -> str:
        # gs2-header: "n," [ "a=" authzid ] ","  (only "n": no channel binding, as Kafka)
        if not text.startswith("n,"):
            raise AuthenticationFailed(f"{self._mechanism} client-first does not start with n,")
        authzid_part, sep, bare = text[2:].partition(",")
        if not sep or (authzid_part and not authzid_part.startswith("a=")):
            raise AuthenticationFailed(f"{self._mechanism} client-first has a bad gs2 header")
        self._gs2_header = text[:2 + len(authzid_part) + 1]
        attributes = _attributes(bare)
        user, client_nonce = attributes.get("n"), attributes.get("r")
        if user is None or not client_nonce or not bare.startswith("n="):
            raise AuthenticationFailed(f"{self._mechanism} client-first lacks n= or r=")
        user = user.replace("=2C", ",").replace("=3D", "=")
        authzid = authzid_part[2:].replace("=2C", ",").replace("=3D", "=")
        self.user = user
        if authzid and authzid != user:
            raise AuthenticationFailed(f"{self._mechanism} authorization id differs from user {user!r}")
        if "tokenauth" in attributes:
            raise AuthenticationFailed(f"{self._mechanism} delegation-token login of {user!r} is not supported")
        self._credential = self._lookup(user)
        self._client_first_bare = bare
        self._nonce = client_nonce + base64.b64encode(os.urandom(24)).decode()
        salt = base64.b64encode(self._credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={self._credential.iterations}"
        return self._server_first

    def _client_final(self, text: str) -> str:
        credential = self._credential
        assert credential is not None
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        attributes = _attributes(without_proof)
        if not sep or not proof_b64:
            raise AuthenticationFailed(f"{self._mechanism} client-final of {self.user!r} has no proof")
        if attributes.get("c") != base64.b64encode(self._gs2_header.encode()).decode():
            raise AuthenticationFailed(f"{self._mechanism} client-final of {self.user!r}: channel binding differs")
        if not attributes.get("r", "").endswith(self._nonce):  # Kafka's check (see the class comment)
            raise AuthenticationFailed(f"{self._mechanism} client-final of {self.user!r}: wrong nonce")
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise AuthenticationFailed(f"{self._mechanism} client-final of {self.user!r}: proof is not base64") from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.new(credential.stored_key, auth_message, self._hash).digest()
        if len(proof) != len(signature) or not self._verify(proof, signature, credential.stored_key):
            raise AuthenticationFailed(f"{self._mechanism} login of user {self.user!r} refused "
                                       "(unknown user or wrong password)")
        self.complete = True
        server_signature = hmac.new(credential.server_key, auth_message, self._hash).digest()
        return "v=" + base64.b64encode(server_signature).decode()

    def _verify(self, proof: bytes, signature: bytes, stored_key: bytes) -> bool:
        """The proof holds iff H(proof XOR ClientSignature) is the stored key (RFC 5802 3)."""
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        return hmac.compare_digest(self._hash(client_key).digest(), stored_key) and self._known


def _attributes(message: str) -> dict[str, str]:
    """`k=v,k=v` of a SCRAM message (values may hold '=')."""
    found: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if sep:
            found.setdefault(key, value)
    return found


@dataclass
class SaslSettings:
    """What one SASL listener offers."""

    mechanisms: list[str]
    plain_users: Callable[[], dict[str, str]] = dict
    scram_credentials: Callable[[str, str], ScramCredential | None] = lambda user, mech: None
    reauth_ms: int = 0  # connections.max.reauth.ms (KIP-368): 0, sessions never expire

    def server(self, mechanism: str) -> MechanismServer:
        if mechanism == "PLAIN":
            return PlainServer(self.plain_users)
        return ScramServer(mechanism, self.scram_credentials)


class Action(Enum):
    ROUTE = auto()       # an ApiVersions request: answer it as usual
    REPLY = auto()       # send `reply`, keep going
    DONE = auto()        # send `reply`; the client is `principal` from now on
    FAIL = auto()        # after the failure delay send `reply` (may be empty) and close
    CLOSE = auto()       # close at once (a protocol violation)


@dataclass
class Step:
    action: Action
    reply: list[bytes] = field(default_factory=list)
    reason: str = ""  # for the log: never a secret
    principal: KafkaPrincipal | None = None


class State(Enum):
    INITIAL = auto()
    HANDSHAKE = auto()        # after ApiVersions: only SaslHandshake
    AUTHENTICATE = auto()     # SaslAuthenticate requests (handshake v1)
    RAW_TOKENS = auto()       # raw tokens (handshake v0)
    COMPLETE = auto()
    FAILED = auto()


class SaslAuthenticator:
    def __init__(self, settings: SaslSettings, reauthenticating: bool = False) -> None:
        """`reauthenticating`: a KIP-368 re-login on a connection already authenticated, which
        starts at SaslHandshake (no ApiVersions first)."""
        self.settings = settings
        self.state = State.HANDSHAKE if reauthenticating else State.INITIAL
        self.mechanism = ""
        self._server: MechanismServer | None = None

    @property
    def complete(self) -> bool:
        return self.state is State.COMPLETE

    def on_frame(self, frame: bytearray) -> Step:
        assert self.state not in (State.COMPLETE, State.FAILED), self.state
        if self.state is State.RAW_TOKENS:
            return self._token(bytes(frame), raw=True, header=None)
        try:
            header, _ = read_request_header(frame)
        except KafkaCodecError as error:
            return self._close(f"undecodable request before authentication: {error}")
        key = header.api_key
        if key == ApiKey.API_VERSIONS and self.state is State.INITIAL:
            if header.api_version <= 3:
                self.state = State.HANDSHAKE
            return Step(Action.ROUTE)
        if key == ApiKey.SASL_HANDSHAKE and self.state in (State.INITIAL, State.HANDSHAKE):
            return self._handshake(frame)
        if key == ApiKey.SASL_AUTHENTICATE and self.state is State.AUTHENTICATE:
            return self._authenticate(frame)
        return self._close(f"request api_key={key} v{header.api_version} before SASL authentication "
                           f"(state {self.state.name})")

    def _close(self, reason: str) -> Step:
        self.state = State.FAILED
        return Step(Action.CLOSE, reason=reason)

    def _decode(self, frame: bytearray) -> tuple[object, dict[str, object]] | None:
        from roost.wire.kafka import decode_request
        try:
            return decode_request(frame)
        except KafkaCodecError:
            return None

    def _handshake(self, frame: bytearray) -> Step:
        decoded = self._decode(frame)
        if decoded is None:
            return self._close("undecodable SaslHandshake")
        header, body = decoded
        mechanism = str(body["mechanism"])
        enabled = self.settings.mechanisms
        if mechanism not in enabled:
            self.state = State.FAILED
            reply = encode_response(header, {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM,  # type: ignore[arg-type]
                                             "mechanisms": enabled})
            return Step(Action.FAIL, [bytes(b) for b in reply],
                        reason=f"SASL mechanism {mechanism[:40]!r} is not enabled (enabled: {', '.join(enabled)})")
        self.mechanism = mechanism
        self._server = self.settings.server(mechanism)
        self.state = State.AUTHENTICATE if header.api_version >= 1 else State.RAW_TOKENS  # type: ignore[attr-defined]
        reply = encode_response(header, {"error_code": ErrorCode.NONE, "mechanisms": enabled})  # type: ignore[arg-type]
        return Step(Action.REPLY, [bytes(b) for b in reply])

    def _authenticate(self, frame: bytearray) -> Step:
        decoded = self._decode(frame)
        if decoded is None:
            return self._close("undecodable SaslAuthenticate")
        header, body = decoded
        return self._token(bytes(body["auth_bytes"]), raw=False, header=header)

    def _token(self, token: bytes, raw: bool, header: object) -> Step:
        assert self._server is not None
        try:
            answer = self._server.step(token)
        except AuthenticationFailed as error:
            self.state = State.FAILED
            reply: list[bytes] = []
            if not raw:
                reply = [bytes(b) for b in encode_response(header, {  # type: ignore[arg-type]
                    "error_code": ErrorCode.SASL_AUTHENTICATION_FAILED,
                    "error_message": AUTH_FAILED_MESSAGE, "auth_bytes": b"", "session_lifetime_ms": 0})]
            return Step(Action.FAIL, reply, reason=f"authentication with {self.mechanism} failed: {error}")
        if raw:
            reply = [len(answer).to_bytes(4, "big"), answer]
        else:
            reply = [bytes(b) for b in encode_response(header, {  # type: ignore[arg-type]
                "error_code": ErrorCode.NONE, "error_message": None, "auth_bytes": answer,
                # KIP-368: the client must log in again within this time (0: never).
                "session_lifetime_ms": self.settings.reauth_ms if self._server.complete else 0})]
        if not self._server.complete:
            return Step(Action.REPLY, reply)
        self.state = State.COMPLETE
        return Step(Action.DONE, reply, principal=KafkaPrincipal(USER_TYPE, self._server.user),
                    reason=f"authenticated as User:{self._server.user} with {self.mechanism}")
