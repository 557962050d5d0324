"""Long transaction chaos runs against a real local cluster (3 brokers, 1 keeper; issue 20): a
consume-transform-produce application (its own process) works through kill -9 of its transaction
coordinator's broker, of an output partition's leader and of itself, in the middle of
transactions; then the read_committed output must hold every input record exactly once, no
transaction may stay open, and no output partition's LSO may ever have gone back. Bounded by
--rounds and --minutes; prints every round and the seed to replay a failure with.

    .venv/bin/python scripts/txn_chaos.py --rounds 30 --seed 1
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.cluster.txn_chaos import CLUSTER_SETTINGS, TxnChaosReport, run_txn_chaos
from tests.support.cluster import LocalCluster
from tests.support.procs import run_this_checkout


def summary(report: TxnChaosReport, seconds: float) -> str:
    return (f"OK: {len(report.rounds)} rounds ({report.mid_transaction} struck a transaction in flight), "
            f"{report.records} input records each once in the committed output; {report.aborted_output} "
            f"aborted output records skipped by read_committed; application started {report.app_starts} times "
            f"(exits {report.app_exits}, {report.app_aborts} aborts of its own); no transaction left open; "
            f"{report.lso_samples} LSO samples never went back; {seconds:.0f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=30.0, help="stop starting rounds after this long")
    parser.add_argument("--records", type=int, default=1000, help="input records written before the rounds")
    parser.add_argument("--rate", type=int, default=100, help="input records per second added during the rounds")
    parser.add_argument("--keep", action="store_true", help="keep the cluster's directory (logs) after the run")
    args = parser.parse_args()
    run_this_checkout()
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="roost-txn-chaos-"))
    print(f"seed {args.seed}; logs under {root}", flush=True)
    cluster = LocalCluster.start(root, brokers=3, keepers=1, settings=CLUSTER_SETTINGS)
    try:
        report = run_txn_chaos(cluster, rounds=args.rounds, seed=args.seed, records=args.records, rate=args.rate,
                               deadline_s=args.minutes * 60, say=lambda line: print(line, flush=True))
    except AssertionError as failure:
        print(f"FAILED: {failure}\nreplay: .venv/bin/python scripts/txn_chaos.py --rounds {args.rounds} "
              f"--seed {args.seed} --records {args.records} --rate {args.rate}", flush=True)
        keep_logs(cluster, root)
        return 1
    finally:
        cluster.close()
    print(summary(report, time.monotonic() - started), flush=True)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


def keep_logs(cluster: LocalCluster, root: Path) -> None:
    """The brokers' output (killed incarnations' is already there), next to the application's
    logs, for the failure's story."""
    for broker_id in cluster.brokers:
        (root / f"broker-{broker_id}.out").write_text(cluster.broker_output(broker_id))
    print(f"logs kept under {root}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
