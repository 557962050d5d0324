"""Exactly-once writes to Roost topics without transactions: the argument and its pure parts.

The broker has no transactions (no EndTxn), so the sink cannot hide a half-written micro-batch
from consumers. Instead it makes sure that every record of a batch reaches the topic once, however
often Spark runs the batch. The argument:

1. **What Spark replays.** A micro-batch `B` is re-run (same batch id, same input offsets, taken
   from the offset log in the checkpoint) when the query stopped or failed before `B` was in the
   checkpoint's commit log; only the last batch can be in that state. A failed task is re-run
   as a new attempt of the same task (same partition id). For a deterministic query, every run
   of task `p` of batch `B` yields the same multiset of rows: the input offsets are fixed, and the
   state (aggregations, watermark) is restored to the version before `B`.
2. **A name for every record.** The sink names each record it writes by
   `sink/B/p/digest/n`: the sink id (the streaming query id, which survives restarts from the
   same checkpoint; a fresh id per batch `df.write` job), the batch id, the task's partition id,
   a digest of the record's content (topic, partition, key, value, headers) and `n`, how many
   records with the same digest the task met before this one. Being derived from the multiset,
   the names of a run's records are the same in every run of the same task, in whatever order
   the rows arrive. The name travels as the record header `roost-sink-record`.
3. **A commit log in a topic.** Each sink keeps a one-partition topic (`__roost_sink_<id>` for a
   query; `__roost_sink_batch_jobs` shared by batch jobs) of small JSON markers:
   - `begin(B, p, attempt, topic, offsets)`: written and acknowledged (acks=all) *before* the
     task's first record to `topic`, with the end offset of every partition of `topic` at that
     moment. Everything this attempt writes to `topic` lies after those offsets.
   - `commit(B)`: written by the driver in Spark's `commit(messages, B)`, after every task of
     `B` succeeded and before Spark records `B` in its own commit log.
4. **The write rule.** A task of batch `B` first reads the markers of `B`.
   - `commit(B)` present: `B` is complete in the topics (Spark failed between our commit and its
     own); the task writes nothing.
   - `begin(B, p, ...)` markers present: an earlier run of this task may have written some of
     its records. For each topic they name, the task reads the partitions from the recorded
     offsets to the current end and collects the names starting `sink/B/p/`; it then writes
     only the records whose names are not there.
   - no marker: no earlier run of this task wrote anything (it would have written `begin` first);
     the task writes everything.
   Every record of the task is therefore in the topic after the run, and none twice: a name
   already there is not written again, and two records of one run never share a name.
5. **Why the scan sees everything.** Records are acknowledged only once durable on the in-sync
   replicas, and a dead attempt's producer has no more acknowledged writes to come. The idempotent
   producer (enable.idempotence) makes librdkafka's own retries (a broker restart mid-write) land
   once.

Assumptions, stated: the query is deterministic (no `rand()`, no processing-time columns in the
output); a task attempt is dead before its batch is re-run (Spark's default: speculative execution
off; a zombie attempt that still writes after its replacement scanned could add duplicates, as
Kafka's transactions would fence it and we cannot); and record timestamps play no part.

Readers see each record once, with the extra header. Like Spark's Kafka sink with transactions
off, a reader may see part of a batch before the rest arrives (there is no read_committed), but
never a record twice. With `exactlyOnce=false` the sink writes plain records (at least once).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

RECORD_NAME_HEADER = "roost-sink-record"
QUERY_LOG_PREFIX = "__roost_sink_"
BATCH_JOBS_LOG = "__roost_sink_batch_jobs"
MARKER_BEGIN = "begin"
MARKER_COMMIT = "commit"


def query_commit_log(sink_id: str) -> str:
    """The commit-log topic of a streaming sink; topic names allow [a-zA-Z0-9._-]."""
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in sink_id)
    assert safe, "empty sink id"
    return f"{QUERY_LOG_PREFIX}{safe}"[:249]


def _length_prefixed(part: bytes | None) -> bytes:
    if part is None:
        return b"\xff\xff\xff\xff"
    return len(part).to_bytes(4, "big") + part


def record_digest(topic: str, partition: int | None, key: bytes | None, value: bytes | None,
                  headers: Sequence[tuple[str, bytes | None]]) -> str:
    """A digest of everything that makes a record what it is (lengths prefixed: no ambiguity)."""
    digest = hashlib.blake2b(digest_size=12)
    digest.update(_length_prefixed(topic.encode()))
    digest.update(_length_prefixed(None if partition is None else str(partition).encode()))
    digest.update(_length_prefixed(key))
    digest.update(_length_prefixed(value))
    for header_key, header_value in headers:
        digest.update(_length_prefixed(header_key.encode()))
        digest.update(_length_prefixed(header_value))
    return digest.hexdigest()


def name_prefix(sink_id: str, batch_id: int, task: int) -> str:
    assert "/" not in sink_id, sink_id
    return f"{sink_id}/{batch_id}/{task}/"


class RecordNamer:
    """Names a task's records by content and occurrence (see point 2 of the module docstring)."""

    def __init__(self, sink_id: str, batch_id: int, task: int) -> None:
        self.prefix = name_prefix(sink_id, batch_id, task)
        self._seen: Counter[str] = Counter()

    def name(self, digest: str) -> str:
        occurrence = self._seen[digest]
        self._seen[digest] += 1
        return f"{self.prefix}{digest}/{occurrence}"


@dataclass(frozen=True)
class Marker:
    kind: str
    sink: str
    batch: int
    task: int = -1
    attempt: int = -1
    topic: str = ""
    offsets: dict[int, int] = field(default_factory=dict)
    records: int = 0

    def __post_init__(self) -> None:
        assert self.kind in (MARKER_BEGIN, MARKER_COMMIT), self.kind
        assert self.kind != MARKER_BEGIN or (self.task >= 0 and self.topic), self

    def encode(self) -> bytes:
        body: dict[str, Any] = {"kind": self.kind, "sink": self.sink, "batch": self.batch}
        if self.kind == MARKER_BEGIN:
            body.update(task=self.task, attempt=self.attempt, topic=self.topic,
                        offsets={str(p): o for p, o in sorted(self.offsets.items())})
        else:
            body["records"] = self.records
        return json.dumps(body, sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes) -> Marker:
        body = json.loads(data)
        return cls(kind=body["kind"], sink=body["sink"], batch=int(body["batch"]),
                   task=int(body.get("task", -1)), attempt=int(body.get("attempt", -1)),
                   topic=body.get("topic", ""),
                   offsets={int(p): int(o) for p, o in body.get("offsets", {}).items()},
                   records=int(body.get("records", 0)))


@dataclass(frozen=True)
class TaskPlan:
    """What a task must do, decided from the markers of its batch."""

    batch_committed: bool
    # topic -> partition -> the offset from which earlier runs of this task may have written
    scan_from: dict[str, dict[int, int]]


def plan_task(markers: Iterable[Marker], sink_id: str, batch_id: int, task: int) -> TaskPlan:
    committed = False
    scan_from: dict[str, dict[int, int]] = {}
    for marker in markers:
        if marker.sink != sink_id or marker.batch != batch_id:
            continue
        if marker.kind == MARKER_COMMIT:
            committed = True
        elif marker.task == task:
            earliest = scan_from.setdefault(marker.topic, {})
            for partition, offset in marker.offsets.items():
                earliest[partition] = min(offset, earliest.get(partition, offset))
    return TaskPlan(committed, scan_from)
