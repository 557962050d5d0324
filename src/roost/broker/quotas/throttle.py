"""Where client quotas meet requests: the dispatcher's one hook (Kafka's KafkaApis + the quota
managers' throttle callbacks).

For each request from a client (not another broker, not a follower's fetch, not the cluster's
own APIs), as Kafka does:
- Produce: the request's size is recorded against `producer_byte_rate`;
- Fetch (and any other API whose response carries records, such as ShareFetch): the response's
  record bytes against `consumer_byte_rate`, when the response is ready;
- every request: the time its handler took against `request_percentage`;
the response's throttle_time_ms is the largest of those throttle times (KIP-219: answered at once
with the throttle time, not delayed), and the connection is muted for that long (it reads no
further request), so a client that ignores the throttle time is held back all the same.

`Throttler.settle(...)` is the whole interface for the dispatcher; a handler with a byte count of
its own to charge can call `ClientQuotas.fetch.record(...)` directly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Final

from roost.broker.quotas.core import ClientQuotas
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


def record_bytes(body: Any) -> int:
    """The bytes of every `records` field in a response body (Kafka charges a fetch's size)."""
    total = 0
    stack = [body]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "records" and item is not None:
                    total += sum(len(part) for part in item) if isinstance(item, list) else len(item)
                elif isinstance(item, (dict, list)):
                    stack.append(item)
        elif isinstance(value, list):
            stack.extend(item for item in value if isinstance(item, (dict, list)))
    return total


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
                total = max(total, self.quotas.fetch.record(user, client, record_bytes(body), self._clock_ms()))
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
