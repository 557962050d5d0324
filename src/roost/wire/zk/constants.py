"""ZooKeeper protocol numbers: opcodes, error codes, watch event types, flags, permissions.

Values are ZooKeeper's own (ZooDefs.OpCode, KeeperException.Code, Watcher.Event) so that standard
clients understand them.
"""

from __future__ import annotations

from enum import IntEnum


class OpCode(IntEnum):
    NOTIFICATION = 0
    CREATE = 1
    DELETE = 2
    EXISTS = 3
    GET_DATA = 4
    SET_DATA = 5
    GET_ACL = 6
    SET_ACL = 7
    GET_CHILDREN = 8
    SYNC = 9
    PING = 11
    GET_CHILDREN2 = 12
    CHECK = 13
    MULTI = 14
    CREATE2 = 15
    RECONFIG = 16
    CHECK_WATCHES = 17
    REMOVE_WATCHES = 18
    CREATE_CONTAINER = 19
    DELETE_CONTAINER = 20
    CREATE_TTL = 21
    MULTI_READ = 22
    AUTH = 100
    SET_WATCHES = 101
    SASL = 102
    GET_EPHEMERALS = 103
    GET_ALL_CHILDREN_NUMBER = 104
    SET_WATCHES2 = 105
    ADD_WATCH = 106
    WHO_AM_I = 107
    CREATE_SESSION = -10
    CLOSE_SESSION = -11
    ERROR = -1


class Err(IntEnum):
    OK = 0
    SYSTEM_ERROR = -1
    RUNTIME_INCONSISTENCY = -2
    DATA_INCONSISTENCY = -3
    CONNECTION_LOSS = -4
    MARSHALLING_ERROR = -5
    UNIMPLEMENTED = -6
    OPERATION_TIMEOUT = -7
    BAD_ARGUMENTS = -8
    NEW_CONFIG_NO_QUORUM = -13
    RECONFIG_IN_PROGRESS = -14
    UNKNOWN_SESSION = -12
    API_ERROR = -100
    NO_NODE = -101
    NO_AUTH = -102
    BAD_VERSION = -103
    NO_CHILDREN_FOR_EPHEMERALS = -108
    NODE_EXISTS = -110
    NOT_EMPTY = -111
    SESSION_EXPIRED = -112
    INVALID_CALLBACK = -113
    INVALID_ACL = -114
    AUTH_FAILED = -115
    SESSION_MOVED = -118
    NOT_READ_ONLY = -119
    EPHEMERAL_ON_LOCAL_SESSION = -120
    NO_WATCHER = -121
    REQUEST_TIMEOUT = -122
    RECONFIG_DISABLED = -123
    SESSION_CLOSED_REQUIRE_SASL = -124
    QUOTA_EXCEEDED = -125
    THROTTLED_OP = -127


class EventType(IntEnum):
    NONE = -1
    NODE_CREATED = 1
    NODE_DELETED = 2
    NODE_DATA_CHANGED = 3
    NODE_CHILDREN_CHANGED = 4
    DATA_WATCH_REMOVED = 5
    CHILD_WATCH_REMOVED = 6
    PERSISTENT_WATCH_REMOVED = 7


class KeeperState(IntEnum):
    DISCONNECTED = 0
    SYNC_CONNECTED = 3
    AUTH_FAILED = 4
    CONNECTED_READ_ONLY = 5
    SASL_AUTHENTICATED = 6
    EXPIRED = -112
    CLOSED = 7


class WatcherType(IntEnum):
    """The `type` field of checkWatches/removeWatches."""

    CHILDREN = 1
    DATA = 2
    ANY = 3
    PERSISTENT = 4
    PERSISTENT_RECURSIVE = 5


class AddWatchMode(IntEnum):
    PERSISTENT = 0
    PERSISTENT_RECURSIVE = 1


class CreateMode(IntEnum):
    """The `flags` field of create requests (CreateMode.toFlag)."""

    PERSISTENT = 0
    EPHEMERAL = 1
    PERSISTENT_SEQUENTIAL = 2
    EPHEMERAL_SEQUENTIAL = 3
    CONTAINER = 4
    PERSISTENT_WITH_TTL = 5
    PERSISTENT_SEQUENTIAL_WITH_TTL = 6

    @property
    def is_ephemeral(self) -> bool:
        return self in (CreateMode.EPHEMERAL, CreateMode.EPHEMERAL_SEQUENTIAL)

    @property
    def is_sequential(self) -> bool:
        return self in (
            CreateMode.PERSISTENT_SEQUENTIAL,
            CreateMode.EPHEMERAL_SEQUENTIAL,
            CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL,
        )

    @property
    def is_ttl(self) -> bool:
        return self in (CreateMode.PERSISTENT_WITH_TTL, CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL)


class Perms:
    READ = 1
    WRITE = 2
    CREATE = 4
    DELETE = 8
    ADMIN = 16
    ALL = 31


# Special xids (ClientCnxn): replies with these xids are not matched against pending requests.
WATCH_XID = -1
PING_XID = -2
AUTH_XID = -4
SET_WATCHES_XID = -8

# jute.maxbuffer: ZooKeeper's default is 0xfffff bytes; a frame whose length exceeds it is refused.
DEFAULT_MAX_BUFFER = 0xFFFFF

# The four-letter words a server answers on a fresh client connection (read as the frame length).
FOUR_LETTER_WORDS = frozenset(
    {b"ruok", b"srvr", b"stat", b"mntr", b"envi", b"conf", b"cons", b"crst", b"srst", b"wchs",
     b"wchc", b"wchp", b"dump", b"reqs", b"dirs", b"isro", b"gtmk", b"stmk"}
)

# Ops that change state: they go through the replicated log and each consumes a zxid.
WRITE_OPS = frozenset(
    {OpCode.CREATE, OpCode.CREATE2, OpCode.CREATE_CONTAINER, OpCode.CREATE_TTL, OpCode.DELETE,
     OpCode.SET_DATA, OpCode.SET_ACL, OpCode.CHECK, OpCode.MULTI, OpCode.RECONFIG,
     OpCode.CLOSE_SESSION, OpCode.DELETE_CONTAINER}
)
