"""The transaction coordinator's asyncio shell: which transactional ids this broker coordinates,
the appends to `__transaction_state`, the markers, the timers.

Kafka's placement, as for groups: a transactional id's coordinator is the leader of its
`__transaction_state` partition (`txn_partition_for`), and the coordinator epoch is that
partition's leader epoch when this broker took it up. The replica manager's leadership listener
tells this service when that changes:

- on election the partition is read back from its log start (the last record per id wins);
  meanwhile its ids answer COORDINATOR_LOAD_IN_PROGRESS; transactions found in PrepareCommit /
  PrepareAbort get their markers sent again, then their Complete* record;
- on resignation its ids are dropped and answer NOT_COORDINATOR.

Every transition is appended with acks=-1 through the append door (origin COORDINATOR) and takes
effect once replicated. EndTxn is answered once PrepareCommit/PrepareAbort is durable; the markers
then go to the leaders of the transaction's partitions (WriteTxnMarkers, this broker included,
served in-process), retried until each leader took them or the transaction is superseded; then
CompleteCommit/CompleteAbort is appended. Every `transaction.abort.timed.out.transaction.cleanup.
interval.ms` the ongoing transactions past their timeout are fenced and aborted.

Transactional ids idle for `transactional.id.expiration.ms` are expired (Dead, written as the id's
tombstone) every `transaction.remove.expired.transaction.cleanup.interval.ms`.

Not done: the leaders' verification of KIP-890 part 1 (Kafka with it disabled).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from roost.broker.coordinators.load import LoadState, coordinator_status, log_chunks
from roost.broker.metadata.cache import BrokerEndpoint, MetadataCache
from roost.broker.metadata.catalog import TRANSACTION_STATE_TOPIC
from roost.broker.net.peer import PeerError, PeerPool
from roost.broker.replica.append import ACKS_ALL, AppendOrigin
from roost.broker.replica.manager import ReplicaManager
from roost.broker.replica.partition import Partition
from roost.broker.txn.core import PREPARE, Transition, TxnCoordinatorCore, TxnState
from roost.broker.txn.records import TxnRecordError, decode_key, decode_value, txn_batch, txn_partition_for
from roost.clock import Clock, now_ms
from roost.config import BrokerConfig
from roost.log import OffsetOutOfRange
from roost.wire.kafka import ApiKey, KafkaCodecError
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import iter_records

log = logging.getLogger("roost.broker.txn")

WRITE_TXN_MARKERS_VERSION = 1
MARKER_REQUEST_TIMEOUT_S = 10.0
MARKER_RETRY_BACKOFF_S = 0.1
MARKER_RETRY_BACKOFF_MAX_S = 2.0
LOAD_TIMES_KEPT = 64
# How long AddPartitionsToTxn / AddOffsetsToTxn wait for the previous transaction of the same id to
# finish its markers and CompleteCommit/Abort before answering CONCURRENT_TRANSACTIONS. A
# producer's next transaction starts right after EndTxn's answer, which comes before the markers
# (Kafka's order); answering CONCURRENT_TRANSACTIONS at once costs librdkafka a retry backoff
# (tens of ms) for a wait of about a millisecond.
SETTLE_WAIT_S = 1.0  # partition-load-time-max/avg are over the last loads
# A leader's answer that means "try again" (Kafka's TransactionMarkerRequestCompletionHandler).
RETRIABLE_MARKER_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
    ErrorCode.UNKNOWN_SERVER_ERROR,
})
# The transaction moved on without us (a newer producer epoch or coordinator): stop.
SUPERSEDED_MARKER_ERRORS = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})


# Kafka's mapping of a failed append to __transaction_state (TransactionStateManager): the
# client retries the same coordinator, or looks it up again.
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


def append_error(log_error: ErrorCode) -> ErrorCode:
    return _APPEND_ERRORS.get(log_error, log_error)



def transaction_state_configs(config: BrokerConfig) -> dict[str, Any]:
    """The topic configs `__transaction_state` is created with (compacted, kept forever)."""
    return {"cleanup.policy": "compact", "segment.bytes": config["transaction.state.log.segment.bytes"],
            "retention.ms": -1, "min.insync.replicas": config["transaction.state.log.min.isr"]}


@dataclass(eq=False)
class OwnedTxnPartition:
    """A `__transaction_state` partition this broker leads. Its coordinator epoch is the leader
    epoch of the election that made us its leader: the controller bumps the leader epoch again
    when it shrinks the ISR while we stay leader, and we stay its coordinator then, with the
    same epoch (any later coordinator is elected in a higher one)."""

    partition: Partition
    coordinator_epoch: int
    state: LoadState = LoadState.LOADING
    task: asyncio.Task[None] | None = None
    ids: set[str] = field(default_factory=set)


ProducerIdSource = Callable[[], "int | Awaitable[int]"]


@dataclass
class TxnCounts:
    """What /metrics reports of the coordinator's work since the broker started."""

    markers_written: int = 0  # partitions that took a marker from this coordinator
    timeout_aborts: int = 0  # transactions aborted because their producer went quiet
    load_times_ms: deque[float] = field(default_factory=lambda: deque(maxlen=LOAD_TIMES_KEPT))


