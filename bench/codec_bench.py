"""Micro benchmark of the Kafka wire codec's hot paths: the closure codec ("generic",
tests/wire_kafka/closure_codec.py, the tests' oracle) against the generated one ("generated",
codegen.py, the codec Roost runs), in the same process, in alternating rounds. Prints figures with their conditions; never asserts.

    .venv/bin/python bench/codec_bench.py [--rounds 5] [--seconds 0.05] [--only WORD]
    .venv/bin/python bench/codec_bench.py --compare-with /path/to/other/checkout [--rounds 5]

Each row is one call of the public framing functions (header included), as the broker (decode
request, encode response) or a client/follower (decode response) makes it. Every round measures
every row with both codecs, the codec that goes first alternating between rounds so a machine
getting busier favours neither; a measurement repeats the call for about `--seconds` of CPU time.
The figures are medians over the rounds of microseconds per call, in CPU time of this process
(time.process_time) and in wall-clock time.

`--compare-with DIR` measures the public functions (roost.wire.kafka.decode_request, ...) of
another checkout's `DIR/src` against this one's, for a before/after: each round runs one process
per checkout (`--public`), the checkout that goes first alternating between rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import roost.wire.kafka
from roost.wire.kafka import RequestHeader

sys.path.insert(0, str(Path(__file__).parent))

from micro_timing import Action, calls_for, checkout_figures, time_calls  # a sibling module


class KafkaFraming(Protocol):
    """What the rows call: a framing.KafkaFraming, or the roost.wire.kafka module of any checkout."""

    def decode_request(self, frame: Any, *, strict: bool = False) -> Any: ...
    def encode_request(self, header: Any, body: dict[str, Any]) -> list[Any]: ...
    def encode_response(self, header: Any, body: dict[str, Any]) -> list[Any]: ...
    def decode_response(self, api_key: int, api_version: int, frame: Any) -> Any: ...


def codec_variants() -> dict[str, KafkaFraming]:
    from roost.wire.kafka.apis import GENERATED_CODECS, CodecTable
    from roost.wire.kafka.framing import KafkaFraming as Framing

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: the oracle is in tests/
    from tests.wire_kafka.closure_codec import compile_struct

    return {"generic": Framing(CodecTable("generic", compile_struct)), "generated": Framing(GENERATED_CODECS)}


@dataclass(frozen=True)
class Row:
    label: str
    small: bool  # a small message: the latency case the ≥ 2x target is about
    make: Callable[[KafkaFraming], Action]  # the call to time, bound to one framing


def _request_frame(framing: KafkaFraming, header: RequestHeader, body: dict[str, Any]) -> bytearray:
    """A request frame as the broker's connection gets it: a bytearray without the size prefix."""
    return bytearray(b"".join(framing.encode_request(header, body))[4:])


def _response_frame(framing: KafkaFraming, header: RequestHeader, body: dict[str, Any]) -> bytes:
    return b"".join(bytes(part) for part in framing.encode_response(header, body))[4:]


def produce_request(batch: bytes) -> dict[str, Any]:
    return {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": "events", "partition_data": [{"index": 3, "records": batch}]}]}


def produce_response() -> dict[str, Any]:
    return {"responses": [{"name": "events", "partition_responses": [
        {"index": 3, "error_code": 0, "base_offset": 1_234_567, "log_append_time_ms": -1,
         "log_start_offset": 0}]}], "throttle_time_ms": 0}


TOPIC_ID = uuid.UUID(int=0x1234_5678_9ABC_DEF0_1234_5678_9ABC_DEF0)


def fetch_request() -> dict[str, Any]:
    """A consumer's Fetch v16: one partition, caught up (the tail read)."""
    return {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52_428_800,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic_id": TOPIC_ID, "partitions": [
                {"partition": 3, "current_leader_epoch": 0, "fetch_offset": 1_234_567,
                 "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1_048_576}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def fetch_response(partitions: int, records: Callable[[int], Any]) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic_id": TOPIC_ID, "partitions": [
            {"partition_index": index, "error_code": 0, "high_watermark": 1_000_000 + index,
             "last_stable_offset": 1_000_000 + index, "log_start_offset": 0, "aborted_transactions": None,
             "preferred_read_replica": -1, "records": records(index)} for index in range(partitions)]}]}


SEGMENT = memoryview(os.urandom(1024 * 1024))


def segment_slices(index: int) -> list[memoryview]:
    """What a Fetch response carries for a partition with data: slices of segment files."""
    return [SEGMENT[index * 40_000:index * 40_000 + 16_384],
            SEGMENT[500_000 + index * 9_000:500_000 + index * 9_000 + 8_192]]


