"""Sans-IO ZooKeeper wire protocol (jute encoding): handshake, requests, replies, watch events."""

from roost.wire.zk.connection import (
    ClientConnection,
    ConnectReceived,
    FourLetterWord,
    ReplyEvent,
    RequestReceived,
    ServerConnection,
    UnknownRequest,
    WatchEvent,
    encode_connect_response,
    encode_reply,
    encode_request,
    encode_watch_event,
)
from roost.wire.zk.constants import (
    DEFAULT_MAX_BUFFER,
    AddWatchMode,
    CreateMode,
    Err,
    EventType,
    KeeperState,
    OpCode,
    Perms,
    WatcherType,
)
from roost.wire.zk.errors import ZkCodecError

__all__ = [
    "DEFAULT_MAX_BUFFER",
    "AddWatchMode",
    "ClientConnection",
    "ConnectReceived",
    "CreateMode",
    "Err",
    "EventType",
    "FourLetterWord",
    "KeeperState",
    "OpCode",
    "Perms",
    "ReplyEvent",
    "RequestReceived",
    "ServerConnection",
    "UnknownRequest",
    "WatchEvent",
    "WatcherType",
    "ZkCodecError",
    "encode_connect_response",
    "encode_reply",
    "encode_request",
    "encode_watch_event",
]
