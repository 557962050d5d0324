"""Controlled shutdown (Kafka's): before a clustered broker stops, it asks the controller to move
its leaderships away, retrying a bounded number of times, then waits a short while for the
LeaderAndIsr that makes it a follower.

An activity (see `roost.broker.activity.effects`): it yields the ControlledShutdown request to the
controller and its pauses, and does no I/O itself. The broker runs it on its asyncio shell; the
replication simulation runs it on the simulated network and clock.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Protocol

from roost.broker.activity.effects import Activity, Request, Sleep, Unreachable
from roost.broker.metadata.cache import MetadataCache
from roost.clock import Clock
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode

log = logging.getLogger("roost.broker")

CONTROLLED_SHUTDOWN_VERSION = 3
REQUEST_TIMEOUT_MS = 10_000
LEADERSHIPS_GONE_WAIT_MS = 2000  # how long the LeaderAndIsr making this broker a follower may take
LEADERSHIPS_POLL_MS = 10


class Replicas(Protocol):
    """What the activity reads of the replica manager."""

    broker_epoch: int

    def hosted(self) -> Iterable[Any]: ...


def controlled_shutdown(broker_id: int, replicas: Replicas, metadata: MetadataCache, retries: int,
                        backoff_ms: float, clock_ms: Clock, request_timeout_ms: float = REQUEST_TIMEOUT_MS,
                        leaderships_gone_wait_ms: float = LEADERSHIPS_GONE_WAIT_MS) -> Activity:
    if replicas.broker_epoch < 0:
        return
    hosted = list(replicas.hosted())
    if all(p.is_leader and p.isr() <= {broker_id} for p in hosted):
        return  # nothing to hand over and no ISR to leave (a one-broker cluster, say)
    remaining_before: set[tuple[str, int]] | None = None
    for attempt in range(retries + 1):
        controller = metadata.endpoint(metadata.controller_id)
        if controller is not None:
            body = {"broker_id": broker_id, "broker_epoch": replicas.broker_epoch}
            try:
                answer = yield Request(controller.node_id, ApiKey.CONTROLLED_SHUTDOWN, CONTROLLED_SHUTDOWN_VERSION,
                                       body, request_timeout_ms)
            except Unreachable as error:
                log.info("controlled shutdown: controller %d unreachable: %s", controller.node_id, error)
            else:
                remaining = answer.get("remaining_partitions", [])
                if answer["error_code"] == ErrorCode.NONE and not remaining:
                    log.info("controlled shutdown done: this broker leads nothing")
                    yield from _wait_for_leaderships_to_go(replicas, clock_ms, leaderships_gone_wait_ms)
                    return
                log.info("controlled shutdown attempt %d: error %d, %d partitions still led here",
                         attempt + 1, answer["error_code"], len(remaining))
                left = {(r["topic_name"], r["partition_index"]) for r in remaining}
                if answer["error_code"] == ErrorCode.NONE and left == remaining_before:
                    # No progress: those partitions have no other in-sync replica to go to.
                    log.info("controlled shutdown: %d partitions have no other in-sync replica; "
                             "stopping with them", len(left))
                    return
                remaining_before = left
        yield Sleep(backoff_ms)
    log.warning("controlled shutdown did not finish after %d attempts; stopping anyway", retries + 1)


def _wait_for_leaderships_to_go(replicas: Replicas, clock_ms: Clock, wait_ms: float) -> Activity:
    """The controller answered; its LeaderAndIsr telling us to follow may still be on its way."""
    deadline = clock_ms() + wait_ms
    while clock_ms() < deadline and any(p.is_leader and len(p.replicas()) > 1 for p in replicas.hosted()):
        yield Sleep(LEADERSHIPS_POLL_MS)
