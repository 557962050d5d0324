"""The broker's ZooKeeper client: sessions, reconnects, watches and multi against any ZooKeeper
ensemble (Roost's keepers or Apache ZooKeeper 3.8), on the broker's asyncio event loop.

(Decision and measurements: filled in after the bench.)
"""

from roost.zkclient.client import OPEN_ACL_UNSAFE, SessionEvent, SessionListener, SessionState, ZkClient
from roost.zkclient.connect_string import ConnectString, parse_connect_string
from roost.zkclient.errors import (
    ApiError,
    BadArgumentsError,
    BadVersionError,
    ClientClosedError,
    ConnectionLossError,
    NoAuthError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RequestTooLargeError,
    RolledBackError,
    RuntimeInconsistencyError,
    SessionExpiredError,
    SessionMovedError,
    ZkError,
    error_for,
)
from roost.zkclient.ops import Check, Create, Delete, Op, OpOutcome, SetData
from roost.zkclient.watches import WatchedEvent, Watcher

__all__ = [
    "OPEN_ACL_UNSAFE",
    "ApiError",
    "BadArgumentsError",
    "BadVersionError",
    "Check",
    "ClientClosedError",
    "ConnectString",
    "ConnectionLossError",
    "Create",
    "Delete",
    "NoAuthError",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "Op",
    "OpOutcome",
    "RequestTooLargeError",
    "RolledBackError",
    "RuntimeInconsistencyError",
    "SessionEvent",
    "SessionExpiredError",
    "SessionListener",
    "SessionMovedError",
    "SessionState",
    "SetData",
    "WatchedEvent",
    "Watcher",
    "ZkClient",
    "ZkError",
    "error_for",
    "parse_connect_string",
]
