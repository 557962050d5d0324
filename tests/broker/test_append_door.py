"""The append door (`ReplicaManager.append`) as its two callers see it: a Produce request through
the produce handler and an offset commit through the group service, on real partition logs and a
real replica manager whose roles come from LeaderAndIsr requests (the harness of
test_group_service.py). The acks rule is written once; these tests show both callers get it:
NOT_ENOUGH_REPLICAS before the append, the wait for the high watermark, the timeout, a lost
leadership, and the answers' order. Real clients over sockets cover the same rule end to end in
test_alter_configs.py (min.insync.replicas), test_fsync_before_ack.py and test_idempotence.py."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from roost.broker.handlers.produce import ProduceApi
from roost.broker.metadata.cache import PartitionInfo
from roost.broker.net.request import NO_RESPONSE
from roost.broker.replica.append import AppendOrigin
from roost.broker.replica.partition import Partition
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import build_batch
from tests.broker.test_group_service import (
    ME,
    PEER,
    USER_TOPIC,
    Node,
    answer,
    committed,
    group_in,
    loaded,
    request,
    run,
)

PRODUCE_VERSION = 10  # KIP-951: a NOT_LEADER_OR_FOLLOWER answer names the leader


async def lead_user_topic(node: Node, leader: int = ME, epoch: int = 1, isr: tuple[int, ...] = (ME, PEER)
                          ) -> Partition:
    """A LeaderAndIsr for the user topic's partition 0, and the matching UpdateMetadata."""
    body = {"controller_id": PEER, "controller_epoch": node.controller_epoch, "broker_epoch": -1,
            "topic_states": [{"topic_name": USER_TOPIC, "topic_id": None, "partition_states": [{
                "partition_index": 0, "leader": leader, "leader_epoch": epoch, "partition_epoch": epoch,
                "replicas": [ME, PEER], "isr": list(isr)}]}]}

    async def configs_for(topic: str) -> dict[str, Any]:
        return {}

    reply = await node.replicas.leader_and_isr(body, configs_for)
    assert reply["topics"][0]["partition_errors"][0]["error_code"] == ErrorCode.NONE
    node.metadata.set_partition(USER_TOPIC, 0, PartitionInfo(leader, epoch, (ME, PEER), isr))
    partition = node.replicas.partition(USER_TOPIC, 0)
    assert partition is not None
    return partition


def produce_body(acks: int, *values: bytes, timeout_ms: int = 5_000, repeat: int = 1) -> dict[str, Any]:
    now = int(time.time() * 1000)
    return {"transactional_id": None, "acks": acks, "timeout_ms": timeout_ms, "topic_data": [
        {"name": USER_TOPIC, "partition_data": [
            {"index": 0, "records": build_batch([(b"k", value)], timestamp_ms=now)}
            for value in values for _ in range(repeat)]}]}


async def produce(node: Node, body: dict[str, Any]) -> Any:
    result = ProduceApi(node.replicas, node.metadata, None).handle(request(ApiKey.PRODUCE, PRODUCE_VERSION, body))
    return (await result) if asyncio.isfuture(result) else result


def errors(response: dict[str, Any]) -> list[ErrorCode]:
    return [p["error_code"] for p in response["responses"][0]["partition_responses"]]


def shrink_isr_to_leader(partition: Partition) -> None:
    """As the ISR manager does once AlterPartition is accepted: the follower is out."""
    partition.state.update_isr({ME}, partition.state.partition_epoch + 1)
    if partition.state.advance_high_watermark(partition.log_end_offset):
        partition.high_watermark_moved()


def test_acks_all_below_min_insync_is_refused_before_the_append_for_produce_and_commit(tmp_path: Path) -> None:
    async def scenario(node: Node) -> None:
        partition = await lead_user_topic(node, isr=(ME,))
        response = await produce(node, produce_body(-1, b"refused"))
        assert errors(response) == [ErrorCode.NOT_ENOUGH_REPLICAS]
        assert partition.log_end_offset == 0
        # acks=1 takes the same records: the minimum is acks=all's rule only.
        assert errors(await produce(node, produce_body(1, b"taken"))) == [ErrorCode.NONE]
        assert partition.log_end_offset == 1
        # The group coordinator's commits meet the same door.
        group = group_in(0)
        offsets = await node.set_role(0, ME, 1, isr=(ME,))
        node.groups.start()
        await loaded(node, group)
        end = offsets.log_end_offset
        assert await answer(node.groups.commit(group, {(USER_TOPIC, 0): committed(1)}, 1_000)) == \
            ErrorCode.COORDINATOR_NOT_AVAILABLE  # Kafka's mapping of NOT_ENOUGH_REPLICAS
        assert offsets.log_end_offset == end

    run(tmp_path, scenario, **{"min.insync.replicas": 2})


