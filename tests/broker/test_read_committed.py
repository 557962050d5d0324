"""Fetch and ListOffsets with isolation_level 1 (read_committed) on a real replica manager and
partition log (the harness of test_group_service.py): data only below the last stable offset,
the aborted transactions of the range read, `last_stable_offset` in every answer, and "latest" as
the LSO. Transactional batches and markers go in through the append door with origin COORDINATOR
(what WriteTxnMarkers will use); the end-to-end tests with transactional clients come with the
transaction coordinator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from roost.broker.handlers.fetch import FetchApi
from roost.broker.handlers.offsets import OffsetsApi
from roost.broker.replica.append import AppendOrigin
from roost.log.transactions import build_marker
from roost.wire.kafka import ApiKey
from roost.wire.kafka.records import build_batch, iter_batch_headers
from tests.broker.test_append_door import lead_user_topic
from tests.broker.test_group_service import ME, USER_TOPIC, Node, request, run


def _txn(pid: int, seq: int) -> bytes:
    return build_batch([(b"k", b"t%d" % seq)], timestamp_ms=1, producer_id=pid, producer_epoch=0,
                       base_sequence=seq, is_transactional=True)


async def _append(node: Node, records: bytes) -> None:
    appending = node.replicas.append([((USER_TOPIC, 0), records)], 1, AppendOrigin.COORDINATOR, 5.0)
    if appending.done is not None:
        await appending.done
    assert appending.outcomes[0].error == 0, appending.outcomes[0]


def _fetch(node: Node, isolation: int, offset: int = 0) -> dict[str, Any]:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": isolation,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": USER_TOPIC, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""}
    response = FetchApi(node.replicas, node.metadata).handle(request(ApiKey.FETCH, 11, body))
    return response["responses"][0]["partitions"][0]


def _offsets(result: dict[str, Any]) -> list[int]:
    data = b"".join(bytes(b) for b in result["records"]) if isinstance(result["records"], list) else result["records"]
    return [header.base_offset for _pos, header in iter_batch_headers(data)]


def _latest(node: Node, isolation: int) -> int:
    body = {"replica_id": -1, "isolation_level": isolation, "topics": [{"name": USER_TOPIC, "partitions": [
        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}
    return OffsetsApi(node.replicas).handle_list_offsets(request(ApiKey.LIST_OFFSETS, 5, body))[
        "topics"][0]["partitions"][0]["offset"]


def test_read_committed_stops_at_the_lso_and_lists_aborted_transactions(tmp_path: Path) -> None:
    async def scenario(node: Node) -> None:
        await lead_user_topic(node, isr=(ME,))  # alone in the ISR: the HW follows the log end
        await _append(node, build_batch([(b"k", b"plain")], timestamp_ms=1))  # 0
        await _append(node, _txn(7, 0))  # 1: producer 7 opens a transaction
        await _append(node, build_batch([(b"k", b"plain")], timestamp_ms=1))  # 2
        committed = _fetch(node, 1)
        assert _offsets(committed) == [0] and committed["last_stable_offset"] == 1
        assert committed["aborted_transactions"] == [] and committed["high_watermark"] == 3
        assert _offsets(_fetch(node, 0)) == [0, 1, 2] and _fetch(node, 0)["aborted_transactions"] is None
        assert (_latest(node, 1), _latest(node, 0)) == (1, 3)
        await _append(node, build_marker(7, 0, commit=False, coordinator_epoch=0, timestamp_ms=1))  # 3
        committed = _fetch(node, 1)
        assert _offsets(committed) == [0, 1, 2, 3] and committed["last_stable_offset"] == 4
        assert committed["aborted_transactions"] == [{"producer_id": 7, "first_offset": 1}]
        assert _fetch(node, 1, offset=4)["aborted_transactions"] == []
        assert _latest(node, 1) == 4

    run(tmp_path, scenario)
