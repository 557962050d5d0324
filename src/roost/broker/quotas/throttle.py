"""Where client quotas meet requests: the dispatcher's one hook (Kafka's KafkaApis + the quota
managers' throttle callbacks).

For each request from a client (not another broker, not a follower's fetch, not the cluster's
own APIs), as Kafka does:
- Produce: the request's size is recorded against `producer_byte_rate`;
- Fetch (and ShareFetch): the bytes of records read against `consumer_byte_rate`, charged by the
  handler through the request's `FetchAllowance` (which also caps what it reads, and answers it
  empty while the client is over), as Kafka's KafkaApis charges a fetch itself;
- every request: the time its handler took against `request_percentage`;
the response's throttle_time_ms is the largest of those throttle times (KIP-219: answered at once
with the throttle time, not delayed), and the connection is muted for that long (it reads no
further request), so a client that ignores the throttle time is held back all the same.

`Throttler.fetch_allowance(...)` (before a fetch-like request is handled; the dispatcher puts it
on the `Request`) and `Throttler.settle(...)` (after) are the whole interface for the dispatcher.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Final

from roost.broker.quotas.core import ClientQuotaManager, ClientQuotas
from roost.principal import KafkaPrincipal
from roost.wire.kafka import ApiKey
from roost.wire.kafka.apis import APIS

Mute = Callable[[int], None]

# The cluster's own requests and the login: never throttled.
EXEMPT: Final = frozenset(int(key) for key in (
    ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN,
    ApiKey.ALTER_PARTITION, ApiKey.WRITE_TXN_MARKERS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE,
    ApiKey.API_VERSIONS))
_PRODUCE: Final = int(ApiKey.PRODUCE)
_FETCH: Final = int(ApiKey.FETCH)


def _has_throttle_field(api_key: int, version: int) -> bool:
    return any(f.key == "throttle_time_ms" and version in f.versions for f in APIS[api_key].response.fields)


_THROTTLE_FIELD: Final = {(key, version): _has_throttle_field(key, version)
                          for key, api in APIS.items()
                          for version in range(api.request.versions.low, api.request.versions.high + 1)}


class FetchAllowance:
    """What one consumer fetch (Fetch from a client, or ShareFetch) may read under the client's
    `consumer_byte_rate` quota, and where the handler charges what it read, as Kafka's KafkaApis
    does: a response carries at most the quota's whole window (`max_bytes`), so one 1 MiB fetch
    cannot carry a client far past its rate; a client already over its quota
    (`over_quota_ms` > 0) reads nothing and is answered at once, empty, with that throttle time; a
    Fetch whose read would put the client over is answered empty instead (`charge_unless_over`,
    the read taken back), so what a client receives never runs ahead of its rate. A ShareFetch
    has acquired what it read, so it is sent and charged (`charge`): the next fetch waits."""

    __slots__ = ("_client", "_clock_ms", "_manager", "_user", "max_bytes", "over_quota_ms")

    def __init__(self, manager: ClientQuotaManager, user: str, client: str, clock_ms: Callable[[], int],
                 window: int) -> None:
        self._manager, self._user, self._client, self._clock_ms = manager, user, client, clock_ms
        self.max_bytes = window
        self.over_quota_ms = manager.throttle_now(user, client, clock_ms())

    def cap(self, asked_max_bytes: int) -> int:
        return min(asked_max_bytes, self.max_bytes)

    def charge(self, size: int) -> int:
        """Count `size` bytes sent: the throttle time (0 within the quota)."""
        return self._manager.record(self._user, self._client, size, self._clock_ms())

    def charge_unless_over(self, size: int) -> int:
        """Count `size` bytes unless they would put the client over its quota: 0 when counted (send
        them), else the throttle time (send nothing)."""
        return self._manager.record_unless_over(self._user, self._client, size, self._clock_ms())


def is_follower_fetch(body: dict[str, Any]) -> bool:
    state = body.get("replica_state")
    replica = state.get("replica_id", -1) if state else body.get("replica_id", -1)
    return replica >= 0


class Throttler:
    def __init__(self, quotas: ClientQuotas, exempt: Callable[[KafkaPrincipal], bool],
                 clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.quotas = quotas
        self._exempt = exempt
        self._clock_ms = clock_ms
        # Response keys that carry records, fetch-like: Fetch, and ShareFetch once it exists.
        share_fetch = getattr(ApiKey, "SHARE_FETCH", None)
        self._byte_responses = frozenset({_FETCH} | ({int(share_fetch)} if share_fetch is not None else set()))

    def applies(self, api_key: int, body: dict[str, Any], principal: KafkaPrincipal) -> bool:
        if api_key in EXEMPT or self._exempt(principal):
            return False
        return not (api_key == _FETCH and is_follower_fetch(body))

    def fetch_allowance(self, api_key: int, client_id: str | None, principal: KafkaPrincipal) -> FetchAllowance | None:
        """The allowance of a client's fetch-like request (None: not fetch-like, or no
        `consumer_byte_rate` applies). Called only for requests `applies` to."""
        if api_key not in self._byte_responses:
            return None
        user, client = principal.name, client_id or ""
        window = self.quotas.fetch.max_in_window(user, client)  # None: no consumer_byte_rate applies
        if window is None:
            return None
        return FetchAllowance(self.quotas.fetch, user, client, self._clock_ms, window)

    def settle(self, api_key: int, version: int, client_id: str | None, principal: KafkaPrincipal,
               request_bytes: int, handler_seconds: float, answer: Any, mute: Mute | None) -> Any:
        """Charge the request; `answer` (a body dict, NO_RESPONSE, or a future of either) comes
        back with throttle_time_ms set, and the connection is muted for the throttle time."""
        user, client = principal.name, client_id or ""
        now = self._clock_ms()
        throttle = self.quotas.record_request_time(user, client, handler_seconds, now)
        if api_key == _PRODUCE:
            throttle = max(throttle, self.quotas.produce.record(user, client, request_bytes, now))
        has_field = _THROTTLE_FIELD.get((api_key, version), False)
        charges_bytes = api_key in self._byte_responses

        def finish(body: Any) -> Any:
            total = throttle
            if charges_bytes and isinstance(body, dict):
                # The handler charged what it read (FetchAllowance) and put its throttle here.
                total = max(total, body.get("throttle_time_ms") or 0)
            if total > 0:
                if has_field and isinstance(body, dict):
                    body["throttle_time_ms"] = max(total, body.get("throttle_time_ms") or 0)
                if mute is not None:
                    mute(total)
            return body

        if isinstance(answer, asyncio.Future):
            settled: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

            def done(future: asyncio.Future[Any]) -> None:
                if settled.done():
                    return
                if future.cancelled():
                    settled.cancel()
                elif future.exception() is not None:
                    settled.set_exception(future.exception())  # type: ignore[arg-type]
                else:
                    settled.set_result(finish(future.result()))

            answer.add_done_callback(done)
            settled.add_done_callback(lambda s: answer.cancel() if s.cancelled() else None)
            return settled
        return finish(answer)
