"""The differential's machinery: raw requests to Apache Kafka and to Roost, and the normalising of
their answers (what legitimately differs between two clusters: ids, ports, clocks, throttles)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

from tests.support.kafka_wire import WireClient


class Count:
    """Cases compared against Kafka, over every differential module (printed at the package's end)."""

    cases = 0


CLOSED = "<no answer>"  # the connection closed, or no answer within the timeout

# Fields whose values differ between any two clusters; compared by shape (type) only.
VOLATILE = frozenset({
    "throttle_time_ms", "cluster_id", "controller_id", "node_id", "broker_id", "leader_id", "host",
    "port", "topic_id", "producer_id", "session_id", "member_id", "coordinator_id", "log_append_time_ms",
    "timestamp", "finalized_features_epoch", "cluster_authorized_operations", "log_dir", "usable_bytes",
})
# Free text; a refused record's reason also names the broker's clock (Produce's record_errors).
MESSAGE = frozenset({"error_message", "batch_index_error_message"})


def ask(address: str, api_key: int, version: int, body: dict[str, Any], timeout: float = 15.0) -> Any:
    """The decoded answer to one request on a fresh connection, or CLOSED when the broker closes
    the connection instead of answering, or does not answer within `timeout` seconds."""
    client = WireClient(address, timeout=timeout)
    try:
        return client.request(api_key, version, body)
    except (ConnectionError, OSError):
        return CLOSED
    finally:
        client.close()


def normalise(value: Any, key: str = "") -> Any:
    if key in VOLATILE:
        return f"<{type(value).__name__}>"
    if key in MESSAGE:  # free text: Kafka's words are not Roost's, and "" and null mean the same
        return None
    if isinstance(value, Mapping):
        return {k: normalise(v, k) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [normalise(v, key) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return value


def intersection(kafka: Mapping[int, tuple[int, int]], roost: Mapping[int, tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """Every (api key, version) both sides advertise."""
    for key in sorted(set(kafka) & set(roost)):
        low = max(kafka[key][0], roost[key][0])
        high = min(kafka[key][1], roost[key][1])
        yield from ((key, version) for version in range(low, high + 1))


NOT_READY = frozenset({14, 15})  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE


def ask_settled(address: str, api_key: int, version: int, body: dict[str, Any], attempts: int = 120,
                interval: float = 0.25, timeout: float = 15.0) -> Any:
    """`ask`, again while the top-level answer says a coordinator is still getting ready (a new
    cluster creates its internal topics and fetches producer id blocks on first use): the
    settled answer is what is compared, not which side warmed up first."""
    answer: Any = None
    for _ in range(attempts):
        answer = ask(address, api_key, version, body, timeout)
        if not (isinstance(answer, dict) and answer.get("error_code") in NOT_READY):
            return answer
        time.sleep(interval)
    return answer
