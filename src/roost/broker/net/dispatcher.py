"""Routes each decoded request to its handler and encodes the handler's answer.

The routing table (ApiKey -> Handler) is given by the broker, which builds each handler with only
the services it needs; this module knows no handler. A handler returns a response body (dict),
NO_RESPONSE, or an awaitable of either. What the broker advertises in ApiVersions is decided here,
and only versions the codec implements and the tests exercise are advertised.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from roost.broker.net.request import NO_RESPONSE, Deferred, Handler, Request
from roost.broker.net.stats import BrokerStats, perf_ms
from roost.principal import ANONYMOUS, KafkaPrincipal
from roost.wire.kafka import (
    API_NAMES,
    SUPPORTED_VERSIONS,
    ApiKey,
    KafkaCodecError,
    RequestHeader,
    decode_request,
    decode_request_body,
    encode_api_versions_fallback,
    encode_response,
)
from roost.wire.kafka.errors import ErrorCode

if TYPE_CHECKING:
    from roost.broker.quotas.throttle import Throttler

log = logging.getLogger("roost.broker.net.dispatcher")

# (api key) -> (lowest, highest) version advertised. Produce 0-2 are advertised but answered
# UNSUPPORTED_VERSION: librdkafka compresses with gzip/snappy/lz4 only when Produce v0 is listed.
# Flexible versions (compact encodings, tagged fields) are advertised where the clients use them
# and the test suite runs them: librdkafka 2.x and kafka-python pick the highest, aiokafka and
# Debian's kcat (librdkafka 2.0) the older non-flexible ones, so both kinds are exercised.
ADVERTISED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 11),             # 9+ flexible, 11 (Kafka 3.8) as 10: TRANSACTION_ABORTABLE never sent
    ApiKey.FETCH: (4, 17),               # 12+ flexible, 13+ by topic id, 17 (3.9) a tagged directory id
    ApiKey.LIST_OFFSETS: (1, 7),         # 6+ flexible, 7 max timestamp
    ApiKey.METADATA: (1, 12),            # 9+ flexible, 10+ topic ids
    ApiKey.OFFSET_COMMIT: (2, 9),        # 8+ flexible, 9 member epochs of KIP-848 groups
    ApiKey.OFFSET_FETCH: (1, 9),         # 6+ flexible, 8+ batches of groups, 9 member epochs
    ApiKey.FIND_COORDINATOR: (0, 6),     # 3+ flexible, 4+ batched keys, 6 share-partition keys (type 2)
    ApiKey.JOIN_GROUP: (0, 7),           # 4+ MEMBER_ID_REQUIRED, 5+ static members, 6+ flexible
    ApiKey.HEARTBEAT: (0, 4),            # 4 flexible
    ApiKey.LEAVE_GROUP: (0, 4),          # 3+ batch, 4 flexible
    ApiKey.SYNC_GROUP: (0, 5),           # 4+ flexible
    ApiKey.DESCRIBE_GROUPS: (0, 5),      # 5 flexible
    ApiKey.LIST_GROUPS: (0, 5),          # 3+ flexible, 4 states filter, 5 types filter
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),  # KIP-848, flexible; 1 regex subscriptions
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 0),   # KIP-848, flexible
    # KIP-932 share groups, all flexible; v0 was Kafka 4.0's early access (gone from 4.1).
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.SHARE_FETCH: (1, 2),              # 2 record-limit acquire mode (KIP-1206) and renew acks
    ApiKey.SHARE_ACKNOWLEDGE: (1, 2),        # 2 renew acks, AcquisitionLockTimeoutMs
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),  # 1 Lag (KIP-1226)
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.API_VERSIONS: (0, 3),         # 3 flexible
    ApiKey.CREATE_TOPICS: (2, 5),        # 5 flexible
    ApiKey.DELETE_TOPICS: (1, 5),        # 4+ flexible
    ApiKey.DELETE_RECORDS: (0, 2),       # 2 flexible
    ApiKey.INIT_PRODUCER_ID: (0, 4),     # 2+ flexible, 3 epoch bump, 4 PRODUCER_FENCED
    # Transactions, the classic protocol only: AddPartitionsToTxn v4+ (the brokers' verify form),
    # EndTxn v5 and TxnOffsetCommit v5 (KIP-890 part 2) are not advertised.
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),   # 2+ PRODUCER_FENCED, 3 flexible
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),      # 2+ PRODUCER_FENCED, 3 flexible
    ApiKey.END_TXN: (0, 3),                 # 2+ PRODUCER_FENCED, 3 flexible
    ApiKey.WRITE_TXN_MARKERS: (1, 1),       # flexible (Kafka 4 dropped v0)
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),       # 2+ leader epoch, 3 flexible, member checks
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),   # flexible
    ApiKey.LIST_TRANSACTIONS: (0, 1),       # flexible, 1 duration filter
    ApiKey.DESCRIBE_CONFIGS: (1, 3),
    ApiKey.ALTER_CONFIGS: (0, 2),        # 2 flexible
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),  # 1 flexible
    ApiKey.ALTER_REPLICA_LOG_DIRS: (1, 2),  # 2 flexible (0: Kafka 4 dropped it)
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),    # 2+ flexible, 3 top error, 4 total/usable bytes
    ApiKey.CREATE_PARTITIONS: (0, 2),    # 2 flexible
    ApiKey.DELETE_GROUPS: (0, 2),        # 2 flexible
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),            # flexible
    ApiKey.LIST_CONFIG_RESOURCES: (0, 1),         # flexible; 1 (Kafka 4.1) by resource type
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),     # flexible
    ApiKey.DESCRIBE_ACLS: (0, 3),        # 1+ pattern types, 2+ flexible, 3 USER resources
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
    ApiKey.SASL_HANDSHAKE: (0, 1),       # 1: tokens inside SaslAuthenticate
    ApiKey.SASL_AUTHENTICATE: (0, 2),    # 2 flexible
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),  # flexible
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),    # 1 flexible
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),       # 1 flexible
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),     # flexible
}


def advertised_versions() -> dict[ApiKey, tuple[int, int]]:
    """The client APIs' advertised ranges, checked against what the codec implements."""
    return clip_to_codec(ADVERTISED_VERSIONS)


