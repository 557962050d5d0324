"""The Spark half of scripts/link_chaos.py: a structured-streaming query that outlives its region.

A query on Roost's own Spark source (`format("roost")`, local[1], a processing-time trigger of
1 s, a foreachBatch sink that appends what each micro-batch read to a file) reads topic `chaos`
in region A with its checkpoint on storage both regions see (the host's file system: the
checkpoint stands for one on replicated storage). It dies with region A. The same query (same
checkpoint directory) is then started in region B against B's brokers, after B failed over.

What is checked (pure functions below, tested in tests/link/test_link_chaos_measures.py):

- every record the query had committed in its checkpoint on A, below B's promotion point, is
  on B at the same offset with the same value (the link keeps offsets, so the checkpoint stays
  valid);
- every record B holds at or past the checkpoint's offsets is read by the resumed query, with the
  value B holds; records read again (the micro-batch A's query had not committed, replayed) are
  counted;
- where the checkpoint is past the promotion point (the query on A read records the link never
  brought to B: the RPO as the query saw it), B's own new writes at the offsets the checkpoint had
  passed are never read by the resumed query: counted and printed, not hidden (a source that
  stores no leader epochs in its offsets cannot tell the offsets were reused).

The driver runs inside a region's namespace (`ip netns exec`): Spark binds to that namespace's
loopback, and the brokers it reads are the region's. Its JVM and Python workers are the driver's
descendants; link_chaos.py kills the whole process tree on every exit path.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TRIGGER = "1 second"
MAX_OFFSETS_PER_TRIGGER = 20000  # bounds a catch-up batch (a backlog after Spark's start-up)


# -- pure: what the query read, what its checkpoint says, what the resume did ---------------------
@dataclass(frozen=True)
class SparkRead:
    batch: int
    partition: int
    offset: int
    value: str


def parse_reads(text: str) -> tuple[list[SparkRead], list[tuple[int, float, int]]]:
    """The sink file: `batch <id> <time> <rows>` headers, each followed by `read <id> <p> <o> <value>`
    lines. A last line without its newline (cut short by a kill) is ignored."""
    reads: list[SparkRead] = []
    batches: list[tuple[int, float, int]] = []
    for line in text.split("\n")[:-1]:  # the piece after the last newline is empty or cut
        parts = line.split(" ")
        if parts[0] == "read" and len(parts) == 5:
            reads.append(SparkRead(int(parts[1]), int(parts[2]), int(parts[3]), parts[4]))
        elif parts[0] == "batch" and len(parts) == 4:
            batches.append((int(parts[1]), float(parts[2]), int(parts[3])))
    return reads, batches


def checkpoint_offsets(checkpoint: Path, topic: str) -> tuple[int | None, dict[int, int]]:
    """The last committed micro-batch of a Spark checkpoint and the end offsets it read to (the next
    offset to read, per partition). Spark writes `offsets/<id>` (a version line, the batch's
    metadata, then one line per source) before a batch runs and `commits/<id>` once its sink is done."""
    return _last(checkpoint, "commits", topic)


def planned_offsets(checkpoint: Path, topic: str) -> tuple[int | None, dict[int, int]]:
    """The last micro-batch planned (committed or not) and the end offsets it reads to."""
    return _last(checkpoint, "offsets", topic)


def _last(checkpoint: Path, log: str, topic: str) -> tuple[int | None, dict[int, int]]:
    batches = [int(p.name) for p in (checkpoint / log).glob("*") if p.name.isdigit()]
    if not batches:
        return None, {}
    last = max(batches)
    lines = (checkpoint / "offsets" / str(last)).read_text().splitlines()
    data: Any = json.loads(lines[2])
    if isinstance(data, str):  # a Python data source's offset is kept as its JSON text
        data = json.loads(data)
    return last, {int(p): int(o) for p, o in data.get(topic, {}).items()}


@dataclass(frozen=True)
class SparkResume:
    checked: int  # records committed on A below the promotion point, compared with B
    changed: list[tuple[int, int]]  # of those, B holds another value or none: must be none
    lost_with_a: int  # records the query committed on A at or past the promotion point
    skipped_on_b: list[tuple[int, int]]  # B's records in [promotion point, checkpoint): never read
    must_read: int  # B's records at or past the checkpoint
    missing: list[tuple[int, int]]  # of those, not read on B (or read with another value): must be none
    rereads: int  # records read on B that the query had read on A (the replayed micro-batch)
    duplicates_on_b: int  # records read more than once on B


def spark_resume(read_a: Iterable[SparkRead], committed: Mapping[int, int], promotion: Mapping[int, int],
                 held_b: Mapping[tuple[int, int], str], read_b: Iterable[SparkRead]) -> SparkResume:
    """`committed`: the checkpoint's offsets at the loss (next to read); `promotion`: per partition
    the first offset B did not hold from A; `held_b`: B's records (read_committed) when checked."""
    seen_a = {(r.partition, r.offset): r.value for r in read_a}
    done_a = {k: v for k, v in seen_a.items() if k[1] < committed.get(k[0], 0)}
    below = {k: v for k, v in done_a.items() if k[1] < promotion.get(k[0], 0)}
    changed = sorted(k for k, v in below.items() if held_b.get(k) != v)
    counts_b = Counter((r.partition, r.offset) for r in read_b)
    values_b: dict[tuple[int, int], set[str]] = {}
    for r in read_b:
        values_b.setdefault((r.partition, r.offset), set()).add(r.value)
    skipped = sorted(k for k in held_b if promotion.get(k[0], 0) <= k[1] < committed.get(k[0], 0))
    owed = [k for k in held_b if k[1] >= committed.get(k[0], 0)]
    missing = sorted(k for k in owed if values_b.get(k) != {held_b[k]})
    return SparkResume(
        checked=len(below), changed=changed, lost_with_a=len(done_a) - len(below), skipped_on_b=skipped,
        must_read=len(owed), missing=missing, rereads=sum(1 for k in counts_b if k in seen_a),
        duplicates_on_b=sum(n - 1 for n in counts_b.values() if n > 1))


