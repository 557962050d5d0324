"""A LeaderAndIsr or a StopReplica of many partitions lets the event loop run between them: taking
a leadership writes a leader-epoch checkpoint with an fsync, and thousands in one go held a
broker's loop past its ZooKeeper session (seen: 4,000 partitions, 3 s, session expired mid
controlled shutdown); a topic deletion is one StopReplica of all its partitions (1,000 held each
broker's loop 0.2-0.7 s)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from roost.broker.metadata.cache import BrokerEndpoint, MetadataCache
from roost.broker.replica import manager as manager_module
from roost.broker.replica.manager import ReplicaManager
from roost.config import BrokerConfig
from roost.storage.log_manager import LogManager
from roost.wire.kafka.errors import ErrorCode

ME, PEER = 1, 2
PARTITIONS = 40


def leader_and_isr(leader: int, epoch: int) -> dict[str, Any]:
    return {"controller_id": PEER, "controller_epoch": 1, "broker_epoch": -1, "topic_states": [{
        "topic_name": "many", "topic_id": None, "partition_states": [
            {"partition_index": index, "leader": leader, "leader_epoch": epoch, "partition_epoch": epoch,
             "replicas": [ME, PEER], "isr": [ME, PEER]} for index in range(PARTITIONS)]}]}


def replica_manager(data: Path) -> ReplicaManager:
    """Broker ME's replica manager, with PEER as the controller and the other replica."""
    config = BrokerConfig.build([("test", {"broker.id": ME})])
    metadata = MetadataCache()
    metadata.set_brokers([BrokerEndpoint(ME, "127.0.0.1", 19092), BrokerEndpoint(PEER, "127.0.0.1", 19093)], PEER)
    return ReplicaManager(ME, config, LogManager(config, data), metadata)


async def no_overrides(topic: str) -> dict[str, Any]:
    return {}


async def ticks_while(work: asyncio.Future[dict[str, Any]]) -> int:
    """How many times the loop ran another task before `work` finished (bounded)."""
    ticks = 0
    while not work.done() and ticks < 100_000:
        await asyncio.sleep(0)
        ticks += 1
    return ticks


def test_taking_leadership_of_many_partitions_yields_to_the_loop_between_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> tuple[int, int, list[int]]:
        replicas = replica_manager(tmp_path)
        try:
            # Follower first: the logs are opened (which yields on its own), so the second
            # request only changes roles, the part that used to run in one go.
            await replicas.leader_and_isr(leader_and_isr(PEER, 1), no_overrides)
            monkeypatch.setattr(manager_module, "BREATHE_EVERY_S", 0.0)  # every partition spends the budget
            work = asyncio.ensure_future(replicas.leader_and_isr(leader_and_isr(ME, 2), no_overrides))
            ticks = await ticks_while(work)
            answer = await work
            leaders = sum(1 for p in replicas.hosted() if p.is_leader)
            codes = [e["error_code"] for t in answer["topics"] for e in t["partition_errors"]]
            return ticks, leaders, codes
        finally:
            await replicas.close()
            replicas.logs.close()

    ticks, leaders, codes = asyncio.run(main())
    assert codes == [ErrorCode.NONE] * PARTITIONS
    assert leaders == PARTITIONS
    # The loop ran between the partitions, not only once the whole request was done.
    assert ticks >= PARTITIONS - 1


def stop_replica(delete: bool) -> dict[str, Any]:
    return {"controller_id": PEER, "controller_epoch": 1, "broker_epoch": -1, "topic_states": [{
        "topic_name": "many", "partition_states": [
            {"partition_index": index, "leader_epoch": -2 if delete else 1, "delete_partition": delete}
            for index in range(PARTITIONS)]}]}


@pytest.mark.parametrize("delete", [True, False], ids=["delete", "stop-only"])
def test_stopping_many_partitions_yields_to_the_loop_between_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, delete: bool) -> None:
    async def main() -> tuple[int, int, list[int]]:
        replicas = replica_manager(tmp_path)
        try:
            await replicas.leader_and_isr(leader_and_isr(PEER, 1), no_overrides)
            monkeypatch.setattr(manager_module, "BREATHE_EVERY_S", 0.0)
            work = asyncio.ensure_future(replicas.stop_replicas(stop_replica(delete)))
            ticks = await ticks_while(work)
            answer = await work
            assert replicas.logs.deleter.wait_idle(30)
            codes = [e["error_code"] for e in answer["partition_errors"]]
            return ticks, len(list(replicas.hosted())), codes
        finally:
            await replicas.close()
            replicas.logs.close()

    ticks, hosted, codes = asyncio.run(main())
    assert codes == [ErrorCode.NONE] * PARTITIONS
    assert hosted == (0 if delete else PARTITIONS)
    assert ticks >= PARTITIONS - 1
    logs_left = {entry.name for entry in (tmp_path / "logs").iterdir() if entry.is_dir()}
    assert logs_left == (set() if delete else {f"many-{index}" for index in range(PARTITIONS)})
