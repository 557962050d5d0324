"""DeleteGroups and OffsetDelete in the group service, over real partition logs and a real replica
manager (the harness of test_group_service): when the answer comes, what the log holds after, and
Kafka's decisions on which groups and offsets may go. The same APIs over sockets with real
clients: test_delete_groups."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from roost.broker.group.classic_protocol import GroupCoordinator, GroupLimits, GroupState
from roost.broker.group.offsets import (
    decode_key,
    encode_group_metadata_key,
    encode_key,
    offsets_partition_for,
)
from roost.broker.handlers import groups as handlers
from roost.broker.replica.partition import Partition
from roost.wire.kafka import ApiKey
from roost.wire.kafka.consumer_protocol import encode_consumer_subscription
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import iter_records
from tests.broker.test_group_service import (
    ME,
    PARTITIONS,
    USER_TOPIC,
    Node,
    answer,
    committed,
    context,
    group_in,
    loaded,
    request,
    run,
)

OTHER_TOPIC = "audit"
NO_DELAY = {"group.initial.rebalance.delay.ms": 0}


def another_group_in(partition: int, prefix: str) -> str:
    """A group id other than `group_in`'s whose offsets live in `partition`."""
    return next(g for i in range(10_000)
                if offsets_partition_for(g := f"{prefix}-{i}", PARTITIONS) == partition)


async def answer_of(result: Any) -> dict[str, Any]:
    """A handler's response, whether it answered at once or later."""
    return result if isinstance(result, dict) else await result


def records_of(partition: Partition, start: int) -> list[tuple[bytes, bytes | None]]:
    """(key, value) of the records from `start` to the log end."""
    chunk = partition.log.read(start, 1 << 20)
    return [(bytes(r.key or b""), None if r.value is None else bytes(r.value))
            for r in iter_records(b"".join(bytes(b) for b in chunk.buffers)) if r.offset >= start]


def join(node: Node, group: str, topics: list[str], protocol_type: str = "consumer") -> list[dict[str, Any]]:
    """A member joins (no initial delay: the join completes at once)."""
    replies: list[dict[str, Any]] = []
    metadata = encode_consumer_subscription(0, {"topics": topics, "user_data": None})
    node.groups.coordinator.join(0, group_id=group, member_id="", instance_id=None, client_id="c",
                                 client_host="127.0.0.1", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                 protocol_type=protocol_type, protocols=[("range", metadata)],
                                 require_known_member_id=False, reply=replies.append)
    assert replies and replies[-1]["error_code"] == ErrorCode.NONE
    return replies


def test_a_deletion_is_answered_once_replicated_drops_commits_in_flight_and_reads_back(tmp_path: Path) -> None:
    group = group_in(0)

    async def scenario(node: Node) -> None:
        partition = await node.set_role(0, ME, 1)
        node.groups.start()
        await loaded(node, group)
        first = node.groups.commit(group, {(USER_TOPIC, 0): committed(10)}, 1_000)
        node.follower_reached(partition, partition.log_end_offset)
        assert await answer(first) == ErrorCode.NONE
        in_flight = asyncio.ensure_future(answer(node.groups.commit(group, {(USER_TOPIC, 1): committed(11)}, 1_100)))
        tombstones_at = partition.log_end_offset  # after the commit in flight's record

        deletion = node.groups.delete_group(group, 1_200)
        assert not isinstance(deletion, ErrorCode)
        waiting = asyncio.ensure_future(answer(deletion))
        await asyncio.sleep(0)
        assert not waiting.done()  # the follower has not fetched the tombstones yet
        assert node.groups.offsets(group).for_group(group) == {}  # gone at once, as in Kafka
        node.follower_reached(partition, partition.log_end_offset)
        assert await waiting == ErrorCode.NONE
        assert await in_flight == ErrorCode.NONE
        assert node.groups.offsets(group).for_group(group) == {}  # the commit in flight does not show
        assert records_of(partition, tombstones_at) == [
            (key, None) for key in sorted(encode_key((group, USER_TOPIC, i)) for i in (0, 1))]

        # A new leader reading the log back agrees.
        await node.set_role(0, 2, 2)
        await node.set_role(0, ME, 3)
        await loaded(node, group)
        assert node.groups.offsets(group).for_group(group) == {}
        assert node.groups.delete_group(group, 2_000) == ErrorCode.GROUP_ID_NOT_FOUND

    run(tmp_path, scenario)


def test_a_group_that_had_members_also_gets_its_metadata_tombstone(tmp_path: Path) -> None:
    group = group_in(0)

    async def scenario(node: Node) -> None:
        partition = await node.set_role(0, ME, 1, isr=(ME,))
        node.groups.start()
        await loaded(node, group)
        member = join(node, group, [USER_TOPIC])[-1]["member_id"]
        assert node.groups.coordinator.leave(0, group_id=group, member_id=member, instance_id=None) == ErrorCode.NONE
        assert node.groups.coordinator.groups[group].state == GroupState.EMPTY
        assert await answer(node.groups.commit(group, {(USER_TOPIC, 0): committed(5)}, 1_000)) == ErrorCode.NONE
        start = partition.log_end_offset

        response = await answer_of(handlers.handle_delete_groups(context(node), request(ApiKey.DELETE_GROUPS, 2, {
            "groups_names": [group, group]})))
        assert response["results"] == [{"group_id": group, "error_code": ErrorCode.NONE}]
        written = records_of(partition, start)
        assert written == [(encode_key((group, USER_TOPIC, 0)), None), (encode_group_metadata_key(group), None)]
        assert decode_key(written[1][0]) is None  # loading skips it
        assert group not in node.groups.coordinator.groups
        assert [g for g, _, _ in node.groups.listing()] == []

    run(tmp_path, scenario, **NO_DELAY)


