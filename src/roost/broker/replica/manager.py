"""The replica manager: the partitions this broker hosts, their roles, the append door into
them (`append`, the only way a produce, an offset commit or, next, a transaction marker reaches a
leader's log; see docs/append-path.md) and the fetch door out of them (`fetch`, the only way a
consumer's or a follower's fetch reads a leader's log; its vocabulary in `fetch.py`).

Roles come from the controller's LeaderAndIsr requests (a higher leader epoch wins; an older
controller epoch is refused) and end with StopReplica. As leader, a partition takes produces,
serves consumers below the high watermark and followers up to its log end, tracks where each
follower is (their fetch offsets), and moves the high watermark. As follower, it is fed by the
replica fetchers. The door checks a client's batches (headers, CRC, size, producer sequences),
applies the acks rule (`append.py`), appends, and settles each outcome once what the
acknowledgement waits for is over: a group-commit fsync when the topic asks for fsync before ack,
and for acks=all the high watermark (the purgatory).

A broker that does not host a partition answers NOT_LEADER_OR_FOLLOWER if the topic is in its
metadata cache, UNKNOWN_TOPIC_OR_PARTITION if not (Kafka's rule, which keeps clients looking).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from roost.broker.link.core import (
    MIRROR_PRODUCE_ERROR,
    OpenTransaction,
    WriteOrigin,
    leader_log_epoch,
    promotion_epoch,
    transactions_to_abort,
    write_allowed,
)
from roost.broker.metadata.cache import MetadataCache, PartitionInfo
from roost.broker.metadata.catalog import TopicInfo
from roost.broker.replica.append import (
    ACKS_ALL,
    ACKS_LEADER,
    ACKS_NONE,
    VALID_ACKS,
    Appending,
    AppendOrigin,
    AppendOutcome,
    Batches,
    TopicPartition,
    check_sequences,
    mark_failed_fsync,
    refused,
)
from roost.broker.replica.fetch import Fetching, FetchParams, FetchPlan, FetchWanted
from roost.broker.replica.follower import divergence
from roost.broker.replica.partition import Partition
from roost.broker.replica.purgatory import AwaitedAppend, DelayedFetch, DelayedProduce, ParkedFollowerFetches
from roost.broker.replica.recompression import recompress_for_topic
from roost.broker.replica.repair import Damage, Verdict, holders_at_damage, plan_repair, sole_copy
from roost.broker.replica.state import NO_LEADER, PartitionState
from roost.broker.replica.throttle import LEADER_THROTTLED_REPLICAS, ReplicationQuota, quota_for
from roost.broker.replica.throttle import names as throttle_names
from roost.broker.replica.timestamps import REFUSAL as TIMESTAMP_REFUSAL
from roost.broker.replica.timestamps import TimestampBounds, refused_timestamps
from roost.broker.replica.waits import AsyncioWaits, Waits
from roost.clock import Clock, now_ms
from roost.config import BrokerConfig
from roost.log import (
    CorruptLog,
    Duplicate,
    MessageTooLarge,
    NonMonotonicAppend,
    OffsetOutOfRange,
    PartitionLog,
    ReadResult,
    RecordBatchTooLarge,
)
from roost.log.files import atomic_write
from roost.log.transactions import build_marker
from roost.storage.log_manager import LogManager
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    LOG_OVERHEAD,
    InvalidRecordBatch,
    validate_batches,
)

log = logging.getLogger("roost.broker.replica")

UNKNOWN_EPOCH = -1
DELETE_EPOCH = -2
RECOVERING = 1
# A LeaderAndIsr of thousands of partitions writes a leader-epoch checkpoint (an fsync) for each
# leadership taken: about 0.8 ms apiece here, so 4,000 held the loop for 3 s, past the brokers'
# 2 s ZooKeeper session. The handler yields once this long has passed without a yield.
BREATHE_EVERY_S = 0.02


class _Breather:
    """Yields to the event loop once BREATHE_EVERY_S has passed since the last yield: a controller
    request over thousands of partitions (LeaderAndIsr, StopReplica) lets ZooKeeper heartbeats and
    clients' requests go on between them."""

    def __init__(self) -> None:
        self._since = time.monotonic()

    async def breathe(self) -> None:
        if time.monotonic() - self._since > BREATHE_EVERY_S:
            await asyncio.sleep(0)
            self._since = time.monotonic()

# Called with (partition, became leader?) whenever a hosted partition's role changes; the group
# coordinator loads or unloads the groups of __consumer_offsets partitions this way.
LeadershipListener = Callable[[Partition, bool], None]
# Where a partition's log gets its topic configs (ZooKeeper's /config/topics in a cluster).
ConfigSource = Callable[[str], Awaitable[dict[str, Any]]]




