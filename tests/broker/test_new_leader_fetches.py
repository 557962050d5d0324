"""A new leadership answers the parked fetches of the partition's followers at once: a follower
fetches all its partitions from one leader in one long-polling request, so a fetch parked here for
its other partitions held a newly led partition back for the whole MaxWaitMs — and every acks=all
produce to it (seen after a leader's kill: every partition silent for replica.fetch.wait.max.ms).
And while the leadership is new, a follower fetch that leaves the partition out parks only briefly
(the follower has not heard of the change yet). Broker ME's real ReplicaManager and FetchApi."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

from roost.broker.handlers.fetch import FetchApi
from roost.broker.metadata.cache import BrokerEndpoint, MetadataCache, PartitionInfo
from roost.broker.net.request import Request
from roost.broker.replica.manager import ReplicaManager
from roost.config import BrokerConfig
from roost.storage.log_manager import LogManager
from roost.wire.kafka import ApiKey
from roost.wire.kafka.framing import RequestHeader

ME, PEER = 1, 2
TOPIC = "moving"
TOPIC_ID = uuid.uuid4()
LONG_WAIT_MS = 5000


def leader_and_isr(leaders: dict[int, tuple[int, int]]) -> dict[str, Any]:
    """partition -> (leader, epoch); both brokers replicas and in sync."""
    return {"controller_id": PEER, "controller_epoch": 1, "broker_epoch": -1, "topic_states": [{
        "topic_name": TOPIC, "topic_id": TOPIC_ID, "partition_states": [
            {"partition_index": index, "leader": leader, "leader_epoch": epoch, "partition_epoch": epoch,
             "replicas": [ME, PEER], "isr": [ME, PEER]} for index, (leader, epoch) in leaders.items()]}]}


def follower_fetch(partitions: dict[int, int]) -> Request:
    """PEER's replica fetch (v12, by name) of `partitions` (index -> its leader epoch), from offset 0."""
    body = {"replica_id": PEER, "max_wait_ms": LONG_WAIT_MS, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
            "forgotten_topics_data": [], "topics": [{"topic": TOPIC, "partitions": [
                {"partition": index, "current_leader_epoch": epoch, "fetch_offset": 0, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20} for index, epoch in partitions.items()]}]}
    return Request(RequestHeader(ApiKey.FETCH, 12, 1, "peer"), body, "127.0.0.1")


async def no_overrides(topic: str) -> dict[str, Any]:
    return {}


async def seconds_to_answer(answer: Any) -> float:
    assert isinstance(answer, asyncio.Future), "the fetch was answered at once instead of parking"
    started = time.monotonic()
    await asyncio.wait_for(answer, LONG_WAIT_MS / 1000 + 5)
    return time.monotonic() - started


def test_a_new_leadership_answers_the_followers_parked_fetch_and_briefly_parks_one_without_it(
        tmp_path: Path) -> None:
    async def main() -> tuple[float, float]:
        config = BrokerConfig.build([("test", {"broker.id": ME})])
        metadata = MetadataCache()
        metadata.set_brokers([BrokerEndpoint(ME, "127.0.0.1", 19092), BrokerEndpoint(PEER, "127.0.0.1", 19093)], PEER)
        for index, leader in ((0, ME), (1, PEER)):
            metadata.set_partition(TOPIC, index, PartitionInfo(leader, 1, (ME, PEER), (ME, PEER)), TOPIC_ID)
        replicas = ReplicaManager(ME, config, LogManager(config, tmp_path), metadata)
        fetches = FetchApi(replicas, metadata)
        try:
            await replicas.leader_and_isr(leader_and_isr({0: (ME, 1), 1: (PEER, 1)}), no_overrides)
            # PEER follows partition 0 from here; nothing to read: its fetch parks.
            parked = fetches.handle(follower_fetch({0: 1}))
            await asyncio.sleep(0.1)
            assert not parked.done()
            # PEER is gone from partition 1's leadership: this broker takes it over.
            await replicas.leader_and_isr(leader_and_isr({1: (ME, 2)}), no_overrides)
            released_s = await seconds_to_answer(parked)
            # PEER has not heard yet: its next fetch still leaves partition 1 out.
            without_new = await seconds_to_answer(fetches.handle(follower_fetch({0: 1})))
            return released_s, without_new
        finally:
            await replicas.close()
            replicas.logs.close()

    released_s, without_new = asyncio.run(main())
    # Either answer would otherwise come after MaxWaitMs (5 s).
    assert released_s < LONG_WAIT_MS / 1000 / 2, f"the parked fetch waited {released_s:.2f} s after the new leadership"
    assert without_new < LONG_WAIT_MS / 1000 / 2, \
        f"a fetch leaving out the newly led partition parked {without_new:.2f} s"