def test_which_groups_and_offsets_may_go(tmp_path: Path) -> None:
    consumers, connect, theirs = group_in(0), another_group_in(0, "connect"), group_in(1)
    unknown = another_group_in(0, "never-seen")

    async def scenario(node: Node) -> None:
        await node.set_role(0, ME, 1, isr=(ME,))
        await node.set_role(1, 2, 1)
        node.groups.start()
        await loaded(node, consumers)
        ctx = context(node)
        join(node, consumers, [USER_TOPIC])
        join(node, connect, [USER_TOPIC], protocol_type="connect")
        for group in (consumers, connect):
            assert await answer(node.groups.commit(group, {(USER_TOPIC, 0): committed(1),
                                                           (OTHER_TOPIC, 0): committed(2)}, 1_000)) == ErrorCode.NONE
        deleted = handlers.handle_delete_groups(ctx, request(ApiKey.DELETE_GROUPS, 1, {
            "groups_names": [consumers, theirs, unknown]}))
        assert isinstance(deleted, dict)
        assert [(r["group_id"], r["error_code"]) for r in deleted["results"]] == [
            (consumers, ErrorCode.NON_EMPTY_GROUP), (theirs, ErrorCode.NOT_COORDINATOR),
            (unknown, ErrorCode.GROUP_ID_NOT_FOUND)]

        def offset_delete(group: str, topics: dict[str, list[int]]) -> dict[str, Any]:
            result = handlers.handle_offset_delete(ctx, request(ApiKey.OFFSET_DELETE, 0, {
                "group_id": group, "topics": [{"name": t, "partitions": [{"partition_index": i} for i in indexes]}
                                              for t, indexes in topics.items()]}))
            assert isinstance(result, dict)
            return result

        # A consumer group with members: the topics its members subscribe to stay.
        result = offset_delete(consumers, {USER_TOPIC: [0], "no-such-topic": [0]})
        assert result["error_code"] == ErrorCode.NONE
        assert [(t["name"], [(p["partition_index"], p["error_code"]) for p in t["partitions"]])
                for t in result["topics"]] == [
            (USER_TOPIC, [(0, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)]),
            ("no-such-topic", [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])]
        # Other protocol types with members: the group is not empty.
        assert offset_delete(connect, {USER_TOPIC: [0]}) == {
            "error_code": ErrorCode.NON_EMPTY_GROUP, "throttle_time_ms": 0, "topics": []}
        assert offset_delete(theirs, {USER_TOPIC: [0]})["error_code"] == ErrorCode.NOT_COORDINATOR
        assert offset_delete("", {USER_TOPIC: [0]})["error_code"] == ErrorCode.INVALID_GROUP_ID
        assert offset_delete(unknown, {USER_TOPIC: [0]})["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND

    run(tmp_path, scenario, **NO_DELAY)


def test_too_few_in_sync_replicas_delete_nothing(tmp_path: Path) -> None:
    group = group_in(0)

    async def scenario(node: Node) -> None:
        partition = await node.set_role(0, ME, 1)
        node.groups.start()
        await loaded(node, group)
        first = node.groups.commit(group, {(USER_TOPIC, 0): committed(7)}, 1_000)
        node.follower_reached(partition, partition.log_end_offset)
        assert await answer(first) == ErrorCode.NONE
        partition.state.update_isr({ME}, partition.state.partition_epoch + 1)  # the follower fell behind
        end = partition.log_end_offset
        assert node.groups.delete_group(group, 2_000) == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert node.groups.offsets(group).for_group(group) == {(USER_TOPIC, 0): committed(7)}
        assert partition.log_end_offset == end

    run(tmp_path, scenario, **{"min.insync.replicas": 2})


def test_subscribed_topics_are_read_from_the_members_metadata_as_kafka_does() -> None:
    coordinator = GroupCoordinator(GroupLimits(1000, 60_000, 0, 10))
    replies: list[dict[str, Any]] = []

    def join_with(group: str, metadata: bytes, member_id: str = "") -> None:
        coordinator.join(0, group_id=group, member_id=member_id, instance_id=None, client_id="c",
                         client_host="127.0.0.1", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                         protocol_type="consumer", protocols=[("range", metadata)],
                         require_known_member_id=False, reply=replies.append)

    v0 = encode_consumer_subscription(0, {"topics": ["a"], "user_data": None})
    v3 = encode_consumer_subscription(3, {"topics": ["b", "c"], "user_data": b"x", "owned_partitions": [],
                                          "generation_id": 4, "rack_id": "r1"})
    join_with("g", v0)
    first = replies[-1]["member_id"]
    join_with("g", v3)  # a second member: the group rebalances and waits for the first to rejoin
    join_with("g", v0, first)
    group = coordinator.groups["g"]
    assert group.state == GroupState.COMPLETING_REBALANCE and len(group.members) == 2
    assert group.subscribed_topics == {"a", "b", "c"}
    assert group.is_subscribed_to("b") and not group.is_subscribed_to("d")

    join_with("opaque", b"not a subscription")  # unreadable: taken as subscribed to every topic
    assert coordinator.groups["opaque"].subscribed_topics is None
    assert coordinator.groups["opaque"].is_subscribed_to("d")

    for member_id in list(group.members):
        coordinator.leave(0, group_id="g", member_id=member_id, instance_id=None)
    assert group.state == GroupState.EMPTY and group.subscribed_topics == frozenset()
    assert coordinator.remove_empty("g") is group and group.state == GroupState.DEAD
    assert "g" not in coordinator.groups
