"""Throughput of the replication simulation (tests/sim/replication): simulated events ("steps")
per second of CPU time, over a few fixed seeds with the chaos nemesis.

    .venv/bin/python bench/replication_sim_bench.py                        # this checkout
    .venv/bin/python bench/replication_sim_bench.py --before /work/main     # before/after, one run

With --before, each round runs the script once per checkout (each with its own src/ and tests/
first on the path, the order alternating between rounds) and prints both checkouts' figures.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def measure(seeds: list[int], steps: int) -> dict[str, float]:
    from tests.sim.replication.cluster import Cluster

    logging.disable(logging.CRITICAL)
    total_steps = 0
    cpu = time.process_time()
    wall = time.perf_counter()
    for seed in seeds:
        with Cluster(seed) as cluster:
            cluster.run(steps)
            total_steps += cluster.world.steps
    cpu = time.process_time() - cpu
    wall = time.perf_counter() - wall
    import roost

    return {"module": roost.__file__, "steps": total_steps, "cpu_s": cpu, "wall_s": wall,
            "steps_per_cpu_s": total_steps / cpu, "seeds_per_cpu_s": len(seeds) / cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=4, help="seeds 1..N")
    parser.add_argument("--steps", type=int, default=6000, help="steps per seed (the CI figure)")
    parser.add_argument("--before", type=Path, help="another checkout to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="(internal) one measurement as JSON")
    args = parser.parse_args()
    seeds = list(range(1, args.seeds + 1))
    if args.json or args.before is None:
        figures = measure(seeds, args.steps)
        print(json.dumps(figures) if args.json else
              f"{figures['steps']} steps in {figures['cpu_s']:.2f} s CPU ({figures['wall_s']:.2f} s wall): "
              f"{figures['steps_per_cpu_s']:.0f} steps/s CPU, {figures['seeds_per_cpu_s']:.3f} seeds/s "
              f"({len(seeds)} seeds x {args.steps} steps)")
        return
    trees = {"before": args.before.resolve(), "after": Path(__file__).resolve().parent.parent}
    rates: dict[str, list[float]] = {name: [] for name in trees}
    for round_index in range(args.rounds):
        for name in (list(trees) if round_index % 2 == 0 else list(reversed(trees))):
            tree = trees[name]
            env = {**os.environ, "PYTHONPATH": f"{tree / 'src'}{os.pathsep}{tree}"}
            # The script of the checkout measured (its tests/ is the simulation measured).
            # This script, measuring the checkout's simulation (its tests/ and src/ first on the path).
            result = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--json", "--seeds", str(args.seeds),
                                     "--steps", str(args.steps)], env=env, cwd=tree, capture_output=True, text=True,
                                    check=True, timeout=1800)
            figures = json.loads(result.stdout)
            assert figures["module"].startswith(str(tree)), figures["module"]
            rates[name].append(figures["steps_per_cpu_s"])
            print(f"round {round_index + 1} {name:6} {figures['steps']} steps, {figures['cpu_s']:.2f} s CPU: "
                  f"{figures['steps_per_cpu_s']:.0f} steps/s", flush=True)
    for name, values in rates.items():
        print(f"{name:6} median {statistics.median(values):.0f} steps/s CPU over {len(values)} rounds "
              f"({args.seeds} seeds x {args.steps} steps, {trees[name]})")


if __name__ == "__main__":
    main()