def clip_to_codec(wanted: Mapping[ApiKey, tuple[int, int]]) -> dict[ApiKey, tuple[int, int]]:
    """`wanted`, each range asserted to lie within what the codec implements."""
    ranges = {}
    for key, (low, high) in wanted.items():
        codec_low, codec_high = SUPPORTED_VERSIONS[key]
        assert codec_low <= low and high <= codec_high, f"api {key} advertised beyond the codec"
        ranges[key] = (low, high)
    return ranges


def describe_counts(counts: Counter[tuple[int, int]]) -> str:
    return ", ".join(f"{API_NAMES[key]} v{version}: {n}" for (key, version), n in sorted(counts.items()))


def request_metric_name(key: int, body: dict[str, Any]) -> str:
    """Kafka's `request` label of RequestMetrics: the API's name, with Fetch split into
    FetchConsumer and FetchFollower (a replica id >= 0: another broker)."""
    if key == ApiKey.FETCH:
        state = body.get("replica_state")
        replica = state.get("replica_id", -1) if state else body.get("replica_id", -1)
        return "FetchFollower" if replica >= 0 else "FetchConsumer"
    return API_NAMES[key]


class Dispatcher:
    def __init__(self, routes: Mapping[ApiKey, Handler], advertised: Mapping[ApiKey, tuple[int, int]],
                 stats: BrokerStats | None = None, throttler: Throttler | None = None) -> None:
        missing = set(advertised) - set(routes)
        assert not missing, f"advertised APIs without a handler: {sorted(missing)}"
        self._routes = dict(routes)
        self._advertised = dict(advertised)
        # (api key, version) -> requests served: which versions clients really use.
        self.request_counts: Counter[tuple[int, int]] = Counter()
        self._stats = stats  # None: metrics are off and requests are not timed
        self.throttler = throttler  # client quotas (roost.broker.quotas); None: none apply

    def route(self, header: RequestHeader, frame: bytearray, client_host: str, header_end: int = -1,
              principal: KafkaPrincipal = ANONYMOUS, listener: str = "",
              mute: Callable[[int], None] | None = None, connection: object = None) -> Any:
        """Decode and handle one request (its header already read; `header_end` where it ended,
        so that it is not parsed twice, or -1). `mute(ms)`: stop reading the connection for that
        long (a client over its quota)."""
        key, version = header.api_key, header.api_version
        advertised = self._advertised.get(key)  # type: ignore[call-overload]
        if advertised is None:
            raise KafkaCodecError(f"unknown api key {key}")
        if not advertised[0] <= version <= advertised[1]:
            if key == ApiKey.API_VERSIONS:
                # KIP-511: answer in v0 shape so any client can read the supported range.
                return [encode_api_versions_fallback(
                    header.correlation_id, ErrorCode.UNSUPPORTED_VERSION,
                    [(k, low, high) for k, (low, high) in sorted(self._advertised.items())])]
            raise KafkaCodecError(f"api key {key} version {version} is not supported")
        if header_end >= 0:
            body = decode_request_body(header, frame, header_end)
        else:
            header, body = decode_request(frame)
        self.request_counts[(key, version)] += 1
        if self._stats is None:
            return self._handle(key, header, body, client_host, principal, listener, len(frame), mute, connection)
        started = perf_ms()
        times = self._stats.timer(request_metric_name(key, body))
        answer = self._handle(key, header, body, client_host, principal, listener, len(frame), mute, connection)
        if type(answer) is Deferred:
            answer.future.add_done_callback(lambda _: times.record(perf_ms() - started))
        else:
            times.record(perf_ms() - started)
        return answer

    def _handle(self, key: int, header: RequestHeader, body: dict[str, Any], client_host: str,
                principal: KafkaPrincipal, listener: str = "", frame_size: int = 0,
                mute: Callable[[int], None] | None = None, connection: object = None) -> Any:
        throttler = self.throttler
        if throttler is not None and throttler.applies(key, body, principal):
            started = time.perf_counter()
            allowance = throttler.fetch_allowance(key, header.client_id, principal)
            result = self._routes[key](Request(header, body, client_host, principal, listener, connection,  # type: ignore[index]
                                               allowance))
            if type(result) is not dict and result is not NO_RESPONSE and not isinstance(result, asyncio.Future):
                result = asyncio.ensure_future(result)
            result = throttler.settle(key, header.api_version, header.client_id, principal, frame_size,
                                      time.perf_counter() - started, result, mute)
        else:
            result = self._routes[key](Request(header, body, client_host, principal, listener, connection))  # type: ignore[index]
        if type(result) is dict:
            return encode_response(header, result)
        if result is NO_RESPONSE:
            return NO_RESPONSE
        if isinstance(result, asyncio.Future):
            return Deferred(header, result)
        assert inspect.isawaitable(result), f"handler for api {key} returned {type(result)}"
        return Deferred(header, asyncio.ensure_future(result))