def metadata_response(topics: int) -> dict[str, Any]:
    """Metadata v12 for `topics` topics of 3 partitions on 3 brokers."""
    brokers = [{"node_id": node, "host": f"broker-{node}.example.internal", "port": 9092, "rack": None}
               for node in range(3)]
    return {"throttle_time_ms": 0, "brokers": brokers, "cluster_id": "roost-cluster-0001", "controller_id": 0,
            "topics": [{"error_code": 0, "name": f"topic-{index:03d}", "topic_id": uuid.UUID(int=index + 1),
                        "is_internal": False, "partitions": [
                            {"error_code": 0, "partition_index": partition, "leader_id": partition % 3,
                             "leader_epoch": 4, "replica_nodes": [0, 1, 2], "isr_nodes": [0, 1, 2],
                             "offline_replicas": []} for partition in range(3)],
                        "topic_authorized_operations": -2147483648} for index in range(topics)]}


def decode_request_row(label: str, small: bool, version: int, body: dict[str, Any], api_key: int) -> Row:
    header = RequestHeader(api_key, version, 12345, "rdkafka")

    def make(framing: KafkaFraming) -> Action:
        frame = _request_frame(framing, header, body)
        return lambda: framing.decode_request(frame)
    return Row(label, small, make)


def encode_response_row(label: str, small: bool, api_key: int, version: int, body: dict[str, Any]) -> Row:
    header = RequestHeader(api_key, version, 12345, "rdkafka")

    def make(framing: KafkaFraming) -> Action:
        return lambda: framing.encode_response(header, body)
    return Row(label, small, make)


def decode_response_row(label: str, small: bool, api_key: int, version: int, body: dict[str, Any]) -> Row:
    header = RequestHeader(api_key, version, 12345, "rdkafka")

    def make(framing: KafkaFraming) -> Action:
        frame = _response_frame(framing, header, body)
        return lambda: framing.decode_response(api_key, version, frame)
    return Row(label, small, make)


def round_trip_row(label: str, api_key: int, request_version: int, request: dict[str, Any],
                   response: dict[str, Any]) -> Row:
    """What the broker's codec does for one request: decode it, encode its answer."""
    header = RequestHeader(api_key, request_version, 12345, "rdkafka")

    def make(framing: KafkaFraming) -> Action:
        frame = _request_frame(framing, header, request)

        def serve() -> object:
            decoded_header, _ = framing.decode_request(frame)
            return framing.encode_response(decoded_header, response)
        return serve
    return Row(label, True, make)


def rows() -> list[Row]:
    small_batch = os.urandom(171)  # a RecordBatch of one 100 B record, as librdkafka sends it at linger 0
    large_batch = os.urandom(16 * 1024)
    small_records = os.urandom(200)
    return [
        decode_request_row("decode Produce v9 request, one 171 B batch", True, 9, produce_request(small_batch), 0),
        decode_request_row("decode Produce v10 request, one 171 B batch", True, 10, produce_request(small_batch), 0),
        decode_request_row("decode Produce v9 request, one 16 KiB batch", False, 9, produce_request(large_batch), 0),
        decode_request_row("decode Produce v10 request, one 16 KiB batch", False, 10, produce_request(large_batch), 0),
        encode_response_row("encode Produce v10 response, 1 partition", True, 0, 10, produce_response()),
        decode_request_row("decode Fetch v16 request, 1 partition", True, 16, fetch_request(), 1),
        encode_response_row("encode Fetch v16 response, 1 partition, 200 B records", True, 1, 16,
                            fetch_response(1, lambda _: small_records)),
        encode_response_row("encode Fetch v16 response, 6 partitions, 2 segment slices each", False, 1, 16,
                            fetch_response(6, segment_slices)),
        decode_response_row("decode Fetch v16 response, 1 partition, 200 B records", True, 1, 16,
                            fetch_response(1, lambda _: small_records)),
        encode_response_row("encode Metadata v12 response, 10 topics x 3 partitions", False, 3, 12,
                            metadata_response(10)),
        round_trip_row("Produce v10: decode request + encode response", 0, 10, produce_request(small_batch),
                       produce_response()),
        round_trip_row("Fetch v16 tail: decode request + encode response (200 B)", 1, 16, fetch_request(),
                       fetch_response(1, lambda _: small_records)),
    ]


