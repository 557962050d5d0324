"""A consumer's fetch parked on a partition whose leader epoch moves on while it waits (an ISR
shrink: same leader, epoch + 1) is answered FENCED_LEADER_EPOCH, as Kafka's DelayedFetch does,
not with the new epoch's records: librdkafka, given those before it validated its position against
the new epoch, took its fetch position for a truncation and seeked back there, dropping records it
had fetched but not yet handed to the application (issue 20's chaos loop lost them). Broker ME's
real ReplicaManager and FetchApi."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from roost.broker.handlers.fetch import FetchApi
from roost.broker.replica.append import AppendOrigin
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import build_batch
from tests.broker.test_append_door import lead_user_topic
from tests.broker.test_group_service import ME, USER_TOPIC, WAIT_S, Node, request, run


def consumer_fetch(epoch: int, offset: int) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait_ms": 5000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 1,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": USER_TOPIC, "partitions": [
                {"partition": 0, "current_leader_epoch": epoch, "fetch_offset": offset, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""}


async def append(node: Node, value: bytes) -> None:
    appending = node.replicas.append([((USER_TOPIC, 0), build_batch([(b"k", value)], timestamp_ms=1))], 1,
                                     AppendOrigin.CLIENT, 5.0)
    if appending.done is not None:
        await appending.done
    assert appending.outcomes[0].error == 0, appending.outcomes[0]


def test_a_parked_consumer_fetch_is_fenced_when_the_leader_epoch_moves_on(tmp_path: Path) -> None:
    async def scenario(node: Node) -> None:
        await lead_user_topic(node, epoch=1, isr=(ME,))  # alone in the ISR: the HW follows the log end
        await append(node, b"epoch-1")  # offset 0
        fetches = FetchApi(node.replicas, node.metadata)
        parked = fetches.handle(request(ApiKey.FETCH, 12, consumer_fetch(epoch=1, offset=1)))
        assert isinstance(parked, asyncio.Future), "nothing to read past offset 0: the fetch parks"
        await lead_user_topic(node, epoch=2, isr=(ME,))  # the same leader, a new epoch
        await append(node, b"epoch-2")  # offset 1 wakes the parked fetch
        answer = (await asyncio.wait_for(parked, WAIT_S))["responses"][0]["partitions"][0]
        assert answer["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
        # A fetch that names the new epoch reads the new record.
        fresh = fetches.handle(request(ApiKey.FETCH, 12, consumer_fetch(epoch=2, offset=1)))
        fresh = (await asyncio.wait_for(fresh, WAIT_S)) if isinstance(fresh, asyncio.Future) else fresh
        result = fresh["responses"][0]["partitions"][0]
        assert result["error_code"] == ErrorCode.NONE and result["high_watermark"] == 2

    run(tmp_path, scenario)
