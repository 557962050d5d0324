"""A Fetch naming a topic id the broker does not know is answered UNKNOWN_TOPIC_ID for it (a
follower asks by id before its leader's metadata has the topic): the handler once took the
error code, an IntEnum, for an index into the door's outcomes and closed the connection."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from roost.broker.handlers.fetch import FetchApi
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
from tests.broker.test_append_door import lead_user_topic
from tests.broker.test_group_service import PEER, Node, request, run


def test_unknown_topic_id_is_answered_not_a_crash(tmp_path: Path) -> None:
    async def scenario(node: Node) -> None:
        await lead_user_topic(node)
        body = {"replica_state": {"replica_id": PEER, "replica_epoch": -1}, "max_wait_ms": 0, "min_bytes": 1,
                "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "forgotten_topics_data": [], "rack_id": "",
                "topics": [{"topic_id": uuid.uuid4(), "partitions": [{
                    "partition": 0, "current_leader_epoch": 1, "fetch_offset": 0, "last_fetched_epoch": -1,
                    "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}
        answer = FetchApi(node.replicas, node.metadata).handle(request(ApiKey.FETCH, 15, body))
        if asyncio.isfuture(answer):
            answer = await answer
        assert answer["responses"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID

    run(tmp_path, scenario)