def test_acks_all_produce_is_answered_once_the_high_watermark_covers_it(tmp_path: Path) -> None:
    async def scenario(node: Node) -> None:
        partition = await lead_user_topic(node)
        pending = asyncio.ensure_future(produce(node, produce_body(-1, b"first", b"second")))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not pending.done()
        assert partition.log_end_offset == 2 and partition.high_watermark == 0
        node.replicas.follower_fetched(partition, PEER, 1)  # the follower has the first batch only
        for _ in range(5):
            await asyncio.sleep(0)
        assert not pending.done()
        node.replicas.follower_fetched(partition, PEER, 2)
        response = await pending
        assert errors(response) == [ErrorCode.NONE, ErrorCode.NONE]
        assert [p["base_offset"] for p in response["responses"][0]["partition_responses"]] == [0, 1]

    run(tmp_path, scenario)


def test_acks_all_produce_times_out_or_learns_the_isr_shrank_after_the_append(tmp_path: Path) -> None:
    async def scenario(node: Node) -> None:
        partition = await lead_user_topic(node)
        assert errors(await produce(node, produce_body(-1, b"never fetched", timeout_ms=30))) == \
            [ErrorCode.REQUEST_TIMED_OUT]
        pending = asyncio.ensure_future(produce(node, produce_body(-1, b"shrunk")))
        await asyncio.sleep(0)
        shrink_isr_to_leader(partition)  # the HW covers it now, with one in-sync replica of two
        assert errors(await pending) == [ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND]

    run(tmp_path, scenario, **{"min.insync.replicas": 2})


def test_a_new_epoch_of_the_same_leader_keeps_the_wait_and_acknowledges_the_records(tmp_path: Path) -> None:
    """The controller drops an offline follower from the ISR with a new leader epoch and the same
    leader: the records already written are still this leader's and commit once the HW covers
    them. Answering NOT_LEADER_OR_FOLLOWER here made librdkafka take them for unwritten and, after
    an epoch bump, send them again under the new epoch (fault run broker-41: 36 duplicates)."""
    async def scenario(node: Node) -> None:
        partition = await lead_user_topic(node)
        pending = asyncio.ensure_future(produce(node, produce_body(-1, b"written", b"too")))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not pending.done() and partition.log_end_offset == 2
        await lead_user_topic(node, epoch=2, isr=(ME,))
        if partition.state.advance_high_watermark(partition.log_end_offset):
            partition.high_watermark_moved()
        response = await asyncio.wait_for(pending, 5)
        assert errors(response) == [ErrorCode.NONE, ErrorCode.NONE]
        assert [p["base_offset"] for p in response["responses"][0]["partition_responses"]] == [0, 1]

    run(tmp_path, scenario)


def test_leadership_lost_while_waiting_answers_not_leader_with_the_new_leader(tmp_path: Path) -> None:
    async def scenario(node: Node) -> None:
        await lead_user_topic(node)
        pending = asyncio.ensure_future(produce(node, produce_body(-1, b"orphan")))
        await asyncio.sleep(0)
        await lead_user_topic(node, leader=PEER, epoch=2)
        response = await pending
        assert errors(response) == [ErrorCode.NOT_LEADER_OR_FOLLOWER]
        assert response["responses"][0]["partition_responses"][0]["current_leader"] == \
            {"leader_id": PEER, "leader_epoch": 2}
        # A new request is refused at once, before any append.
        assert errors(await produce(node, produce_body(1, b"late"))) == [ErrorCode.NOT_LEADER_OR_FOLLOWER]

    run(tmp_path, scenario)


def test_acks_are_checked_once_and_acks_zero_sends_no_answer(tmp_path: Path) -> None:
    async def scenario(node: Node) -> None:
        partition = await lead_user_topic(node, isr=(ME,))
        assert errors(await produce(node, produce_body(2, b"bad acks"))) == [ErrorCode.INVALID_REQUIRED_ACKS]
        assert partition.log_end_offset == 0
        assert await produce(node, produce_body(0, b"fire and forget")) is NO_RESPONSE
        assert partition.log_end_offset == 1
        # The door answers entries in the order given, the same partition twice included.
        response = await produce(node, produce_body(1, b"twice", repeat=2))
        assert [p["base_offset"] for p in response["responses"][0]["partition_responses"]] == [1, 2]
        # Straight at the door: a partition this broker does not host, and an origin-trusted batch.
        appending = node.replicas.append([(("unknown-topic", 0), b""), ((USER_TOPIC, 0), build_batch(
            [(b"k", b"built here")], timestamp_ms=0))], 1, AppendOrigin.COORDINATOR, 1.0)
        assert [o.error for o in appending.outcomes] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NONE]
        assert appending.outcomes[1].base_offset == 3

    run(tmp_path, scenario)
