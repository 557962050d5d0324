"""The table of implemented APIs: keys, names, version ranges, and their compiled codecs.

Codecs are compiled on first use of an (api, version) and cached; compiling is deterministic, so
a race between two threads only compiles twice.

The codecs are generated source (`codegen.generate_struct`). A `CodecTable` takes any compiler
of the same signature: the tests hold the generated codecs against a closure codec written apart
(tests/wire_kafka/closure_codec.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Final

from roost.wire.kafka.codegen import generate_struct
from roost.wire.kafka.exceptions import KafkaCodecError, UnknownApiError, UnsupportedVersionError
from roost.wire.kafka.schema import Message
from roost.wire.kafka.schemas import API_MESSAGES, EMBEDDED_STRUCTS
from roost.wire.kafka.struct_codec import StructCodec


class ApiKey(IntEnum):
    """The API keys this codec implements, by Kafka's names (org.apache.kafka.common.protocol.ApiKeys)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    ALTER_PARTITION = 56
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


@dataclass(frozen=True, slots=True)
class Api:
    key: int
    name: str  # Kafka's name without the Request/Response suffix, e.g. "Produce"
    request: Message
    response: Message

    def is_flexible(self, version: int) -> bool:
        return version in self.request.flexible


def _build_table() -> dict[int, Api]:
    table: dict[int, Api] = {}
    for request, response in API_MESSAGES:
        assert request.api_key is not None and request.api_key == response.api_key, request.name
        assert request.kind == "request" and response.kind == "response", request.name
        assert (request.versions.low, request.versions.high) == \
            (response.versions.low, response.versions.high), f"{request.name}: version ranges differ"
        assert repr(request.flexible) == repr(response.flexible), f"{request.name}: flexible differs"
        assert request.name.endswith("Request") and response.name == request.name[:-7] + "Response"
        assert request.api_key not in table, f"api key {request.api_key} twice"
        table[request.api_key] = Api(request.api_key, request.name[:-7], request, response)
    assert set(table) == {int(key) for key in ApiKey}, "ApiKey and the schemas disagree"
    return table


APIS: Final = _build_table()
API_NAMES: Final[dict[int, str]] = {key: api.name for key, api in APIS.items()}
SUPPORTED_VERSIONS: Final[dict[int, tuple[int, int]]] = {
    key: (api.request.versions.low, api.request.versions.high) for key, api in APIS.items()
}

def lookup_api(api_key: int, api_version: int) -> Api:
    """The API, or UnknownApiError / UnsupportedVersionError."""
    api = APIS.get(api_key)
    if api is None:
        raise UnknownApiError(api_key)
    if api_version not in api.request.versions:
        raise UnsupportedVersionError(api_key, api_version)
    return api


StructCompiler = Callable[[str, tuple[Any, ...], int, bool], StructCodec]


class CodecTable:
    """The body codecs of every message and embedded struct, made by one compiler, cached."""

    def __init__(self, name: str, compile_struct: StructCompiler) -> None:
        self.name = name
        self.compile_struct = compile_struct
        self._codecs: dict[tuple[int, int, bool], tuple[StructCodec, bool]] = {}
        self._struct_codecs: dict[tuple[str, int], StructCodec] = {}

    def __repr__(self) -> str:
        return f"CodecTable({self.name!r})"

    def message_codec(self, api_key: int, api_version: int, is_request: bool) -> tuple[StructCodec, bool]:
        """The compiled body codec of a request (or response) and whether that version is flexible."""
        cache_key = (api_key, api_version, is_request)
        found = self._codecs.get(cache_key)
        if found is None:
            api = lookup_api(api_key, api_version)
            message = api.request if is_request else api.response
            flexible = api.is_flexible(api_version)
            found = (self.compile_struct(message.name, message.fields, api_version, flexible), flexible)
            self._codecs[cache_key] = found
        return found

    def prepare(self, versions: Mapping[int, tuple[int, int]]) -> int:
        """Compiles both directions of every (api, version) in the inclusive ranges now, so that no
        request pays for it (a generated codec takes a few milliseconds); the number compiled."""
        count = 0
        for api_key, (low, high) in versions.items():
            for version in range(low, high + 1):
                for is_request in (True, False):
                    self.message_codec(api_key, version, is_request)
                    count += 1
        return count

    def struct_codec(self, name: str, version: int) -> StructCodec:
        """The compiled codec of an embedded struct such as "ConsumerProtocolSubscription"."""
        found = self._struct_codecs.get((name, version))
        if found is None:
            message = EMBEDDED_STRUCTS.get(name)
            if message is None:
                raise KafkaCodecError(f"unknown struct {name!r}; known: {sorted(EMBEDDED_STRUCTS)}")
            if version not in message.versions:
                raise KafkaCodecError(f"{name} version {version} is not supported ({message.versions!r})")
            found = self.compile_struct(name, message.fields, version, version in message.flexible)
            self._struct_codecs[(name, version)] = found
        return found


GENERATED_CODECS: Final = CodecTable("generated", generate_struct)
DEFAULT_CODECS: Final = GENERATED_CODECS

# The default table's lookups, as functions (their callers predate the tables).
message_codec: Final = DEFAULT_CODECS.message_codec
struct_codec: Final = DEFAULT_CODECS.struct_codec
prepare_codecs: Final = DEFAULT_CODECS.prepare
