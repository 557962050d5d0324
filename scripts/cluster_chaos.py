"""Long chaos runs against a real local cluster (3 brokers, 1 keeper): kill -9 or SIGTERM random
brokers (the controller among them) and restart them, while a producer (acks=all, idempotent) and
a consumer group work; then check that nothing acknowledged was lost, order per key held, and no
committed group offset went back. Bounded by --rounds and --minutes; prints every round and the
seed to replay a failure with.

    .venv/bin/python scripts/cluster_chaos.py --rounds 50 --seed 1
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.cluster.chaos import run_chaos
from tests.support.cluster import LocalCluster


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=30.0, help="stop starting rounds after this long")
    parser.add_argument("--rate", type=int, default=1000, help="messages per second offered")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="roost-chaos-") as root:
        cluster = LocalCluster.start(Path(root), brokers=3, keepers=1)
        try:
            report = run_chaos(cluster, rounds=args.rounds, seed=args.seed, rate=args.rate,
                               deadline_s=args.minutes * 60, say=lambda line: print(line, flush=True))
        except AssertionError as failure:
            print(f"FAILED: {failure}\nreplay: .venv/bin/python scripts/cluster_chaos.py --rounds {args.rounds} "
                  f"--seed {args.seed}", flush=True)
            return 1
        finally:
            cluster.close()
    print(f"OK: {len(report.rounds)} rounds, {report.acked} messages acknowledged, none lost, order per key "
          f"kept, {report.offsets_checked} committed-offset samples never went back; "
          f"{time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
