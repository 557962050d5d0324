"""The group service as a per-partition coordinator: real partition logs in a temporary directory,
a real replica manager whose roles are set by LeaderAndIsr requests written here (so the
leadership listener fires as it does in a cluster), and followers' progress fed as their fetches
would feed it. No sockets: the handlers are called with decoded requests."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from roost.broker.coordinators import load as coordinator_load
from roost.broker.group.classic_protocol import GroupState
from roost.broker.group.offsets import CommittedOffset, offset_batch, offsets_partition_for
from roost.broker.group.service import GroupService, commit_error, offsets_topic_configs
from roost.broker.handlers import groups as handlers
from roost.broker.metadata.cache import BrokerEndpoint, MetadataCache, PartitionInfo
from roost.broker.metadata.catalog import OFFSETS_TOPIC
from roost.broker.net.request import Request
from roost.broker.replica.manager import ReplicaManager
from roost.broker.replica.partition import Partition
from roost.config import BrokerConfig
from roost.storage.log_manager import LogManager
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.framing import RequestHeader

ME, PEER = 1, 2
PARTITIONS = 3
TOPIC_ID = uuid.uuid4()
USER_TOPIC = "orders"
WAIT_S = 10.0  # against hangs only


def group_in(partition: int) -> str:
    """A group id whose offsets live in `partition` (Kafka's placement)."""
    return next(g for i in itertools.count() if offsets_partition_for(g := f"group-{i}", PARTITIONS) == partition)


@dataclass
class Node:
    """One broker's replica manager and group service over real logs."""

    config: BrokerConfig
    metadata: MetadataCache
    replicas: ReplicaManager
    groups: GroupService
    controller_epoch: int = 1

    async def set_role(self, index: int, leader: int, epoch: int, isr: tuple[int, ...] = (ME, PEER)) -> Partition:
        """A LeaderAndIsr for one offsets partition, and the matching UpdateMetadata."""
        body = {"controller_id": PEER, "controller_epoch": self.controller_epoch, "broker_epoch": -1,
                "topic_states": [{"topic_name": OFFSETS_TOPIC, "topic_id": TOPIC_ID, "partition_states": [{
                    "partition_index": index, "leader": leader, "leader_epoch": epoch, "partition_epoch": epoch,
                    "replicas": [ME, PEER], "isr": list(isr)}]}]}

        async def configs_for(topic: str) -> dict[str, Any]:
            return offsets_topic_configs(self.config)

        answer = await self.replicas.leader_and_isr(body, configs_for)
        assert answer["topics"][0]["partition_errors"][0]["error_code"] == ErrorCode.NONE
        self.metadata.set_partition(OFFSETS_TOPIC, index, PartitionInfo(leader, epoch, (ME, PEER), isr), TOPIC_ID)
        partition = self.replicas.partition(OFFSETS_TOPIC, index)
        assert partition is not None
        return partition

    def follower_reached(self, partition: Partition, offset: int) -> None:
        """The peer fetched from `offset`: it holds everything below (the HW may move)."""
        self.replicas.follower_fetched(partition, PEER, offset)


def run(tmp_path: Path, scenario: Callable[[Node], Coroutine[Any, Any, None]], **settings: Any) -> None:
    async def main() -> None:
        config = BrokerConfig.build([("test", {"broker.id": ME, "offsets.topic.num.partitions": PARTITIONS,
                                               **settings})])
        metadata = MetadataCache()
        metadata.set_brokers([BrokerEndpoint(ME, "127.0.0.1", 19092), BrokerEndpoint(PEER, "127.0.0.1", 19093)], PEER)
        metadata.set_partition(USER_TOPIC, 0, PartitionInfo(PEER, 0, (ME, PEER), (ME, PEER)))
        for index in range(PARTITIONS):  # as the controller's UpdateMetadata tells every broker
            metadata.set_partition(OFFSETS_TOPIC, index, PartitionInfo(PEER, 0, (ME, PEER), (ME, PEER)), TOPIC_ID)
        replicas = ReplicaManager(ME, config, LogManager(config, tmp_path), metadata)
        node = Node(config, metadata, replicas, GroupService(config, replicas, metadata))
        try:
            await asyncio.wait_for(scenario(node), WAIT_S)
        finally:
            await node.groups.stop()
            await replicas.close()

    asyncio.run(main())


async def loaded(node: Node, group_id: str) -> None:
    """Let the loop run until the group's partition is loaded (bounded in steps)."""
    for _ in range(10_000):
        if node.groups.status(group_id) != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            break
        await asyncio.sleep(0)
    assert node.groups.status(group_id) == ErrorCode.NONE


def committed(offset: int, stamp: int = 1_000) -> CommittedOffset:
    return CommittedOffset(offset, 0, "", stamp)


async def answer(outcome: ErrorCode | Awaitable[ErrorCode]) -> ErrorCode:
    return outcome if isinstance(outcome, ErrorCode) else await outcome


def request(api: ApiKey, version: int, body: dict[str, Any]) -> Request:
    return Request(RequestHeader(api, version, 1, "test-client"), body, "127.0.0.1")


def context(node: Node) -> handlers.GroupContext:
    return handlers.GroupContext(node.groups, lambda topic, index: node.metadata.partition(topic, index) is not None)


# loading ----------------------------------------------------------------------------------------
def test_election_loads_only_the_partitions_it_leads_last_record_winning(tmp_path: Path) -> None:
    mine, theirs = group_in(0), group_in(1)

    async def scenario(node: Node) -> None:
        p0 = await node.set_role(0, ME, 1)
        await node.set_role(1, PEER, 1)
        # Records as earlier leaders left them: an update, a deletion, another group's entry.
        p0.log.append(offset_batch({(mine, USER_TOPIC, 0): committed(5), (mine, USER_TOPIC, 1): committed(7)}, 1))
        p0.log.append(offset_batch({(mine, USER_TOPIC, 0): committed(9), (mine, USER_TOPIC, 1): None}, 2))
        node.groups.start()
        assert node.groups.status(mine) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert node.groups.status(theirs) == ErrorCode.NOT_COORDINATOR
        await loaded(node, mine)
        store = node.groups.offsets(mine)
        assert store.for_group(mine) == {(USER_TOPIC, 0): committed(9)}
        assert node.groups.status(theirs) == ErrorCode.NOT_COORDINATOR

    run(tmp_path, scenario)


def test_groups_answer_load_in_progress_until_the_whole_partition_is_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(coordinator_load, "LOAD_CHUNK_BYTES", 256)  # many chunks from a small log
    group = group_in(2)

    async def scenario(node: Node) -> None:
        partition = await node.set_role(2, ME, 1)
        for offset in range(200):
            partition.log.append(offset_batch({(group, USER_TOPIC, 0): committed(offset)}, 1))
        node.groups.start()
        # Another task runs between the chunks: the load does not hold the loop.
        other_ran_while_loading = 0
        while node.groups.status(group) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            assert other_ran_while_loading < 10_000
            other_ran_while_loading += 1
            fetched = handlers.handle_offset_fetch(context(node), request(ApiKey.OFFSET_FETCH, 3, {
                "group_id": group, "topics": None}))
            assert fetched["error_code"] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            # Kafka answers heartbeats blindly meanwhile; the member finds out once loaded.
            heartbeat = handlers.handle_heartbeat(context(node), request(ApiKey.HEARTBEAT, 3, {
                "group_id": group, "generation_id": 1, "member_id": "m", "group_instance_id": None}))
            assert heartbeat["error_code"] == ErrorCode.NONE
            synced = handlers.handle_sync_group(context(node), request(ApiKey.SYNC_GROUP, 3, {
                "group_id": group, "generation_id": 1, "member_id": "m", "group_instance_id": None,
                "assignments": []}))
            assert synced["error_code"] == ErrorCode.REBALANCE_IN_PROGRESS
            await asyncio.sleep(0)
        assert other_ran_while_loading > 10
        assert node.groups.status(group) == ErrorCode.NONE
        assert node.groups.offsets(group).get(group, USER_TOPIC, 0) == committed(199)

    run(tmp_path, scenario)


def test_resignation_unloads_groups_and_reelection_reads_them_back(tmp_path: Path) -> None:
    group = group_in(0)

    async def scenario(node: Node) -> None:
        partition = await node.set_role(0, ME, 1, isr=(ME,))
        node.groups.start()
        await loaded(node, group)
        assert await answer(node.groups.commit(group, {(USER_TOPIC, 0): committed(42)}, 5_000)) == ErrorCode.NONE
        # A member waits in JoinGroup (the initial rebalance delay): it is told to move on.
        joined = handlers.handle_join_group(context(node), request(ApiKey.JOIN_GROUP, 3, {
            "group_id": group, "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]}))
        assert isinstance(joined, asyncio.Future) and not joined.done()

        await node.set_role(0, PEER, 2)
        assert joined.done() and joined.result()["error_code"] == ErrorCode.NOT_COORDINATOR
        assert group not in node.groups.coordinator.groups
        assert node.groups.status(group) == ErrorCode.NOT_COORDINATOR
        fetched = handlers.handle_offset_fetch(context(node), request(ApiKey.OFFSET_FETCH, 3, {
            "group_id": group, "topics": None}))
        assert fetched["error_code"] == ErrorCode.NOT_COORDINATOR and fetched["topics"] == []

        # Leader again (in a cluster the log would be the new leader's; here it is unchanged).
        assert partition is await node.set_role(0, ME, 3, isr=(ME,))
        assert node.groups.status(group) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await loaded(node, group)
        assert node.groups.offsets(group).get(group, USER_TOPIC, 0) == committed(42)

    run(tmp_path, scenario)


def test_a_dropped_partition_unloads_its_groups(tmp_path: Path) -> None:
    group = group_in(1)

    async def scenario(node: Node) -> None:
        await node.set_role(1, ME, 1, isr=(ME,))
        node.groups.start()
        await loaded(node, group)
        node.replicas.drop_partitions(OFFSETS_TOPIC, [1], delete=False)
        assert node.groups.status(group) == ErrorCode.NOT_COORDINATOR

    run(tmp_path, scenario)


# committing -------------------------------------------------------------------------------------
def test_a_commit_is_answered_and_visible_only_once_the_high_watermark_covers_it(tmp_path: Path) -> None:
    group = group_in(0)

    async def scenario(node: Node) -> None:
        partition = await node.set_role(0, ME, 1)
        node.groups.start()
        await loaded(node, group)
        outcome = node.groups.commit(group, {(USER_TOPIC, 0): committed(10)}, 1_000)
        assert not isinstance(outcome, ErrorCode)
        pending = asyncio.ensure_future(outcome)
        await asyncio.sleep(0)
        assert not pending.done()
        assert node.groups.offsets(group).get(group, USER_TOPIC, 0) is None  # not acknowledged yet
        node.follower_reached(partition, partition.log_end_offset)
        assert await pending == ErrorCode.NONE
        assert node.groups.offsets(group).get(group, USER_TOPIC, 0) == committed(10)

    run(tmp_path, scenario)


def test_a_commit_that_times_out_leaves_the_offset_unchanged(tmp_path: Path) -> None:
    group = group_in(0)

    async def scenario(node: Node) -> None:
        partition = await node.set_role(0, ME, 1)
        node.groups.start()
        await loaded(node, group)
        first = node.groups.commit(group, {(USER_TOPIC, 0): committed(10)}, 1_000)
        node.follower_reached(partition, partition.log_end_offset)
        assert await answer(first) == ErrorCode.NONE
        # The follower never fetches the second commit: the commit timeout answers.
        assert await answer(node.groups.commit(group, {(USER_TOPIC, 0): committed(20)}, 2_000)) == \
            ErrorCode.REQUEST_TIMED_OUT
        assert node.groups.offsets(group).get(group, USER_TOPIC, 0) == committed(10)
        fetched = handlers.handle_offset_fetch(context(node), request(ApiKey.OFFSET_FETCH, 1, {
            "group_id": group, "topics": [{"name": USER_TOPIC, "partition_indexes": [0]}]}))
        assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 10

    run(tmp_path, scenario, **{"offsets.commit.timeout.ms": 50})


def test_too_few_in_sync_replicas_answer_coordinator_not_available(tmp_path: Path) -> None:
    group = group_in(0)

    async def scenario(node: Node) -> None:
        partition = await node.set_role(0, ME, 1)
        node.groups.start()
        await loaded(node, group)
        pending = asyncio.ensure_future(answer(node.groups.commit(group, {(USER_TOPIC, 0): committed(10)}, 1_000)))
        await asyncio.sleep(0)
        # The ISR manager drops the silent follower: the HW covers the commit, but with one
        # in-sync replica where min.insync.replicas is 2 (NOT_ENOUGH_REPLICAS_AFTER_APPEND).
        partition.state.update_isr({ME}, partition.state.partition_epoch + 1)
        if partition.state.advance_high_watermark(partition.log_end_offset):
            partition.high_watermark_moved()
        assert await pending == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert node.groups.offsets(group).get(group, USER_TOPIC, 0) is None
        # And before the append, the next commit is refused the same way (NOT_ENOUGH_REPLICAS).
        end = partition.log_end_offset
        assert await answer(node.groups.commit(group, {(USER_TOPIC, 0): committed(11)}, 1_000)) == \
            ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert partition.log_end_offset == end

    run(tmp_path, scenario, **{"min.insync.replicas": 2})


def test_leadership_lost_during_a_commit_answers_not_coordinator(tmp_path: Path) -> None:
    group = group_in(0)

    async def scenario(node: Node) -> None:
        await node.set_role(0, ME, 1)
        node.groups.start()
        await loaded(node, group)
        commit = handlers.handle_offset_commit(context(node), request(ApiKey.OFFSET_COMMIT, 8, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": USER_TOPIC, "partitions": [
                {"partition_index": 0, "committed_offset": 10, "committed_leader_epoch": -1,
                 "committed_metadata": ""},
                {"partition_index": 7, "committed_offset": 10, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]}))
        pending = asyncio.ensure_future(commit)
        await asyncio.sleep(0)
        await node.set_role(0, PEER, 2)
        response = await pending
        codes = {p["partition_index"]: p["error_code"] for p in response["topics"][0]["partitions"]}
        assert codes == {0: ErrorCode.NOT_COORDINATOR, 7: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}

    run(tmp_path, scenario)


def test_commits_finishing_out_of_order_keep_the_later_one(tmp_path: Path) -> None:
    group = group_in(0)

    async def scenario(node: Node) -> None:
        partition = await node.set_role(0, ME, 1)
        node.groups.start()
        await loaded(node, group)
        first = asyncio.ensure_future(answer(node.groups.commit(group, {(USER_TOPIC, 0): committed(10)}, 1_000)))
        second = asyncio.ensure_future(answer(node.groups.commit(group, {(USER_TOPIC, 0): committed(20)}, 1_000)))
        await asyncio.sleep(0)
        node.follower_reached(partition, partition.log_end_offset)
        assert await second == ErrorCode.NONE and await first == ErrorCode.NONE
        assert node.groups.offsets(group).get(group, USER_TOPIC, 0) == committed(20)

    run(tmp_path, scenario)


# cleanup ----------------------------------------------------------------------------------------
def test_expiry_and_topic_deletion_write_tombstones_in_the_partitions_it_leads(tmp_path: Path) -> None:
    old, young = group_in(0), group_in(2)

    async def scenario(node: Node) -> None:
        p0 = await node.set_role(0, ME, 1, isr=(ME,))
        p2 = await node.set_role(2, ME, 1, isr=(ME,))
        node.groups.start()
        await loaded(node, old)
        await loaded(node, young)
        day_ms = 24 * 3600 * 1000
        assert await answer(node.groups.commit(old, {(USER_TOPIC, 0): committed(1, stamp=0)}, 0)) == ErrorCode.NONE
        assert await answer(node.groups.commit(young, {(USER_TOPIC, 0): committed(2, stamp=day_ms),
                                                       ("gone", 0): committed(3, stamp=day_ms)}, day_ms)) == \
            ErrorCode.NONE
        assert node.groups.expire_offsets(now=day_ms + 60_000 * 60) == 1  # retention: 60 minutes
        node.groups.forget_topic("gone")
        assert node.groups.offsets(old).for_group(old) == {}
        assert node.groups.offsets(young).for_group(young) == {(USER_TOPIC, 0): committed(2, stamp=day_ms)}
        # The tombstones are in the logs: a new leader reading them back agrees.
        await node.set_role(0, PEER, 2)
        await node.set_role(2, PEER, 2)
        await node.set_role(0, ME, 3, isr=(ME,))
        await node.set_role(2, ME, 3, isr=(ME,))
        await loaded(node, old)
        await loaded(node, young)
        assert node.groups.offsets(old).for_group(old) == {}
        assert node.groups.offsets(young).for_group(young) == {(USER_TOPIC, 0): committed(2, stamp=day_ms)}
        assert (p0.log_end_offset, p2.log_end_offset) == (2, 3)  # the commits and one tombstone batch each

    run(tmp_path, scenario, **{"offsets.retention.minutes": 60})


# answers ----------------------------------------------------------------------------------------
def test_error_placement_follows_kafka(tmp_path: Path) -> None:
    theirs = group_in(1)

    async def scenario(node: Node) -> None:
        await node.set_role(1, PEER, 1)
        node.groups.start()
        ctx = context(node)
        assert handlers.handle_sync_group(ctx, request(ApiKey.SYNC_GROUP, 3, {
            "group_id": theirs, "generation_id": 1, "member_id": "m", "group_instance_id": None,
            "assignments": []}))["error_code"] == ErrorCode.NOT_COORDINATOR
        assert handlers.handle_leave_group(ctx, request(ApiKey.LEAVE_GROUP, 3, {
            "group_id": theirs, "members": [{"member_id": "m", "group_instance_id": None}]})) == \
            {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_COORDINATOR, "members": []}
        v1 = handlers.handle_offset_fetch(ctx, request(ApiKey.OFFSET_FETCH, 1, {
            "group_id": theirs, "topics": [{"name": USER_TOPIC, "partition_indexes": [0, 1]}]}))
        assert [p["error_code"] for p in v1["topics"][0]["partitions"]] == [ErrorCode.NOT_COORDINATOR] * 2
        described = handlers.handle_describe_groups(ctx, request(ApiKey.DESCRIBE_GROUPS, 3, {
            "groups": [theirs]}))["groups"]
        assert [(g["group_id"], g["error_code"]) for g in described] == [(theirs, ErrorCode.NOT_COORDINATOR)]
        found = handlers.handle_find_coordinator(ctx, request(ApiKey.FIND_COORDINATOR, 2, {
            "key": theirs, "key_type": 0}))
        assert (found["error_code"], found["node_id"], found["port"]) == (ErrorCode.NONE, PEER, 19093)

    run(tmp_path, scenario)


def test_find_coordinator_without_a_leader_or_topic_is_not_available(tmp_path: Path) -> None:
    group = group_in(0)

    async def scenario(node: Node) -> None:
        for index in range(PARTITIONS):
            node.metadata.remove_partition(OFFSETS_TOPIC, index)
        ctx = context(node)
        asked: list[bool] = []
        node.groups.on_offsets_topic_missing = lambda: asked.append(True)
        found = handlers.handle_find_coordinator(ctx, request(ApiKey.FIND_COORDINATOR, 2, {"key": group}))
        assert found["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE and asked == [True]
        node.metadata.set_partition(OFFSETS_TOPIC, 0, PartitionInfo(-1, 1, (ME, PEER), (ME,)))
        for index in (1, 2):
            node.metadata.set_partition(OFFSETS_TOPIC, index, PartitionInfo(ME, 1, (ME, PEER), (ME,)))
        found = handlers.handle_find_coordinator(ctx, request(ApiKey.FIND_COORDINATOR, 2, {"key": group}))
        assert found["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE and asked == [True]

    run(tmp_path, scenario)


def test_list_groups_shows_only_loaded_groups_and_says_when_loading(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(coordinator_load, "LOAD_CHUNK_BYTES", 256)
    ready, slow, elsewhere = group_in(0), group_in(2), group_in(1)

    async def scenario(node: Node) -> None:
        await node.set_role(0, ME, 1, isr=(ME,))
        await node.set_role(1, PEER, 1)
        p2 = await node.set_role(2, ME, 1, isr=(ME,))
        for offset in range(200):
            p2.log.append(offset_batch({(slow, USER_TOPIC, 0): committed(offset)}, 1))
        node.groups.start()
        await loaded(node, ready)
        assert await answer(node.groups.commit(ready, {(USER_TOPIC, 0): committed(1)}, 1)) == ErrorCode.NONE
        listed = handlers.handle_list_groups(context(node), request(ApiKey.LIST_GROUPS, 4, {}))
        assert listed["error_code"] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert [g["group_id"] for g in listed["groups"]] == [ready]
        await loaded(node, slow)
        listed = handlers.handle_list_groups(context(node), request(ApiKey.LIST_GROUPS, 4, {}))
        assert listed["error_code"] == ErrorCode.NONE
        assert sorted(g["group_id"] for g in listed["groups"]) == sorted([ready, slow])
        assert elsewhere not in [g["group_id"] for g in listed["groups"]]
        assert all(g["group_state"] == GroupState.EMPTY.value for g in listed["groups"])

    run(tmp_path, scenario)


def test_log_errors_map_to_kafkas_coordinator_errors() -> None:
    assert commit_error(ErrorCode.NONE) == ErrorCode.NONE
    for code in (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                 ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        assert commit_error(code) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    for code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        assert commit_error(code) == ErrorCode.NOT_COORDINATOR
    assert commit_error(ErrorCode.REQUEST_TIMED_OUT) == ErrorCode.REQUEST_TIMED_OUT
