#!/usr/bin/env python3
"""Soak the raft core in the deterministic simulator over a range of seeds.

    python scripts/raft_soak.py --seeds 1..500 --steps 20000 [--members 3|5|both]

Each seed runs a whole ensemble through `--steps` events of chaos (drops, duplicates, delays,
partitions, crashes and restarts), then heals everything and checks liveness. A failing seed prints
its violation and a replay command; the exit status is the number of failing seeds (capped at 100).
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.sim.cluster import Cluster


def parse_range(text: str) -> range:
    low, sep, high = text.partition("..")
    return range(int(low), int(high if sep else low) + 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=parse_range, default=parse_range("1..100"), help="A..B, inclusive")
    parser.add_argument("--steps", type=int, default=10_000, help="chaos events per seed")
    parser.add_argument("--members", choices=["1", "3", "5", "both"], default="both")
    args = parser.parse_args()
    sizes = [3, 5] if args.members == "both" else [int(args.members)]
    failures = 0
    started = time.monotonic()
    runs = 0
    for seed in args.seeds:
        for size in sizes:
            runs += 1
            cluster = Cluster(seed, members=size)
            try:
                cluster.run(args.steps)
                cluster.run_liveness()
            except AssertionError as exc:
                failures += 1
                print(f"FAIL seed={seed} members={size}: {exc}", flush=True)
                traceback.print_exc()
                print(f"  replay: python scripts/raft_soak.py --seeds {seed}..{seed} --members {size} "
                      f"--steps {args.steps}", flush=True)
                continue
            print(f"ok   seed={seed} members={size} terms={len(cluster.leaders)} "
                  f"commit={cluster.max_commit} acknowledged={len(cluster.acknowledged)} "
                  f"time={cluster.now}", flush=True)
    print(f"{runs - failures} passed, {failures} failed in {time.monotonic() - started:.1f}s")
    return min(failures, 100)


if __name__ == "__main__":
    sys.exit(main())
