"""The leader's side of the ISR: shrink it when a follower falls behind, expand it when one has
caught up, always through the controller (AlterPartition), never by writing ZooKeeper itself.

Kafka's rules: a follower in the ISR that is behind the leader's log end and has not caught up
for `replica.lag.time.max.ms` is removed (checked every half of that); a follower outside it joins
once it holds everything up to the high watermark and from the start of the leader's epoch. A
change is "pending" until the controller answers: the maximal ISR (what the high watermark waits
for) counts a replica being added at once and a replica being removed until it is gone. One
change per partition is in flight; changes of many partitions travel in one request.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from typing import Any

from roost.broker.activity.effects import (
    Activity,
    AsyncioShell,
    Effect,
    Request,
    ShellTask,
    Sleep,
    Spawn,
    Unreachable,
)
from roost.broker.metadata.cache import MetadataCache
from roost.broker.net.peer import PeerPool
from roost.broker.replica.manager import ReplicaManager
from roost.broker.replica.partition import Partition
from roost.config import BrokerConfig
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode

log = logging.getLogger("roost.broker.isr")

ALTER_PARTITION_VERSION = 3
REQUEST_TIMEOUT_MS = 10_000
RETRY_MS = 100
MAX_RETRY_MS = 2000
# Answers that mean "wait for the controller's LeaderAndIsr": our view is stale.
STALE = frozenset({ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.UNKNOWN_TOPIC_ID,
                   ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INELIGIBLE_REPLICA, ErrorCode.INVALID_REQUEST})


class IsrManager:
    """The ISR's decisions for the partitions led here. Its two activities (the periodic shrink
    check and the AlterPartition sender) are sans-IO: they yield effects
    (roost.broker.activity.effects) to a shell and read the replica manager's clock."""

    def __init__(self, broker_id: int, config: BrokerConfig, replicas: ReplicaManager, metadata: MetadataCache,
                 peers: PeerPool | None, spawn: Spawn | None = None) -> None:
        self.broker_id = broker_id
        self.replicas = replicas
        self.metadata = metadata
        self.peers = peers
        self.spawn: Spawn = spawn or AsyncioShell(self._peer_for).spawn
        self.max_lag_ms = config["replica.lag.time.max.ms"]
        self.request_timeout_ms = REQUEST_TIMEOUT_MS
        self._queued: dict[tuple[str, int], Partition] = {}
        self._in_flight: set[tuple[str, int]] = set()
        self._sending = False
        self._failures = 0  # consecutive requests that found no controller
        self._tasks: list[ShellTask] = []
        # ISR changes the controller accepted for partitions led here (Kafka's IsrShrinksPerSec,
        # IsrExpandsPerSec): one per partition change that drops, or adds, members.
        self.shrinks = 0
        self.expands = 0
        replicas.on_follower_caught_up = self.expand

    def _peer_for(self, broker: int) -> Any:
        endpoint = self.metadata.endpoint(broker)
        if endpoint is None or self.peers is None:
            return None
        return self.peers.get(endpoint.node_id, endpoint.host, endpoint.port)

    def start(self) -> None:
        self._tasks.append(self.spawn(self._shrink_loop(), "the ISR shrink check"))

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            await task.close()

    # proposals --------------------------------------------------------------------------------
    def expand(self, partition: Partition, replica: int) -> None:
        state = partition.state
        if state.pending_isr is not None or (partition.topic, partition.index) in self._in_flight:
            return
        state.pending_isr = state.isr | {replica}
        log.info("%s-%d: follower %d caught up; asking to add it to the ISR %s", partition.topic,
                 partition.index, replica, sorted(state.isr))
        self._queue(partition)

    def shrink_stale(self, now: int) -> None:
        for partition in self.replicas.hosted():
            state = partition.state
            if not partition.is_leader or state.pending_isr is not None:
                continue
            stale = state.out_of_sync_replicas(partition.log.log_end_offset, now, self.max_lag_ms)
            if stale:
                state.pending_isr = state.isr - stale
                log.info("%s-%d: followers %s fell behind for over %d ms; asking to shrink the ISR to %s",
                         partition.topic, partition.index, sorted(stale), self.max_lag_ms, sorted(state.pending_isr))
                self._queue(partition)

    def _shrink_loop(self) -> Activity:
        while True:
            yield Sleep(self.max_lag_ms / 2)
            self.shrink_stale(self.replicas.clock_ms())

    def _queue(self, partition: Partition) -> None:
        self._queued[(partition.topic, partition.index)] = partition
        if not self._sending:
            self._sending = True
            # One request for every change proposed in this loop turn (the sender starts on the
            # shell's next turn).
            self._tasks = [task for task in self._tasks if not task.done()]
            self._tasks.append(self.spawn(self._send(), "the AlterPartition sender"))

    # the request ------------------------------------------------------------------------------
    def _send(self) -> Activity:
        try:
            while self._queued:
                batch, self._queued = self._queued, {}
                batch = {tp: p for tp, p in batch.items()
                         if p.is_leader and p.state.pending_isr is not None and tp not in self._in_flight}
                if not batch:
                    continue
                assert self._in_flight.isdisjoint(batch), "one ISR change per partition in flight"
                self._in_flight.update(batch)
                try:
                    answer = yield from self._request(batch)
                finally:
                    self._in_flight.difference_update(batch)
                retry = batch if answer is None else self._apply(batch, answer)
                if retry:
                    # No controller, or not the controller: try again (still pending), backing off
                    # while it lasts (a broker cut off from the cluster asks in vain).
                    self._failures += 1
                    yield Sleep(min(MAX_RETRY_MS, RETRY_MS * 2 ** min(self._failures, 5)))
                    for tp, partition in retry.items():
                        self._queued.setdefault(tp, partition)
                else:
                    self._failures = 0
        finally:
            self._sending = False

    def _request(self, batch: dict[tuple[str, int], Partition]) -> Generator[Effect, Any, dict[str, Any] | None]:
        controller = self.metadata.endpoint(self.metadata.controller_id)
        if controller is None:
            return None
        by_topic: dict[Any, list[dict[str, Any]]] = {}
        for partition in batch.values():
            state = partition.state
            assert state.pending_isr is not None
            by_topic.setdefault(partition.topic_id, []).append({
                "partition_index": partition.index, "leader_epoch": state.leader_epoch,
                "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": -1} for b in sorted(state.pending_isr)],
                "leader_recovery_state": 1 if state.recovering else 0, "partition_epoch": state.partition_epoch})
        body = {"broker_id": self.broker_id, "broker_epoch": self.replicas.broker_epoch,
                "topics": [{"topic_id": t, "partitions": p} for t, p in by_topic.items()]}
        answer: dict[str, Any]
        try:
            answer = yield Request(controller.node_id, ApiKey.ALTER_PARTITION, ALTER_PARTITION_VERSION, body,
                                   self.request_timeout_ms)
        except Unreachable as error:
            if not self._failures:
                log.info("AlterPartition to controller %d failed: %s", controller.node_id, error)
            return None
        if answer["error_code"] in (ErrorCode.NOT_CONTROLLER, ErrorCode.STALE_BROKER_EPOCH):
            if not self._failures:
                log.info("AlterPartition answered %s by broker %d", ErrorCode(answer["error_code"]).name,
                         controller.node_id)
            return None
        return answer

    def _apply(self, batch: dict[tuple[str, int], Partition],
               answer: dict[str, Any]) -> dict[tuple[str, int], Partition]:
        """Take the controller's answer; returns the partitions to ask again for."""
        retry: dict[tuple[str, int], Partition] = {}
        by_id = {p.topic_id: p.topic for p in batch.values()}
        for topic in answer["topics"]:
            name = by_id.get(topic["topic_id"])
            for result in topic["partitions"]:
                partition = batch.get((name, result["partition_index"])) if name else None
                if partition is None:
                    continue
                state = partition.state
                code = result["error_code"]
                if code == ErrorCode.NONE:
                    if partition.is_leader and result["leader_epoch"] == state.leader_epoch \
                            and result["partition_epoch"] >= state.partition_epoch:
                        before = set(state.isr)
                        state.update_isr(result["isr"], result["partition_epoch"])
                        self.shrinks += bool(before - set(state.isr))
                        self.expands += bool(set(state.isr) - before)
                        log.info("%s-%d: ISR now %s (partition epoch %d)", partition.topic, partition.index,
                                 result["isr"], result["partition_epoch"])
                        partition.state_changed()
                        if state.advance_high_watermark(partition.log.log_end_offset):
                            partition.high_watermark_moved()
                    elif not partition.is_leader:
                        state.pending_isr = None
                    # else: an answer for another leader epoch. The controller may have committed
                    # the change (with a leadership move, say): it stays pending, and the replica
                    # being added keeps counting for the HW, until LeaderAndIsr says what holds.
                elif code == ErrorCode.NOT_CONTROLLER:
                    retry[(partition.topic, partition.index)] = partition
                elif code in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION):
                    # Our epochs are stale: a LeaderAndIsr is on its way and resets the state
                    # (Kafka's Partition.handleAlterPartitionError leaves it pending too). Forgetting
                    # the change now would let the HW pass a replica the controller may have added
                    # (found by the replication simulation: acknowledged writes lost).
                    log.info("%s-%d: ISR change fenced (%s); pending until LeaderAndIsr", partition.topic,
                             partition.index, ErrorCode(code).name)
                else:
                    # Refused: forget the proposal; a later check brings a fresh one.
                    log.info("%s-%d: ISR change refused (%s)", partition.topic, partition.index,
                             ErrorCode(code).name if code in ErrorCode._value2member_map_ else code)
                    state.pending_isr = None
        return retry
