"""Micro benchmark of the Kafka wire codec's hot paths. Prints figures; never asserts.

    .venv/bin/python bench/codec_bench.py

- decode of a Produce v7 request carrying one 16 KiB record batch (the broker's hot path in);
- encode of a Fetch v11 response with 6 partitions whose records are lists of segment slices
  (the broker's hot path out).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from roost.wire.kafka import RequestHeader, decode_request, encode_request, encode_response


def _per_call_us(action: Callable[[], object], seconds: float = 1.0) -> float:
    """Best of five rounds, each about `seconds` / 5 long: microseconds per call."""
    calls = 1
    while True:  # size a round
        start = time.perf_counter()
        for _ in range(calls):
            action()
        if time.perf_counter() - start > seconds / 50 or calls > 10_000_000:
            break
        calls *= 2
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls * 10):
            action()
        best = min(best, (time.perf_counter() - start) / (calls * 10))
    return best * 1e6


def produce_v7_frame() -> bytes:
    batch = os.urandom(16 * 1024)
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": "events", "partition_data": [{"index": 3, "records": batch}]}]}
    return b"".join(encode_request(RequestHeader(0, 7, 12345, "rdkafka"), body))[4:]


def fetch_v11_body() -> dict[str, object]:
    segment = memoryview(os.urandom(1024 * 1024))
    partitions = [{
        "partition_index": index, "error_code": 0, "high_watermark": 1_000_000 + index,
        "last_stable_offset": 1_000_000 + index, "log_start_offset": 0, "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": [segment[index * 40_000:index * 40_000 + 16_384],
                    segment[500_000 + index * 9_000:500_000 + index * 9_000 + 8_192]],
    } for index in range(6)]
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0,
            "responses": [{"topic": "events", "partitions": partitions}]}


def main() -> None:
    frame = produce_v7_frame()
    decode_us = _per_call_us(lambda: decode_request(frame))
    print(f"decode Produce v7 request, one 16 KiB batch ({len(frame)} bytes): {decode_us:8.2f} µs")

    header = RequestHeader(1, 11, 777, "rdkafka")
    body = fetch_v11_body()
    parts = encode_response(header, body)
    encode_us = _per_call_us(lambda: encode_response(header, body))
    total = sum(len(part) for part in parts)
    print(f"encode Fetch v11 response, 6 partitions ({total} bytes in {len(parts)} buffers): "
          f"{encode_us:8.2f} µs")


if __name__ == "__main__":
    main()