def _comparable(value: Any) -> Any:
    """A result with its buffers as bytes (an encoded frame joined), to compare two codecs' results."""
    if isinstance(value, list) and all(isinstance(part, bytes | memoryview) for part in value):
        return b"".join(bytes(part) for part in value)
    if isinstance(value, dict):
        return {key: _comparable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_comparable(item) for item in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def measure(variants: dict[str, KafkaFraming], selected: list[Row], rounds: int,
            seconds: float) -> tuple[dict[tuple[str, str], list[float]], dict[tuple[str, str], list[float]]]:
    """CPU and wall µs per call of every row and variant, one figure per round."""
    actions = {(row.label, name): row.make(framing) for row in selected for name, framing in variants.items()}
    # Variants must agree on every row before their speed means anything.
    for row in selected:
        results = [_comparable(actions[(row.label, name)]()) for name in variants]
        assert all(result == results[0] for result in results), f"{row.label}: the variants disagree"
    calls = {key: calls_for(action, seconds) for key, action in actions.items()}
    cpu: dict[tuple[str, str], list[float]] = {key: [] for key in actions}
    wall: dict[tuple[str, str], list[float]] = {key: [] for key in actions}
    for round_index in range(rounds):
        order = list(variants) if round_index % 2 == 0 else list(reversed(variants))
        for row in selected:
            for name in order:
                key = (row.label, name)
                cpu_us, wall_us = time_calls(actions[key], calls[key])
                cpu[key].append(cpu_us)
                wall[key].append(wall_us)
    return cpu, wall


def _conditions(rounds: int, what: str, spent_cpu: float, spent_wall: float) -> None:
    load = os.getloadavg()
    print(f"Kafka wire codec, µs per call ({what}; median of {rounds} alternating rounds, CPU time; "
          f"wall clock in brackets)")
    print(f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}; "
          f"{spent_cpu:.1f} s CPU in {spent_wall:.1f} s wall")


def _table(selected: list[Row], names: tuple[str, str], cpu: dict[tuple[str, str], list[float]],
           wall: dict[tuple[str, str], list[float]]) -> None:
    width = max(len(row.label) for row in selected)
    print(f"{'':{width}}  {names[0]:>16}  {names[1]:>16}  {'speed-up':>8}")
    for row in selected:
        medians = {name: statistics.median(cpu[(row.label, name)]) for name in names}
        walls = {name: statistics.median(wall[(row.label, name)]) for name in names}
        cells = "  ".join(f"{medians[name]:7.2f} ({walls[name]:6.2f})" for name in names)
        mark = " *" if row.small else ""
        print(f"{row.label:{width}}  {cells}  {medians[names[0]] / medians[names[1]]:7.2f}x{mark}")
    print("* a small message (the latency case)")


def compare_checkouts(other: Path, selected: list[Row], rounds: int, seconds: float, only: str) -> None:
    """Before/after: the public functions of `other`/src against this checkout's, one process each."""
    started_cpu, started_wall = _children_cpu(), time.perf_counter()
    trees, cpu, wall = checkout_figures(Path(__file__), other, rounds,
                                        ["--public", "--rounds", "1", "--seconds", str(seconds), "--only", only])
    _conditions(rounds, f"public functions of {trees['before']} vs {trees['after']}, "
                f"one process per checkout and round", _children_cpu() - started_cpu,
                time.perf_counter() - started_wall)
    _table(selected, ("before", "after"), cpu, wall)


def _children_cpu() -> float:
    usage = os.times()
    return usage.children_user + usage.children_system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.05, help="CPU time per measurement")
    parser.add_argument("--only", default="", help="rows whose label contains this")
    parser.add_argument("--compare-with", type=Path, help="another checkout, measured as 'before'")
    parser.add_argument("--public", action="store_true", help="(internal) time roost.wire.kafka's functions, "
                        "print JSON")
    args = parser.parse_args()
    selected = [row for row in rows() if args.only in row.label]

    if args.public:
        cpu, wall = measure({"public": roost.wire.kafka}, selected, args.rounds, args.seconds)
        print(json.dumps({"module": roost.wire.kafka.__file__, "rows": {
            label: (statistics.median(cpu[(label, name)]), statistics.median(wall[(label, name)]))
            for label, name in cpu}}))
        return
    assert args.rounds >= 3, "medians of at least three rounds"
    if args.compare_with is not None:
        compare_checkouts(args.compare_with, selected, args.rounds, args.seconds, args.only)
        return
    started_cpu, started_wall = time.process_time(), time.perf_counter()
    cpu, wall = measure(codec_variants(), selected, args.rounds, args.seconds)
    _conditions(args.rounds, "closure codec vs generated codec, one process",
                time.process_time() - started_cpu, time.perf_counter() - started_wall)
    _table(selected, ("generic", "generated"), cpu, wall)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
