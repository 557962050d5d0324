"""Where one unbatched request's broker CPU goes: an account by stage, in process and over a socket.

Prints figures with their conditions; never asserts.

    .venv/bin/python bench/request_cost.py [--requests 20000] [--rounds 3] [--compare CHECKOUT]

Two views of the same request, Produce v10 (one 100 B record, acks=all, one partition, page
cache) and Fetch v16 (a consumer's fetch of the partition's last record):

- **in process**: a real `Broker` on an event loop, no sockets. Each stage is timed on its own
  over `--requests` calls, in CPU time of this process: reading the request header, decoding the
  body (the generated codecs), the handler (for Produce: checks, the log append, the high
  watermark; for Fetch: the plan and the read), the log append alone, encoding the response.
- **over a socket**: `roost up --no-keeper` in its own process, this process sending one request
  at a time and waiting for its answer (TCP_NODELAY): the broker's user and system CPU per
  request from /proc, and its system calls per request from `perf stat` where perf runs.

The socket's user CPU minus the in-process total is what the connection and the event loop add
(callbacks, frame splitting, the write); its system CPU is the kernel's share (read, write,
epoll: on loopback a write also runs the receiver's side of TCP and wakes it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import socket
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import broker_bench  # a sibling module: the broker process and perf stat helpers
from process_cpu import user_system_seconds

from roost.broker.broker import Broker
from roost.broker.net.request import Deferred, Request
from roost.config import BROKER_SETTINGS, BrokerConfig
from roost.wire.kafka import (
    ApiKey,
    RequestHeader,
    decode_request_body,
    encode_request,
    encode_response,
    read_request_header,
)
from roost.wire.kafka.records import build_batch

PAYLOAD = b"x" * 100
TOPIC = "cost"


def produce_frame() -> bytearray:
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": TOPIC, "partition_data": [
                {"index": 0, "records": build_batch([(None, PAYLOAD)], timestamp_ms=1_700_000_000_000)}]}]}
    return request_frame(ApiKey.PRODUCE, 10, body)


def fetch_frame(topic_id: Any, offset: int) -> bytearray:
    body = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic_id": topic_id, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1048576}]}]}
    return request_frame(ApiKey.FETCH, 16, body)


def fetch_frame_by_name(offset: int) -> bytearray:
    """Fetch v12 (topics by name: a socket client need not learn the topic id first)."""
    body = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": TOPIC, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1048576}]}]}
    return request_frame(ApiKey.FETCH, 12, body)


def request_frame(key: int, version: int, body: dict[str, Any]) -> bytearray:
    """A request frame without its size prefix, as the connection hands it to the broker."""
    frame = b"".join(bytes(part) for part in encode_request(RequestHeader(key, version, 7, "cost"), body))
    return bytearray(frame[4:])


def cpu_us_per_call(calls: int, work: Callable[[], object]) -> float:
    started = time.process_time()
    for _ in range(calls):
        work()
    return (time.process_time() - started) / calls * 1e6


async def in_process(requests: int) -> dict[str, float]:
    values = {setting.name: setting.default for setting in BROKER_SETTINGS}
    with tempfile.TemporaryDirectory(prefix="roost-cost-") as data:
        broker = Broker(BrokerConfig(values), Path(data), "127.0.0.1", 0)
        await broker.start()
        try:
            return stage_costs(broker, requests)
        finally:
            await broker.stop()


def stage_costs(broker: Broker, requests: int) -> dict[str, float]:
    broker.topics.create_topic(TOPIC, 1, {})
    partition = broker.replicas.partition(TOPIC, 0)
    dispatcher = broker._dispatcher  # the bench times the broker's own routing table, stage by stage
    handlers = dispatcher._routes
    costs: dict[str, float] = {}

    def answered(result: Any) -> dict[str, Any]:
        if isinstance(result, asyncio.Future):
            assert result.done(), "an RF1 acks=all produce or a fetch with data answers at once"
            result = result.result()
        assert isinstance(result, dict)
        return result

    # Produce: each stage on its own, then the whole route (which encodes too).
    frame = produce_frame()
    header, header_end = read_request_header(frame)
    body = decode_request_body(header, frame, header_end)
    costs["produce: read header"] = cpu_us_per_call(requests, lambda: read_request_header(frame))
    costs["produce: decode body"] = cpu_us_per_call(requests, lambda: decode_request_body(header, frame, header_end))

    def produce() -> dict[str, Any]:
        fresh = decode_request_body(header, bytearray(frame), header_end)  # the append rewrites the batch
        return answered(handlers[ApiKey.PRODUCE](Request(header, fresh, "127.0.0.1")))

    costs["produce: handler (+ decode)"] = cpu_us_per_call(requests, produce)
    response = produce()
    costs["produce: encode response"] = cpu_us_per_call(requests, lambda: encode_response(header, response))
    records = build_batch([(None, PAYLOAD)], timestamp_ms=1_700_000_000_000)
    costs["produce: log append alone"] = cpu_us_per_call(
        requests, lambda: partition.log.append(bytearray(records), leader_epoch=partition.leader_epoch))

    def route_produce() -> None:
        fresh = bytearray(frame)
        parsed, end = read_request_header(fresh)
        dispatcher.route(parsed, fresh, "127.0.0.1", end)

    costs["produce: whole route"] = cpu_us_per_call(requests, route_produce)

    # Fetch of the last record, as a consumer that is caught up and woken by an append makes it.
    topic_id = broker.metadata.topic_ids[TOPIC]
    frame = fetch_frame(topic_id, partition.log_end_offset - 1)
    header, header_end = read_request_header(frame)
    body = decode_request_body(header, frame, header_end)
    costs["fetch: read header"] = cpu_us_per_call(requests, lambda: read_request_header(frame))
    costs["fetch: decode body"] = cpu_us_per_call(requests, lambda: decode_request_body(header, frame, header_end))
    costs["fetch: handler (plan, read)"] = cpu_us_per_call(
        requests, lambda: answered(handlers[ApiKey.FETCH](Request(header, body, "127.0.0.1"))))
    response = answered(handlers[ApiKey.FETCH](Request(header, body, "127.0.0.1")))
    costs["fetch: encode response"] = cpu_us_per_call(requests, lambda: encode_response(header, response))

    def route_fetch() -> None:
        parsed, end = read_request_header(frame)
        result = dispatcher.route(parsed, frame, "127.0.0.1", end)
        if type(result) is Deferred:
            encode_response(parsed, answered(result.future))

    costs["fetch: whole route"] = cpu_us_per_call(requests, route_fetch)
    return costs


def over_socket(requests: int, source: str | None = None) -> dict[str, float]:
    """Unpipelined produce requests to a broker process (of this tree, or of the checkout `source`),
    then as many fetches of the partition's last record (a caught-up consumer's, answered at
    once): its CPU and system calls per request."""
    with broker_bench.running_broker(source=source) as broker:
        broker_bench.create_topic(broker.bootstrap, TOPIC, 1)
        host, port = broker.bootstrap.rsplit(":", 1)
        with socket.create_connection((host, int(port))) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            frame = produce_frame()
            message = struct.pack(">i", len(frame)) + bytes(frame)

            def round_trip(message: bytes = message) -> None:
                sock.sendall(message)
                buffered = b""
                while len(buffered) < 4:
                    buffered += sock.recv(65536)
                (size,) = struct.unpack_from(">i", buffered)
                while len(buffered) < 4 + size:
                    buffered += sock.recv(65536)

            for _ in range(500):  # warm: generated codecs, the first segment
                round_trip()
            user0, system0 = user_system_seconds(broker.popen.pid)
            syscalls = broker_bench.SyscallCount(broker.popen.pid)
            started = time.perf_counter()
            for _ in range(requests):
                round_trip()
            wall = time.perf_counter() - started
            user1, system1 = user_system_seconds(broker.popen.pid)
            counted = syscalls.stop()
            fetch = fetch_frame_by_name(500 + requests - 1)  # the last record produced
            fetch_message = struct.pack(">i", len(fetch)) + bytes(fetch)
            for _ in range(500):
                round_trip(fetch_message)
            fetch_user0, fetch_system0 = user_system_seconds(broker.popen.pid)
            started = time.perf_counter()
            for _ in range(requests):
                round_trip(fetch_message)
            fetch_wall = time.perf_counter() - started
            fetch_user1, fetch_system1 = user_system_seconds(broker.popen.pid)
    return {"user": (user1 - user0) / requests * 1e6, "system": (system1 - system0) / requests * 1e6,
            "syscalls": counted / requests if counted is not None else float("nan"),
            "round trip": wall / requests * 1e6,
            "fetch user": (fetch_user1 - fetch_user0) / requests * 1e6,
            "fetch system": (fetch_system1 - fetch_system0) / requests * 1e6,
            "fetch round trip": fetch_wall / requests * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3, help="rounds; medians are printed")
    parser.add_argument("--compare", metavar="CHECKOUT",
                        help="also measure the socket view against the broker of another checkout, in turn")
    args = parser.parse_args()
    print(f"roost request cost — {platform.node()} {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}, {args.requests} requests per figure, medians of {args.rounds} rounds")
    stages: dict[str, list[float]] = {}
    sources: dict[str, str | None] = {"this tree": None}
    if args.compare:
        sources[args.compare] = args.compare
    sockets: dict[str, dict[str, list[float]]] = {name: {} for name in sources}
    for _ in range(args.rounds):
        for name, value in asyncio.run(in_process(args.requests)).items():
            stages.setdefault(name, []).append(value)
        for label, source in sources.items():
            for name, value in over_socket(args.requests, source).items():
                sockets[label].setdefault(name, []).append(value)
    print("\n== in process (CPU µs per call; 'handler' includes a decode of its own fresh body) ==")
    for name, values in stages.items():
        print(f"  {name:<30} {statistics.median(values):7.1f} µs   (rounds: {', '.join(f'{v:.1f}' for v in values)})")
    print("\n== Produce v10 over a socket, one request at a time (the broker process's CPU per request) ==")
    for label, figures in sockets.items():
        user, system = statistics.median(figures["user"]), statistics.median(figures["system"])
        print(f"  [{label}] user {user:.1f} µs + system {system:.1f} µs = {user + system:.1f} µs per request, "
              f"{statistics.median(figures['syscalls']):.1f} system calls per request, "
              f"round trip {statistics.median(figures['round trip']):.0f} µs")
    print("\n== Fetch v12 of the last record over a socket, one request at a time (the broker's CPU per request) ==")
    for label, figures in sockets.items():
        user, system = statistics.median(figures["fetch user"]), statistics.median(figures["fetch system"])
        print(f"  [{label}] user {user:.1f} µs + system {system:.1f} µs = {user + system:.1f} µs per request, "
              f"round trip {statistics.median(figures['fetch round trip']):.0f} µs")
    user = statistics.median(sockets["this tree"]["user"])
    route = statistics.median(stages["produce: whole route"])
    print(f"  [this tree] connection and event loop (user CPU beyond the in-process route): {user - route:.1f} µs")


if __name__ == "__main__":
    main()
