"""A keyed message workload whose delivery can be checked: exactly once, in order per key.

Each message's value says which key it belongs to and its sequence number within that key, so
a consumer's output can be checked without remembering what was sent.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

KEYS = 200


@dataclass(frozen=True)
class Message:
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]


def messages(count: int, tag: str, keys: int = KEYS, start: int = 0, pad: int = 40) -> Iterator[Message]:
    """`count` messages spread over `keys` keys; message n has sequence n // keys within its key."""
    filler = "x" * pad
    for n in range(start, start + count):
        key = f"{tag}-k{n % keys}"
        value = json.dumps({"k": key, "s": n // keys, "n": n, "pad": filler}).encode()
        yield Message(key.encode(), value, [("tag", tag.encode()), ("n", str(n).encode())])


@dataclass(frozen=True)
class Received:
    key: bytes
    value: bytes
    partition: int
    offset: int
    headers: tuple[tuple[str, bytes], ...] = ()


def check_exactly_once_in_order(streams: Iterable[Iterable[Received]], expected_ns: set[int]) -> None:
    """Every expected message once across all streams; within each stream, per key in order.

    A stream is what one consumer received in the order it received it. Ordering is also checked
    on the union sorted by (partition, offset): the log order of a key must be its produce order.
    """
    seen: dict[int, Received] = {}
    all_records: list[Received] = []
    for stream in streams:
        last_seq: dict[bytes, int] = {}
        for record in stream:
            data = json.loads(record.value)
            n, seq = data["n"], data["s"]
            assert record.key == data["k"].encode(), f"key mismatch at offset {record.offset}"
            assert n not in seen, f"message {n} delivered twice ({seen[n]} and {record})"
            seen[n] = record
            previous = last_seq.get(record.key, -1)
            assert seq > previous, f"key {record.key!r} went from seq {previous} to {seq}"
            last_seq[record.key] = seq
            all_records.append(record)
    missing = expected_ns - seen.keys()
    extra = seen.keys() - expected_ns
    assert not missing, f"{len(missing)} messages never delivered, e.g. {sorted(missing)[:10]}"
    assert not extra, f"{len(extra)} unexpected messages, e.g. {sorted(extra)[:10]}"
    by_key: dict[bytes, list[tuple[int, int, int]]] = defaultdict(list)
    for record in all_records:
        data = json.loads(record.value)
        by_key[record.key].append((record.partition, record.offset, data["s"]))
    for key, entries in by_key.items():
        partitions = {p for p, _, _ in entries}
        assert len(partitions) == 1, f"key {key!r} landed in several partitions {partitions}"
        entries.sort()
        seqs = [s for _, _, s in entries]
        assert seqs == sorted(seqs), f"key {key!r} is out of order in the log"
