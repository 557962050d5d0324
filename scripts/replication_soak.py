#!/usr/bin/env python3
"""Soak Roost's replication (controller core, replica manager, fetchers, ISR, logs) in the
deterministic simulation (tests/sim/replication) over many seeds.

    python scripts/replication_soak.py --seeds 1..2000 --steps 8000 --time-limit 3600
    python scripts/replication_soak.py --seed 1234 --steps 5170 --verbose     # replay one seed
    python scripts/replication_soak.py --seeds 1..50 --bug truncate-to-hw     # a seeded bug

Each seed runs `--steps` events of chaos (crashes, power losses, restarts, ZooKeeper session
expiries, controller failover, partitions, delayed/dropped/reordered messages, controlled
shutdowns, preferred elections) with the invariants checked after every step, then (unless
--no-liveness) heals everything and checks that the cluster converges. A failing seed prints the
violation, the transcript's tail and the replay command. Bounded: at most the seeds given, and it
stops starting new seeds after --time-limit seconds. The exit status is the number of failing
seeds (capped at 100); with --bug, the run stops at the first seed that catches the bug.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.sim.replication.bugs import BUGS, seeded
from tests.sim.replication.cluster import Cluster, SimulationFailure


def parse_range(text: str) -> range:
    low, sep, high = text.partition("..")
    return range(int(low), int(high if sep else low) + 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=parse_range, default=parse_range("1..200"), help="A..B, inclusive")
    parser.add_argument("--seed", type=int, help="one seed (overrides --seeds)")
    parser.add_argument("--steps", type=int, default=8000, help="chaos events per seed")
    parser.add_argument("--brokers", type=int, choices=[3, 4, 5], help="default: drawn per seed")
    parser.add_argument("--bug", choices=sorted(BUGS), help="seed a known bug; stop at the first seed catching it")
    parser.add_argument("--power-loss-without-fsync", action="store_true",
                        help="power losses also where topics do not fsync before acknowledging (loses acked writes, "
                             "as Kafka's ZooKeeper mode does)")
    parser.add_argument("--fast-detection", action="store_true",
                        help="the fast failure detection's signals too: killed brokers seen dead at once, and "
                             "false verdicts on live brokers and controllers (controller/liveness.py)")
    parser.add_argument("--no-liveness", action="store_true", help="skip the heal-and-converge phase")
    parser.add_argument("--first-failure", action="store_true", help="stop at the first failing seed")
    parser.add_argument("--time-limit", type=float, default=600.0, help="seconds; no new seed starts after it")
    parser.add_argument("--verbose", action="store_true", help="print the transcript as it happens")
    args = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL)  # the brokers' own log lines: the transcript says enough
    seeds = range(args.seed, args.seed + 1) if args.seed is not None else args.seeds
    started = time.monotonic()
    failures: list[int] = []
    totals: Counter[str] = Counter()
    runs = 0
    for seed in seeds:
        if time.monotonic() - started > args.time_limit:
            print(f"time limit reached after {runs} seeds", flush=True)
            break
        runs += 1
        extra = (f" --bug {args.bug}" if args.bug else "") + (" --no-liveness" if args.no_liveness else "") \
            + (f" --brokers {args.brokers}" if args.brokers else "") \
            + (" --power-loss-without-fsync" if args.power_loss_without_fsync else "") \
            + (" --fast-detection" if args.fast_detection else "")
        with seeded(args.bug), Cluster(seed, brokers=args.brokers, verbose=args.verbose,
                                       power_loss_without_fsync=args.power_loss_without_fsync,
                                       fast_detection=args.fast_detection) as cluster:
            cluster.replay_extra = extra
            try:
                cluster.run(args.steps)
                if not args.no_liveness:
                    cluster.run_liveness()
            except SimulationFailure as failure:
                failures.append(seed)
                print(f"FAIL seed={seed}: {failure}", flush=True)
                if args.bug or args.first_failure:
                    break
                continue
            totals["acknowledged"] += cluster.checker.acknowledged
            totals["state_writes"] += cluster.checker.state_writes
            totals["truncations"] += cluster.stats["truncations"]
            totals["restarts"] += sum(cluster.incarnations.values()) - len(cluster.broker_ids)
            totals["controller_epochs"] += cluster.checker.controller_epoch
            print(f"ok   {cluster.summary()}", flush=True)
    elapsed = time.monotonic() - started
    print(f"{runs - len(failures)} passed, {len(failures)} failed in {elapsed:.1f}s "
          f"({args.steps} steps per seed{', bug ' + args.bug if args.bug else ''}"
          f"); totals {dict(totals)}"
          + (f"; failing seeds {failures}" if failures else ""), flush=True)
    if args.bug:
        print("the seeded bug was caught" if failures else "the seeded bug was NOT caught", flush=True)
        return 0 if failures else 1
    return min(len(failures), 100)


if __name__ == "__main__":
    sys.exit(main())