def read_to(read_b: Iterable[SparkRead], held_b: Mapping[tuple[int, int], str]) -> bool:
    """Whether the query on B has read as far as B's records go in every partition."""
    last: dict[int, int] = {}
    for p, o in held_b:
        last[p] = max(last.get(p, -1), o)
    got: dict[int, int] = {}
    for r in read_b:
        got[r.partition] = max(got.get(r.partition, -1), r.offset)
    return all(got.get(p, -1) >= o for p, o in last.items())


# -- the query (run as `link_chaos.py --role spark` inside a region's namespace) ---------------------
def run_query(bootstrap: str, topic: str, checkpoint: str, out_path: str, stop: str) -> int:
    """Read `topic` until the stop file exists; every micro-batch's rows appended to `out_path`."""
    from roost.spark.session import local_session

    spark = local_session("link-chaos", cores=1, shuffle_partitions=1)
    out = open(out_path, "a", buffering=1)  # noqa: SIM115 - appended until the process is killed

    def record(frame: Any, batch_id: int) -> None:
        rows = frame.select("partition", "offset", "value").collect()
        lines = [f"batch {batch_id} {time.time():.6f} {len(rows)}"]
        lines += [f"read {batch_id} {r.partition} {r.offset} {bytes(r.value).decode()}" for r in rows]
        out.write("\n".join(lines) + "\n")
        out.flush()
        os.fsync(out.fileno())  # written before Spark commits the batch: a kill then leaves a re-read

    query = (spark.readStream.format("roost").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", MAX_OFFSETS_PER_TRIGGER)
             .option("kafkaConsumer.pollTimeoutMs", 60000).load()
             .writeStream.foreachBatch(record).option("checkpointLocation", checkpoint)
             .trigger(processingTime=TRIGGER).start())
    deadline = time.monotonic() + 3600  # bounded: the orchestrator stops or kills it long before
    while query.isActive and not Path(stop).exists() and time.monotonic() < deadline:
        query.awaitTermination(1)
    failure = query.exception()
    if failure is not None:
        print(f"spark query failed: {failure}", file=sys.stderr, flush=True)
    query.stop()
    spark.stop()
    return 1 if failure is not None else 0