class ReplicaManager:
    def __init__(self, broker_id: int, config: BrokerConfig, logs: LogManager, metadata: MetadataCache,
                 clock_ms: Clock = now_ms, waits: Waits | None = None) -> None:
        self.broker_id = broker_id
        # The one clock of replication decisions (follower positions here, the ISR manager's lag).
        self.clock_ms = clock_ms
        # What the append door waits with (the fsyncs before an ack, the purgatory's timers).
        self.waits: Waits = waits if waits is not None else AsyncioWaits()
        self.config = config
        self.logs = logs
        self.metadata = metadata
        self.broker_epoch = -1  # this incarnation's epoch (its /brokers/ids znode's czxid)
        self.controller_epoch = 0  # the highest seen in a LeaderAndIsr or StopReplica
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.leadership_listeners: list[LeadershipListener] = []
        self._parked_followers = ParkedFollowerFetches(self.waits)  # the fetch door's (see `fetch`)
        # Set by the broker in a cluster: the follower side and the ISR side.
        self.on_become_follower: Callable[[Partition], None] = lambda partition: None
        self.on_stop_following: Callable[[Partition], None] = lambda partition: None
        self.on_follower_caught_up: Callable[[Partition, int], None] = lambda partition, replica: None
        self._checkpointed_hws: dict[tuple[str, int], int] = {}
        for logs_dir in logs.checkpoint_dirs():  # each log directory has the HWs of its partitions
            self._checkpointed_hws.update(read_hw_checkpoint(logs_dir / HW_CHECKPOINT_FILE))
        # Partitions whose log directory failed: they answer KAFKA_STORAGE_ERROR.
        self.offline: set[tuple[str, int]] = set()
        # Partitions offline here because a read found a damaged batch in their log (the log is
        # kept open, to be cut and refetched once `roost.broker.replica.repair` allows it).
        self.damaged: dict[tuple[str, int], DamagedReplica] = {}
        # Set by the broker in a cluster: tell the controller that replicas here went offline.
        self.on_replica_damaged: Callable[[], None] = lambda: None
        self._checkpointer: asyncio.Task[None] | None = None
        # Each hosted topic's own overrides, so that its configs can be recomputed when the
        # dynamic broker defaults change.
        self._overrides: dict[str, dict[str, Any]] = {}
        # Hosted partitions per topic, kept with `partitions`: dropping a topic's last one forgets
        # its overrides (a scan of every partition per drop made deleting N topics cost N^2).
        self._hosted_per_topic: dict[str, int] = {}
        # KIP-73: what this broker sends to out-of-ISR followers of its leader-throttled partitions.
        self.leader_quota = quota_for(config, "leader.replication.throttled.rate", clock_ms())
        # When each hosted partition last logged a refused idempotent batch (_log_sequence_refusal).
        self._sequence_refusals_logged: dict[tuple[str, int], float] = {}
        logs.host(self.hosted)

    # hosting ----------------------------------------------------------------------------------
    def effective_configs(self, overrides: dict[str, Any]) -> dict[str, Any]:
        configs = self.config.topic_defaults()
        configs.update(overrides)
        return configs

    def host_partitions(self, info: TopicInfo, indexes: Iterable[int], new: bool = True) -> None:
        """Open (or create) the logs of `info`'s partitions `indexes` as their only replica (a
        broker without a controller): it leads them. `new`: they did not exist before (else a
        log not found while a log directory is offline is not created afresh)."""
        self._overrides[info.name] = dict(info.configs)
        configs = self.effective_configs(info.configs)
        for index in indexes:
            try:
                partition_log = self.logs.open_log(info.name, index, configs, may_create=new)
            except OSError as error:
                log.error("%s-%d is offline: %s", info.name, index, error)
                self.offline.add((info.name, index))
                self.metadata.set_partition(info.name, index, PartitionInfo(
                    leader=self.broker_id, leader_epoch=0, replicas=(self.broker_id,), isr=(self.broker_id,)),
                    info.topic_id)
                continue
            state = PartitionState.sole_replica(self.broker_id, partition_log.log_end_offset)
            partition = Partition(info.name, index, partition_log, configs, state, info.topic_id)
            self._add(partition)
            self.metadata.set_partition(info.name, index, PartitionInfo(
                leader=self.broker_id, leader_epoch=state.leader_epoch, replicas=state.replicas,
                isr=tuple(sorted(state.isr))), info.topic_id)
            self._leadership_changed(partition, True)

    def apply_topic_configs(self, topic: str, overrides: dict[str, Any]) -> int:
        """Give every hosted partition of `topic` its new configs (the defaults with `overrides`);
        returns how many partitions took them."""
        self._overrides[topic] = dict(overrides)
        configs = self.effective_configs(overrides)
        changed = 0
        for (name, _index), partition in list(self.partitions.items()):
            if name == topic:
                was_mirror = partition.mirror_link
                partition.reconfigure(dict(configs))
                if was_mirror and not partition.mirror_link and partition.is_leader:
                    self._promoted(partition)
                elif partition.mirror_link and not was_mirror:
                    self._became_mirror(partition)
                changed += 1
        return changed

    def _promoted(self, partition: Partition) -> None:
        """A mirror became a writable topic on its leader: its writes start a new leader epoch
        above every mirrored one, so that a failback finds by epoch where the two logs part."""
        epochs = partition.log.leader_epochs
        epoch = promotion_epoch(partition.leader_epoch, epochs.latest_epoch)
        epochs.assign(epoch, partition.log.log_end_offset)
        log.info("%s-%d: promoted at offset %d; writes in epoch %d", partition.topic, partition.index,
                 partition.log.log_end_offset, epoch)
        self._abort_mirrored_transactions(partition)

    def _became_mirror(self, partition: Partition) -> None:
        """A writable topic became a mirror (failback: the old source mirrors the promoted side;
        the switch-back: the destination mirrors the old source again). A mirror's leader-epoch
        history must be its batches' own, compared by number with its source's: an epoch this
        broker began at its log end as a leader and wrote nothing in (a restart's election, a
        promotion without writes) is dropped. Kept, it outnumbers the source's later epochs: the
        source's batches append under it unrecorded, and once this side is promoted again the
        other side, asking where its own epoch ends, is told the end of the epoch below, and cuts
        records it had acknowledged (Kafka's truncateTo trims the cache the same way)."""
        epochs = partition.log.leader_epochs
        before = epochs.latest_epoch
        epochs.truncate_from_end(partition.log.log_end_offset)
        if epochs.latest_epoch != before:
            log.info("%s-%d: now a mirror of link %s; epoch %d (nothing written in it) dropped at offset %d",
                     partition.topic, partition.index, partition.mirror_link, before, partition.log.log_end_offset)

    def _abort_mirrored_transactions(self, partition: Partition) -> None:
        """The source's transactions still open on the promoted mirror: no coordinator here will
        ever end them, so each gets an ABORT marker now (roost.broker.link.core), in the
        promotion epoch, through the append door as a coordinator's marker. The last stable
        offset moves on once the markers are replicated; their records stay, aborted."""
        producers = partition.log.producer_state
        open_transactions = [
            OpenTransaction(pid, producers.producers[pid].epoch, producers.producers[pid].coordinator_epoch, first)
            for pid, first in producers.ongoing.items() if pid in producers.producers]
        for txn in transactions_to_abort(open_transactions):
            marker = build_marker(txn.producer_id, txn.producer_epoch, commit=False,
                                  coordinator_epoch=max(0, txn.coordinator_epoch), timestamp_ms=self.clock_ms())
            # acks=0: nobody waits here; the marker is in the leader's log when append returns
            # and the followers take it as any record.
            outcome = self.append([((partition.topic, partition.index), marker)], ACKS_NONE,
                                  AppendOrigin.COORDINATOR, 0.0).outcomes[0]
            if outcome.error != ErrorCode.NONE:
                log.error("%s-%d: the mirrored transaction of producer %d (from offset %d) could not be aborted: %s %s",
                          partition.topic, partition.index, txn.producer_id, txn.first_offset,
                          ErrorCode(outcome.error).name, outcome.message or "")
                continue
            log.warning("%s-%d: promoted with producer %d's transaction open (from offset %d, no marker mirrored): "
                        "aborted at offset %d", partition.topic, partition.index, txn.producer_id, txn.first_offset,
                        outcome.base_offset)

    def reapply_configs(self) -> int:
        """Recompute every hosted partition's configs (the dynamic broker defaults changed)."""
        topics = {partition.topic for partition in self.hosted()}
        return sum(self.apply_topic_configs(topic, self._overrides.get(topic, {})) for topic in topics)

    def drop_partitions(self, topic: str, indexes: Iterable[int], delete: bool = True) -> None:
        """Stop hosting the partitions; with `delete`, their logs go too."""
        for index in indexes:
            self.offline.discard((topic, index))
            damaged = self.damaged.pop((topic, index), None)
            if damaged is not None:
                if delete:
                    self.logs.delete_log(topic, index, damaged.log)
                else:
                    damaged.log.close()
                continue
            partition = self._remove(topic, index)
            if partition is not None:
                was_leader = partition.is_leader
                partition.close()
                self.on_stop_following(partition)
                if was_leader:
                    self._leadership_changed(partition, False)
                if not delete:
                    partition.log.close()
            if delete:
                self.logs.delete_log(topic, index, partition.log if partition else None)
        if topic not in self._hosted_per_topic:
            self._overrides.pop(topic, None)

    def _add(self, partition: Partition) -> None:
        key = (partition.topic, partition.index)
        if key not in self.partitions:
            self._hosted_per_topic[partition.topic] = self._hosted_per_topic.get(partition.topic, 0) + 1
        self.partitions[key] = partition

    def _remove(self, topic: str, index: int) -> Partition | None:
        partition = self.partitions.pop((topic, index), None)
        self._sequence_refusals_logged.pop((topic, index), None)  # kept for hosted partitions only
        if partition is not None:
            left = self._hosted_per_topic[topic] - 1
            assert left >= 0, topic
            if left:
                self._hosted_per_topic[topic] = left
            else:
                del self._hosted_per_topic[topic]
        return partition

    def take_offline(self, logs_dir: Path) -> int:
        """A log directory failed: its partitions stop serving (KAFKA_STORAGE_ERROR) and their
        files are let go without writing (writes there fail). Returns how many went offline."""
        gone = [p for p in self.partitions.values() if self.logs.logs_dir_of(p.log) == logs_dir]
        for partition in gone:
            self._remove(partition.topic, partition.index)
            self.offline.add((partition.topic, partition.index))
            was_leader = partition.is_leader
            partition.close()
            self.on_stop_following(partition)
            if was_leader:
                self._leadership_changed(partition, False)
            partition.log.abandon()
        return len(gone)

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def is_offline(self, topic: str, index: int) -> bool:
        """The partition's log directory failed: it answers KAFKA_STORAGE_ERROR."""
        return (topic, index) in self.offline

    def offline_count(self) -> int:
        return len(self.offline)

    def hosted(self) -> Iterator[Partition]:
        return iter(list(self.partitions.values()))

    def leader_partition(self, topic: str, index: int) -> tuple[Partition | None, ErrorCode]:
        """The partition if this broker leads it; else the error a client gets."""
        if (topic, index) in self.offline:
            return None, ErrorCode.KAFKA_STORAGE_ERROR
        partition = self.partitions.get((topic, index))
        if partition is not None and partition.is_leader:
            return partition, ErrorCode.NONE
        # A partition the cluster has but another broker leads (or this one not yet): try again
        # elsewhere. An index the topic does not have is unknown, as Kafka answers it.
        if partition is not None or self.metadata.partition(topic, index) is not None:
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def _leadership_changed(self, partition: Partition, leader: bool) -> None:
        for listener in self.leadership_listeners:
            listener(partition, leader)
        self._parked_followers.leadership_changed(partition, leader)

    # controller requests ----------------------------------------------------------------------
    async def leader_and_isr(self, body: dict[str, Any], configs_for: ConfigSource) -> dict[str, Any]:
        """LeaderAndIsr (v5+ shape): become leader or follower of each partition named, where the
        request's leader epoch is newer than ours."""
        topics_out = []
        if body["broker_epoch"] != -1 and body["broker_epoch"] < self.broker_epoch:
            log.warning("LeaderAndIsr for broker epoch %d refused: this is epoch %d",
                        body["broker_epoch"], self.broker_epoch)
            return {"error_code": ErrorCode.STALE_BROKER_EPOCH, "topics": []}
        if body["controller_epoch"] < self.controller_epoch:
            log.warning("LeaderAndIsr from controller %d epoch %d refused: epoch %d seen",
                        body["controller_id"], body["controller_epoch"], self.controller_epoch)
            return {"error_code": ErrorCode.STALE_CONTROLLER_EPOCH, "topics": []}
        self.controller_epoch = body["controller_epoch"]
        now = self.clock_ms()
        breather = _Breather()
        for topic in body["topic_states"]:
            name, topic_id = topic["topic_name"], topic.get("topic_id")
            errors = []
            configs: dict[str, Any] | None = None
            for wanted in topic["partition_states"]:
                index = wanted["partition_index"]
                if self.broker_id not in wanted["replicas"]:
                    errors.append({"partition_index": index, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
                    continue
                if (name, index) in self.damaged:
                    partition = self._repaired(name, index, wanted)
                    if partition is None:
                        errors.append({"partition_index": index, "error_code": ErrorCode.KAFKA_STORAGE_ERROR})
                        continue
                partition = self.partitions.get((name, index))
                if partition is not None and topic_id and partition.topic_id and partition.topic_id != topic_id:
                    log.warning("%s-%d: the topic was recreated (id %s, was %s); dropping the old log",
                                name, index, topic_id, partition.topic_id)
                    self.drop_partitions(name, [index])
                    partition = None
                if partition is not None and (wanted["leader_epoch"], wanted["partition_epoch"]) <= \
                        (partition.state.leader_epoch, partition.state.partition_epoch):
                    errors.append({"partition_index": index, "error_code": ErrorCode.STALE_CONTROLLER_EPOCH})
                    continue
                if partition is None:
                    if configs is None:
                        overrides = await configs_for(name)
                        self._overrides[name] = dict(overrides)
                        configs = self.effective_configs(overrides)
                    if (name, index) in self.partitions:  # opened while we awaited the configs
                        partition = self.partitions[(name, index)]
                    else:
                        try:
                            partition = self._open(name, index, configs, topic_id, wanted.get("is_new", True))
                        except OSError as error:
                            log.error("%s-%d is offline: %s", name, index, error)
                            self.offline.add((name, index))
                            errors.append({"partition_index": index, "error_code": ErrorCode.KAFKA_STORAGE_ERROR})
                            continue
                        # Opening a log costs file creation and fsyncs: let the loop breathe
                        # between them (a request may open a thousand; heartbeats must go on).
                        await asyncio.sleep(0)
                self._apply_state(partition, wanted, now)
                errors.append({"partition_index": index, "error_code": ErrorCode.NONE})
                await breather.breathe()
            topics_out.append({"topic_id": topic_id, "partition_errors": errors})
        return {"error_code": ErrorCode.NONE, "topics": topics_out}

    def _open(self, name: str, index: int, configs: dict[str, Any], topic_id: uuid.UUID | None,
              is_new: bool = True) -> Partition:
        partition_log = self.logs.open_log(name, index, configs, may_create=is_new)
        # Nothing known yet: a follower of nobody, with the high watermark it had last time.
        known_hw = min(self._checkpointed_hws.get((name, index), 0), partition_log.log_end_offset)
        state = PartitionState(self.broker_id, (), NO_LEADER, UNKNOWN_EPOCH, (), -1, max(0, known_hw))
        partition = Partition(name, index, partition_log, configs, state, topic_id)
        self._add(partition)
        return partition

    def _repaired(self, name: str, index: int, wanted: dict[str, Any]) -> Partition | None:
        """A damaged replica offered a new state: cut its log and host it again as a follower
        when `plan_repair` allows it (the caller applies the state), else None (it stays offline
        and answers KAFKA_STORAGE_ERROR, which keeps the controller from leading or counting it)."""
        held = self.damaged[(name, index)]
        damage = held.damage
        if wanted["leader_epoch"] <= held.leader_epoch:
            return None  # a state from before the damage was found: it says nothing of who holds the data
        plan = plan_repair(damage, self.broker_id, wanted["leader"], wanted["isr"],
                           wanted.get("leader_recovery_state", 0) != RECOVERING)
        if plan.verdict is not Verdict.TRUNCATE:
            log.info("%s-%d stays offline (damaged batch in %s at position %d, offset %d): %s", name, index,
                     damage.path, damage.position, damage.offset, plan.reason)
            return None
        try:
            held.log.truncate_to(plan.truncate_to)
        except OSError as error:  # the disk itself fails: its directory goes offline
            self.logs.storage_failed(held.log, error)
            return None
        del self.damaged[(name, index)]
        self.offline.discard((name, index))
        log.warning("%s-%d repaired: cut at offset %d before the damaged batch in %s (position %d); %s, "
                    "refetching from it", name, index, held.log.log_end_offset, damage.path, damage.position,
                    plan.reason)
        state = PartitionState(self.broker_id, (), NO_LEADER, UNKNOWN_EPOCH, (), -1,
                               min(damage.high_watermark, held.log.log_end_offset))
        partition = Partition(name, index, held.log, held.configs, state, held.topic_id)
        self._add(partition)
        return partition

    def replica_damaged(self, partition: Partition, error: CorruptLog) -> None:
        """A read found a damaged batch in `partition`'s log: nothing of it is served. The
        partition alone goes offline here (its directory's other logs keep serving), what the
        replica knows now is kept for `plan_repair`, and the controller is told (it moves the
        leadership away and takes this replica out of the ISR)."""
        key = (partition.topic, partition.index)
        if self.partitions.get(key) is not partition:
            return
        try:
            position, offset, why = partition.log.first_damage(error.path)
        except (OSError, ValueError) as failed:  # cannot even walk it: treat as the disk failing
            self.logs.storage_failed(partition.log, failed if isinstance(failed, OSError) else error)
            return
        state = partition.state
        damage = Damage(str(error.path), position, offset, state.high_watermark,
                        holders_at_damage(self.broker_id, partition.is_leader, state.leader, state.isr))
        self._remove(*key)
        self.offline.add(key)
        was_leader = partition.is_leader
        partition.close()
        self.on_stop_following(partition)
        if was_leader:
            self._leadership_changed(partition, False)
        self.damaged[key] = DamagedReplica(damage, partition.log, partition.configs, partition.topic_id,
                                           state.leader_epoch)
        refused = sole_copy(damage)
        if refused is not None:
            log.error("%s-%d stopped: damaged record batch in %s at position %d, offset %d (%s); nothing is cut, "
                      "because %s. Restore the data or remove the partition's directory to accept the loss",
                      *key, damage.path, position, offset, why, refused)
        else:
            log.error("%s-%d offline: damaged record batch in %s at position %d, offset %d (%s); it will cut its "
                      "log there and refetch once another in-sync replica leads", *key, damage.path, position,
                      offset, why)
        self.on_replica_damaged()

    def _apply_state(self, partition: Partition, wanted: dict[str, Any], now: int) -> None:
        state = partition.state
        was_leader = partition.is_leader
        leader, epoch = wanted["leader"], wanted["leader_epoch"]
        if leader == self.broker_id:
            self.on_stop_following(partition)
            end = partition.log.log_end_offset
            same_leadership = was_leader and state.leader_epoch == epoch
            state.become_leader(epoch, wanted["partition_epoch"], wanted["replicas"], wanted["isr"], end, now)
            state.recovering = wanted.get("leader_recovery_state", 0) == RECOVERING
            # The new epoch starts at our log end: followers truncate to it (KIP-101/279). A
            # mirror's epochs are its source's, carried by the mirrored batches: its leader adds
            # none of its own (roost.broker.link.core).
            if not partition.mirror_link and not same_leadership:
                partition.log.leader_epochs.assign(
                    leader_log_epoch(epoch, partition.log.leader_epochs.latest_epoch), end)
            log.info("%s-%d: leader in epoch %d from offset %d, ISR %s", partition.topic, partition.index,
                     epoch, end, sorted(wanted["isr"]))
            partition.state_changed()
            if state.advance_high_watermark(end):
                partition.high_watermark_moved()
            if not was_leader:
                self._leadership_changed(partition, True)
        else:
            state.become_follower(leader, epoch, wanted["partition_epoch"], wanted["replicas"])
            log.info("%s-%d: follower of %d in epoch %d", partition.topic, partition.index, leader, epoch)
            partition.state_changed()  # delayed produces and fetches answer NOT_LEADER_OR_FOLLOWER
            if was_leader:
                self._leadership_changed(partition, False)
            self.on_stop_following(partition)
            if leader != NO_LEADER:
                self.on_become_follower(partition)
        state.check(partition.log.log_end_offset)

    async def stop_replicas(self, body: dict[str, Any]) -> dict[str, Any]:
        """StopReplica (v3+ shape): stop fetching, and delete the log when asked. Yields to the
        loop every BREATHE_EVERY_S, as LeaderAndIsr does: a topic deletion of a thousand
        partitions is one request."""
        if body["broker_epoch"] != -1 and body["broker_epoch"] < self.broker_epoch:
            return {"error_code": ErrorCode.STALE_BROKER_EPOCH, "partition_errors": []}
        if body["controller_epoch"] < self.controller_epoch:
            return {"error_code": ErrorCode.STALE_CONTROLLER_EPOCH, "partition_errors": []}
        self.controller_epoch = body["controller_epoch"]
        errors = []
        breather = _Breather()
        for topic in body["topic_states"]:
            name = topic["topic_name"]
            for wanted in topic["partition_states"]:
                index, epoch = wanted["partition_index"], wanted["leader_epoch"]
                partition = self.partitions.get((name, index))
                code = ErrorCode.NONE
                if partition is not None and epoch not in (UNKNOWN_EPOCH, DELETE_EPOCH) \
                        and epoch < partition.leader_epoch:
                    code = ErrorCode.FENCED_LEADER_EPOCH
                elif wanted["delete_partition"]:
                    self.drop_partitions(name, [index], delete=True)
                    log.info("%s-%d: stopped and deleted (controller %d)", name, index, body["controller_id"])
                elif partition is not None:
                    # Stop fetching; the log stays (a broker shutting down, or a replica moved away).
                    self.on_stop_following(partition)
                errors.append({"topic_name": name, "partition_index": index, "error_code": code})
                await breather.breathe()
        return {"error_code": ErrorCode.NONE, "partition_errors": errors}

    # the append door ----------------------------------------------------------------------------
    def append(self, entries: Sequence[tuple[TopicPartition, Any]], acks: int, origin: AppendOrigin,
               timeout_s: float, transactional_id: str | None = None, link: str | None = None) -> Appending:
        """The only way into a partition's log on its leader (Kafka's appendRecords): produce
        (origin CLIENT), the group coordinator's commits and group writes (COORDINATOR), and next
        transaction markers. Each entry is (topic-partition, records); each gets an outcome, in
        order. The acks rule (this module's `append.py` says it) is applied here and in the
        purgatory, nowhere else. `done`, when set, resolves once every outcome is final: the
        fsyncs before the ack, and for acks=-1 the high watermark (or `timeout_s`). A client's
        transactional batches need the request's `transactional_id` (Kafka answers
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED without one); control batches come only from the
        coordinator. A cluster link's batches (origin LINK, `link` its name) keep their offsets
        and bytes, and go only into that link's mirrors, which take nothing else."""
        if acks not in VALID_ACKS:
            return refused(entries, ErrorCode.INVALID_REQUIRED_ACKS)
        outcomes: list[AppendOutcome] = []
        durable: list[Any] = []  # futures of self.waits' kind
        awaited: list[AwaitedAppend] = []
        hosted, offline = self.partitions, self.offline
        for key, records in entries:
            partition = hosted.get(key)
            if partition is None or not partition.is_leader or key in offline:
                outcomes.append(AppendOutcome(self.leader_partition(*key)[1]))
                continue
            if origin is AppendOrigin.LINK:
                outcome = self._append_mirrored(partition, records, link)
            elif partition.mirror_link:
                outcome = AppendOutcome(MIRROR_PRODUCE_ERROR, f"{partition.topic} is a mirror of cluster link "
                                        f"{partition.mirror_link!r}: read-only until promoted")
            else:
                outcome = self._append_to_leader(partition, records, acks, origin, transactional_id is not None)
            outcomes.append(outcome)
            if outcome.durable is not None:
                durable.append(outcome.durable)
            if acks == ACKS_ALL and outcome.error == ErrorCode.NONE \
                    and outcome.required_offset > partition.high_watermark:
                awaited.append(AwaitedAppend(partition, outcome.required_offset, outcome.leader_epoch, outcome))
        if acks == ACKS_NONE:
            if durable:
                # Nobody waits for the answer, but the fsync must still happen (its failure is
                # retrieved here, not left unobserved).
                self.waits.when_all(durable)
            return Appending(outcomes)
        if awaited:
            delayed = DelayedProduce(awaited, timeout_s, self.waits)
            if not delayed.done.done():
                durable.append(delayed.done)
        if not durable:
            return Appending(outcomes)
        return Appending(outcomes, _settled(self.waits, durable, outcomes))

    def _append_to_leader(self, partition: Partition, records: Any, acks: int, origin: AppendOrigin,
                          transactional: bool = False) -> AppendOutcome:
        """One entry on its leader (Kafka's Partition.appendRecordsToLeader): the origin's checks,
        the min-ISR check of acks=-1, the append, and the fsync its ack waits for."""
        batches: Batches | None = None
        if origin is AppendOrigin.CLIENT:
            # A client's batches: headers and CRCs, max.message.bytes, no control batches, and
            # transactional ones only with a transactional id (inline: once per produced partition).
            # Kafka's KIP-890 part 1 check (is the partition in the producer's transaction?) is
            # not made: as Kafka with transaction.partition.verification.enable=false.
            if records is None or len(records) == 0:
                return AppendOutcome(ErrorCode.CORRUPT_MESSAGE, "no records")
            try:
                batches = validate_batches(records)
            except InvalidRecordBatch as invalid:
                log.warning("rejected batch for %s-%d: %s", partition.topic, partition.index, invalid)
                return AppendOutcome(ErrorCode(invalid.error_code), str(invalid),
                                     log_start_offset=partition.log_start_offset if invalid.log_validation else -1)
            max_batch = partition.configs["max.message.bytes"]
            for _, batch in batches:  # fields by name, not the properties: once per produced batch
                if batch.batch_length + LOG_OVERHEAD > max_batch:
                    return AppendOutcome(ErrorCode.MESSAGE_TOO_LARGE,
                                         f"batch of {batch.size} bytes exceeds max.message.bytes {max_batch}")
                if batch.attributes & ATTR_CONTROL:
                    return AppendOutcome(ErrorCode.INVALID_RECORD, "control batches come from the coordinator only")
                if batch.attributes & ATTR_TRANSACTIONAL and not transactional:
                    return AppendOutcome(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                         "a transactional batch needs the request's transactional id")
            refused = refused_timestamps(records, batches, TimestampBounds.of(partition.configs),
                                         partition.configs["message.timestamp.type"] == "CreateTime", self.clock_ms())
            if refused:
                return AppendOutcome(ErrorCode.INVALID_TIMESTAMP, TIMESTAMP_REFUSAL,
                                     log_start_offset=partition.log_start_offset, record_errors=tuple(refused))
            try:
                # The topic's compression.type; the log checks max.message.bytes again on the result.
                recompressed = recompress_for_topic(records, batches, partition.configs)
            except InvalidRecordBatch as invalid:
                log.warning("rejected batch for %s-%d: %s", partition.topic, partition.index, invalid)
                return AppendOutcome(ErrorCode(invalid.error_code), str(invalid))
            if recompressed is not None:
                records, batches = recompressed
        # From here a refusal names the partition's log start offset, as Kafka's appendToLocalLog
        # does for every error but unknown partition, not leader, too large, corrupt and storage.
        if acks == ACKS_ALL and partition.isr_below_min():
            return AppendOutcome(ErrorCode.NOT_ENOUGH_REPLICAS,
                                 f"ISR {sorted(partition.state.isr)} is smaller than min.insync.replicas",
                                 log_start_offset=partition.log_start_offset)
        if batches is not None and batches[0][1].producer_id >= 0:
            verdict = check_sequences(partition, batches)
            if isinstance(verdict, Duplicate):
                # A retry of a batch we have: acknowledge it like the first time (acks=all waits
                # for the HW to cover it, as the first attempt would have).
                return AppendOutcome(base_offset=verdict.first_offset, log_start_offset=partition.log_start_offset,
                                     required_offset=verdict.last_offset + 1, leader_epoch=partition.leader_epoch)
            if verdict != ErrorCode.NONE:
                self._log_sequence_refusal(partition, batches[0][1], verdict)
                return AppendOutcome(verdict, log_start_offset=partition.log_start_offset)
        try:
            # Offsets assigned from the log end; each batch stamped with the epoch of the leader
            # that wrote it (outside the CRC: followers and the leader-epoch cache know from it
            # where each epoch began): the log's latest, which a promoted mirror's is.
            info = partition.log.append(records, batches, leader_epoch=partition.write_epoch)
        except MessageTooLarge as error:
            return AppendOutcome(ErrorCode.MESSAGE_TOO_LARGE, str(error))
        except RecordBatchTooLarge as error:
            # Kafka's answer when a batch cannot fit in any segment of this topic.
            return AppendOutcome(ErrorCode.RECORD_LIST_TOO_LARGE, str(error))
        except OSError as error:
            log.error("append to %s-%d failed: %s", partition.topic, partition.index, error)
            self.logs.storage_failed(partition.log, error)
            return AppendOutcome(ErrorCode.KAFKA_STORAGE_ERROR, f"log directory failed: {error}")
        partition.appended()  # followers' parked fetches wake; the HW may move
        partition.bytes_in += len(records)  # the balancer's load sample (roost.broker.balance.sampler)
        partition.messages_in += info.last_offset - info.first_offset + 1
        return AppendOutcome(base_offset=info.first_offset, log_append_time=info.log_append_time,
                             log_start_offset=partition.log_start_offset,
                             durable=self.logs.flush_after_append(partition, len(batches) if batches else 1),
                             required_offset=info.last_offset + 1, leader_epoch=partition.leader_epoch,
                             appended_records=info.last_offset - info.first_offset + 1)

    def _log_sequence_refusal(self, partition: Partition, first: Any, verdict: ErrorCode) -> None:
        """A refused idempotent batch, named with what this leader holds for its producer: a
        client answered OUT_OF_ORDER_SEQUENCE_NUMBER may renumber and re-send (librdkafka bumps
        its epoch), so a fault run's duplicate is traced through this line. At most one line a
        second per partition: a client looping on the refusal cannot flood the log."""
        key = (partition.topic, partition.index)
        now = time.monotonic()
        if now - self._sequence_refusals_logged.get(key, -1.0) < 1.0:
            return
        self._sequence_refusals_logged[key] = now
        entry = partition.log.producer_state.entry(first.producer_id)
        held = "nothing" if entry is None else (
            f"epoch {entry.epoch}, batches "
            + (", ".join(f"{b.first_seq}..{b.last_seq}@{b.first_offset}" for b in entry.batches) or "none"))
        log.warning("%s-%d: refused %s for producer %d epoch %d seq %d..%d (leader epoch %d, log end %d); "
                    "held for it: %s", partition.topic, partition.index, verdict.name, first.producer_id,
                    first.producer_epoch, first.base_sequence, first.last_sequence, partition.leader_epoch,
                    partition.log.log_end_offset, held)

    def _append_mirrored(self, partition: Partition, records: Any, link: str | None) -> AppendOutcome:
        """A cluster link's batches on the mirror's leader, as a follower appends its leader's
        (Kafka's appendRecordsToFollowerOrFutureReplica): checked (headers, CRCs), then appended
        byte for byte at their own offsets, leader epochs kept; the producer state and the
        aborted-transaction index follow the batches as on a follower."""
        if not write_allowed(partition.mirror_link, WriteOrigin.LINK, link):
            return AppendOutcome(ErrorCode.INVALID_REQUEST,
                                 f"{partition.topic} is not a mirror of cluster link {link!r}")
        if records is None or len(records) == 0:
            return AppendOutcome(ErrorCode.CORRUPT_MESSAGE, "no records")
        try:
            batches = validate_batches(records)
        except InvalidRecordBatch as invalid:
            return AppendOutcome(ErrorCode(invalid.error_code), str(invalid))
        try:
            info = partition.log.append(records, batches, assign_offsets=False)
        except NonMonotonicAppend as error:
            return AppendOutcome(ErrorCode.OFFSET_OUT_OF_RANGE, str(error))
        except (MessageTooLarge, RecordBatchTooLarge) as error:
            return AppendOutcome(ErrorCode.MESSAGE_TOO_LARGE, str(error))
        except OSError as error:
            log.error("mirror append to %s-%d failed: %s", partition.topic, partition.index, error)
            self.logs.storage_failed(partition.log, error)
            return AppendOutcome(ErrorCode.KAFKA_STORAGE_ERROR, f"log directory failed: {error}")
        partition.appended()
        return AppendOutcome(base_offset=info.first_offset, log_start_offset=partition.log_start_offset,
                             durable=self.logs.flush_after_append(partition, len(batches)),
                             required_offset=info.last_offset + 1, leader_epoch=partition.leader_epoch,
                             appended_records=info.last_offset - info.first_offset + 1)

    def truncate_mirror(self, partition: Partition, offset: int) -> None:
        """A mirror's leader cuts its log where it parted from its source (leader-epoch rules,
        roost.broker.link.core): its followers then truncate to it as to any leader."""
        assert partition.mirror_link and partition.is_leader, "only a mirror's leader truncates to its source"
        assert 0 <= offset <= partition.log.log_end_offset, offset
        partition.log.truncate_to(offset)
        partition.state.truncated(partition.log.log_end_offset)
        partition.state_changed()

    def restart_mirror_at(self, partition: Partition, offset: int) -> None:
        """The source's log starts past the mirror's end (retention moved on): start over there."""
        assert partition.mirror_link and partition.is_leader, "only a mirror's leader starts over"
        partition.log.truncate_fully_and_start_at(offset)
        partition.state.truncated(partition.log.log_end_offset)
        partition.state_changed()

    # the fetch door -----------------------------------------------------------------------------
    def fetch(self, params: FetchParams, wanted: list[FetchWanted]) -> Fetching:
        """The only way to read a partition's log on its leader (Kafka's fetchMessages): a
        consumer's fetch, a follower's (`params.replica_id` >= 0) and, next, share fetches and
        cluster links. Each wanted partition gets an outcome, in order (`fetch.py` says what is
        checked). A follower's fetch tells the leader where the follower is once, when it comes
        (the high watermark may move, the follower may join the ISR).

        Answered at once (`done` None) when the reads found `min_bytes`, any partition is in
        error or diverging, `max_wait_s` <= 0, or there is nothing to wait on; else the fetch
        parks in the purgatory (`DelayedFetch`) and `done` resolves with the outcomes of the read
        that answers: when MinBytes are there, a partition errs, `max_wait_s` passes, or this
        broker becomes the leader of a partition the fetching follower replicates (its next
        fetch must name it). Whoever is not a live broker of the cluster is the caller's to
        refuse (the handler knows who sent the request)."""
        plan = FetchPlan(self, params, wanted)
        outcomes, found, errored = plan.read()
        if found >= params.min_bytes or errored or params.max_wait_s <= 0 or not plan.partitions():
            return Fetching(outcomes)
        max_wait = params.max_wait_s
        if params.follower:
            max_wait = self._parked_followers.max_wait(params.replica_id, plan.partitions(), max_wait)
        parked = DelayedFetch(plan, params.min_bytes, max_wait, self.waits)
        if params.follower:
            self._parked_followers.park(params.replica_id, parked)
        return Fetching(outcomes, parked.done)

    def read(self, partition: Partition, fetch_offset: int, max_bytes: int, min_one_batch: bool,
             follower: bool = False, read_committed: bool = False) -> ReadResult:
        """Whole batches from `fetch_offset`: a consumer reads below the high watermark (below the
        last stable offset with read_committed), a follower up to the log end. Raises
        OffsetOutOfRange, or OSError once the read failed (the directory is then offline)."""
        if follower:
            limit = partition.log.log_end_offset
        elif read_committed:
            limit = partition.last_stable_offset
        else:
            limit = partition.high_watermark
        try:
            return partition.log.read(fetch_offset, max_bytes, max_offset=limit, min_one_batch=min_one_batch)
        except CorruptLog as error:
            # Bytes that fail their checks on a disk that reads: this partition alone goes
            # offline and repairs from another replica when one holds the data (`replica_damaged`).
            log.error("reading %s-%d at offset %d failed: %s", partition.topic, partition.index, fetch_offset, error)
            self.replica_damaged(partition, error)
            raise
        except OSError as error:
            # A failed read or a batch whose CRC does not check (CorruptLog, naming the file and
            # position): the directory goes offline as for any I/O error, so its leaders move to
            # replicas on healthy disks; nothing of it is served.
            log.error("reading %s-%d at offset %d failed: %s", partition.topic, partition.index, fetch_offset, error)
            self.logs.storage_failed(partition.log, error)
            raise

    def leader_throttle(self, partition: Partition) -> ReplicationQuota | None:
        """The leader quota when `partition` is leader-throttled on this broker (its topic's
        leader.replication.throttled.replicas names it here and the rate is bounded)."""
        quota = self.leader_quota
        if quota.limited and throttle_names(partition.configs.get(LEADER_THROTTLED_REPLICAS, ""),
                                            partition.index, self.broker_id):
            return quota
        return None

    def follower_fetched(self, partition: Partition, replica: int, fetch_offset: int) -> None:
        """A follower's fetch tells where it is: maybe the HW moves, maybe it joins the ISR."""
        partition.follower_fetched(replica, fetch_offset, self.clock_ms())
        if partition.state.may_join_isr(replica) and replica in self.metadata.brokers:
            self.on_follower_caught_up(partition, replica)

    def diverging_epoch(self, partition: Partition, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
        """For a follower's fetch: (epoch, end offset) where its log departs from ours, if it does."""
        return divergence(partition.log.leader_epochs, partition.log.log_end_offset, last_fetched_epoch,
                          fetch_offset)

    # offsets ----------------------------------------------------------------------------------
    def delete_records(self, partition: Partition, offset: int) -> tuple[ErrorCode, int]:
        """DeleteRecords: move the log start up to `offset` (-1: as far as may go). Kafka's
        bound is the high watermark; Roost's is the last stable offset, which is the high
        watermark unless a transaction is undecided: cutting under its first record would leave
        part of it to read_committed consumers once it commits. Past it: OFFSET_OUT_OF_RANGE, as
        past the high watermark (the request can be made again once the transaction ends)."""
        bound = partition.last_stable_offset
        if offset == -1:
            offset = bound
        if offset < 0 or offset > bound:
            if 0 <= offset <= partition.high_watermark:
                log.info("DeleteRecords to %d in %s refused: an undecided transaction starts at %d",
                         offset, partition.log.directory.name, bound)
            return ErrorCode.OFFSET_OUT_OF_RANGE, -1
        return ErrorCode.NONE, partition.log.delete_records_before(offset)

    # high watermark checkpoints ---------------------------------------------------------------
    def start_checkpoints(self, interval_ms: int) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                self.checkpoint_high_watermarks()

        self._checkpointer = asyncio.ensure_future(loop())

    def checkpoint_high_watermarks(self) -> None:
        """Kafka's replication-offset-checkpoint: where each partition's HW stood, so that a
        restarted replica does not start from 0 (a hint: an older value only delays consumers)."""
        live = [p for p in self.partitions.values() if not p.closed]
        hws = {(p.topic, p.index): p.high_watermark for p in live}
        if hws == self._checkpointed_hws:
            return
        by_dir: dict[Path, dict[tuple[str, int], int]] = {d: {} for d in self.logs.checkpoint_dirs()}
        for p in live:
            by_dir.setdefault(self.logs.logs_dir_of(p.log), {})[(p.topic, p.index)] = p.high_watermark
        for logs_dir, dir_hws in by_dir.items():
            try:
                write_hw_checkpoint(logs_dir / HW_CHECKPOINT_FILE, dir_hws)
            except OSError as error:
                failed = [p for p in live if self.logs.logs_dir_of(p.log) == logs_dir]
                log.error("cannot write the HW checkpoint in %s: %s", logs_dir, error)
                if failed:
                    self.logs.storage_failed(failed[0].log, error)
        self._checkpointed_hws = hws

    async def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._checkpointer
        if self.partitions:
            self.checkpoint_high_watermarks()
        for partition in self.partitions.values():
            partition.close()
            partition.log.close()
        self.partitions.clear()
        for damaged in self.damaged.values():
            damaged.log.close()
        self.damaged.clear()
        self._hosted_per_topic.clear()


def _settled(waits: Waits, futures: list[Any], outcomes: list[AppendOutcome]) -> Any:
    """Done once every wait is over (fsyncs, the purgatory), the outcomes then final: a future,
    no task."""
    settled = waits.future()

    def all_done(results: Any) -> None:
        mark_failed_fsync(outcomes, results.result())
        if not settled.done():
            settled.set_result(None)

    waits.when_all(futures).add_done_callback(all_done)
    return settled


HW_CHECKPOINT_FILE = "replication-offset-checkpoint"


def write_hw_checkpoint(path: Path, hws: dict[tuple[str, int], int]) -> None:
    lines = ["0", str(len(hws)), *(f"{t} {p} {hw}" for (t, p), hw in sorted(hws.items()))]
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, ("\n".join(lines) + "\n").encode(), durable_name=False)


def read_hw_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """The checkpoint's HWs; empty when it is missing or unreadable (it is only a hint)."""
    try:
        lines = path.read_text().split("\n")
        if lines[0] != "0" or int(lines[1]) != len(lines) - 3:
            raise ValueError("bad header")
        found = {}
        for line in lines[2:-1]:
            topic, partition, hw = line.split(" ")
            found[(topic, int(partition))] = int(hw)
        return found
    except FileNotFoundError:
        return {}
    except (ValueError, IndexError, UnicodeDecodeError) as error:
        log.warning("ignoring unreadable %s: %s", path, error)
        return {}


class DamagedReplica(NamedTuple):
    """A partition offline here for a damaged batch: what `plan_repair` needs, and what hosting
    it again takes."""

    damage: Damage
    log: PartitionLog
    configs: dict[str, Any]
    topic_id: uuid.UUID | None
    leader_epoch: int  # the partition's when the damage was found


__all__ = ["ACKS_ALL", "ACKS_LEADER", "ACKS_NONE", "AppendOrigin", "AppendOutcome", "Appending", "OffsetOutOfRange",
           "ReplicaManager"]