class TxnService:
    def __init__(self, config: BrokerConfig, replicas: ReplicaManager, metadata: MetadataCache, peers: PeerPool,
                 allocate_producer_id: ProducerIdSource, clock_ms: Clock = now_ms) -> None:
        self.clock_ms = clock_ms  # the one clock (roost.clock); the handlers read it here too
        self.core = TxnCoordinatorCore(config["transaction.max.timeout.ms"])
        self._config = config
        self._replicas = replicas
        self._metadata = metadata
        self._peers = peers
        self._allocate = allocate_producer_id
        self._owned: dict[int, OwnedTxnPartition] = {}
        self.counts = TxnCounts()
        self._abort_interval_s = config["transaction.abort.timed.out.transaction.cleanup.interval.ms"] / 1000
        self._expiration_ms = config["transactional.id.expiration.ms"]
        self._expiry_interval_s = config["transaction.remove.expired.transaction.cleanup.interval.ms"] / 1000
        self._write_timeout_s = config["offsets.commit.timeout.ms"] / 1000
        self._tasks: set[asyncio.Future[Any]] = set()
        # Transactional ids whose markers and Complete* record are being written: their waiters.
        self._settling: dict[str, asyncio.Future[None]] = {}
        self._started = False
        # Called when FindCoordinator finds no `__transaction_state` (must not block).
        self.on_topic_missing: Callable[[], None] = lambda: None
        # This broker's id and its own WriteTxnMarkers (body -> answer), set by the broker: the
        # markers for partitions it leads itself skip the loopback round trip and two request
        # codecs, which lie on the path of the producer's next transaction (its
        # AddPartitionsToTxn waits for them).
        self.broker_id = -1
        self.local_markers: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None = None
        replicas.leadership_listeners.append(self.leadership_changed)

    # lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        self._started = True
        for partition in self._replicas.hosted():
            if partition.topic == TRANSACTION_STATE_TOPIC and partition.is_leader:
                self._elected(partition)
        self._spawn(self._abort_loop())
        self._spawn(self._expiry_loop())

    async def stop(self) -> None:
        self._started = False
        tasks = list(self._tasks) + [o.task for o in self._owned.values() if o.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    def _spawn(self, work: Awaitable[Any]) -> asyncio.Future[Any]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _abort_loop(self) -> None:
        while True:
            await asyncio.sleep(self._abort_interval_s)
            self.abort_timed_out(self.clock_ms())

    async def _expiry_loop(self) -> None:
        while True:
            await asyncio.sleep(self._expiry_interval_s)
            self.expire_transactional_ids(self.clock_ms())

    def expire_transactional_ids(self, now: int) -> None:
        """Idle ids go (a tombstone each), so that the coordinator's memory does not grow with
        every transactional id ever used."""
        for transactional_id in self.core.expired(now, self._expiration_ms):
            if self.status(transactional_id) != ErrorCode.NONE:
                continue
            transition = self.core.expire(now, transactional_id)
            if transition is not None:
                self._spawn(self._write(transition))

    def abort_timed_out(self, now: int) -> None:
        for transactional_id in self.core.timed_out(now):
            if self.status(transactional_id) != ErrorCode.NONE:
                continue
            transition = self.core.abort_timed_out(now, transactional_id)
            if transition is not None:
                self.counts.timeout_aborts += 1
                self._spawn(self._end(transition))

    # leadership -------------------------------------------------------------------------------
    def leadership_changed(self, partition: Partition, leader: bool) -> None:
        if partition.topic != TRANSACTION_STATE_TOPIC or not self._started:
            return
        if leader:
            self._elected(partition)
        else:
            self._resigned(partition)

    def _elected(self, partition: Partition) -> None:
        known = self._owned.get(partition.index)
        if known is not None:
            if known.partition is partition and known.state != LoadState.FAILED:
                return
            self._resigned(known.partition)
        owned = OwnedTxnPartition(partition, partition.leader_epoch)
        self._owned[partition.index] = owned
        owned.task = asyncio.ensure_future(self._load(owned))
        log.info("transaction coordinator for %s-%d (coordinator epoch %d): loading", TRANSACTION_STATE_TOPIC,
                 partition.index, owned.coordinator_epoch)

    def _resigned(self, partition: Partition) -> None:
        owned = self._owned.get(partition.index)
        if owned is None or owned.partition is not partition:
            return
        del self._owned[partition.index]
        if owned.task is not None:
            owned.task.cancel()
        ids = {t for t in self.core.txns if self.partition_for(t) == partition.index}
        self.core.unload(ids)
        log.info("no longer transaction coordinator for %s-%d: unloaded %d transactional ids",
                 TRANSACTION_STATE_TOPIC, partition.index, len(ids))

    async def _load(self, owned: OwnedTxnPartition) -> None:
        partition = owned.partition
        where = f"{TRANSACTION_STATE_TOPIC}-{partition.index}"
        found: dict[str, Any] = {}
        started = time.monotonic()
        try:
            async for chunk in log_chunks(partition):
                for record in iter_records(chunk, include_control=False):
                    if record.key is None:
                        continue
                    try:
                        transactional_id = decode_key(record.key)
                        found[transactional_id] = None if record.value is None else decode_value(record.value)
                    except TxnRecordError as error:
                        log.warning("skipping unreadable record at offset %d of %s: %s", record.offset, where, error)
        except (OSError, OffsetOutOfRange):
            log.exception("loading %s failed; answering NOT_COORDINATOR for its transactional ids", where)
            owned.state = LoadState.FAILED
            return
        for transactional_id, value in found.items():
            self.core.load(transactional_id, value)
        owned.state = LoadState.LOADED
        self.counts.load_times_ms.append((time.monotonic() - started) * 1000)
        log.info("loaded %s: %d transactional ids", where, len(found))
        # Transactions decided before the failover: their markers may be missing somewhere.
        for transactional_id in found:
            md = self.core.txns.get(transactional_id)
            if md is not None and md.state in PREPARE:
                self._spawn_markers(Transition(transactional_id, md.value()), owned)

    # placement --------------------------------------------------------------------------------
    def partition_count(self) -> int:
        info = self._metadata.get(TRANSACTION_STATE_TOPIC)
        return info.partitions if info is not None else self._config["transaction.state.log.num.partitions"]

    def partition_for(self, transactional_id: str) -> int:
        return txn_partition_for(transactional_id, self.partition_count())

    def coordinator_for(self, transactional_id: str) -> BrokerEndpoint | None:
        if TRANSACTION_STATE_TOPIC not in self._metadata:
            self.on_topic_missing()  # a lone broker creates it at once, a cluster's controller later
            if TRANSACTION_STATE_TOPIC not in self._metadata:
                return None
        return self._metadata.coordinator_endpoint(TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id))

    def status(self, transactional_id: str) -> ErrorCode:
        return coordinator_status(self._owned.get(self.partition_for(transactional_id)))

    # requests ---------------------------------------------------------------------------------
    async def init_producer_id(self, transactional_id: str, timeout_ms: int, expected_id: int,
                               expected_epoch: int) -> tuple[ErrorCode, int, int]:
        code = self.status(transactional_id)
        if code != ErrorCode.NONE:
            return code, -1, -1
        fresh: int | None = None
        if self.core.needs_producer_id(transactional_id):
            allocated = self._allocate()
            fresh = allocated if isinstance(allocated, int) else await allocated
            code = self.status(transactional_id)  # we may have lost the partition meanwhile
            if code != ErrorCode.NONE:
                return code, -1, -1
        decided = self.core.init_producer_id(self.clock_ms(), transactional_id, timeout_ms, fresh_producer_id=fresh,
                                             expected_id=expected_id, expected_epoch=expected_epoch)
        if isinstance(decided, ErrorCode):
            return decided, -1, -1
        if decided.fence:
            # The ongoing transaction is aborted with a bumped epoch; the client retries.
            code = await self._end(decided)
            return (ErrorCode.CONCURRENT_TRANSACTIONS if code == ErrorCode.NONE else code), -1, -1
        code = await self._write(decided)
        if code != ErrorCode.NONE:
            return code, -1, -1
        return ErrorCode.NONE, decided.value.producer_id, decided.value.producer_epoch

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[tuple[str, int]]) -> ErrorCode:
        if not transactional_id:  # Kafka's TransactionCoordinator: INVALID_REQUEST before anything
            return ErrorCode.INVALID_REQUEST
        code = self.status(transactional_id)
        if code != ErrorCode.NONE:
            return code
        wanted = list(partitions)
        decided = self.core.add_partitions(self.clock_ms(), transactional_id, producer_id, producer_epoch, wanted)
        if decided == ErrorCode.CONCURRENT_TRANSACTIONS and await self._settled(transactional_id):
            # The previous transaction finished meanwhile (or is slow: the answer stays the same).
            code = self.status(transactional_id)
            if code != ErrorCode.NONE:
                return code
            decided = self.core.add_partitions(self.clock_ms(), transactional_id, producer_id, producer_epoch, wanted)
        if decided is None:
            return ErrorCode.NONE
        if isinstance(decided, ErrorCode):
            return decided
        return await self._write(decided)

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode:
        if not transactional_id:  # Kafka's TransactionCoordinator: INVALID_REQUEST before anything
            return ErrorCode.INVALID_REQUEST
        code = self.status(transactional_id)
        if code != ErrorCode.NONE:
            return code
        decided = self.core.end_txn(self.clock_ms(), transactional_id, producer_id, producer_epoch, commit)
        if decided is None:
            return ErrorCode.NONE
        if isinstance(decided, ErrorCode):
            return decided
        return await self._end(decided)

    # writing ----------------------------------------------------------------------------------
    async def _write(self, transition: Transition) -> ErrorCode:
        """Append the transition's record (acks=-1) and apply it once replicated."""
        owned = self._owned.get(self.partition_for(transition.transactional_id))
        if owned is None or owned.state != LoadState.LOADED:
            self.core.fail(transition)
            return ErrorCode.NOT_COORDINATOR
        # Dead is written as the id's tombstone (Kafka's expiry), which compaction removes.
        value = None if transition.state == TxnState.DEAD else transition.value
        batch = txn_batch(transition.transactional_id, value, self.clock_ms())
        appending = self._replicas.append([((TRANSACTION_STATE_TOPIC, owned.partition.index), batch)], ACKS_ALL,
                                          AppendOrigin.COORDINATOR, self._write_timeout_s)
        if appending.done is not None:
            await asyncio.shield(appending.done)
        code = append_error(appending.outcomes[0].error)
        if code == ErrorCode.NONE and (self._owned.get(owned.partition.index) is not owned
                                       or not owned.partition.is_leader):
            code = ErrorCode.NOT_COORDINATOR
        if code == ErrorCode.NONE:
            self.core.complete(transition)
        else:
            log.warning("transaction %s: writing %s failed: %s", transition.transactional_id,
                        transition.state.label, code.name)
            self.core.fail(transition)
        return code

    async def _end(self, prepared: Transition) -> ErrorCode:
        """Write PrepareCommit/PrepareAbort; once it is in, send the markers in the background
        (then Complete*). The answer is the Prepare* write's."""
        code = await self._write(prepared)
        if code == ErrorCode.NONE:
            owned = self._owned.get(self.partition_for(prepared.transactional_id))
            if owned is not None:
                self._spawn_markers(prepared, owned)
        return code

    def _spawn_markers(self, prepared: Transition, owned: OwnedTxnPartition) -> None:
        """Send the markers, then write Complete*, in the background. The id's waiters are
        registered now, before any later request of the same id can be handled."""
        transactional_id = prepared.transactional_id
        settled = self._settling.get(transactional_id)
        if settled is None:
            settled = self._settling[transactional_id] = asyncio.get_running_loop().create_future()
        self._spawn(self._markers_then_complete(prepared, owned, settled))

    async def _markers_then_complete(self, prepared: Transition, owned: OwnedTxnPartition,
                                     settled: asyncio.Future[None]) -> None:
        transactional_id = prepared.transactional_id
        try:
            await self._finish(prepared, owned)
        finally:
            if self._settling.get(transactional_id) is settled:
                del self._settling[transactional_id]
            if not settled.done():
                settled.set_result(None)

    async def _settled(self, transactional_id: str) -> bool:
        """Wait (at most SETTLE_WAIT_S) while the id's last transaction writes its markers and
        Complete* record; whether there was anything to wait for."""
        settled = self._settling.get(transactional_id)
        if settled is None:
            return False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(settled), SETTLE_WAIT_S)
        return True

    async def _finish(self, prepared: Transition, owned: OwnedTxnPartition) -> None:
        value = prepared.value
        commit = prepared.state == TxnState.PREPARE_COMMIT
        if not await self._send_markers(prepared.transactional_id, value.producer_id, value.producer_epoch, commit,
                                        set(value.partitions), owned):
            return
        complete = self.core.complete_markers(self.clock_ms(), prepared.transactional_id, prepared)
        if complete is not None:
            await self._write(complete)

    def _still_ours(self, owned: OwnedTxnPartition) -> bool:
        return self._started and self._owned.get(owned.partition.index) is owned and owned.partition.is_leader

    async def _send_markers(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                            remaining: set[tuple[str, int]], owned: OwnedTxnPartition) -> bool:
        """WriteTxnMarkers to every leader of `remaining` until each took its marker: True, or
        False when the transaction is superseded or this broker no longer coordinates it."""
        backoff = MARKER_RETRY_BACKOFF_S
        while remaining:
            if not self._still_ours(owned):
                return False
            by_leader: dict[int, list[tuple[str, int]]] = {}
            for topic, index in sorted(remaining):
                placement = self._metadata.partition(topic, index)
                if placement is None:
                    if topic not in self._metadata:
                        # Kafka drops the partitions of deleted topics from the transaction.
                        log.info("transaction %s: %s-%d is gone; no marker for it", transactional_id, topic, index)
                        remaining.discard((topic, index))
                    continue
                if placement.leader >= 0:
                    by_leader.setdefault(placement.leader, []).append((topic, index))
            sent = await asyncio.gather(*(
                self._send_to(leader, partitions, producer_id, producer_epoch, commit, owned.coordinator_epoch)
                for leader, partitions in by_leader.items()))
            for answers in sent:
                for partition, code in answers.items():
                    if code == ErrorCode.NONE:
                        remaining.discard(partition)
                        self.counts.markers_written += 1
                    elif code in SUPERSEDED_MARKER_ERRORS:
                        log.info("transaction %s: marker for %s-%d refused (%s): superseded", transactional_id,
                                 *partition, code.name)
                        return False
                    elif code not in RETRIABLE_MARKER_ERRORS:
                        log.warning("transaction %s: marker for %s-%d refused (%s); retrying", transactional_id,
                                    *partition, code.name)
            if remaining:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MARKER_RETRY_BACKOFF_MAX_S)
        return True

    async def _send_to(self, leader: int, partitions: list[tuple[str, int]], producer_id: int, producer_epoch: int,
                       commit: bool, coordinator_epoch: int) -> dict[tuple[str, int], ErrorCode]:
        endpoint = self._metadata.endpoint(leader)
        if endpoint is None:
            return {p: ErrorCode.NOT_LEADER_OR_FOLLOWER for p in partitions}
        topics: dict[str, list[int]] = {}
        for topic, index in partitions:
            topics.setdefault(topic, []).append(index)
        body = {"markers": [{"producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_result": commit,
                             "topics": [{"name": t, "partition_indexes": ix} for t, ix in topics.items()],
                             "coordinator_epoch": coordinator_epoch}]}
        try:
            if leader == self.broker_id and self.local_markers is not None:
                answer = await asyncio.wait_for(self.local_markers(body), MARKER_REQUEST_TIMEOUT_S)
            else:
                peer = self._peers.get(endpoint.node_id, endpoint.host, endpoint.port)
                answer = await peer.request(ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, body,
                                            MARKER_REQUEST_TIMEOUT_S)
        except (PeerError, KafkaCodecError, OSError, TimeoutError) as error:
            log.info("WriteTxnMarkers to broker %d failed: %s", leader, error)
            return {p: ErrorCode.NOT_LEADER_OR_FOLLOWER for p in partitions}
        codes: dict[tuple[str, int], ErrorCode] = {}
        for marker in answer.get("markers", []):
            for topic in marker["topics"]:
                for result in topic["partitions"]:
                    codes[(topic["name"], result["partition_index"])] = ErrorCode(result["error_code"])
        return {p: codes.get(p, ErrorCode.UNKNOWN_SERVER_ERROR) for p in partitions}

    # questions --------------------------------------------------------------------------------
    def listing(self) -> list[tuple[str, int, TxnState]]:
        """(transactional id, producer id, state) of every id this broker coordinates and has loaded."""
        return [(t, md.producer_id, md.shown_state()) for t, md in sorted(self.core.txns.items())
                if self.status(t) == ErrorCode.NONE]

    def is_loading(self) -> bool:
        return any(owned.state == LoadState.LOADING for owned in self._owned.values())
