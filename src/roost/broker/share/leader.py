"""The share-partitions this broker leads (Kafka's SharePartitionManager without the sessions):
the asyncio shell around the pure `SharePartition` core (share/partition.py).

- A share-partition is loaded on its first use here: its state is read from the share
  coordinator (through the `StateStore`, the persister); a partition never initialized takes its
  start offset from the group's `share.auto.offset.reset` then (latest: the high watermark;
  earliest: the log start; by_duration: the first offset at or after now - duration), which is
  persisted with its first write. Requests for it wait until it is loaded.
- Acquisitions read the log through the replica manager's read door (as Fetch does) and hand the
  core the batch bounds; the response carries those whole batches, cut to the span of the
  acquired ranges (clients skip offsets outside them).
- An acknowledgement is answered only once its state change is durable in the share coordinator
  (`StateStore.write` returned NONE); if the write fails, the core puts the records back under
  their lock (`fail`) and the partition answers the error.
- Every other state change (lock expiry, released members, archived aborted transactions) is
  written in the background, in the order the core made them (`change.seq`): one write at a time
  per share-partition; the changes that arrive while a write is in flight go together in the
  next one (`merge_changes`), acknowledgements included.
- Dead letters (Roost's own, share/dead_letter.py): a change that archives records because they
  were rejected or reached the delivery limit, in a group with `roost.share.dead.letter.topic`,
  has their copies written there (acks=all) first, in the same write chain; if that fails the
  change is not written and the share-partition is dropped, so its next use loads the durable
  state, in which those records are not archived: nothing rejected is lost.
- Lock expiry is driven by one timer per share-partition set at the core's `next_deadline()`.
- Leadership: when this broker stops leading the data partition, its share-partitions are dropped
  (the next leader loads them from the coordinator); their parked fetches answer at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from roost.broker.replica.manager import ReplicaManager
from roost.broker.replica.partition import Partition
from roost.broker.share.group_configs import GroupConfigStore, ShareGroupSettings
from roost.broker.share.keys import SharePartitionKey
from roost.broker.share.partition import (
    AbortedTxn,
    AckBatch,
    AcquiredRange,
    AcquireMode,
    DeadLetter,
    Isolation,
    LogBatch,
    ShareConfig,
    SharePartition,
    StateBatch,
    StateChange,
    merge_changes,
)
from roost.clock import now_ms
from roost.log import OffsetOutOfRange
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import iter_batch_headers

log = logging.getLogger("roost.broker.share")
_T = TypeVar("_T")

# What a state write answers when the state it wrote to is no longer the loaded one.
STATE_REPLACED = frozenset({ErrorCode.FENCED_STATE_EPOCH, ErrorCode.INVALID_REQUEST})
MAX_SHARE_PARTITIONS = 100_000  # share-partitions one broker keeps loaded (bounded memory)
READ_BYTES = 1 << 20  # the most one acquisition reads from the log
MIN_READ_BYTES = 4096  # the least it reads once it knows the partition's bytes per record
MAX_DEAD_LETTER_READS = 64  # reads of the log for one change's dead letters
MAX_CHANGES_PER_WRITE = 256  # state changes one WriteShareGroupState may carry (bounded requests)


class StateStore(Protocol):
    """Where share-partition state is durable (the share coordinator through the persister)."""

    async def load(self, key: SharePartitionKey, leader_epoch: int) -> tuple[ErrorCode, int, int, tuple[StateBatch, ...]]:
        """(error, state epoch, start offset (-1: never initialized), batches)."""

    async def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, change: StateChange) -> ErrorCode:
        """NONE once `change` is durable."""

    async def state_epoch(self, key: SharePartitionKey) -> int | ErrorCode:
        """The state epoch the store holds now (INVALID_REQUEST: no state; another error: unknown)."""


class DeadLetterSink(Protocol):
    """Where a share group's dead letters are written (its dead-letter topic)."""

    async def write(self, group_id: str, topic: str, partition: int, dead_letter_topic: str,
                    letters: Sequence[DeadLetter], log_data: Sequence[bytes | memoryview]) -> ErrorCode:
        """NONE once the copies are durable (acks=all)."""


