"""The balancer's planner (roost.broker.balance): how long a plan takes for a skewed cluster of
P partitions on B brokers, and how good it is (replicas, leaders and bytes in per broker before
and after, the moves and bytes it would copy). The cluster: P partitions RF 3 placed on the first
B - 1 brokers (a broker just added), racks round robin over 3, one topic in ten ten times hotter.

    .venv/bin/python bench/balance_bench.py                  # 1,000 x 6 and 10,000 x 12
    .venv/bin/python bench/balance_bench.py --sizes 1000x6 --repeat 3

Prints figures with their conditions (the planner is single-threaded pure Python; CPU time is
the process's); never passes or fails.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from roost.broker.balance.model import BrokerInfo, PartitionInfo, PartitionLoad, Resource
from roost.broker.balance.planner import plan


def skewed_cluster(partitions: int, brokers: int, seed: int) -> tuple[list[BrokerInfo], list[PartitionInfo]]:
    rng = random.Random(seed)
    infos = [BrokerInfo(b, rack=f"rack-{b % 3}") for b in range(1, brokers + 1)]
    old = list(range(1, brokers))
    by_rack: dict[str, list[int]] = {}
    for b in old:
        by_rack.setdefault(f"rack-{b % 3}", []).append(b)
    racks = sorted(by_rack)
    placed = []
    for index in range(partitions):
        chosen = rng.sample(racks, 3)
        replicas = tuple(rng.choice(by_rack[r]) for r in chosen)
        hot = 10.0 if index % 10 == 0 else 1.0
        load = PartitionLoad(hot * rng.uniform(0.5, 1.5) * 1e5, hot * rng.uniform(0.5, 1.5) * 1e5,
                             rng.uniform(0.5, 1.5) * 1e9, hot * 0.001)
        placed.append(PartitionInfo(f"topic-{index % 50}", index, replicas, replicas[0], load, 2))
    return infos, placed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000x6,10000x12")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--max-actions", type=int, default=5000)
    args = parser.parse_args()
    print(f"balancer planner — {platform.node()} {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}, load average {os.getloadavg()[0]:.2f}, max actions {args.max_actions}")
    for size in args.sizes.split(","):
        partitions, brokers = (int(x) for x in size.split("x"))
        walls, cpus = [], []
        for run in range(args.repeat):
            infos, placed = skewed_cluster(partitions, brokers, seed=run)
            wall0, cpu0 = time.perf_counter(), time.process_time()
            result = plan(infos, placed, max_actions=args.max_actions)
            walls.append(time.perf_counter() - wall0)
            cpus.append(time.process_time() - cpu0)
        new = brokers
        before, after = result.before[new], result.after[new]
        nw = [result.after[b].load[Resource.NW_IN] for b in result.after]
        mean = sum(nw) / len(nw)
        print(f"  {partitions:,} partitions x {brokers} brokers: plan in {statistics.median(walls):.2f} s "
              f"(worst {max(walls):.2f} s, CPU {statistics.median(cpus):.2f} s), {len(result.actions)} actions, "
              f"{len(result.proposals)} partitions changed, {result.bytes_to_move / 1e9:.1f} GB to copy"
              f"{', truncated by the action budget' if result.truncated else ''}")
        print(f"    new broker {new}: replicas {before.replicas} -> {after.replicas} "
              f"(mean {3 * partitions / brokers:.0f}), leaders {before.leaders} -> {after.leaders} "
              f"(mean {partitions / brokers:.0f}); bytes in per broker after: "
              f"{min(nw) / mean:.0%}..{max(nw) / mean:.0%} of the mean")


if __name__ == "__main__":
    main()
