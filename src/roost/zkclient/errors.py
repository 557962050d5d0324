"""The client's exceptions: one class per ZooKeeper error code, under one base class.

`ZkError` is the base of everything the client raises about ZooKeeper. A server's error code maps
to its class through `error_for(code)` (`NoNodeError` for -101 and so on, as Java's
KeeperException.Code names them); codes this table does not know still raise a `ZkError` that
carries the code. Errors that the client itself detects have classes of their own:
`ConnectionLossError` (the connection ended before the reply came), `SessionExpiredError`,
`ClientClosedError` and `RequestTooLargeError`.

A failed multi raises the failing operation's class with `op_index`, `op` and `results` set
(`results` holds one error per op: `RolledBackError` before the failing op, the failure itself,
`RuntimeInconsistencyError` after it), so `except BadVersionError` catches a fenced multi as it
catches a fenced set.
"""

from __future__ import annotations

from typing import Any

from roost.wire.zk.constants import Err


class ZkError(Exception):
    """A ZooKeeper operation failed. `code` is the server's error code (Err), or None when the
    client itself detected the failure and no code fits."""

    code: int | None = None

    def __init__(self, message: str = "", *, code: int | None = None) -> None:
        if code is not None:
            self.code = code
        super().__init__(message or self._default_message())
        # Set when this error is a failed multi (see MultiFailure).
        self.op_index: int | None = None
        self.op: Any = None
        self.results: list[Any] | None = None

    def _default_message(self) -> str:
        if self.code is None:
            return type(self).__name__
        try:
            return f"{Err(self.code).name} ({self.code})"
        except ValueError:
            return f"ZooKeeper error {self.code}"


# ----------------------------------------------------------------------- client-side conditions


class ClientClosedError(ZkError):
    """The client was closed; it sends nothing more."""


class RequestTooLargeError(ZkError):
    """The request would exceed the frame limit (jute.maxbuffer); it was not sent."""

    code = Err.BAD_ARGUMENTS


# ------------------------------------------------------------------------- system errors (> -100)


class SystemZkError(ZkError):
    code = Err.SYSTEM_ERROR


class RuntimeInconsistencyError(SystemZkError):
    """In a failed multi: this op was not run because an earlier one failed."""

    code = Err.RUNTIME_INCONSISTENCY


class DataInconsistencyError(SystemZkError):
    code = Err.DATA_INCONSISTENCY


class ConnectionLossError(SystemZkError):
    """The connection ended before the reply came: the request may or may not have been applied."""

    code = Err.CONNECTION_LOSS


class MarshallingError(SystemZkError):
    code = Err.MARSHALLING_ERROR


class UnimplementedError(SystemZkError):
    code = Err.UNIMPLEMENTED


class OperationTimeoutError(SystemZkError):
    code = Err.OPERATION_TIMEOUT


class BadArgumentsError(SystemZkError):
    code = Err.BAD_ARGUMENTS


class UnknownSessionError(SystemZkError):
    code = Err.UNKNOWN_SESSION


class NewConfigNoQuorumError(SystemZkError):
    code = Err.NEW_CONFIG_NO_QUORUM


class ReconfigInProgressError(SystemZkError):
    code = Err.RECONFIG_IN_PROGRESS


# ---------------------------------------------------------------------------- API errors (<= -100)


class ApiError(ZkError):
    """Errors about the request itself (missing node, wrong version, ...): the server is fine."""

    code = Err.API_ERROR


class NoNodeError(ApiError):
    code = Err.NO_NODE


class NoAuthError(ApiError):
    code = Err.NO_AUTH


class BadVersionError(ApiError):
    code = Err.BAD_VERSION


class NoChildrenForEphemeralsError(ApiError):
    code = Err.NO_CHILDREN_FOR_EPHEMERALS


class NodeExistsError(ApiError):
    code = Err.NODE_EXISTS


class NotEmptyError(ApiError):
    code = Err.NOT_EMPTY


class SessionExpiredError(ApiError):
    """The session ended (the server expired it, or the client found no server within the
    session timeout); ephemeral nodes and watches of that session are gone."""

    code = Err.SESSION_EXPIRED


class InvalidCallbackError(ApiError):
    code = Err.INVALID_CALLBACK


class InvalidACLError(ApiError):
    code = Err.INVALID_ACL


class AuthFailedError(ApiError):
    code = Err.AUTH_FAILED


class SessionMovedError(ApiError):
    code = Err.SESSION_MOVED


class NotReadOnlyError(ApiError):
    code = Err.NOT_READ_ONLY


class EphemeralOnLocalSessionError(ApiError):
    code = Err.EPHEMERAL_ON_LOCAL_SESSION


class NoWatcherError(ApiError):
    code = Err.NO_WATCHER


class RequestTimeoutError(ApiError):
    code = Err.REQUEST_TIMEOUT


class ReconfigDisabledError(ApiError):
    code = Err.RECONFIG_DISABLED


class SessionClosedRequireSaslError(ApiError):
    code = Err.SESSION_CLOSED_REQUIRE_SASL


class QuotaExceededError(ApiError):
    code = Err.QUOTA_EXCEEDED


class ThrottledOpError(ApiError):
    code = Err.THROTTLED_OP


class RolledBackError(ZkError):
    """In a failed multi: this op would have succeeded but was rolled back (code 0)."""

    code = Err.OK


_BY_CODE: dict[int, type[ZkError]] = {
    cls.code: cls
    for cls in (
        SystemZkError, RuntimeInconsistencyError, DataInconsistencyError, ConnectionLossError,
        MarshallingError, UnimplementedError, OperationTimeoutError, BadArgumentsError,
        UnknownSessionError, NewConfigNoQuorumError, ReconfigInProgressError, ApiError, NoNodeError,
        NoAuthError, BadVersionError, NoChildrenForEphemeralsError, NodeExistsError, NotEmptyError,
        SessionExpiredError, InvalidCallbackError, InvalidACLError, AuthFailedError,
        SessionMovedError, NotReadOnlyError, EphemeralOnLocalSessionError, NoWatcherError,
        RequestTimeoutError, ReconfigDisabledError, SessionClosedRequireSaslError,
        QuotaExceededError, ThrottledOpError, RolledBackError,
    )
    if cls.code is not None
}


def error_for(code: int, message: str = "") -> ZkError:
    """The exception for a server's error `code` (a plain ZkError carrying the code if unknown)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return ZkError(message, code=code)
    return cls(message)