class MemoryStateStore:
    """State kept in this broker's memory: what a broker without a share coordinator uses. It
    survives neither this broker nor a move of the data partition's leadership."""

    def __init__(self) -> None:
        self.states: dict[SharePartitionKey, tuple[int, dict[int, StateBatch]]] = {}

    async def load(self, key: SharePartitionKey, leader_epoch: int) -> tuple[ErrorCode, int, int, tuple[StateBatch, ...]]:
        found = self.states.get(key)
        if found is None:
            return ErrorCode.NONE, 0, -1, ()
        start, batches = found
        return ErrorCode.NONE, 0, start, tuple(b for first, b in sorted(batches.items()) if b.last_offset >= start)

    async def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, change: StateChange) -> ErrorCode:
        start, batches = self.states.get(key, (change.start_offset, {}))
        if change.start_offset >= 0:
            start = change.start_offset
        for batch in change.batches:
            for offset in range(batch.first_offset, batch.last_offset + 1):
                batches[offset] = StateBatch(offset, offset, batch.delivery_state, batch.delivery_count)
        self.states[key] = (start, {o: b for o, b in batches.items() if o >= start})
        return ErrorCode.NONE

    async def state_epoch(self, key: SharePartitionKey) -> int | ErrorCode:
        return 0 if key in self.states else ErrorCode.INVALID_REQUEST


@dataclass(eq=False)
class LeaderSharePartition:
    key: SharePartitionKey
    partition: Partition
    leader_epoch: int
    settings: ShareGroupSettings
    core: SharePartition | None = None
    state_epoch: int = 0
    loading: asyncio.Future[ErrorCode] | None = None
    timer: asyncio.TimerHandle | None = None
    writes: asyncio.Future[ErrorCode] | None = None  # the answer of the last write asked for
    queued: list[tuple[StateChange, asyncio.Future[ErrorCode]]] = field(default_factory=list)  # not sent yet
    writer: asyncio.Future[ErrorCode] | None = None  # the task sending the queued writes, one at a time
    bytes_per_record: float = 0.0  # of the batches last acquired here: sizes the next read (0: unknown)
    waiters: list[Callable[[], None]] = field(default_factory=list)  # parked fetches to wake
    dropped: bool = False


@dataclass(frozen=True)
class Acquired:
    ranges: list[AcquiredRange]
    records: list[bytes | memoryview]


