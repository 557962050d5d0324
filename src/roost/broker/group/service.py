"""The group coordinator's asyncio shell: which groups this broker coordinates, their committed
offsets, the commit path, and the timers.

Kafka's placement: a group's coordinator is the leader of its `__consumer_offsets` partition
(`offsets_partition_for`). The replica manager tells this service when the broker starts or stops
leading one of those partitions (its leadership listeners):

- on election the partition's offsets are read back from the log start to the log end in chunks,
  yielding to the event loop between chunks, into a store of the partition's own; meanwhile its
  groups answer COORDINATOR_LOAD_IN_PROGRESS (clients retry the same broker);
- on resignation (follower now, or the partition dropped) its groups and offsets are unloaded and
  answer NOT_COORDINATOR (clients look the coordinator up again);
- groups of partitions this broker does not lead answer NOT_COORDINATOR.

Commits are appended with acks = `offsets.commit.required.acks` (-1: every in-sync replica must
have them) and answered once the high watermark covers the batch (and its fsync, where the topic
asks for one), or at `offsets.commit.timeout.ms`. A commit becomes visible to OffsetFetch only when
it succeeded. Log errors map to the coordinator errors Kafka answers (`commit_error`).

The pure state machine (joins, syncs, heartbeats) is `GroupCoordinator`; this shell holds the
loading state, the clock, and the I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from roost.broker.coordinators.load import LoadState, coordinator_status, log_chunks
from roost.broker.group.classic_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    GroupCoordinator,
    GroupLimits,
    GroupState,
)
from roost.broker.group.consumer_protocol import ConsumerGroupConfig, ConsumerGroupCoordinator, TopicMeta
from roost.broker.group.consumer_protocol_records import GroupRecords, delta, record_type, snapshot
from roost.broker.group.migration import (
    MigrationPolicy,
    MigrationRefused,
    classic_group_from_consumer,
    consumer_group_from_classic,
    downgrade_allowed,
    upgrade_refusal,
)
from roost.broker.group.offsets import (
    CommittedOffset,
    OffsetKey,
    OffsetStore,
    offset_batch,
    offsets_partition_for,
)
from roost.broker.group.share_group import SHARE_PROTOCOL_TYPE, ShareGroupCoordinator
from roost.broker.group.share_records import SHARE_RECORD_TYPES, ShareGroupRecords
from roost.broker.group.share_records import snapshot as share_snapshot
from roost.broker.metadata.cache import BrokerEndpoint, MetadataCache
from roost.broker.metadata.catalog import INTERNAL_TOPICS, OFFSETS_TOPIC
from roost.broker.replica.append import ACKS_ALL, ACKS_LEADER, AppendOrigin, AppendOutcome
from roost.broker.replica.manager import ReplicaManager
from roost.broker.replica.partition import Partition
from roost.clock import Clock, now_ms
from roost.config import BrokerConfig
from roost.log import OffsetOutOfRange
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import build_batch

log = logging.getLogger("roost.broker.group")

TICK_SECONDS = 0.1

# Kafka's mapping of a commit's log error to the coordinator's answer (GroupMetadataManager).
_COMMIT_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}



def commit_error(log_error: ErrorCode) -> ErrorCode:
    """What an OffsetCommit answers for a commit whose append ended with `log_error`."""
    return _COMMIT_ERRORS.get(log_error, log_error)


def offsets_topic_configs(config: BrokerConfig) -> dict[str, Any]:
    """The topic configs `__consumer_offsets` is created with (compacted, kept forever)."""
    return {
        "cleanup.policy": "compact",
        "segment.bytes": config["offsets.topic.segment.bytes"],
        "retention.ms": -1,
    }


@dataclass(eq=False)
class OwnedPartition:
    """An offsets partition this broker leads, and its groups' offsets."""

    partition: Partition
    store: OffsetStore = field(default_factory=OffsetStore)
    state: LoadState = LoadState.LOADING
    task: asyncio.Task[None] | None = None
    deleted_topics: set[str] = field(default_factory=set)  # deleted while loading: forget after


