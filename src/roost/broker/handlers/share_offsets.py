"""The share groups' offsets administration (KIP-932): DescribeShareGroupOffsets (90),
AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92), on the group's coordinator, as
Kafka 4.2's GroupCoordinatorService serves them.

- Describe reads each share-partition's summary (ReadShareGroupStateSummary) from the share
  coordinator: StartOffset, LeaderEpoch and (v1) Lag = log end offset - StartOffset -
  DeliveryCompleteCount, the log end read from the data partition's leader (ListOffsets
  latest). A null topic list describes every share-partition the group has state for
  (`ShareGroup.initialized`); an unknown topic answers StartOffset -1 and a zero topic id, not an
  error; a share-partition without state answers StartOffset -1, LeaderEpoch 0, Lag -1.
- Alter needs the group Empty (NON_EMPTY_GROUP), creates a missing one, and re-initializes each
  named share-partition's state (InitializeShareGroupState) at the new StartOffset with a state
  epoch above the current one, so a leader still holding the old state is fenced
  (FENCED_STATE_EPOCH) and loads the new one (share/leader.py). Unknown topics and partitions are
  UNKNOWN_TOPIC_OR_PARTITION per partition.
- Delete needs the group Empty and existing (GROUP_ID_NOT_FOUND), and removes the state of every
  initialized partition of each named topic (DeleteShareGroupState); a topic without state is
  UNKNOWN_TOPIC_OR_PARTITION "There is no offset information to delete.".

An empty group id is INVALID_GROUP_ID; a group held by a classic or consumer group is
GROUP_ID_NOT_FOUND. The authorizer's checks (Group DESCRIBE + Topic DESCRIBE; Group READ +
Topic READ; Group DELETE + Topic READ) are in api_rules.py.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from roost.broker.group.service import GroupService
from roost.broker.group.share_group import ShareGroup, mark_initialized
from roost.broker.metadata.cache import MetadataCache
from roost.broker.net.peer import PeerError, PeerPool
from roost.broker.net.request import Request
from roost.broker.replica.manager import ReplicaManager
from roost.broker.share.coordinator_records import ShareKey
from roost.broker.share.persister import Persister
from roost.wire.kafka import ApiKey, KafkaCodecError
from roost.wire.kafka.errors import ErrorCode

log = logging.getLogger("roost.broker.share")

ZERO_UUID = uuid.UUID(int=0)
LIST_OFFSETS_VERSION = 7
PEER_TIMEOUT_S = 10.0
LATEST = -1
NO_OFFSET_INFO = "There is no offset information to delete."


class ShareOffsetsApi:
    def __init__(self, groups: GroupService, metadata: MetadataCache, replicas: ReplicaManager, persister: Persister,
                 peers: PeerPool, broker_id: int, forget: Callable[[str], None] | None = None) -> None:
        self.groups = groups
        self.metadata = metadata
        self.replicas = replicas
        self.persister = persister
        self.peers = peers
        self.broker_id = broker_id
        # Told when a share group's offsets were altered or deleted: this broker's leader drops
        # what it holds of the group (others are fenced by the state epoch and reload).
        self.forget = forget or (lambda _group: None)

    def _group_problem(self, group_id: str) -> ErrorCode | None:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        status = self.groups.status(group_id)
        if status != ErrorCode.NONE:
            return status
        if group_id in self.groups.consumer.groups or group_id in self.groups.coordinator.groups:
            return ErrorCode.GROUP_ID_NOT_FOUND
        return None

    # log end offsets (for the lag) -----------------------------------------------------------------
    async def _log_end(self, topic: str, index: int) -> int | None:
        partition = self.replicas.partition(topic, index)
        if partition is not None and partition.is_leader:
            return partition.high_watermark
        endpoint = self.metadata.coordinator_endpoint(topic, index)  # the leader, if live
        if endpoint is None:
            return None
        body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": index, "current_leader_epoch": -1, "timestamp": LATEST}]}]}
        try:
            answer = await self.peers.get(endpoint.node_id, endpoint.host, endpoint.port).request(
                ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, body, PEER_TIMEOUT_S)
        except (PeerError, KafkaCodecError, OSError, TimeoutError) as error:
            log.info("log end of %s-%d not read from broker %d: %s", topic, index, endpoint.node_id, error)
            return None
        for t in answer.get("topics", []):
            for p in t["partitions"]:
                if p["partition_index"] == index and p["error_code"] == ErrorCode.NONE:
                    return int(p["offset"])
        return None

    # DescribeShareGroupOffsets --------------------------------------------------------------------
    async def handle_describe(self, request: Request) -> dict[str, Any]:
        groups = await asyncio.gather(*(self._describe_group(g, request.version) for g in request.body["groups"]))
        return {"throttle_time_ms": 0, "groups": list(groups)}

    async def _describe_group(self, asked: dict[str, Any], version: int) -> dict[str, Any]:
        group_id = asked["group_id"]
        problem = self._group_problem(group_id)
        if problem is not None:
            return {"group_id": group_id, "topics": [], "error_code": problem, "error_message": None}
        wanted: list[tuple[str, list[int]]]
        if asked.get("topics") is None:
            group = self.groups.share.groups.get(group_id)
            initialized = group.initialized if group is not None else {}
            wanted = []
            for topic_id, (_name, parts) in sorted(initialized.items(), key=lambda item: item[1][0]):
                info = self.metadata.by_id(topic_id)
                if info is not None:  # a topic deleted since is left out, as Kafka does
                    wanted.append((info.name, sorted(p for p in parts if p < info.partitions)))
        else:
            wanted = [(t["topic_name"], list(t["partitions"])) for t in asked["topics"]]
        topics = await asyncio.gather(*(self._describe_topic(group_id, name, parts) for name, parts in wanted))
        return {"group_id": group_id, "topics": list(topics), "error_code": ErrorCode.NONE, "error_message": None}

    async def _describe_topic(self, group_id: str, name: str, partitions: list[int]) -> dict[str, Any]:
        info = self.metadata.get(name)
        if info is None:
            return {"topic_name": name, "topic_id": ZERO_UUID, "partitions": [
                {"partition_index": p, "start_offset": -1, "leader_epoch": 0, "lag": -1,
                 "error_code": ErrorCode.NONE, "error_message": None} for p in partitions]}

        async def one(index: int) -> dict[str, Any]:
            summary = await self.persister.read_summary(ShareKey(group_id, info.topic_id, index), -1)
            entry: dict[str, Any] = {"partition_index": index, "start_offset": -1, "leader_epoch": 0, "lag": -1,
                     "error_code": ErrorCode.NONE, "error_message": None}
            if summary.error != ErrorCode.NONE:
                return entry  # no state: absence of data, not an error (Kafka)
            entry.update(start_offset=summary.start_offset, leader_epoch=summary.leader_epoch)
            if summary.start_offset >= 0 and summary.delivery_complete_count >= 0:
                end = await self._log_end(name, index)
                if end is None:
                    entry.update(error_code=ErrorCode.LEADER_NOT_AVAILABLE, error_message="the log end is unknown")
                else:
                    entry["lag"] = max(0, end - summary.start_offset - summary.delivery_complete_count)
            return entry
        return {"topic_name": name, "topic_id": info.topic_id,
                "partitions": list(await asyncio.gather(*(one(p) for p in partitions)))}

    # AlterShareGroupOffsets --------------------------------------------------------------------------
    async def handle_alter(self, request: Request) -> dict[str, Any]:
        body = request.body
        group_id = body["group_id"]

        def refused(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
            return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "responses": []}
        problem = self._group_problem(group_id)
        if problem is not None:
            return refused(problem)
        group = self.groups.share.group_for_offsets(group_id, create=True)
        if isinstance(group, ErrorCode):
            return refused(group, "the share group has members: offsets are altered only while it is empty"
                           if group == ErrorCode.NON_EMPTY_GROUP else None)
        responses = []
        work: list[tuple[dict[str, Any], ShareKey, int]] = []
        for topic in body["topics"]:
            info = self.metadata.get(topic["topic_name"])
            out: dict[str, Any] = {"topic_name": topic["topic_name"],
                                   "topic_id": info.topic_id if info is not None else ZERO_UUID, "partitions": []}
            for p in topic["partitions"]:
                entry = {"partition_index": p["partition_index"], "error_code": ErrorCode.NONE, "error_message": None}
                if info is None or not 0 <= p["partition_index"] < info.partitions:
                    entry.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 error_message="This server does not host this topic-partition.")
                else:
                    work.append((entry, ShareKey(group_id, info.topic_id, p["partition_index"]), p["start_offset"]))
                out["partitions"].append(entry)
            responses.append(out)
        codes = await asyncio.gather(*(self._reinitialize(key, start) for _, key, start in work))
        done = False
        for (entry, key, _), code in zip(work, codes, strict=True):
            if code != ErrorCode.NONE:
                entry.update(error_code=code, error_message=None)
                continue
            info = self.metadata.by_id(key.topic_id)
            mark_initialized(group, key.topic_id, info.name if info is not None else "", [key.partition])
            done = True
        if done:
            self.forget(group_id)
        code = await self._persist(group_id, group)
        if code != ErrorCode.NONE:
            return refused(code)
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "responses": responses}

    async def _reinitialize(self, key: ShareKey, start_offset: int) -> ErrorCode:
        """The share-partition's state starts again at `start_offset`, one state epoch on."""
        summary = await self.persister.read_summary(key, -1)
        epoch = summary.state_epoch + 1 if summary.error == ErrorCode.NONE else 0
        code = await self.persister.initialize(key, epoch, start_offset)
        log.info("share-partition %s: offsets altered to start at %d (state epoch %d): %s",
                 key.coordinator_key(), start_offset, epoch, code.name)
        return code

    async def _persist(self, group_id: str, group: ShareGroup) -> ErrorCode:
        persisted = self.groups.persist_consumer_group(group_id, self.groups.clock_ms())
        return persisted if isinstance(persisted, ErrorCode) else await persisted

    # DeleteGroups of a share group ----------------------------------------------------------------
    async def delete_group_state(self, group_id: str) -> ErrorCode:
        """Before DeleteGroups removes a share group, the state of every share-partition it has
        initialized goes from the share coordinator (Kafka's deleteShareGroups), so a new group of
        the same name starts from `share.auto.offset.reset`, not from the old group's start offset
        and acknowledged records. NONE when the group may go (or is no share group here: the
        group service answers for it), NON_EMPTY_GROUP while it has members, else the first
        persister error (the group then stays, as in Kafka, and the delete may be retried). An
        empty group is marked deleting first (`ShareGroupCoordinator.deleting`): the caller
        clears the mark once the group is removed or kept."""
        if self._group_problem(group_id) is not None:
            return ErrorCode.NONE
        group = self.groups.share.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        if group_id in self.groups.share.deleting:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # another DeleteGroups is at it: retry
        # No await since the check: no member can join until DeleteGroups clears the mark.
        self.groups.share.deleting.add(group_id)
        keys = [ShareKey(group_id, topic_id, p) for topic_id, (_name, parts) in sorted(group.initialized.items())
                for p in sorted(parts)]
        codes = await asyncio.gather(*(self.persister.delete(key) for key in keys))
        failed = next((c for c in codes if c != ErrorCode.NONE), ErrorCode.NONE)
        if failed != ErrorCode.NONE:
            log.info("share group %s not deleted: the state of its share-partitions was not: %s", group_id,
                     failed.name)
            return failed
        if keys:
            log.info("share group %s: the state of its %d share-partitions deleted", group_id, len(keys))
        return ErrorCode.NONE

    # DeleteShareGroupOffsets --------------------------------------------------------------------------
    async def handle_delete(self, request: Request) -> dict[str, Any]:
        body = request.body
        group_id = body["group_id"]

        def refused(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
            return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "responses": []}
        problem = self._group_problem(group_id)
        if problem is not None:
            return refused(problem)
        group = self.groups.share.group_for_offsets(group_id, create=False)
        if isinstance(group, ErrorCode):
            return refused(group, "the share group has members: offsets are deleted only while it is empty"
                           if group == ErrorCode.NON_EMPTY_GROUP else None)
        responses: list[dict[str, Any]] = []
        work: list[tuple[dict[str, Any], uuid.UUID, list[int]]] = []
        for topic in body["topics"]:
            name = topic["topic_name"]
            info = self.metadata.get(name)
            entry: dict[str, Any] = {"topic_name": name, "topic_id": ZERO_UUID, "error_code": ErrorCode.NONE,
                                     "error_message": None}
            if info is None:
                entry.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             error_message="This server does not host this topic-partition.")
            elif info.topic_id not in group.initialized:
                entry.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message=NO_OFFSET_INFO)
            else:
                entry["topic_id"] = info.topic_id
                work.append((entry, info.topic_id, sorted(group.initialized[info.topic_id][1])))
            responses.append(entry)

        async def delete_topic(topic_id: uuid.UUID, partitions: list[int]) -> ErrorCode:
            codes = await asyncio.gather(*(self.persister.delete(ShareKey(group_id, topic_id, p)) for p in partitions))
            return next((c for c in codes if c != ErrorCode.NONE), ErrorCode.NONE)
        results = await asyncio.gather(*(delete_topic(t, parts) for _, t, parts in work))
        for (entry, topic_id, _), code in zip(work, results, strict=True):
            if code != ErrorCode.NONE:
                entry.update(error_code=code, error_message=None)
            else:
                group.initialized.pop(topic_id, None)
        if work:
            self.forget(group_id)
        code = await self._persist(group_id, group)
        if code != ErrorCode.NONE:
            return refused(code)
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "responses": responses}