class ShareLeader:
    def __init__(self, replicas: ReplicaManager, store: StateStore, configs: GroupConfigStore,
                 clock: Callable[[], int] = now_ms) -> None:
        self.replicas = replicas
        self.store = store
        self.configs = configs
        self.clock = clock
        # Where dead letters go (share/dead_letter_writer.py); None: nowhere (no group has one).
        self.dead_letters: DeadLetterSink | None = None
        self.parts: dict[SharePartitionKey, LeaderSharePartition] = {}
        self._tasks: set[asyncio.Future[object]] = set()
        # (error of an acknowledgement write) -> what the client is answered
        self.client_error: Callable[[ErrorCode], ErrorCode] = _client_error
        replicas.leadership_listeners.append(self._leadership_changed)
        configs.listeners.append(self._group_configs_changed)

    # loading ------------------------------------------------------------------------------------------
    def get(self, key: SharePartitionKey, partition: Partition) -> LeaderSharePartition | ErrorCode | Awaitable[
            LeaderSharePartition | ErrorCode]:
        """The share-partition, loaded (or an awaitable of it, or the error to answer)."""
        found = self.parts.get(key)
        if found is not None and (found.partition is not partition or found.leader_epoch != partition.leader_epoch):
            self._drop(found, "the partition's leadership changed")
            found = None
        if found is None:
            if len(self.parts) >= MAX_SHARE_PARTITIONS:
                return ErrorCode.UNKNOWN_SERVER_ERROR
            found = LeaderSharePartition(key, partition, partition.leader_epoch, self.configs.settings(key.group_id))
            self.parts[key] = found
            found.loading = self._spawn(self._load(found))
        if found.core is not None:
            return found
        loading = found.loading
        assert loading is not None

        async def loaded() -> LeaderSharePartition | ErrorCode:
            code = await asyncio.shield(loading)
            return found if code == ErrorCode.NONE and found.core is not None else code
        return loaded()

    async def _load(self, part: LeaderSharePartition) -> ErrorCode:
        code, state_epoch, start, batches = await self.store.load(part.key, part.leader_epoch)
        if part.dropped:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if code != ErrorCode.NONE:
            self.parts.pop(part.key, None)
            log.warning("share-partition %s: its state could not be read: %s", part.key, code.name)
            return self.client_error(code)
        settings = part.settings
        config = ShareConfig(delivery_limit=settings.delivery_limit, max_record_locks=settings.max_record_locks,
                             lock_duration_ms=settings.lock_duration_ms)
        partition = part.partition
        log_start = partition.log_start_offset
        if start < 0:
            start = self._reset_offset(partition, settings)
            log.info("share-partition %s starts at offset %d (share.auto.offset.reset %s)", part.key, start,
                     settings.auto_offset_reset.strategy)
        start = max(start, log_start)
        part.core = SharePartition.load(start, batches, config)
        part.state_epoch = state_epoch
        self._background(part, part.core.start_change())
        return ErrorCode.NONE

    def _reset_offset(self, partition: Partition, settings: ShareGroupSettings) -> int:
        reset = settings.auto_offset_reset
        if reset.strategy == "earliest":
            return partition.log_start_offset
        if reset.strategy == "by_duration":
            found = partition.offset_for_timestamp(self.clock() - reset.duration_ms)
            return found[0] if found is not None else partition.high_watermark
        return partition.high_watermark

    # acquiring ------------------------------------------------------------------------------------------
    def acquire(self, part: LeaderSharePartition, member: str, max_records: int, max_bytes: int,
                first_read: bool, mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED) -> Acquired:
        """Acquire for `member` what the log holds from the core's fetch offset (nothing when the
        window is full or there is nothing new); `mode` is the fetch's ShareAcquireMode (record
        limit: never more than `max_records`, even splitting a log batch)."""
        core = part.core
        assert core is not None
        partition = part.partition
        offset = core.fetch_offset()
        read_committed = part.settings.read_committed
        if offset is None:
            return Acquired([], [])
        # Bounded: the core acquires at most about max_records of what is read, so reading
        # the whole backlog each time (MaxBytes is often 50 MiB) would make a drain quadratic;
        # and sized by what the last acquisitions here took per record, since every byte read is
        # checked (CRC-32C), and a megabyte of one-record batches for a consumer that takes one
        # record a time cost more than all the rest of its fetch.
        limit = max(1, min(max_bytes, READ_BYTES))
        wanted = limit
        if part.bytes_per_record:
            wanted = min(limit, max(MIN_READ_BYTES, int(2 * max_records * part.bytes_per_record)))
        try:
            result = self.replicas.read(partition, offset, wanted, min_one_batch=first_read,
                                        read_committed=read_committed)
            if not result.size and wanted < limit:  # the next batch is bigger than the estimate
                result = self.replicas.read(partition, offset, limit, min_one_batch=first_read,
                                            read_committed=read_committed)
        except OffsetOutOfRange:
            self._background(part, core.advance_log_start(partition.log_start_offset))
            return Acquired([], [])
        if not result.size:
            return Acquired([], [])
        batches: list[tuple[LogBatch, memoryview]] = []  # the batches the core looked at, in order

        def log_batches() -> Iterator[LogBatch]:
            # Parsed as the core asks for them: it stops after about max_records, usually a few
            # batches into the megabyte read, and the rest is never parsed.
            for buffer in result.buffers:
                view = memoryview(buffer)
                for pos, header in iter_batch_headers(view):
                    batch = LogBatch(header.base_offset, header.last_offset, header.is_control, header.producer_id,
                                     header.is_transactional)
                    batches.append((batch, view[pos:pos + header.size]))
                    yield batch
        aborted: list[AbortedTxn] = []
        if read_committed:
            aborted = [AbortedTxn(pid, first) for pid, first in
                       partition.aborted_transactions(offset, result.next_offset)]
        acquired = core.acquire(member, log_batches(), now=self.clock(), max_records=max_records,
                                high_watermark=partition.high_watermark,
                                last_stable_offset=partition.last_stable_offset,
                                isolation=Isolation.READ_COMMITTED if read_committed else Isolation.READ_UNCOMMITTED,
                                aborted=aborted, lock_ms=part.settings.lock_duration_ms, mode=mode)
        self._background(part, acquired.change)
        self._arm_timer(part)
        if not acquired.ranges:
            return Acquired([], [])
        first = acquired.ranges[0].first_offset
        last = acquired.ranges[-1].last_offset
        records: list[bytes | memoryview] = [data for batch, data in batches
                                             if batch.last_offset >= first and batch.base_offset <= last]
        spanned = sum(batch.last_offset - batch.base_offset + 1 for batch, _ in batches
                      if batch.last_offset >= first and batch.base_offset <= last)
        part.bytes_per_record = sum(len(data) for data in records) / max(1, spanned)
        return Acquired(acquired.ranges, records)

    # acknowledging -------------------------------------------------------------------------------------
    async def acknowledge(self, part: LeaderSharePartition, member: str, batches: list[AckBatch],
                          renew_allowed: bool) -> tuple[ErrorCode, str | None]:
        return await self.begin_acknowledge(part, member, batches, renew_allowed)

    def begin_acknowledge(self, part: LeaderSharePartition, member: str, batches: list[AckBatch],
                          renew_allowed: bool) -> asyncio.Future[tuple[ErrorCode, str | None]]:
        """Apply `batches` to the core now and return the future of their answer, which is set
        only once the write carrying them is durable (or failed). Until then the records stay
        pending (neither acquirable nor done), so a ShareFetch may acquire while its own
        acknowledgements are being written, as Kafka's KafkaApis runs a ShareFetch's acknowledge
        and fetch side by side and answers when both are done."""
        core = part.core
        assert core is not None
        result = core.acknowledge(member, batches, now=self.clock(), renew_allowed=renew_allowed,
                                  lock_ms=part.settings.lock_duration_ms)
        if result.error != ErrorCode.NONE or result.change is None:
            self._arm_timer(part)
            answered: asyncio.Future[tuple[ErrorCode, str | None]] = asyncio.get_running_loop().create_future()
            answered.set_result((result.error, result.message))
            return answered
        change = result.change
        # A task of its own (kept in self._tasks): the change is completed or failed in the core
        # even if the request that asked for it goes away meanwhile.
        return self._spawn(self._finish_acknowledge(part, change, self._write(part, change)))

    async def _finish_acknowledge(self, part: LeaderSharePartition, change: StateChange,
                                  written: asyncio.Future[ErrorCode]) -> tuple[ErrorCode, str | None]:
        code = await written
        core = part.core
        if part.dropped or core is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, "this broker no longer leads the partition"
        if code == ErrorCode.NONE:
            self._background(part, core.complete(change))
        else:
            core.fail(change)
            log.warning("share-partition %s: acknowledgement not written: %s", part.key, code.name)
        self._arm_timer(part)
        self._wake(part)
        return (ErrorCode.NONE, None) if code == ErrorCode.NONE else (self.client_error(code), None)

    def release_member(self, group_id: str, member: str, keys: Iterable[SharePartitionKey]) -> None:
        """The member's share session ended (closed, or its connection dropped): its records here
        become available again (archived at the delivery limit)."""
        for key in keys:
            part = self.parts.get(key)
            if part is None or part.core is None or key.group_id != group_id:
                continue
            self._background(part, part.core.release_member(member, self.clock()))
            self._arm_timer(part)
            self._wake(part)

    # writes -----------------------------------------------------------------------------------------------
    def _write(self, part: LeaderSharePartition, change: StateChange) -> asyncio.Future[ErrorCode]:
        """Queue the write of `change`; the future answers once it is durable (NONE) or failed.
        Writes go one at a time, in the order asked for; the changes queued while one is in
        flight go together in the next (one WriteShareGroupState, the later changes' batches
        over the earlier ones'), so the acknowledgements of many consumers of one partition
        share a write rather than wait in line for one each. Each is still answered only once
        the write carrying it is durable."""
        done: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        part.queued.append((change, done))
        part.writes = done
        if part.writer is None:
            part.writer = self._spawn(self._send_queued(part))
        return done

    async def _send_queued(self, part: LeaderSharePartition) -> ErrorCode:
        taken: list[tuple[StateChange, asyncio.Future[ErrorCode]]] = []
        try:
            while part.queued:
                taken = part.queued[:MAX_CHANGES_PER_WRITE]
                del part.queued[:MAX_CHANGES_PER_WRITE]
                code = await self._write_now(part, merge_changes([change for change, _ in taken]))
                for _, done in taken:
                    if not done.done():
                        done.set_result(code)
                taken = []
        finally:
            part.writer = None
            for _, done in taken + part.queued:  # cancelled (the broker stops): nobody is answered
                done.cancel()
            part.queued.clear()
        return ErrorCode.NONE

    async def _write_now(self, part: LeaderSharePartition, change: StateChange) -> ErrorCode:
        if part.dropped:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        dead_letter_topic = part.settings.dead_letter_topic
        if change.dead_letters and dead_letter_topic and self.dead_letters is not None:
            # The copies first: a record is archived only once its dead letter is durable.
            code = await self._write_dead_letters(part, change, dead_letter_topic)
            if code != ErrorCode.NONE:
                # Not archived after all: this leader's memory has them done (a lock expiry or
                # a session's release archived them at once), its durable state does not, so
                # load that again; they are delivered again and dead-lettered then.
                self._drop(part, f"its dead letters were not written to {dead_letter_topic} ({code.name})")
                return code
        try:
            code = await self.store.write(part.key, part.state_epoch, part.leader_epoch, change)
            if code in STATE_REPLACED:
                # The state was re-initialized (AlterShareGroupOffsets) or deleted
                # (DeleteShareGroupOffsets) since it was loaded: load it again.
                self._drop(part, f"its state was replaced in the share coordinator ({code.name})")
            return code
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("share-partition %s: state write failed", part.key)
            return ErrorCode.UNKNOWN_SERVER_ERROR

    async def _write_dead_letters(self, part: LeaderSharePartition, change: StateChange, topic: str) -> ErrorCode:
        assert self.dead_letters is not None
        letters = change.dead_letters
        first, last = min(d.first_offset for d in letters), max(d.last_offset for d in letters)
        data: list[bytes | memoryview] = []
        offset = first
        for _read in range(MAX_DEAD_LETTER_READS):  # bounded: the letters of one change span a window
            if offset > last:
                break
            try:
                result = self.replicas.read(part.partition, offset, READ_BYTES, min_one_batch=True)
            except OffsetOutOfRange:
                break  # below the log start now: those records are gone, nothing to copy
            if not result.size or result.next_offset <= offset:
                break
            data.extend(result.buffers)
            offset = result.next_offset
        try:
            return await self.dead_letters.write(part.key.group_id, part.partition.topic, part.partition.index,
                                                 topic, letters, data)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("share-partition %s: dead letters not written", part.key)
            return ErrorCode.UNKNOWN_SERVER_ERROR

    def _background(self, part: LeaderSharePartition, change: StateChange | None) -> None:
        if change is None:
            return
        task = self._write(part, change)

        def settled(done: asyncio.Future[ErrorCode]) -> None:
            if not _log_background(part.key, done) and part.core is not None and not part.dropped:
                part.core.fail(change)  # its start offset, if it carried one, is sent again
        task.add_done_callback(settled)

    async def revalidate(self, key: SharePartitionKey) -> None:
        """A share session opens on the share-partition: if nothing is acquired or being written
        here, check that the coordinator's state is still the one loaded (offsets altered or
        deleted meanwhile give a new state epoch or none); if not, drop it so it loads again."""
        part = self.parts.get(key)
        if part is None or part.core is None or part.dropped or part.core.acquired_count():
            return
        if part.writes is not None and not part.writes.done():
            return
        found = await self.store.state_epoch(key)
        if part.dropped or self.parts.get(key) is not part:
            return
        if found == ErrorCode.INVALID_REQUEST or (not isinstance(found, ErrorCode) and found != part.state_epoch):
            self._drop(part, "its state in the share coordinator changed (offsets altered or deleted)")

    # lock expiry ------------------------------------------------------------------------------------------
    def _arm_timer(self, part: LeaderSharePartition) -> None:
        core = part.core
        if core is None or part.dropped:
            return
        deadline = core.next_deadline()
        if part.timer is not None:
            part.timer.cancel()
            part.timer = None
        if deadline is None:
            return
        delay = max(0.0, (deadline - self.clock()) / 1000)
        part.timer = asyncio.get_running_loop().call_later(delay, self._expire, part)

    def _expire(self, part: LeaderSharePartition) -> None:
        part.timer = None
        if part.dropped or part.core is None:
            return
        change = part.core.tick(self.clock())
        self._background(part, change)
        self._arm_timer(part)
        if change is not None:
            self._wake(part)

    # parked fetches ------------------------------------------------------------------------------------
    def add_waiter(self, part: LeaderSharePartition, waiter: Callable[[], None]) -> None:
        part.waiters.append(waiter)

    def remove_waiter(self, part: LeaderSharePartition, waiter: Callable[[], None]) -> None:
        with contextlib.suppress(ValueError):
            part.waiters.remove(waiter)

    @staticmethod
    def _wake(part: LeaderSharePartition) -> None:
        waiters, part.waiters = part.waiters, []
        for waiter in waiters:
            waiter()

    # leadership and configs -------------------------------------------------------------------------------
    def _leadership_changed(self, partition: Partition, leader: bool) -> None:
        for part in [p for p in self.parts.values() if p.partition is partition or (
                p.partition.topic == partition.topic and p.partition.index == partition.index)]:
            if not leader or part.partition is not partition or part.leader_epoch != partition.leader_epoch:
                self._drop(part, "leadership moved" if not leader else "a new leadership")

    def _group_configs_changed(self, group_id: str) -> None:
        """New configs take effect on the group's share-partitions here: the next load reads them."""
        for part in [p for p in self.parts.values() if p.key.group_id == group_id]:
            settings = self.configs.settings(group_id)
            if part.core is not None and settings.auto_offset_reset == part.settings.auto_offset_reset:
                part.settings = settings  # lock duration and isolation apply to the next acquisitions
            else:
                self._drop(part, "its group's configs changed")

    def _drop(self, part: LeaderSharePartition, why: str) -> None:
        part.dropped = True
        if self.parts.get(part.key) is part:
            del self.parts[part.key]
        if part.timer is not None:
            part.timer.cancel()
        log.info("share-partition %s dropped here: %s", part.key, why)
        self._wake(part)

    def forget_group(self, group_id: str) -> None:
        for part in [p for p in self.parts.values() if p.key.group_id == group_id]:
            self._drop(part, "its group was deleted")

    # lifecycle --------------------------------------------------------------------------------------------
    def _spawn(self, work: Awaitable[_T]) -> asyncio.Future[_T]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)  # type: ignore[arg-type]
        task.add_done_callback(self._tasks.discard)
        return task

    async def stop(self) -> None:
        for part in list(self.parts.values()):
            self._drop(part, "the broker stops")
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def counts(self) -> list[tuple[SharePartitionKey, int, int, int]]:
        """(key, start offset, in-flight records, acquired records) of each loaded share-partition."""
        return [(k, p.core.start_offset, p.core.window_size, p.core.acquired_count()) for k, p in self.parts.items()
                if p.core is not None]

    def delivery_counts(self) -> list[tuple[SharePartitionKey, dict[int, int]]]:
        """Each loaded share-partition's unfinished in-flight records by delivery count."""
        return [(k, p.core.delivery_counts()) for k, p in self.parts.items() if p.core is not None]


def _client_error(code: ErrorCode) -> ErrorCode:
    if code in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                ErrorCode.REQUEST_TIMED_OUT, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return code


def _log_background(key: SharePartitionKey, done: asyncio.Future[ErrorCode]) -> bool:
    """True when the background write succeeded (or was cancelled with its share-partition)."""
    if done.cancelled():
        return True
    error = done.exception()
    code = done.result() if error is None else ErrorCode.UNKNOWN_SERVER_ERROR
    if code != ErrorCode.NONE:
        log.warning("share-partition %s: a state write failed (%s); the next one carries the window", key, code.name)
        return False
    return True