class GroupService:
    def __init__(self, config: BrokerConfig, replicas: ReplicaManager, metadata: MetadataCache,
                 clock_ms: Clock = now_ms) -> None:
        self.clock_ms = clock_ms  # the one clock (roost.clock); the handlers read it here too
        self.coordinator = GroupCoordinator(GroupLimits(
            min_session_timeout_ms=config["group.min.session.timeout.ms"],
            max_session_timeout_ms=config["group.max.session.timeout.ms"],
            initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
            max_size=config["group.max.size"],
        ))
        # KIP-848's consumer groups, beside the classic ones: a group id is in one of the two.
        self.consumer = ConsumerGroupCoordinator(ConsumerGroupConfig(
            heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
            session_timeout_ms=config["group.consumer.session.timeout.ms"],
            max_size=config["group.consumer.max.size"],
            assignors=tuple(n.strip() for n in config["group.consumer.assignors"].split(",")),
        ))
        # Whether a live group may move between the two (migration.py).
        self.migration_policy = MigrationPolicy(config["group.consumer.migration.policy"])
        # KIP-932's share groups, a third kind beside them (a group id is in one of the three).
        self.share = ShareGroupCoordinator(config["group.share.max.size"])
        # The share groups' session timeouts (their group configs, else the broker's).
        self.share_session_timeout: Callable[[str], int] = lambda _group: config["group.share.session.timeout.ms"]
        # What was last appended for each consumer-protocol or share group (record key -> value):
        # each change appends the difference (consumer_records.delta).
        self._written: dict[str, dict[bytes, bytes]] = {}
        self._config = config
        self._replicas = replicas
        self._metadata = metadata
        self._retention_ms = config["offsets.retention.minutes"] * 60_000
        self._commit_timeout_s = config["offsets.commit.timeout.ms"] / 1000
        # -1: every in-sync replica; any other value: the leader alone.
        self._required_acks = ACKS_ALL if config["offsets.commit.required.acks"] == ACKS_ALL else ACKS_LEADER
        self._owned: dict[int, OwnedPartition] = {}  # offsets partition index -> what we lead
        self._expiry_check_seconds = config["offsets.retention.check.interval.ms"] / 1000
        self._tasks: list[asyncio.Task[None]] = []
        self._in_flight: set[asyncio.Future[ErrorCode]] = set()  # commits and deletions awaiting acks
        self._started = False
        # Called when FindCoordinator finds no `__consumer_offsets`: a cluster asks its
        # controller to create it (must be idempotent and must not block). A standalone broker
        # creates the topic at start (`ensure_offsets_topic` in broker.py), so it stays a no-op.
        self.on_offsets_topic_missing: Callable[[], None] = lambda: None
        # Told a share group that DeleteGroups removed (the share state of its partitions goes).
        self.on_share_group_deleted: Callable[[str], None] = lambda _group: None
        replicas.leadership_listeners.append(self.leadership_changed)

    # lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the timers and take up the offsets partitions this broker already leads."""
        self._started = True
        for partition in self._replicas.hosted():
            if partition.topic == OFFSETS_TOPIC and partition.is_leader:
                self._elected(partition)
        self._tasks.append(asyncio.ensure_future(self._tick_loop()))
        self._tasks.append(asyncio.ensure_future(self._expiry_loop()))

    async def stop(self) -> None:
        self._started = False
        tasks: list[asyncio.Future[Any]] = [*self._tasks, *self._in_flight]
        tasks += [owned.task for owned in self._owned.values() if owned.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            self.coordinator.tick(self.clock_ms())
            now = self.clock_ms()
            for group_id in self.consumer.tick(now):
                self.maybe_downgrade(group_id, now)
                self.persist_consumer_group(group_id, now)
            timeouts = {g: self.share_session_timeout(g) for g in self.share.groups}
            for group_id in self.share.tick(now, timeouts, self._config["group.share.session.timeout.ms"]):
                self.persist_consumer_group(group_id, now)

    async def _expiry_loop(self) -> None:
        while True:
            await asyncio.sleep(self._expiry_check_seconds)
            self.expire_offsets(self.clock_ms())

    # leadership of offsets partitions ---------------------------------------------------------
    def leadership_changed(self, partition: Partition, leader: bool) -> None:
        """The replica manager's listener: load on election, unload on resignation."""
        if partition.topic != OFFSETS_TOPIC or not self._started:
            return  # before start, `start` takes up whatever this broker leads by then
        if leader:
            self._elected(partition)
        else:
            self._resigned(partition)

    def _elected(self, partition: Partition) -> None:
        known = self._owned.get(partition.index)
        if known is not None:
            if known.partition is partition and known.state != LoadState.FAILED:
                return  # already loading or loaded from this very log
            self._resigned(known.partition)
        owned = OwnedPartition(partition)
        self._owned[partition.index] = owned
        owned.task = asyncio.ensure_future(self._load(owned))
        log.info("coordinator for %s-%d (leader epoch %d): loading its groups", OFFSETS_TOPIC,
                 partition.index, partition.leader_epoch)

    def _resigned(self, partition: Partition) -> None:
        owned = self._owned.get(partition.index)
        if owned is None or owned.partition is not partition:
            return  # not ours, or news about a replica that a newer one replaced
        del self._owned[partition.index]
        if owned.task is not None:
            owned.task.cancel()
        groups = {g for g in self.coordinator.groups if self.partition_for(g) == partition.index}
        groups.update(owned.store.groups())
        groups.update(g for g in self.consumer.groups if self.partition_for(g) == partition.index)
        groups.update(g for g in self.share.groups if self.partition_for(g) == partition.index)
        self.coordinator.unload(groups)
        self.consumer.unload(groups)
        self.share.unload(groups)
        for group_id in groups:
            self._written.pop(group_id, None)
        log.info("no longer coordinator for %s-%d: unloaded %d groups (%d offsets)", OFFSETS_TOPIC,
                 partition.index, len(groups), len(owned.store))

    async def _load(self, owned: OwnedPartition) -> None:
        partition = owned.partition
        where = f"{OFFSETS_TOPIC}-{owned.partition.index}"
        started = time.monotonic()
        records = 0
        consumer_groups = GroupRecords()
        share_groups = ShareGroupRecords()

        def group_record(key: bytes, value: bytes | None) -> None:
            if record_type(key) in SHARE_RECORD_TYPES:
                share_groups.apply(key, value)
            else:
                consumer_groups.apply(key, value)
        try:
            async for chunk in log_chunks(partition):
                records += owned.store.replay(chunk, where, group_record)
        except (OSError, OffsetOutOfRange):
            log.exception("loading the groups of %s failed; answering NOT_COORDINATOR for them", where)
            owned.state = LoadState.FAILED
            return
        owned.state = LoadState.LOADED
        for group_id, (group, written) in consumer_groups.groups(self.clock_ms(), self.consumer).items():
            if self.partition_for(group_id) == partition.index and group_id not in self.consumer.groups:
                # The subscribed topics as the metadata has them now (they are not in the records):
                # else the first heartbeat would see them "change", raise the epoch and make every
                # classic member rejoin for nothing.
                group.topics = {name: meta for name, meta in self.topic_view().items()
                                if any(m.subscribes_to(name) for m in group.members.values())}
                self.consumer.groups[group_id] = group
                self._written[group_id] = written
                log.info("group %s (consumer protocol) loaded: epoch %d, %d members", group_id,
                         group.group_epoch, len(group.members))
        for group_id, (share_group, written) in share_groups.groups(now_ms()).items():
            if self.partition_for(group_id) == partition.index and group_id not in self.share.groups:
                self.share.groups[group_id] = share_group
                self._written[group_id] = written
                log.info("share group %s loaded: epoch %d, %d members", group_id, share_group.group_epoch,
                         len(share_group.members))
        for topic in sorted(owned.deleted_topics):
            self._forget_topic_in(owned, topic, self.clock_ms())
        owned.deleted_topics.clear()
        log.info("loaded %s: %d offset records, %d offsets of %d groups in %.3f s", where, records,
                 len(owned.store), len(owned.store.groups()), time.monotonic() - started)

    # online migration between the protocols (migration.py) -----------------------------------
    def upgrade(self, group_id: str, now: int) -> str | None:
        """A consumer-protocol member joins the live classic group `group_id`: convert it into a
        consumer group whose classic members stay (its records are written with the joining
        heartbeat's). Returns why it cannot convert, None once it has."""
        classic = self.coordinator.groups[group_id]
        why = upgrade_refusal(classic, self.migration_policy, self.consumer.config.max_size)
        if why is None:
            try:
                converted = consumer_group_from_classic(classic, self.topic_view(), now,
                                                        self.consumer.config.assignors[0])
            except MigrationRefused as refused:
                why = str(refused)
        if why is not None:
            log.info("group %s: %s", group_id, why)
            return why
        self.coordinator.take_for_upgrade(group_id)
        self.consumer.groups[group_id] = converted
        log.info("group %s converted from the classic to the consumer protocol: epoch %d, %d classic members",
                 group_id, converted.group_epoch, len(converted.members))
        return None

    def maybe_downgrade(self, group_id: str, now: int) -> bool:
        """After members left a consumer group: if only classic members remain (and the policy
        allows), it becomes a classic group again and rebalances. The caller writes the consumer
        group's tombstones (`persist_consumer_group`)."""
        group = self.consumer.groups.get(group_id)
        if group is None or not downgrade_allowed(group, self.migration_policy, self.coordinator.limits.max_size):
            return False
        classic = classic_group_from_consumer(group, now)
        del self.consumer.groups[group_id]
        self.coordinator.adopt(now, classic, "converted back from the consumer protocol")
        log.info("group %s converted from the consumer to the classic protocol: generation %d, %d members",
                 group_id, classic.generation, len(classic.members))
        return True

    # which groups are ours --------------------------------------------------------------------
    def offsets_partition_count(self) -> int:
        info = self._metadata.get(OFFSETS_TOPIC)
        return info.partitions if info is not None else self._config["offsets.topic.num.partitions"]

    def partition_for(self, group_id: str) -> int:
        return offsets_partition_for(group_id, self.offsets_partition_count())

    def coordinator_for(self, group_id: str) -> BrokerEndpoint | None:
        """Where the group's coordinator is: the leader of its offsets partition, if it has one."""
        if OFFSETS_TOPIC not in self._metadata:
            self.on_offsets_topic_missing()
            return None
        return self._metadata.coordinator_endpoint(OFFSETS_TOPIC, self.partition_for(group_id))

    def status(self, group_id: str) -> ErrorCode:
        """NONE when this broker coordinates the group now; else what its requests answer."""
        return coordinator_status(self._owned.get(self.partition_for(group_id)))

    def offsets(self, group_id: str) -> OffsetStore:
        """The store holding the group's offsets; only for a group whose `status` is NONE."""
        owned = self._owned[self.partition_for(group_id)]
        assert owned.state == LoadState.LOADED
        return owned.store

    def _loaded(self) -> Iterator[OwnedPartition]:
        for owned in list(self._owned.values()):
            if owned.state == LoadState.LOADED and owned.partition.is_leader:
                yield owned

    def topic_view(self) -> dict[str, TopicMeta]:
        """The topics consumer groups may subscribe to (internal ones excluded), by name."""
        return {info.name: TopicMeta(info.name, info.topic_id, info.partitions) for info in self._metadata
                if info.name not in INTERNAL_TOPICS and info.partitions > 0}

    def group_type(self, group_id: str) -> str:
        """"consumer" for a KIP-848 group, "share" for a share group, else "classic" (Kafka's
        ListGroups v5 GroupType)."""
        if group_id in self.share.groups:
            return "share"
        return "consumer" if group_id in self.consumer.groups else "classic"

    def is_loading(self) -> bool:
        return any(owned.state == LoadState.LOADING for owned in self._owned.values())

    def listing(self) -> list[tuple[str, str, str]]:
        """(group, protocol type, state) of every group this broker coordinates and has loaded;
        a group known only by its committed offsets is Empty."""
        listed: dict[str, tuple[str, str]] = {}
        for owned in self._loaded():
            for group_id in owned.store.groups():
                listed[group_id] = ("consumer", GroupState.EMPTY.value)
        for group_id, protocol_type, state in self.coordinator.listing():
            if self.status(group_id) == ErrorCode.NONE:
                listed[group_id] = (protocol_type, state)
        for group_id, state in self.consumer.listing():
            if self.status(group_id) == ErrorCode.NONE:
                listed[group_id] = (CONSUMER_PROTOCOL_TYPE, state)
        for group_id, state in self.share.listing():
            if self.status(group_id) == ErrorCode.NONE:
                listed[group_id] = (SHARE_PROTOCOL_TYPE, state)
        return [(g, p, s) for g, (p, s) in sorted(listed.items())]

    def coordinated(self) -> list[tuple[str, int, dict[tuple[str, int], int]]]:
        """(group, members, committed offset by (topic, partition)) of every group this broker
        coordinates and has loaded: what the consumer-group metrics report."""
        found: dict[str, dict[tuple[str, int], int]] = {}
        for owned in self._loaded():
            for group_id in owned.store.groups():
                found[group_id] = {tp: c.offset for tp, c in owned.store.for_group(group_id).items()}
        for group_id in [g for g, _, _ in self.coordinator.listing()] + [g for g, _ in self.consumer.listing()]:
            if group_id not in found and self.status(group_id) == ErrorCode.NONE:
                found[group_id] = {}
        counts = {g: len(group.members) for g, group in self.coordinator.groups.items()}
        counts.update({g: len(group.members) for g, group in self.consumer.groups.items()})
        return [(g, counts.get(g, 0), offsets) for g, offsets in sorted(found.items())]

    # committing -------------------------------------------------------------------------------
    def commit(self, group_id: str, offsets: dict[tuple[str, int], CommittedOffset],
               now: int) -> ErrorCode | Awaitable[ErrorCode]:
        """Append the group's commits as one batch; the answer (at once, or when the batch is
        replicated and durable) is NONE or the coordinator error every partition gets."""
        assert offsets
        code = self.status(group_id)
        if code != ErrorCode.NONE:
            return code
        owned = self._owned[self.partition_for(group_id)]
        entries = {(group_id, topic, index): value for (topic, index), value in offsets.items()}
        appended = self._append_acked(owned.partition, dict(entries), (), now)
        if isinstance(appended, ErrorCode):
            return appended
        outcome, done = appended
        owned.store.begin_commit(entries)
        if done is None:
            code = commit_error(outcome.error)
            owned.store.finish_commit(entries, outcome.base_offset, code == ErrorCode.NONE)
            return code
        # The outcome is applied whether or not anyone still awaits the answer (a client may
        # hang up); the caller gets a shield so it cannot cancel the bookkeeping.
        return self._keep(self._finish_commit(owned.store, entries, outcome, done))

    @staticmethod
    async def _finish_commit(store: OffsetStore, entries: dict[OffsetKey, CommittedOffset], outcome: AppendOutcome,
                             done: asyncio.Future[None]) -> ErrorCode:
        code = await _settled(outcome, done)
        store.finish_commit(entries, outcome.base_offset, code == ErrorCode.NONE)
        return code

    def _keep(self, work: Awaitable[ErrorCode]) -> Awaitable[ErrorCode]:
        """Run `work` to its end even if its caller goes away: the caller gets a shield."""
        running = asyncio.ensure_future(work)
        self._in_flight.add(running)
        running.add_done_callback(self._in_flight.discard)
        return asyncio.shield(running)

    def _append_acked(self, partition: Partition, entries: dict[OffsetKey, CommittedOffset | None],
                      deleted_groups: Iterable[str], now: int
                      ) -> tuple[AppendOutcome, asyncio.Future[None] | None] | ErrorCode:
        """Append one batch of offset records with the commits' acks: (its outcome, and what to
        wait for before that outcome is final), or, if nothing was appended, the coordinator
        error to answer."""
        outcome, done = self._append(partition, entries, now, deleted_groups, self._required_acks)
        if outcome.base_offset < 0:  # nothing appended
            assert outcome.error != ErrorCode.NONE and done is None, outcome
            return commit_error(outcome.error)
        return outcome, done

    # KIP-848 consumer groups' records --------------------------------------------------------------
    def persist_consumer_group(self, group_id: str, now: int) -> ErrorCode | Awaitable[ErrorCode]:
        """Append what changed in a consumer-protocol group since the last append (its records,
        Kafka's layouts; tombstones for what is gone), with the commits' acks: the answer is
        NONE, or the coordinator error, at once or when the batch is replicated."""
        owned = self._owned.get(self.partition_for(group_id))
        if owned is None or owned.state != LoadState.LOADED:
            return ErrorCode.NOT_COORDINATOR
        group = self.consumer.groups.get(group_id)
        share_group = self.share.groups.get(group_id)
        before = self._written.get(group_id, {})
        after = snapshot(group) if group is not None else share_snapshot(share_group) if share_group is not None else {}
        records = delta(before, after)
        if not records:
            return ErrorCode.NONE
        batch = bytearray(build_batch(records, timestamp_ms=now))
        appending = self._replicas.append([((OFFSETS_TOPIC, owned.partition.index), batch)], self._required_acks,
                                          AppendOrigin.COORDINATOR, self._commit_timeout_s)
        outcome = appending.outcomes[0]
        if outcome.base_offset < 0:
            log.warning("group %s: its records were not appended: %s", group_id, outcome.error.name)
            self._forget_written(group_id, before, after)
            return commit_error(outcome.error)
        if after:
            self._written[group_id] = after
        else:
            self._written.pop(group_id, None)
        if appending.done is None:
            return commit_error(outcome.error)

        async def settled(done: asyncio.Future[None]) -> ErrorCode:
            code = await _settled(outcome, done)
            if code != ErrorCode.NONE:
                self._forget_written(group_id, before, after)
            return code
        return self._keep(settled(appending.done))

    def _forget_written(self, group_id: str, before: dict[bytes, bytes], after: dict[bytes, bytes]) -> None:
        """An append failed: the log may hold either version of these keys, so the next append
        rewrites every record of the group (and tombstones every key it no longer has)."""
        if self.consumer.groups.get(group_id) is None and self.share.groups.get(group_id) is None and not before:
            return
        self._written[group_id] = dict.fromkeys({*before, *after}, b"")

    # transactions -----------------------------------------------------------------------------
    def check_txn_commit(self, group_id: str, generation: int, member_id: str) -> ErrorCode:
        """Kafka's doTxnCommitOffsets checks: a named member must be in the group, a given
        generation must be the group's; an unknown group is fine (it only holds offsets). For a
        consumer-protocol group the generation is the member epoch (Kafka's validateOffsetCommit;
        a stale one is ILLEGAL_GENERATION, which TxnOffsetCommit's clients know)."""
        modern = self.consumer.groups.get(group_id)
        if modern is not None:
            member = modern.members.get(member_id)
            if member_id and member is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if generation >= 0 and (member is None or generation != member.member_epoch):
                return ErrorCode.ILLEGAL_GENERATION
            return ErrorCode.NONE
        group = self.coordinator.groups.get(group_id)
        if member_id and (group is None or member_id not in group.members):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation >= 0 and (group is None or generation != group.generation):
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def txn_commit(self, group_id: str, producer_id: int, producer_epoch: int,
                   offsets: dict[tuple[str, int], CommittedOffset], now: int) -> ErrorCode | Awaitable[ErrorCode]:
        """TxnOffsetCommit: append the offsets as a transactional batch of the producer; once
        replicated they are held, invisible, until the transaction's marker reaches this
        partition (`txn_marker_written`)."""
        assert offsets
        code = self.status(group_id)
        if code != ErrorCode.NONE:
            return code
        owned = self._owned[self.partition_for(group_id)]
        entries = {(group_id, topic, index): value for (topic, index), value in offsets.items()}
        batch = offset_batch(dict(entries), now, producer_id=producer_id, producer_epoch=producer_epoch)
        appending = self._replicas.append([((OFFSETS_TOPIC, owned.partition.index), batch)], self._required_acks,
                                          AppendOrigin.COORDINATOR, self._commit_timeout_s)
        outcome = appending.outcomes[0]
        if appending.done is None:
            code = commit_error(outcome.error)
            if code == ErrorCode.NONE:
                owned.store.hold_txn(producer_id, entries, outcome.base_offset)
            return code
        return self._keep(self._finish_txn_commit(owned.store, producer_id, entries, outcome, appending.done))

    @staticmethod
    async def _finish_txn_commit(store: OffsetStore, producer_id: int, entries: dict[OffsetKey, CommittedOffset],
                                 outcome: AppendOutcome, done: asyncio.Future[None]) -> ErrorCode:
        code = await _settled(outcome, done)
        if code == ErrorCode.NONE:
            store.hold_txn(producer_id, entries, outcome.base_offset)
        return code

    def txn_marker_written(self, partition_index: int, producer_id: int, commit: bool) -> None:
        """A transaction marker reached our offsets partition `partition_index` (replicated):
        the producer's held offsets there become visible (COMMIT) or go (ABORT). A partition
        still loading meets the marker in its log instead."""
        owned = self._owned.get(partition_index)
        if owned is None or owned.state != LoadState.LOADED:
            return
        shown = owned.store.end_txn(producer_id, commit)
        log.debug("transaction of producer %d on %s-%d %s: %d offsets visible", producer_id, OFFSETS_TOPIC,
                  partition_index, "committed" if commit else "aborted", shown)

    # deleting groups and their offsets ---------------------------------------------------------
    def delete_group(self, group_id: str, now: int) -> ErrorCode | Awaitable[ErrorCode]:
        """DeleteGroups for one group (Kafka's GroupCoordinator.handleDeleteGroups): a group
        without members goes with its offsets, whose tombstones (and the group metadata key's)
        are appended with the commits' acks; the answer comes when they are replicated and
        durable. A group with members is NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND."""
        code = self.status(group_id)
        if code != ErrorCode.NONE:
            return code
        owned = self._owned[self.partition_for(group_id)]
        group = self.coordinator.groups.get(group_id)
        keys = owned.store.keys_for_group(group_id)
        if self.consumer.is_active(group_id) or self.share.is_active(group_id):
            return ErrorCode.NON_EMPTY_GROUP
        if self.share.remove_empty(group_id):
            self.on_share_group_deleted(group_id)  # its share-partitions' state goes too
            self.persist_consumer_group(group_id, now)  # its records' tombstones
            if group is None and not keys:
                return ErrorCode.NONE
        if self.consumer.remove_empty(group_id):
            self.persist_consumer_group(group_id, now)  # its records' tombstones
            if group is None and not keys:
                return ErrorCode.NONE
        if group is None and not keys:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group is not None and group.state != GroupState.EMPTY:
            return ErrorCode.NON_EMPTY_GROUP
        return self._delete(owned, group_id, keys, now, whole_group=True)

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]], now: int
                       ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode | Awaitable[ErrorCode]]]:
        """OffsetDelete (Kafka's GroupCoordinator.handleDeleteOffsets): (the group's error, each
        partition's answer). An empty group's offsets may all go; a consumer group with members
        keeps those of the topics its members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC); other
        groups with members are NON_EMPTY_GROUP. Tombstones as for DeleteGroups; an empty group
        left without offsets is deleted too, as in Kafka."""
        code = ErrorCode.INVALID_GROUP_ID if not group_id else self.status(group_id)
        if code != ErrorCode.NONE:
            return code, {}
        owned = self._owned[self.partition_for(group_id)]
        group = self.coordinator.groups.get(group_id)
        if group is None and not owned.store.keys_for_group(group_id) and not self.consumer.is_active(group_id):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        answers: dict[tuple[str, int], ErrorCode | Awaitable[ErrorCode]] = {}
        eligible = list(dict.fromkeys(partitions))
        if group is not None and group.state != GroupState.EMPTY:
            if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
                return ErrorCode.NON_EMPTY_GROUP, {}
            for topic, index in eligible:
                if group.is_subscribed_to(topic):
                    answers[(topic, index)] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            eligible = [p for p in eligible if p not in answers]
        modern = self.consumer.groups.get(group_id)
        if modern is not None and modern.members:
            for topic, index in eligible:
                if any(m.subscribes_to(topic) for m in modern.members.values()):
                    answers[(topic, index)] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            eligible = [p for p in eligible if p not in answers]
        if not eligible:
            return ErrorCode.NONE, answers
        held = set(owned.store.keys_for_group(group_id))
        keys = [(group_id, topic, index) for topic, index in eligible if (group_id, topic, index) in held]
        left_empty = (group is None or group.state == GroupState.EMPTY) and held <= set(keys) \
            and not self.consumer.is_active(group_id)
        outcome = self._delete(owned, group_id, keys, now, whole_group=left_empty)
        for partition in eligible:
            answers[partition] = outcome
        return ErrorCode.NONE, answers

    def _delete(self, owned: OwnedPartition, group_id: str, keys: list[OffsetKey], now: int,
                whole_group: bool) -> ErrorCode | Awaitable[ErrorCode]:
        """Forget the group's `keys` (and with `whole_group` the group itself) once their
        tombstones are appended; the answer waits for the commits' acks. Commits of these keys
        still in flight are dropped: their records precede the tombstones in the log.

        Kafka appends these tombstones with acks 0 and answers at once; here the answer waits, so
        that an answered deletion is in every in-sync replica and on disk. If that wait fails
        (timeout, leadership lost), the answer carries the error, but the deletion stands on this
        coordinator, as it would in Kafka; a new leader lacking the tombstones brings the offsets
        back, as Kafka's does."""
        group = self.coordinator.groups.get(group_id)
        # Kafka writes no group metadata tombstone for a group that never had a generation: it
        # only ever stored offsets.
        metadata_tombstone = [group_id] if whole_group and group is not None and group.generation > 0 else []
        if not keys and not metadata_tombstone:
            if whole_group:
                self.coordinator.remove_empty(group_id)
            return ErrorCode.NONE
        appended = self._append_acked(owned.partition, dict.fromkeys(keys), metadata_tombstone, now)
        if isinstance(appended, ErrorCode):
            return appended  # nothing appended: nothing deleted
        outcome, done = appended
        log_offset = outcome.base_offset
        owned.store.delete(keys, drop_pending=True)
        if whole_group:
            self.coordinator.remove_empty(group_id)
        log.info("deleted %d committed offsets%s of group %s (tombstones at %s-%d offset %d)", len(keys),
                 " and the group" if whole_group else "", group_id, OFFSETS_TOPIC, owned.partition.index,
                 log_offset)
        if done is None:
            return commit_error(outcome.error)
        return self._keep(_settled(outcome, done))

    def _append(self, partition: Partition, entries: dict[OffsetKey, CommittedOffset | None], now: int,
                deleted_groups: Iterable[str] = (), acks: int = ACKS_LEADER
                ) -> tuple[AppendOutcome, asyncio.Future[None] | None]:
        """Append one batch of offset records (and group metadata tombstones) through the
        replica manager's append door: (its outcome, and what to wait for before that is final)."""
        batch = offset_batch(entries, now, deleted_groups)
        appending = self._replicas.append([((partition.topic, partition.index), batch)], acks,
                                          AppendOrigin.COORDINATOR, self._commit_timeout_s)
        outcome = appending.outcomes[0]
        if outcome.error != ErrorCode.NONE:
            log.warning("offset batch of %d bytes refused by %s-%d: %s %s", len(batch), partition.topic,
                        partition.index, outcome.error.name, outcome.message or "")
        return outcome, appending.done

    def _write_tombstones(self, owned: OwnedPartition, keys: list[OffsetKey], now: int, why: str,
                          drop_pending: bool = False) -> None:
        """Delete entries now and append their tombstones without waiting (Kafka's cleanup: a
        tombstone lost in a failover brings back an entry that was to go anyway)."""
        owned.store.delete(keys, drop_pending=drop_pending)
        outcome, done = self._append(owned.partition, dict.fromkeys(keys), now)
        if outcome.error != ErrorCode.NONE:
            log.warning("could not write %d tombstones (%s) to %s-%d: %s", len(keys), why, OFFSETS_TOPIC,
                        owned.partition.index, outcome.error.name)
            return
        if done is not None:
            done.add_done_callback(lambda _: _log_failed_flush(outcome))

    # cleanup ----------------------------------------------------------------------------------
    def expire_offsets(self, now: int) -> int:
        """Offsets of groups with no members expire `offsets.retention.minutes` after their
        commit (in the partitions this broker coordinates)."""
        removed = 0
        for owned in self._loaded():
            stale: list[OffsetKey] = []
            for group_id in owned.store.groups():
                group = self.coordinator.groups.get(group_id)
                if (group is not None and group.state != GroupState.EMPTY) or self.consumer.is_active(group_id):
                    continue
                expired = owned.store.expired(group_id, now - self._retention_ms)
                if expired:
                    log.info("expired %d committed offsets of group %s", len(expired), group_id)
                    stale += expired
            if stale:
                self._write_tombstones(owned, stale, now, "expired")
                removed += len(stale)
        return removed

    def forget_topic(self, topic: str) -> None:
        """A deleted topic's committed offsets go too (tombstones), in every partition this
        broker coordinates; commits to it still in flight will not show."""
        now = self.clock_ms()
        for owned in list(self._owned.values()):
            if owned.state == LoadState.LOADING:
                owned.deleted_topics.add(topic)
            elif owned.state == LoadState.LOADED and owned.partition.is_leader:
                self._forget_topic_in(owned, topic, now)

    def _forget_topic_in(self, owned: OwnedPartition, topic: str, now: int) -> None:
        keys = owned.store.keys_for_topic(topic)
        if keys:
            self._write_tombstones(owned, keys, now, f"topic {topic} deleted", drop_pending=True)


async def _settled(outcome: AppendOutcome, done: asyncio.Future[None]) -> ErrorCode:
    """The coordinator's answer for an append once the door has settled it (fsync, replication)."""
    await done
    return commit_error(outcome.error)


def _log_failed_flush(outcome: AppendOutcome) -> None:
    if outcome.error != ErrorCode.NONE:
        log.error("flushing offset tombstones at %d failed: %s", outcome.base_offset, outcome.error.name)
