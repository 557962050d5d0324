"""Routes each decoded request to its handler and encodes the handler's answer.

A handler returns a response body (dict), NO_RESPONSE, or an awaitable of either. What the broker
advertises in ApiVersions is decided here, and only versions the codec implements and the tests
exercise are advertised.
"""

from __future__ import annotations

import inspect
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from roost.broker.connection import NO_RESPONSE, KafkaConnection
from roost.broker.handlers import admin, fetch, groups, metadata, offsets, produce
from roost.wire.kafka import (
    API_NAMES,
    SUPPORTED_VERSIONS,
    KafkaCodecError,
    RequestHeader,
    decode_request,
    encode_api_versions_fallback,
    encode_response,
)
from roost.wire.kafka.errors import ErrorCode

if TYPE_CHECKING:
    from roost.broker.broker import Broker

log = logging.getLogger("roost.broker.dispatcher")

API_VERSIONS_KEY = 18

# (api key) -> (lowest, highest) version advertised. Produce 0-2 are advertised but answered
# UNSUPPORTED_VERSION: librdkafka compresses with gzip/snappy/lz4 only when Produce v0 is listed.
# Flexible versions (compact encodings, tagged fields) are advertised where the clients use them
# and the test suite runs them: librdkafka 2.x and kafka-python pick the highest, aiokafka and
# Debian's kcat (librdkafka 2.0) the older non-flexible ones, so both kinds are exercised.
ADVERTISED_VERSIONS: dict[int, tuple[int, int]] = {
    0: (0, 10),    # Produce (9+ flexible)
    1: (4, 16),    # Fetch (12+ flexible, 13+ by topic id)
    2: (1, 7),     # ListOffsets (6+ flexible, 7 max timestamp)
    3: (1, 12),    # Metadata (9+ flexible, 10+ topic ids)
    8: (2, 8),     # OffsetCommit (8 flexible)
    9: (1, 7),     # OffsetFetch (6+ flexible)
    10: (0, 3),    # FindCoordinator (3 flexible)
    11: (0, 7),    # JoinGroup (4+ MEMBER_ID_REQUIRED, 5+ static members, 6+ flexible)
    12: (0, 4),    # Heartbeat (4 flexible)
    13: (0, 4),    # LeaveGroup (3+ batch, 4 flexible)
    14: (0, 5),    # SyncGroup (4+ flexible)
    15: (0, 5),    # DescribeGroups (5 flexible)
    16: (0, 4),    # ListGroups (3+ flexible, 4 states filter)
    18: (0, 3),    # ApiVersions (3 flexible)
    19: (2, 5),    # CreateTopics (5 flexible)
    20: (1, 5),    # DeleteTopics (4+ flexible)
    21: (0, 2),    # DeleteRecords (2 flexible)
    22: (0, 3),    # InitProducerId (2+ flexible, 3 epoch bump)
    32: (1, 3),    # DescribeConfigs
    37: (0, 2),    # CreatePartitions (2 flexible)
}

Handler = Callable[..., Any]

HANDLERS: dict[int, Handler] = {
    0: produce.handle_produce,
    1: fetch.handle_fetch,
    2: offsets.handle_list_offsets,
    3: metadata.handle_metadata,
    8: groups.handle_offset_commit,
    9: groups.handle_offset_fetch,
    10: groups.handle_find_coordinator,
    11: groups.handle_join_group,
    12: groups.handle_heartbeat,
    13: groups.handle_leave_group,
    14: groups.handle_sync_group,
    15: groups.handle_describe_groups,
    16: groups.handle_list_groups,
    18: metadata.handle_api_versions,
    19: admin.handle_create_topics,
    20: admin.handle_delete_topics,
    21: offsets.handle_delete_records,
    22: admin.handle_init_producer_id,
    32: admin.handle_describe_configs,
    37: admin.handle_create_partitions,
}
# Handlers that also want the client's address (group membership records it).
WANTS_CLIENT_HOST = frozenset({11})


def advertised_versions() -> dict[int, tuple[int, int]]:
    """The advertised ranges, clipped to what the codec implements."""
    ranges = {}
    for key, (low, high) in ADVERTISED_VERSIONS.items():
        codec_low, codec_high = SUPPORTED_VERSIONS[key]
        assert codec_low <= low and high <= codec_high, f"api {key} advertised beyond the codec"
        ranges[key] = (low, high)
    return ranges


def describe_counts(counts: Counter[tuple[int, int]]) -> str:
    return ", ".join(f"{API_NAMES[key]} v{version}: {n}" for (key, version), n in sorted(counts.items()))


class Dispatcher:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._advertised = broker.advertised_versions
        # (api key, version) -> requests served: which versions clients really use.
        self.request_counts: Counter[tuple[int, int]] = Counter()

    def dispatch(self, connection: KafkaConnection, header: RequestHeader, frame: bytearray) -> Any:
        key, version = header.api_key, header.api_version
        advertised = self._advertised.get(key)
        if advertised is None:
            raise KafkaCodecError(f"unknown api key {key}")
        if not advertised[0] <= version <= advertised[1]:
            if key == API_VERSIONS_KEY:
                # KIP-511: answer in v0 shape so any client can read the supported range.
                return [encode_api_versions_fallback(
                    header.correlation_id, ErrorCode.UNSUPPORTED_VERSION,
                    [(k, low, high) for k, (low, high) in sorted(self._advertised.items())])]
            raise KafkaCodecError(f"api key {key} version {version} is not supported")
        header, body = decode_request(frame)
        self.request_counts[(key, version)] += 1
        handler = HANDLERS[key]
        if key in WANTS_CLIENT_HOST:
            result = handler(self._broker, header, body, connection.peer.rsplit(":", 1)[0])
        else:
            result = handler(self._broker, header, body)
        if result is NO_RESPONSE:
            return NO_RESPONSE
        if isinstance(result, dict):
            return encode_response(header, result)
        assert inspect.isawaitable(result), f"handler for api {key} returned {type(result)}"
        return _encode_later(header, result)


async def _encode_later(header: RequestHeader, pending: Awaitable[Any]) -> Any:
    result = await pending
    if result is NO_RESPONSE:
        return NO_RESPONSE
    return encode_response(header, result)
