"""The long version of tests/jvm/test_streams.py: a Kafka Streams word count (exactly_once_v2, a
state store, a repartition topic) on a fresh three-broker Roost cluster, through several kill -9s
of brokers mid-stream; every word's counts, read read_committed, must be exactly 1..n
(tests/jvm/streams_eos.py). Needs Kafka 3.9's jars (scripts/setup.sh test).

    .venv/bin/python scripts/streams_eos.py --records 30000 --kills 5
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

from tests.jvm import streams_eos
from tests.jvm.programs import compiled, kafka_available
from tests.support.cluster import LocalCluster
from tests.support.procs import run_this_checkout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--words", type=int, default=200)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the cluster's directory (logs) after the run")
    args = parser.parse_args()
    if not kafka_available():
        print("Kafka 3.9's jars are missing: scripts/setup.sh test installs them", file=sys.stderr)
        return 2
    run_this_checkout()
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="roost-streams-eos-"))
    print(f"logs under {root}", flush=True)
    # As tests/jvm/conftest.py's cluster: few internal partitions (50 transaction-state partitions
    # at RF 3 take a loaded machine past the Streams producer's 60 s InitProducerId timeout).
    cluster = LocalCluster.start(root / "cluster", brokers=3, keepers=1,
                                 settings={"offsets.topic.num.partitions": 6,
                                           "transaction.state.log.num.partitions": 3})
    try:
        outcome = streams_eos.run(cluster, compiled(), root, records=args.records, words=args.words,
                                  kills=args.kills, app_id="eos-long", settle_timeout=600,
                                  log=lambda line: print(line, flush=True))
    finally:
        cluster.close()
    problems = outcome.problems()
    seconds = time.monotonic() - started
    if problems:
        print(f"FAILED: {len(problems)} words not exactly once (brokers killed: {outcome.killed}):")
        for line in problems[:20]:
            print("  " + line)
        print(f"logs kept under {root}")
        return 1
    print(f"OK: {args.records} records over {args.words} words counted exactly once through "
          f"{len(outcome.killed)} broker kills {outcome.killed}; {seconds:.0f} s")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
