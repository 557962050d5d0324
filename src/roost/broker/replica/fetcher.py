"""Replica fetchers: the follower side of replication.

One fetcher per leader broker fetches every partition this broker follows from that leader, with
Kafka's replica Fetch (v15: ReplicaState with our id and broker epoch, CurrentLeaderEpoch,
LastFetchedEpoch). Fetches long-poll (`replica.fetch.wait.max.ms`), so a new record reaches a
follower one round trip after the leader appends it, and the follower's next fetch (its new
fetch offset) is what moves the leader's high watermark.

Per partition: records are appended at the leader's offsets; a DivergingEpoch answer truncates
the log by leader epoch first (roost.broker.replica.follower); the follower's high watermark
follows the leader's. With fsync before ack (`flush.messages` = 1) the follower fsyncs what it
appended before it fetches again, so the offset it reports, and the leader's acks=all with it,
mean "on disk here too". A partition whose leader or epoch changed while a fetch was in flight
ignores that fetch's answer.

Every decision is here and none of the I/O: a fetcher's loop (`LeaderFetcher.run`) is a sans-IO
activity that yields effects (roost.broker.activity.effects: fetch and ListOffsets requests,
fsyncs, sleeps) to a shell, the broker's asyncio one or the replication simulation's, and reads
the time from one injected clock. Appends and truncations go to the partition's log directly.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from roost.broker.activity.effects import (
    Activity,
    AsyncioShell,
    Effect,
    Request,
    ShellTask,
    Sleep,
    Spawn,
    Sync,
    Unreachable,
    WaitForWork,
)
from roost.broker.net.peer import PeerPool
from roost.broker.replica.follower import start_offset_without_epochs, truncation_offset
from roost.broker.replica.partition import Partition
from roost.broker.replica.throttle import FOLLOWER_THROTTLED_REPLICAS, quota_for
from roost.broker.replica.throttle import names as throttle_names
from roost.clock import Clock, now_ms
from roost.config import BrokerConfig
from roost.log import NonMonotonicAppend
from roost.storage.log_manager import LogManager
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import InvalidRecordBatch

log = logging.getLogger("roost.broker.fetcher")

FETCH_VERSION = 15
LIST_OFFSETS_VERSION = 7
REQUEST_TIMEOUT_MS = 30_000
IDLE_WAIT_MS = 1000  # how long a fetcher with nothing to fetch waits before it looks again
MIN_WAIT_MS = 10
THROTTLED_WAIT_MS = 50
EARLIEST, LATEST = -2, -1
RETRIABLE = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
                       ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_ID,
                       ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
                       ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_LEADER_OR_FOLLOWER})
TopicPartition = tuple[str, int]
# What a fetcher does with an exception applying an answer (a bug, not a network fault).
BugHandler = Callable[[int, BaseException], None]


@dataclass
class _Following:
    partition: Partition
    leader_epoch: int  # the epoch this fetcher follows in; a change means the entry is stale
    delayed_until: float = 0.0  # clock time (ms) before which it sits out (after an error)


def _log_bug(leader: int, error: BaseException) -> None:
    # A bug, not a network fault: say so loudly, and keep the other partitions going.
    log.error("applying a fetch answer from leader %d failed", leader, exc_info=error)


class LeaderFetcher:
    """Fetches all partitions this broker follows from one leader: the loop's decisions (what is
    ready to fetch, what an answer means, when to back off, when to give a partition up)."""

    def __init__(self, leader_id: int, owner: ReplicaFetchers) -> None:
        self.leader_id = leader_id
        self._owner = owner
        self.following: dict[TopicPartition, _Following] = {}
        self._failures = 0
        self._task: ShellTask = owner.spawn(self.run(), f"the fetcher from leader {leader_id}")

    def add(self, partition: Partition) -> None:
        self.following[(partition.topic, partition.index)] = _Following(partition, partition.leader_epoch)
        self._task.wake()

    def remove(self, partition: Partition) -> None:
        self.following.pop((partition.topic, partition.index), None)

    async def close(self) -> None:
        await self._task.close()

    def run(self) -> Activity:
        owner = self._owner
        while True:
            now = owner.clock_ms()
            ready = {tp: f for tp, f in self.following.items() if f.delayed_until <= now and self._current(f)
                     and not owner.held_back(f.partition, now)}
            if not ready:
                # A partition held back by its throttle is looked at again a little later.
                soonest = min((f.delayed_until if f.delayed_until > now else now + THROTTLED_WAIT_MS
                               for f in self.following.values()), default=now + IDLE_WAIT_MS)
                yield WaitForWork(max(MIN_WAIT_MS, soonest - now))
                continue
            assert all(not f.partition.is_leader for f in ready.values()), "a leader never fetches its own partition"
            body = owner.fetch_body(ready)
            try:
                response = yield Request(self.leader_id, ApiKey.FETCH, FETCH_VERSION, body, owner.request_timeout_ms)
            except Unreachable as error:
                if not error.no_address:  # else the leader's address is not known yet
                    # Said once per outage (a dead leader fails every 100 ms until it is replaced).
                    self._failures += 1
                    if self._failures == 1:
                        log.info("fetch from leader %d failed: %s; retrying every %.0f ms", self.leader_id,
                                 error, owner.backoff_ms)
                yield Sleep(owner.backoff_ms)
                continue
            if self._failures:
                log.info("fetching from leader %d again after %d failed attempts", self.leader_id, self._failures)
                self._failures = 0
            try:
                syncs = yield from owner.process(self.leader_id, ready, response)
            except Exception as error:
                owner.on_bug(self.leader_id, error)
                for following in ready.values():
                    following.delayed_until = owner.clock_ms() + owner.backoff_ms
                continue
            if syncs:
                # Report (by fetching again) only what is on disk here.
                outcomes = yield Sync(tuple(following.partition.log for following in syncs))
                assert len(outcomes) == len(syncs), "one outcome per fsync asked for"
                for following, outcome in zip(syncs, outcomes, strict=True):
                    if outcome is not None:
                        self._give_up(following.partition, outcome)

    def _give_up(self, partition: Partition, error: BaseException) -> None:
        """The log could not be made durable: stop following the partition, so that its next
        fetch never tells the leader (which counts it toward acks=all) that this broker holds
        records it may lose. The leader drops it from the ISR; a restart, once the disk is
        fixed, recovers the log to what is on disk and follows again. (Kafka takes the log
        directory offline.)"""
        log.error("%s-%d: fsync failed (%r): no longer following it; restart this broker once the disk is fixed",
                  partition.topic, partition.index, error)
        self.remove(partition)

    @staticmethod
    def _current(following: _Following) -> bool:
        partition = following.partition
        return not partition.closed and not partition.is_leader and partition.leader_epoch == following.leader_epoch


class ReplicaFetchers:
    """The set of leader fetchers, and what is done with their answers."""

    def __init__(self, broker_id: int, config: BrokerConfig, logs: LogManager, peers: PeerPool | None,
                 clock_ms: Clock = now_ms, spawn: Spawn | None = None) -> None:
        self.broker_id = broker_id
        self.broker_epoch = -1
        self.logs = logs
        self.peers = peers
        self.clock_ms = clock_ms
        self.wait_ms = config["replica.fetch.wait.max.ms"]
        self.min_bytes = config["replica.fetch.min.bytes"]
        self.max_bytes = config["replica.fetch.response.max.bytes"]
        self.partition_max_bytes = config["replica.fetch.max.bytes"]
        self.backoff_ms = config["replica.fetch.backoff.ms"]
        self.request_timeout_ms = REQUEST_TIMEOUT_MS
        self.on_bug: BugHandler = _log_bug
        self.spawn: Spawn = spawn or AsyncioShell(self.peer_for, logs.committer).spawn
        self.endpoints: dict[int, tuple[str, int]] = {}
        self._fetchers: dict[int, LeaderFetcher] = {}
        self._by_partition: dict[TopicPartition, int] = {}
        # KIP-73: what this broker fetches for its out-of-ISR follower-throttled partitions.
        self.config = config
        self.follower_quota = quota_for(config, "follower.replication.throttled.rate", clock_ms())

    # membership -------------------------------------------------------------------------------
    def learn_endpoint(self, broker: int, host: str, port: int) -> None:
        self.endpoints[broker] = (host, port)

    def peer_for(self, broker: int) -> Any:
        address = self.endpoints.get(broker)
        return None if address is None or self.peers is None else self.peers.get(broker, *address)

    def follow(self, partition: Partition) -> None:
        """Start fetching `partition` from its leader (after a LeaderAndIsr made us follower)."""
        self.unfollow(partition)
        self._prepare(partition)
        leader = partition.state.leader
        fetcher = self._fetchers.get(leader)
        if fetcher is None:
            fetcher = self._fetchers[leader] = LeaderFetcher(leader, self)
        fetcher.add(partition)
        self._by_partition[(partition.topic, partition.index)] = leader

    def unfollow(self, partition: Partition) -> None:
        leader = self._by_partition.pop((partition.topic, partition.index), None)
        if leader is not None and leader in self._fetchers:
            self._fetchers[leader].remove(partition)

    def _prepare(self, partition: Partition) -> None:
        """A log with records but no epoch history keeps only its committed prefix."""
        plog = partition.log
        keep = start_offset_without_epochs(plog.log_end_offset, partition.high_watermark,
                                           plog.leader_epochs.latest_epoch)
        if keep < plog.log_end_offset:
            log.warning("%s-%d has records without leader epochs: truncating to its high watermark %d",
                        partition.topic, partition.index, keep)
            self._truncate(partition, keep)

    async def close(self) -> None:
        fetchers, self._fetchers = list(self._fetchers.values()), {}
        for fetcher in fetchers:
            await fetcher.close()
        self._by_partition.clear()

    # throttles (KIP-73) -----------------------------------------------------------------------
    def _throttled(self, partition: Partition) -> bool:
        return self.follower_quota.limited and throttle_names(
            partition.configs.get(FOLLOWER_THROTTLED_REPLICAS, ""), partition.index, self.broker_id)

    def held_back(self, partition: Partition, now_ms: int) -> bool:
        """Left out of the next fetch: a follower-throttled partition this broker is not in the
        ISR of, while the follower quota is spent (Kafka's shouldFollowerThrottle)."""
        return self.broker_id not in partition.state.isr and self._throttled(partition) \
            and self.follower_quota.exceeded(now_ms)

    # requests and answers ---------------------------------------------------------------------
    def fetch_body(self, ready: dict[TopicPartition, _Following]) -> dict[str, Any]:
        by_topic: dict[Any, list[dict[str, Any]]] = {}
        for following in ready.values():
            partition = following.partition
            plog = partition.log
            by_topic.setdefault(partition.topic_id, []).append({
                "partition": partition.index, "current_leader_epoch": following.leader_epoch,
                "fetch_offset": plog.log_end_offset, "last_fetched_epoch": plog.leader_epochs.latest_epoch,
                "log_start_offset": plog.log_start_offset, "partition_max_bytes": self.partition_max_bytes})
        return {"replica_state": {"replica_id": self.broker_id, "replica_epoch": self.broker_epoch},
                "max_wait_ms": self.wait_ms, "min_bytes": self.min_bytes, "max_bytes": self.max_bytes,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic_id": topic_id, "partitions": parts} for topic_id, parts in by_topic.items()],
                "forgotten_topics_data": [], "rack_id": ""}

    def process(self, leader: int, ready: dict[TopicPartition, _Following],
                response: dict[str, Any]) -> Generator[Effect, Any, list[_Following]]:
        """Apply a fetch answer; returns the partitions whose logs must be made durable before
        the next fetch reports them."""
        syncs: list[_Following] = []
        by_id = {f.partition.topic_id: f.partition.topic for f in ready.values()}
        for topic in response["responses"]:
            name = by_id.get(topic["topic_id"])
            for answer in topic["partitions"]:
                following = ready.get((name, answer["partition_index"])) if name else None
                if following is None or not LeaderFetcher._current(following):
                    continue  # no longer ours, or the epoch moved on while the fetch was out
                partition = following.partition
                error = answer["error_code"]
                if error == ErrorCode.OFFSET_OUT_OF_RANGE:
                    yield from self._out_of_range(leader, following)
                    continue
                if error != ErrorCode.NONE:
                    if error not in RETRIABLE:
                        log.warning("fetch of %s-%d from %d: error %d", partition.topic, partition.index,
                                    leader, error)
                    following.delayed_until = self.clock_ms() + self.backoff_ms
                    continue
                if self._apply(partition, answer, following):
                    syncs.append(following)
        return syncs

    def _apply(self, partition: Partition, answer: dict[str, Any], following: _Following) -> bool:
        """Take one partition's answer; True when what it appended must be fsynced first."""
        plog = partition.log
        diverging = answer.get("diverging_epoch") or {}
        if diverging.get("epoch", -1) != -1 or diverging.get("end_offset", -1) != -1:
            end = truncation_offset(plog.leader_epochs, plog.log_end_offset, partition.high_watermark,
                                    diverging["epoch"], diverging["end_offset"])
            log.info("%s-%d diverged from leader at epoch %d (ends at %d there): truncating from %d to %d",
                     partition.topic, partition.index, diverging["epoch"], diverging["end_offset"],
                     plog.log_end_offset, end)
            self._truncate(partition, end)
            return False
        sync = False
        records = answer.get("records")
        if records is not None and len(records) > 0:
            data = bytearray(records) if not isinstance(records, bytearray) else records
            if self._throttled(partition):
                self.follower_quota.record(len(data), self.clock_ms())
            before = plog.log_end_offset
            try:
                plog.append(data, assign_offsets=False)
            except (NonMonotonicAppend, InvalidRecordBatch) as error:
                log.error("%s-%d: cannot append the leader's records at %d: %s", partition.topic, partition.index,
                          plog.log_end_offset, error)
                following.delayed_until = self.clock_ms() + self.backoff_ms
                return False
            assert plog.log_end_offset > before, "an append of the leader's records moves the log end"
            if partition.count_unflushed(1) or partition.fsync_each_append:
                sync = True
        leader_start = answer.get("log_start_offset", -1)
        if plog.log_start_offset < leader_start <= plog.log_end_offset:
            plog.delete_records_before(leader_start)
        if partition.state.follow_high_watermark(answer["high_watermark"], plog.log_end_offset):
            partition.high_watermark_moved()
        return sync

    def _truncate(self, partition: Partition, offset: int) -> None:
        assert not partition.is_leader, "only a follower cuts its log to match a leader's"
        assert offset >= 0, offset
        partition.log.truncate_to(offset)
        assert partition.log.log_end_offset <= max(offset, partition.log.log_start_offset), \
            (partition.log.log_end_offset, offset)
        partition.state.truncated(partition.log.log_end_offset)

    def _start_over_at(self, partition: Partition, offset: int) -> None:
        partition.log.truncate_fully_and_start_at(offset)
        partition.state.truncated(partition.log.log_end_offset)

    def _out_of_range(self, leader: int, following: _Following) -> Generator[Effect, Any, None]:
        """Our fetch offset is outside the leader's log: past its end (we hold records it lost:
        truncate to its end) or before its start (retention moved on: start again at its start)."""
        partition = following.partition
        offsets = {}
        for timestamp in (EARLIEST, LATEST):
            body = {"replica_id": self.broker_id, "isolation_level": 0, "topics": [{"name": partition.topic,
                    "partitions": [{"partition_index": partition.index, "current_leader_epoch": partition.leader_epoch,
                                    "timestamp": timestamp}]}]}
            try:
                answer = yield Request(leader, ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, body,
                                       self.request_timeout_ms)
            except Unreachable:
                return
            result = answer["topics"][0]["partitions"][0]
            if result["error_code"] != ErrorCode.NONE:
                return
            offsets[timestamp] = result["offset"]
        if not LeaderFetcher._current(following):
            # While we asked, this broker became the leader or follows another epoch: the answer
            # is not about our log any more, and truncating now could cut committed records
            # (found by the replication simulation).
            return
        end = partition.log.log_end_offset
        if end > offsets[LATEST]:
            log.warning("%s-%d: our log end %d is past the leader's %d: truncating", partition.topic,
                        partition.index, end, offsets[LATEST])
            self._truncate(partition, offsets[LATEST])
        elif end < offsets[EARLIEST]:
            log.warning("%s-%d: our log end %d is before the leader's log start %d: starting over there",
                        partition.topic, partition.index, end, offsets[EARLIEST])
            self._start_over_at(partition, offsets[EARLIEST])
