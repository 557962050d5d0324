"""How long a new coordinator takes to load an offsets partition, and how long it holds the loop.

In one process: a real partition log of `__consumer_offsets` in a temporary directory filled with
offset commits, a replica manager and the group service; the broker is made leader of the
partition (the leadership listener fires) and the load runs while a probe task measures the
longest gap between its turns on the event loop (what other requests would wait), from the
election on (opening the log in LeaderAndIsr is not the load's). Prints figures
with their conditions and CPU seconds; never asserts.

    .venv/bin/python bench/group_load_bench.py                 # 200,000 records, 4 chunk sizes
    .venv/bin/python bench/group_load_bench.py --records 50000 --chunks 1048576
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from roost.broker.coordinators import load as coordinator_load
from roost.broker.group.offsets import CommittedOffset, offset_batch
from roost.broker.group.service import GroupService, offsets_topic_configs
from roost.broker.metadata.cache import BrokerEndpoint, MetadataCache, PartitionInfo
from roost.broker.metadata.catalog import OFFSETS_TOPIC
from roost.broker.replica.manager import ReplicaManager
from roost.config import BrokerConfig
from roost.storage.log_manager import LogManager
from roost.wire.kafka.errors import ErrorCode

ME = 1
RECORDS_PER_BATCH = 10  # a consumer committing 10 partitions at once
GROUPS = 1000


def fill(directory: Path, records: int) -> None:
    """Write `records` offset commits (GROUPS groups, 10 partitions each) into partition 0."""
    config = BrokerConfig.build([("bench", {"broker.id": ME, "offsets.topic.num.partitions": 1})])
    logs = LogManager(config, directory)
    configs = config.topic_defaults() | offsets_topic_configs(config)
    partition_log = logs.open_log(OFFSETS_TOPIC, 0, configs)
    for n in range(records // RECORDS_PER_BATCH):
        group = f"group-{n % GROUPS}"
        entries: dict[tuple[str, str, int], CommittedOffset | None] = {
            (group, "events", p): CommittedOffset(n, 0, "", n) for p in range(RECORDS_PER_BATCH)}
        partition_log.append(offset_batch(entries, n))
    partition_log.close()


async def load(directory: Path) -> dict[str, Any]:
    config = BrokerConfig.build([("bench", {"broker.id": ME, "offsets.topic.num.partitions": 1})])
    metadata = MetadataCache()
    metadata.set_brokers([BrokerEndpoint(ME, "127.0.0.1", 9092)], ME)
    topic_id = uuid.uuid4()
    metadata.set_partition(OFFSETS_TOPIC, 0, PartitionInfo(ME, 1, (ME,), (ME,)), topic_id)
    replicas = ReplicaManager(ME, config, LogManager(config, directory), metadata)
    groups = GroupService(config, replicas, metadata)
    groups.start()
    longest_gap = longest_cpu_gap = 0.0
    turns = 0
    elected_at = float("inf")  # gaps that began before the election (opening the log) do not count

    async def probe() -> None:
        # Wall gaps include time the shared machine ran someone else; CPU gaps are ours alone.
        nonlocal longest_gap, longest_cpu_gap, turns
        last, last_cpu = time.perf_counter(), time.thread_time()
        while True:
            await asyncio.sleep(0)
            now, now_cpu = time.perf_counter(), time.thread_time()
            if last >= elected_at:
                longest_gap = max(longest_gap, now - last)
                longest_cpu_gap = max(longest_cpu_gap, now_cpu - last_cpu)
                turns += 1
            last, last_cpu = now, now_cpu

    async def configs_for(topic: str) -> dict[str, Any]:
        return offsets_topic_configs(config)

    prober = asyncio.ensure_future(probe())
    await asyncio.sleep(0)
    wall, cpu = time.perf_counter(), time.process_time()
    await replicas.leader_and_isr({
        "controller_id": ME, "controller_epoch": 1, "broker_epoch": -1, "topic_states": [{
            "topic_name": OFFSETS_TOPIC, "topic_id": topic_id, "partition_states": [{
                "partition_index": 0, "leader": ME, "leader_epoch": 1, "partition_epoch": 1,
                "replicas": [ME], "isr": [ME]}]}]}, configs_for)
    elected_at = time.perf_counter()
    while groups.status("group-0") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
        await asyncio.sleep(0)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    prober.cancel()
    offsets = len(groups.offsets("group-0"))
    await groups.stop()
    await replicas.close()
    return {"wall_s": wall, "cpu_s": cpu, "longest_gap_ms": longest_gap * 1000,
            "longest_cpu_gap_ms": longest_cpu_gap * 1000, "turns": turns, "offsets": offsets}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--chunks", type=int, nargs="+", default=[16 * 1024, 64 * 1024, 256 * 1024, 1024 * 1024])
    args = parser.parse_args()
    print(f"conditions: Python {platform.python_version()}, {platform.machine()}, one process, "
          f"{args.records:,} offset records in batches of {RECORDS_PER_BATCH} ({GROUPS} groups), "
          f"partition log on a temporary directory (page cache warm after writing)")
    with tempfile.TemporaryDirectory(prefix="roost-group-load-") as data:
        fill(Path(data), args.records)
        size = sum(f.stat().st_size for f in Path(data).rglob("*.log"))
        print(f"log size: {size / 1e6:.1f} MB")
        for chunk in args.chunks:
            coordinator_load.LOAD_CHUNK_BYTES = chunk
            figures = asyncio.run(load(Path(data)))
            print(f"chunk {chunk // 1024:>5} KiB: loaded {figures['offsets']:,} offsets in {figures['wall_s']:.2f} s "
                  f"({args.records / figures['wall_s']:,.0f} records/s, CPU {figures['cpu_s']:.2f} s); "
                  f"longest event-loop stall {figures['longest_cpu_gap_ms']:.1f} ms CPU "
                  f"({figures['longest_gap_ms']:.1f} ms wall) over {figures['turns']:,} probe turns")


if __name__ == "__main__":
    main()
