"""ShareFetch (78) and ShareAcknowledge (79) on the partition leader: the thin shell between the
wire, the share sessions (share/session.py, pure) and the share-partitions (share/leader.py).

The order within one ShareFetch is Kafka's (KafkaApis.handleShareFetchRequest): the session is
opened or checked first (its epoch moves on), then the piggybacked acknowledgements are applied
and made durable, then records are acquired from every partition of the session, whether or not
this request named them. A fetch that acquires nothing parks until a partition gets new records
or has records released (lock expiry, a closed session, a release), at most MaxWaitMs. Epoch -1
processes the acknowledgements, closes the session and releases the member's records on this
broker; so does the connection closing (`connection_closed`).

A full response (epoch 0) lists every partition the request named; an incremental one only the
partitions with records, errors or acknowledgement results. Records are never null (v1+).

A client's fetch quota (`Request.fetch_allowance`) caps the bytes acquired at once; while the
client is over it, its acknowledgements are applied and nothing is acquired (Kafka acquires,
then answers empty, leaving what it acquired locked until the lock expires).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable
from typing import Any

from roost.broker.metadata.cache import MetadataCache
from roost.broker.net.request import Request
from roost.broker.replica.manager import ReplicaManager
from roost.broker.replica.partition import Partition
from roost.broker.share.group_configs import GroupConfigStore
from roost.broker.share.keys import SharePartitionKey
from roost.broker.share.leader import LeaderSharePartition, ShareLeader
from roost.broker.share.partition import AckBatch, AckType, AcquireMode
from roost.broker.share.session import (
    INITIAL_EPOCH,
    ShareSession,
    ShareSessionCache,
    TopicPartition,
    merge_topics,
)
from roost.wire.kafka.errors import ErrorCode

# (partition, topic name, its acknowledgement answer: given, or the future of it)
PendingAcks = list[tuple[TopicPartition, str, tuple[ErrorCode, str | None] | asyncio.Future[tuple[ErrorCode, str | None]]]]

log = logging.getLogger("roost.broker.share")

FIRST_RENEW_VERSION = 2
MAX_WAIT_S = 30.0  # a bound on any one parked fetch, whatever MaxWaitMs says
NO_LEADER = {"leader_id": -1, "leader_epoch": -1}


class ShareApi:
    def __init__(self, replicas: ReplicaManager, metadata: MetadataCache, leader: ShareLeader,
                 configs: GroupConfigStore, max_sessions: int) -> None:
        self.replicas = replicas
        self.metadata = metadata
        self.leader = leader
        self.configs = configs
        self.sessions = ShareSessionCache(max_sessions)
        self.fetches = 0  # requests served, for the metrics
        self.acknowledgements = 0
        self.failed_fetches = 0
        self.failed_acknowledgements = 0
        self.acks_by_type: dict[int, int] = {}

    # resolving partitions -------------------------------------------------------------------------------
    def _resolve(self, tp: TopicPartition) -> tuple[str, Partition | ErrorCode]:
        info = self.metadata.by_id(tp[0])
        if info is None:
            return "", ErrorCode.UNKNOWN_TOPIC_ID
        if not 0 <= tp[1] < info.partitions:
            return info.name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if self.replicas.is_offline(info.name, tp[1]):
            return info.name, ErrorCode.KAFKA_STORAGE_ERROR
        partition = self.replicas.partition(info.name, tp[1])
        if partition is None or not partition.is_leader:
            return info.name, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return info.name, partition

    async def _share_partition(self, group_id: str, tp: TopicPartition) -> tuple[str, LeaderSharePartition | ErrorCode]:
        name, found = self._resolve(tp)
        if isinstance(found, ErrorCode):
            return name, found
        got = self.leader.get(SharePartitionKey(group_id, tp[0], tp[1]), found)
        if isinstance(got, (LeaderSharePartition, ErrorCode)):
            return name, got
        return name, await got

    def _leader_hint(self, name: str, index: int, hinted: set[int]) -> dict[str, int]:
        leader, epoch, endpoint = self.metadata.leader_endpoint(name, index) if name else (-1, -1, None)
        if leader >= 0 and endpoint is not None:
            hinted.add(leader)
        return {"leader_id": leader, "leader_epoch": epoch}

    def _endpoints(self, hinted: set[int], listener: str) -> list[dict[str, Any]]:
        return [{"node_id": e.node_id, "host": e.host, "port": e.port, "rack": e.rack}
                for e in (self.metadata.client_endpoint(b, listener) for b in sorted(hinted)) if e is not None]

    # acknowledgements ----------------------------------------------------------------------------------
    async def _acknowledge(self, session: ShareSession, acks: dict[TopicPartition, list[dict[str, Any]]],
                           renew_allowed: bool) -> dict[TopicPartition, tuple[ErrorCode, str | None, str]]:
        """Each partition's acknowledgement result: (error, message, topic name)."""
        return await self._answers(await self._begin_acknowledge(session, acks, renew_allowed))

    async def _begin_acknowledge(self, session: ShareSession, acks: dict[TopicPartition, list[dict[str, Any]]],
                                 renew_allowed: bool) -> PendingAcks:
        """Apply each partition's acknowledgements to its share-partition; their answers (set
        once durable) are awaited with _answers."""
        wanted = [(tp, batches) for tp, batches in acks.items() if batches]
        found = await asyncio.gather(*(self._share_partition(session.group_id, tp) for tp, _ in wanted))
        pending: PendingAcks = []
        for (tp, batches), (name, part) in zip(wanted, found, strict=True):
            if isinstance(part, ErrorCode):
                pending.append((tp, name, (part, None)))
                continue
            converted = [AckBatch(b["first_offset"], b["last_offset"], tuple(b["acknowledge_types"])) for b in batches]
            for batch in converted:
                for kind in batch.types:
                    self.acks_by_type[kind] = self.acks_by_type.get(kind, 0) + 1
            pending.append((tp, name, self.leader.begin_acknowledge(part, session.member_id, converted,
                                                                    renew_allowed)))
        return pending

    @staticmethod
    async def _answers(pending: PendingAcks) -> dict[TopicPartition, tuple[ErrorCode, str | None, str]]:
        out: dict[TopicPartition, tuple[ErrorCode, str | None, str]] = {}
        for tp, name, answer in pending:
            code, message = answer if isinstance(answer, tuple) else await answer
            out[tp] = (code, message, name)
        return out

    def _close(self, session: ShareSession) -> None:
        if self.sessions.close(session):
            self._release(session)

    def _release(self, session: ShareSession) -> None:
        keys = [SharePartitionKey(session.group_id, t, p) for t, p in session.partitions]
        self.leader.release_member(session.group_id, session.member_id, keys)
        log.debug("share session of member %s of group %s ended: its records here are released",
                  session.member_id, session.group_id)

    def connection_closed(self, connection: object) -> None:
        for session in self.sessions.closed_connection(connection):
            self._release(session)

    # ShareFetch -------------------------------------------------------------------------------------------
    def handle_fetch(self, request: Request) -> Awaitable[dict[str, Any]]:
        self.fetches += 1
        return self._fetch(request)

    async def _fetch(self, request: Request) -> dict[str, Any]:
        body = request.body
        version = request.version
        group_id, member_id, epoch = body.get("group_id"), body.get("member_id"), body["share_session_epoch"]
        lock_ms = self.configs.settings(group_id).lock_duration_ms if group_id else 0

        def refused(code: ErrorCode, message: str | None) -> dict[str, Any]:
            self.failed_fetches += 1
            return {"throttle_time_ms": 0, "error_code": code, "error_message": message,
                    "acquisition_lock_timeout_ms": lock_ms, "responses": [], "node_endpoints": []}
        renew = version >= FIRST_RENEW_VERSION and body.get("is_renew_ack", False)
        if renew and any(body.get(k, 0) for k in ("max_bytes", "min_bytes", "max_records", "max_wait_ms")):
            return refused(ErrorCode.INVALID_REQUEST, "a renew acknowledgement fetches nothing: "
                                                      "MaxBytes, MinBytes, MaxRecords and MaxWaitMs must be 0")
        if body.get("share_acquire_mode", 0) not in (AcquireMode.BATCH_OPTIMIZED, AcquireMode.RECORD_LIMIT):
            return refused(ErrorCode.INVALID_REQUEST, f"unknown ShareAcquireMode {body.get('share_acquire_mode')}")
        merged = merge_topics(body["topics"])
        forgotten = [(t["topic_id"], p) for t in body.get("forgotten_topics_data") or [] for p in t["partitions"]]
        answer = self.sessions.for_fetch(group_id or "", member_id or "", epoch, merged, forgotten,
                                         any(merged.values()), request.connection)
        if answer.error != ErrorCode.NONE:
            return refused(answer.error, answer.message)
        session = answer.session
        assert session is not None and group_id and member_id
        if epoch == INITIAL_EPOCH:  # a new session: the state may have been altered while idle
            await asyncio.gather(*(self.leader.revalidate(SharePartitionKey(group_id, t, p)) for t, p in merged))
        # The acknowledgements are applied now and written meanwhile: the records are acquired
        # while their state write is in flight (the answer still waits for it to be durable).
        pending = await self._begin_acknowledge(session, merged, renew)
        hinted: set[int] = set()
        out: dict[TopicPartition, dict[str, Any]] = {}

        def entry(tp: TopicPartition, name: str) -> dict[str, Any]:
            found = out.get(tp)
            if found is None:
                found = out[tp] = {"partition_index": tp[1], "error_code": ErrorCode.NONE, "error_message": None,
                                   "acknowledge_error_code": ErrorCode.NONE, "acknowledge_error_message": None,
                                   "current_leader": dict(NO_LEADER), "records": b"", "acquired_records": []}
            return found

        async def acknowledged() -> None:
            for tp, (code, message, name) in (await self._answers(pending)).items():
                item = entry(tp, name)
                item["acknowledge_error_code"], item["acknowledge_error_message"] = code, message
                if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    item["current_leader"] = self._leader_hint(name, tp[1], hinted)
        allowance = request.fetch_allowance
        if allowance is not None:
            body = {**body, "max_bytes": allowance.cap(body.get("max_bytes", 0x7FFFFFFF))}
        # Over its fetch quota, the client's acknowledgements are applied but nothing is
        # acquired: it is answered at once and is muted for the throttle time anyway.
        throttled = allowance is not None and allowance.over_quota_ms > 0
        if answer.closing or renew or throttled:
            await acknowledged()
            if answer.closing:
                self._close(session)
            response = self._response(out, lock_ms, hinted, request.listener)
            if throttled:
                assert allowance is not None
                response["throttle_time_ms"] = allowance.over_quota_ms
            return response
        for tp, name, _ in pending:  # the acknowledged partitions come first in the answer, as before
            entry(tp, name)
        if _releases(merged):
            # Released records are acquirable again only once their write is durable: wait for
            # it, so they can come back in this answer (as they always have here).
            await acknowledged()
            await self._acquire_all(session, body, entry, hinted)
        else:
            await self._acquire_all(session, body, entry, hinted)
            await acknowledged()
            if pending and not any(item["acquired_records"] for item in out.values()) \
                    and self.sessions.sessions.get((session.group_id, session.member_id)) is session:
                # What the acknowledgements freed (room under the in-flight cap) is acquirable
                # now: one more look, without waiting, so the answer is what it was when the
                # acknowledgement went first.
                await self._acquire_all(session, {**body, "max_wait_ms": 0}, entry, hinted)
        if epoch == INITIAL_EPOCH:
            for tp in merged:
                name, _ = self._resolve(tp)
                entry(tp, name)
        response = self._response(out, lock_ms, hinted, request.listener)
        if allowance is not None:  # acquired, so sent: the client's next fetch waits instead
            response["throttle_time_ms"] = allowance.charge(sum(_size(item["records"]) for item in out.values()))
        return response

    async def _acquire_all(self, session: ShareSession, body: dict[str, Any], entry: Any, hinted: set[int]) -> None:
        """Acquire from every partition of the session; when nothing is acquired and nothing
        errs, park (woken by new records or released ones) until MaxWaitMs."""
        loop = asyncio.get_running_loop()
        max_wait = min(MAX_WAIT_S, max(0, body.get("max_wait_ms", 0)) / 1000)
        deadline = loop.time() + max_wait
        max_records = max(1, body.get("max_records", 500) or 500)
        mode = AcquireMode(body.get("share_acquire_mode", 0))  # v2+; validated in _fetch
        max_bytes = body.get("max_bytes", 0x7FFFFFFF)
        for _attempt in range(10_000):  # bounded: each round waits for a wake-up or the deadline
            parts: list[tuple[TopicPartition, str, LeaderSharePartition]] = []
            errored = False
            for tp in list(session.partitions):
                name, part = await self._share_partition(session.group_id, tp)
                if isinstance(part, ErrorCode):
                    item = entry(tp, name)
                    item["error_code"] = part
                    if part == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                        item["current_leader"] = self._leader_hint(name, tp[1], hinted)
                    errored = True
                    continue
                parts.append((tp, name, part))
            remaining_records, remaining_bytes, found = max_records, max_bytes, False
            for tp, name, part in parts:
                if remaining_records <= 0 or remaining_bytes <= 0:
                    break
                acquired = self.leader.acquire(part, session.member_id, remaining_records, remaining_bytes,
                                               first_read=not found, mode=mode)
                if not acquired.ranges:
                    continue
                found = True
                item = entry(tp, name)
                item["records"] = acquired.records
                item["acquired_records"] = [{"first_offset": r.first_offset, "last_offset": r.last_offset,
                                             "delivery_count": r.delivery_count} for r in acquired.ranges]
                remaining_records -= sum(r.last_offset - r.first_offset + 1 for r in acquired.ranges)
                remaining_bytes -= sum(len(b) for b in acquired.records)
            if found or errored or loop.time() >= deadline or not parts:
                return
            await self._park(parts, deadline - loop.time())
            if self.sessions.sessions.get((session.group_id, session.member_id)) is not session:
                return  # closed meanwhile (its connection went)

    async def _park(self, parts: list[tuple[TopicPartition, str, LeaderSharePartition]], wait_s: float) -> None:
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not woken.done():
                woken.set_result(None)
        for _, _, part in parts:
            part.partition.add_waiter(wake)
            self.leader.add_waiter(part, wake)
        try:
            await asyncio.wait_for(asyncio.shield(woken), max(0.0, wait_s))
        except TimeoutError:
            pass
        finally:
            for _, _, part in parts:
                part.partition.remove_waiter(wake)
                self.leader.remove_waiter(part, wake)

    def _response(self, out: dict[TopicPartition, dict[str, Any]], lock_ms: int, hinted: set[int],
                  listener: str) -> dict[str, Any]:
        by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
        for (topic_id, _), item in out.items():
            by_topic.setdefault(topic_id, []).append(item)
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
                "acquisition_lock_timeout_ms": lock_ms,
                "responses": [{"topic_id": t, "partitions": p} for t, p in by_topic.items()],
                "node_endpoints": self._endpoints(hinted, listener)}

    # ShareAcknowledge ----------------------------------------------------------------------------------
    def handle_acknowledge(self, request: Request) -> Awaitable[dict[str, Any]]:
        self.acknowledgements += 1
        return self._acknowledge_request(request)

    async def _acknowledge_request(self, request: Request) -> dict[str, Any]:
        body = request.body
        group_id, member_id, epoch = body.get("group_id"), body.get("member_id"), body["share_session_epoch"]
        lock_ms = self.configs.settings(group_id).lock_duration_ms if group_id else 0
        renew = request.version >= FIRST_RENEW_VERSION and body.get("is_renew_ack", False)
        answer = self.sessions.for_acknowledge(group_id or "", member_id or "", epoch, request.connection)
        if answer.error != ErrorCode.NONE:
            self.failed_acknowledgements += 1
            return {"throttle_time_ms": 0, "error_code": answer.error, "error_message": answer.message,
                    "acquisition_lock_timeout_ms": lock_ms, "responses": [], "node_endpoints": []}
        session = answer.session
        assert session is not None
        acks = merge_topics(body["topics"])
        results = await self._acknowledge(session, acks, renew)
        if answer.closing:
            self._close(session)
        hinted: set[int] = set()
        by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
        for tp, (code, message, name) in results.items():
            leader = self._leader_hint(name, tp[1], hinted) if code == ErrorCode.NOT_LEADER_OR_FOLLOWER \
                else dict(NO_LEADER)
            by_topic.setdefault(tp[0], []).append({"partition_index": tp[1], "error_code": code,
                                                   "error_message": message, "current_leader": leader})
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
                "acquisition_lock_timeout_ms": lock_ms,
                "responses": [{"topic_id": t, "partitions": p} for t, p in by_topic.items()],
                "node_endpoints": self._endpoints(hinted, request.listener)}


def _releases(acks: dict[TopicPartition, list[dict[str, Any]]]) -> bool:
    """Whether any acknowledgement releases records (type 2, Release)."""
    return any(AckType.RELEASE in batch["acknowledge_types"] for batches in acks.values() for batch in batches)


def _size(records: bytes | list[bytes | memoryview]) -> int:
    """The bytes of a partition's records in the answer (b"", or the batches acquired)."""
    return len(records) if isinstance(records, bytes) else sum(len(chunk) for chunk in records)
