"""The driver's questions about the cluster (which partitions exist, their earliest and latest
offsets) on Roost's own client, and the retry rule that both clients' driver calls follow.

Driver calls are retried for DRIVER_RETRY_SECONDS: long enough to ride out a broker restart (or,
with a cluster, a leader election) without failing the query.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

from roost.spark.fetch_client import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, ClusterClient, Retriable
from roost.spark.offsets import TopicPartition
from roost.spark.options import Subscription

log = logging.getLogger("roost.spark")

DRIVER_RETRY_SECONDS = 90.0

T = TypeVar("T")


class ClusterQueries(Protocol):
    """What the readers ask on the driver; answered through librdkafka or Roost's own client."""

    def partitions(self, subscription: Subscription) -> list[TopicPartition]: ...

    def watermarks(self, tps: Iterable[TopicPartition]) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]: ...

    def close(self) -> None: ...


def retry(what: str, action: Callable[[], T], retriable: type[Exception] | tuple[type[Exception], ...] = Retriable,
          seconds: float = DRIVER_RETRY_SECONDS) -> T:
    """Run `action` until it stops raising `retriable`, for at most `seconds`."""
    deadline = time.monotonic() + seconds
    delay = 0.1
    while True:
        try:
            return action()
        except retriable as error:
            if time.monotonic() + delay > deadline:
                raise RuntimeError(f"roost: {what} failed for {seconds:.0f} s: {error}") from error
            log.warning("roost: %s failed (%s); retrying", what, error)
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


class RoostClusterView:
    """ClusterQueries on Roost's own client: one Metadata request, one ListOffsets per leader."""

    def __init__(self, settings: dict[str, str]) -> None:
        self._settings = dict(settings)
        self._client: ClusterClient | None = None

    def _connected(self) -> ClusterClient:
        if self._client is None:
            self._client = ClusterClient(self._settings["bootstrap.servers"],
                                         self._settings.get("client.id", "roost-spark"))
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def partitions(self, subscription: Subscription) -> list[TopicPartition]:
        topics = retry("listing topics", lambda: self._connected().topics(subscription.matches))
        return sorted(TopicPartition(name, index) for name, indexes in topics.items() for index in indexes)

    def watermarks(self, tps: Iterable[TopicPartition]) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """(earliest, latest) offset of each partition: log start offset and high watermark."""
        wanted = list(tps)
        if not wanted:
            return {}, {}
        what = f"reading the offsets of {', '.join(map(str, wanted))}"
        earliest = retry(what, lambda: self._connected().list_offsets(wanted, EARLIEST_TIMESTAMP))
        latest = retry(what, lambda: self._connected().list_offsets(wanted, LATEST_TIMESTAMP))
        for tp in wanted:
            assert 0 <= earliest[tp] <= latest[tp], (tp, earliest[tp], latest[tp])
        return earliest, latest
