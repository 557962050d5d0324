"""A scripted Kafka peer for codec tests: a real TCP listener on 127.0.0.1 (ephemeral port) that
decodes every request real clients send with our decoder and answers with our encoder.

It is not a broker and proves nothing about the broker: it is the harness that lets real clients
(librdkafka, kafka-python, aiokafka) judge our bytes. It knows one topic with one partition,
stores produced batches as they arrive, and serves them back to fetches.
"""

from __future__ import annotations

import asyncio
import struct
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from roost.wire.kafka import (
    SUPPORTED_VERSIONS,
    ApiKey,
    ErrorCode,
    KafkaCodecError,
    RequestHeader,
    UnsupportedVersionError,
    decode_request,
    encode_api_versions_fallback,
    encode_response,
    peek_request_header,
)

TOPIC = "codec-topic"
TOPIC_ID = uuid.UUID("6f1c2b55-8d0e-4a53-9a39-3c2f4e8d7b10")
NODE_ID = 1
BASE_OFFSET = 42  # the offset the peer assigns to the first produced batch


@dataclass
class Exchange:
    """One request as it arrived: the raw frame, its header, and its body (or the error)."""

    frame: bytes
    header: RequestHeader
    body: dict[str, Any] | None
    error: KafkaCodecError | None


@dataclass
class ScriptedPeer:
    port: int = 0
    exchanges: list[Exchange] = field(default_factory=list)
    batches: list[bytes] = field(default_factory=list)  # stored with offsets assigned
    next_offset: int = BASE_OFFSET
    unanswered: list[RequestHeader] = field(default_factory=list)

    def requests(self, api_key: int) -> list[Exchange]:
        return [exchange for exchange in list(self.exchanges) if exchange.header.api_key == api_key]

    # ------------------------------------------------------------ connection loop

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size_bytes = await reader.readexactly(4)
                (size,) = struct.unpack(">i", size_bytes)
                assert 0 < size < 64 * 1024 * 1024, size
                frame = await reader.readexactly(size)
                answer = self._answer(frame)
                if answer:
                    writer.writelines(answer)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def _answer(self, frame: bytes) -> list[bytes | memoryview]:
        header = peek_request_header(frame)
        try:
            decoded_header, body = decode_request(frame)
        except UnsupportedVersionError as exc:
            self.exchanges.append(Exchange(frame, header, None, exc))
            if header.api_key == ApiKey.API_VERSIONS:
                api_keys = [(key, low, high) for key, (low, high) in sorted(SUPPORTED_VERSIONS.items())]
                return [encode_api_versions_fallback(header.correlation_id,
                                                     ErrorCode.UNSUPPORTED_VERSION, api_keys)]
            raise
        except KafkaCodecError as exc:
            self.exchanges.append(Exchange(frame, header, None, exc))
            raise
        self.exchanges.append(Exchange(frame, decoded_header, body, None))
        handler = getattr(self, f"_on_{ApiKey(header.api_key).name.lower()}", None)
        if handler is None:
            self.unanswered.append(header)
            return []
        response = handler(decoded_header, body)
        return [] if response is None else encode_response(decoded_header, response)

    # ------------------------------------------------------------ handlers

    def _on_api_versions(self, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        return {"error_code": 0, "api_keys": [
            {"api_key": key, "min_version": low, "max_version": high}
            for key, (low, high) in sorted(SUPPORTED_VERSIONS.items())]}

    def _topic_metadata(self) -> dict[str, Any]:
        return {"error_code": 0, "name": TOPIC, "topic_id": TOPIC_ID, "partitions": [{
            "error_code": 0, "partition_index": 0, "leader_id": NODE_ID, "leader_epoch": 0,
            "replica_nodes": [NODE_ID], "isr_nodes": [NODE_ID]}]}

    def _on_metadata(self, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        topics = []
        for requested in body["topics"] if body["topics"] is not None else [{"name": TOPIC}]:
            if requested["name"] == TOPIC:
                topics.append(self._topic_metadata())
            else:
                topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                               "name": requested["name"]})
        return {"brokers": [{"node_id": NODE_ID, "host": "127.0.0.1", "port": self.port}],
                "cluster_id": "codec-test-cluster", "controller_id": NODE_ID, "topics": topics}

    def _on_init_producer_id(self, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        return {"producer_id": 4000, "producer_epoch": 0}

    def _on_find_coordinator(self, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        if header.api_version >= 4:  # batched (KIP-699): one entry per key, as kafka-python 3 asks
            return {"coordinators": [{"key": key, "node_id": NODE_ID, "host": "127.0.0.1", "port": self.port,
                                      "error_code": 0, "error_message": None}
                                     for key in body.get("coordinator_keys", [])]}
        return {"node_id": NODE_ID, "host": "127.0.0.1", "port": self.port}

    def _on_produce(self, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any] | None:
        responses = []
        for topic in body["topic_data"]:
            partitions = []
            for partition in topic["partition_data"]:
                batch = bytearray(partition["records"])
                # Assign the offset the way a broker does: rewrite baseOffset (outside the CRC).
                base_offset = self.next_offset
                struct.pack_into(">q", batch, 0, base_offset)
                records_count = struct.unpack_from(">i", batch, 57)[0]
                self.next_offset += records_count
                self.batches.append(bytes(batch))
                partitions.append({"index": partition["index"], "error_code": 0,
                                   "base_offset": base_offset, "log_start_offset": BASE_OFFSET})
            responses.append({"name": topic["name"], "partition_responses": partitions})
        return None if body["acks"] == 0 else {"responses": responses}

    def _on_fetch(self, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        responses = []
        for topic in body["topics"]:
            partitions = []
            for partition in topic["partitions"]:
                wanted = partition["fetch_offset"]
                # Serve stored batches as a list of buffers, the way segments are served.
                records = [batch for batch in self.batches
                           if struct.unpack_from(">q", batch, 0)[0] + struct.unpack_from(">i", batch, 23)[0]
                           >= wanted]
                partitions.append({"partition_index": partition["partition"], "error_code": 0,
                                   "high_watermark": self.next_offset,
                                   "last_stable_offset": self.next_offset,
                                   "log_start_offset": BASE_OFFSET, "records": records})
            responses.append({"topic": topic.get("topic", ""), "topic_id": topic.get("topic_id"),
                              "partitions": partitions})
        return {"responses": responses}

    def _on_list_offsets(self, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        topics = [{"name": topic["name"], "partitions": [
            {"partition_index": partition["partition_index"], "error_code": 0, "timestamp": -1,
             "offset": BASE_OFFSET if partition["timestamp"] == -2 else self.next_offset}
            for partition in topic["partitions"]]} for topic in body["topics"]]
        return {"topics": topics}


@contextmanager
def running_peer() -> Iterator[ScriptedPeer]:
    """A ScriptedPeer listening on 127.0.0.1:<ephemeral> in a thread, stopped on exit."""
    peer = ScriptedPeer()
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    server_box: list[asyncio.Server] = []

    async def start() -> None:
        server = await asyncio.start_server(peer.serve, "127.0.0.1", 0)
        peer.port = server.sockets[0].getsockname()[1]
        server_box.append(server)
        ready.set()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()

    thread = threading.Thread(target=run, name="codec-peer", daemon=True)
    thread.start()
    try:
        assert ready.wait(30), "peer did not start"
        yield peer
    finally:
        async def stop() -> None:
            for server in server_box:
                server.close()
            tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if loop.is_running():
            asyncio.run_coroutine_threadsafe(stop(), loop).result(30)
            loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()
