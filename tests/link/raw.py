"""Reading a partition's raw batches with Roost's own wire client (KafkaPeer): what a link
test compares byte for byte between a source and its mirror."""

from __future__ import annotations

import asyncio
from typing import Any

from roost.broker.link.service import whole_batches
from roost.broker.net.peer import KafkaPeer
from roost.wire.kafka import ApiKey


async def _request(address: tuple[str, int], api: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
    peer = KafkaPeer(-1, address[0], address[1], "link-test")
    try:
        return await peer.request(api, version, body, 15.0)
    finally:
        peer.close()


def batches(bootstrap: str, topic: str, partition: int, max_rounds: int = 1000) -> list[bytes]:
    """Every batch of the partition below its high watermark, as bytes, in offset order."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)

    async def read() -> list[bytes]:
        meta = await _request((host, int(port)), ApiKey.METADATA, 9, {
            "topics": [{"name": topic}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False})
        brokers = {b["node_id"]: (b["host"], b["port"]) for b in meta["brokers"]}
        leader = next(p["leader_id"] for t in meta["topics"] for p in t["partitions"]
                      if p["partition_index"] == partition)
        found: list[bytes] = []
        offset = 0
        for _ in range(max_rounds):
            answer = await _request(brokers[leader], ApiKey.FETCH, 12, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 24, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
                "topics": [{"topic": topic, "partitions": [{"partition": partition, "current_leader_epoch": -1,
                                                            "fetch_offset": offset, "last_fetched_epoch": -1,
                                                            "log_start_offset": -1,
                                                            "partition_max_bytes": 1 << 22}]}]})
            result = answer["responses"][0]["partitions"][0]
            assert result["error_code"] == 0, result["error_code"]
            view, _ = whole_batches(result["records"] or b"", offset)
            if len(view) == 0:
                return found
            position = 0
            while position < len(view):
                length = int.from_bytes(view[position + 8:position + 12], "big")
                batch = bytes(view[position:position + 12 + length])
                found.append(batch)
                base = int.from_bytes(batch[:8], "big")
                offset = base + int.from_bytes(batch[23:27], "big") + 1
                position += 12 + length
        raise AssertionError("too many rounds")

    return asyncio.run(read())


def produce_raw(bootstrap: str, topic: str, partition: int, records: bytes) -> int:
    """One Produce (acks=1) of `records` to the partition's leader; the error code answered."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)

    async def send() -> int:
        meta = await _request((host, int(port)), ApiKey.METADATA, 9, {
            "topics": [{"name": topic}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False})
        brokers = {b["node_id"]: (b["host"], b["port"]) for b in meta["brokers"]}
        leader = next(p["leader_id"] for t in meta["topics"] for p in t["partitions"]
                      if p["partition_index"] == partition)
        answer = await _request(brokers[leader], ApiKey.PRODUCE, 8, {
            "transactional_id": None, "acks": 1, "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
        return answer["responses"][0]["partition_responses"][0]["error_code"]

    return asyncio.run(send())


def epoch_end(bootstrap: str, topic: str, partition: int, epoch: int) -> tuple[int, int]:
    """What the partition's leader answers OffsetForLeaderEpoch (v4, as a consumer) for `epoch`:
    (the largest epoch it has at or below it, where that epoch ends)."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)

    async def ask() -> tuple[int, int]:
        meta = await _request((host, int(port)), ApiKey.METADATA, 9, {
            "topics": [{"name": topic}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False})
        brokers = {b["node_id"]: (b["host"], b["port"]) for b in meta["brokers"]}
        leader = next(p["leader_id"] for t in meta["topics"] for p in t["partitions"]
                      if p["partition_index"] == partition)
        answer = await _request(brokers[leader], ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {
            "replica_id": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": partition, "current_leader_epoch": -1, "leader_epoch": epoch}]}]})
        result = answer["topics"][0]["partitions"][0]
        assert result["error_code"] == 0, result["error_code"]
        return result["leader_epoch"], result["end_offset"]

    return asyncio.run(ask())


def leader_epoch(bootstrap: str, topic: str, partition: int) -> int:
    """The partition's leader epoch as Metadata (v9) names it."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    meta = asyncio.run(_request((host, int(port)), ApiKey.METADATA, 9, {
        "topics": [{"name": topic}], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}))
    return next(p["leader_epoch"] for t in meta["topics"] for p in t["partitions"] if p["partition_index"] == partition)
