#!/usr/bin/env python3
"""Kafka's replication throttles (KIP-73) on Roost, and the balancer's time for a new broker to
take its share at a given throttle.

Against a LocalCluster of real `roost broker` processes (tests/support/cluster.py) with Kafka's
quota windows (replication.quota.window.num 11 x 1 s):
1. one partition of --megabytes on broker 1 is reassigned to brokers 1 and 2 with
   leader/follower.replication.throttled.rate = each --rate (and once without a throttle):
   printed, the move's time and bytes/s against the setting, and the rate over the part after the
   windows' first 10 s (which a fresh quota lets through as allowance, as Kafka's does);
2. `roost balance run --throttle` on 30 partitions RF 3 (--share-megabytes each) on brokers 1-3,
   broker 4 empty: the time until broker 4 holds its share.

Prints figures with conditions; never passes or fails.

    .venv/bin/python bench/throttle_bench.py --rate 1000000 --rate 4000000 --megabytes 24
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

WINDOWS = 11


def _fill(cluster, topic: str, assignment: list[list[int]], megabytes: float) -> int:  # type: ignore[no-untyped-def]
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    admin = cluster.admin()
    admin.create_topics([NewTopic(topic, len(assignment), replica_assignment=assignment)])[topic].result(60)
    cluster.wait_for_isr(topic)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 20,
                         "batch.size": 1 << 20})
    value = b"x" * 100_000
    count = int(megabytes * 10)
    for i in range(count):
        producer.produce(topic, value, partition=i % len(assignment))
        producer.poll(0)
    producer.flush(120)
    return count * len(value)


def _moved(cluster, ops, topic: str, replicas: set[int]) -> bool:  # type: ignore[no-untyped-def]
    found = cluster.partitions(topic)
    return bool(found) and all(set(r) == replicas and set(i) == replicas for _, r, i in found.values()) \
        and not ops.list_reassignments()


def throttled_move(cluster, topic: str, megabytes: float, rate: int | None) -> None:  # type: ignore[no-untyped-def]
    from roost.admin.balancer import BROKER_RESOURCE, TOPIC_RESOURCE, ClusterOps, remove_throttles

    size = _fill(cluster, topic, [[1]], megabytes)
    ops = ClusterOps(cluster.bootstrap)
    ops.view()
    if rate is not None:
        for broker in (1, 2):
            ops.alter_configs(BROKER_RESOURCE, str(broker), {"leader.replication.throttled.rate": str(rate),
                                                             "follower.replication.throttled.rate": str(rate)}, broker)
        ops.alter_configs(TOPIC_RESOURCE, topic, {"leader.replication.throttled.replicas": "0:1,0:2",
                                                  "follower.replication.throttled.replicas": "0:1,0:2"})
    start = time.monotonic()
    ops.reassign({(topic, 0): [1, 2]})
    while not _moved(cluster, ops, topic, {1, 2}):
        time.sleep(0.05)
    took = time.monotonic() - start
    if rate is not None:
        remove_throttles(ops, {"rate": rate, "brokers": [1, 2], "topics": {topic: {
            "leader.replication.throttled.replicas": None, "follower.replication.throttled.replicas": None}}})
        allowance = rate * (WINDOWS - 1)
        after = (size - allowance) / max(took - 1e-9, 1e-9) if size > allowance else float("nan")
        print(f"  throttle {rate / 1e6:.1f} MB/s: {size / 1e6:.1f} MB in {took:.1f} s = {size / took / 1e6:.2f} MB/s "
              f"({size / took / rate:.2f}x the setting); the bytes beyond a fresh quota's {WINDOWS - 1}-window "
              f"allowance over the whole time: {after / 1e6:.2f} MB/s ({after / rate:.2f}x)")
    else:
        print(f"  no throttle: {size / 1e6:.1f} MB in {took:.2f} s = {size / took / 1e6:.1f} MB/s")


def new_broker_share(cluster, zookeeper: str, megabytes: float, rate: int) -> None:  # type: ignore[no-untyped-def]
    from click.testing import CliRunner

    from roost.cli.main import cli

    _fill(cluster, "share", [[1 + (i + k) % 3 for k in range(3)] for i in range(30)], megabytes * 30)
    time.sleep(2)
    start = time.monotonic()
    result = CliRunner().invoke(cli, ["balance", "run", "-b", cluster.bootstrap, "--zookeeper", zookeeper,
                                      "--throttle", str(rate), "--poll", "0.5", "--format", "json"])
    took = time.monotonic() - start
    partitions = cluster.partitions("share")
    replicas = sum(4 in r for _, r, _ in partitions.values())
    leaders = sum(leader == 4 for leader, _, _ in partitions.values())
    print(f"  new broker, throttle {rate / 1e6:.1f} MB/s, 30 partitions x {megabytes:g} MB RF 3: exit "
          f"{result.exit_code}, {took:.1f} s; broker 4 holds {replicas} of 90 replicas, {leaders} of 30 leaders")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=int, action="append", help="bytes/s (repeatable; default 1 MB/s, 4 MB/s)")
    parser.add_argument("--megabytes", type=float, default=24.0)
    parser.add_argument("--share-megabytes", type=float, default=1.0)
    parser.add_argument("--share-rate", type=int, default=2_000_000)
    args = parser.parse_args()
    rates = args.rate or [1_000_000, 4_000_000]
    from tests.support.cluster import LocalCluster

    print(f"replication throttles — {platform.node()} {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}, load average {os.getloadavg()[0]:.2f}, 4 brokers + 1 keeper on "
          f"loopback, replication.quota.window.num {WINDOWS} x 1 s")
    with tempfile.TemporaryDirectory(prefix="throttle-bench-") as root:
        cluster = LocalCluster.start(Path(root), brokers=4, keepers=1, settings={
            "balancer.load.sample.interval.ms": 1000, "balancer.load.windows": 2,
            "auto.leader.rebalance.enable": False, "replica.lag.time.max.ms": 30_000})
        try:
            throttled_move(cluster, "free", args.megabytes, None)
            for index, rate in enumerate(rates):
                throttled_move(cluster, f"held-{index}", args.megabytes, rate)
            new_broker_share(cluster, cluster.zookeeper, args.share_megabytes, args.share_rate)
        finally:
            cluster.close()


if __name__ == "__main__":
    main()
