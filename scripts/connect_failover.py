"""The long version of tests/jvm/test_connect.py: Kafka Connect (3.9) in distributed mode on a
fresh three-broker Roost cluster, several workers, the FileStream source and sink connectors, and
rounds that each kill -9 the worker running the source task (restarting the one killed the round
before) while lines keep coming; after every round every connector and task must be RUNNING on a
live worker and the sink file must hold every source line and nothing else (FileStream is
at-least-once: a line may come twice across a kill). Needs Kafka 3.9's jars (scripts/setup.sh test).

    .venv/bin/python scripts/connect_failover.py --workers 3 --rounds 5
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

from tests.jvm import connect
from tests.jvm.programs import compiled, kafka_available
from tests.support.cluster import LocalCluster
from tests.support.procs import run_this_checkout, wait_for

CONNECTORS = ["file-source", "file-sink"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--lines", type=int, default=500, help="lines appended each round")
    parser.add_argument("--keep", action="store_true", help="keep the logs after a run that passed")
    args = parser.parse_args()
    if not kafka_available():
        print("Kafka 3.9's jars are missing: scripts/setup.sh test installs them", file=sys.stderr)
        return 2
    assert args.workers >= 2, "a kill needs a worker left"
    run_this_checkout()
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="roost-connect-failover-"))
    print(f"logs under {root}", flush=True)
    cluster = LocalCluster.start(root / "cluster", brokers=3, keepers=1,
                                 settings={"offsets.topic.num.partitions": 6})
    workers = connect.ConnectCluster(compiled(), root, cluster.bootstrap, count=args.workers)
    source, sink = root / "source.txt", root / "sink.txt"
    try:
        workers.start_all()
        connect.copy_lines(workers, source, sink, "connect-lines")
        written: list[str] = []
        down: connect.Worker | None = None
        for round_number in range(args.rounds):
            placed = wait_for(lambda: workers.placed_on(CONNECTORS, workers.alive()), 120, interval=0.5,
                              what="the connectors and tasks running")
            written += connect.append_lines(source, len(written), args.lines)
            victim = next(w for w in workers.workers if w.worker_id == placed["file-source"][1])
            assert victim.process is not None
            victim.process.kill()
            print(f"round {round_number}: killed {victim.name} (it ran the source task), "
                  f"{len(written)} lines written", flush=True)
            if down is not None:
                workers.start(down)
                workers.await_up(down)
                print(f"round {round_number}: {down.name} restarted", flush=True)
            down = victim
            written += connect.append_lines(source, len(written), args.lines)
            wait_for(lambda: workers.placed_on(CONNECTORS, workers.alive()), 120, interval=0.5,
                     what="the connectors and tasks moved to live workers")
            wait_for(lambda lines=written: set(lines) <= set(connect.sink_lines(sink)), 120, interval=0.5,
                     what="every source line in the sink file")
            copied = connect.sink_lines(sink)
            assert set(copied) == set(written), "the sink holds lines the source never had"
            print(f"round {round_number}: all {len(written)} lines in the sink "
                  f"({len(copied) - len(written)} repeated)", flush=True)
    except AssertionError as failure:
        print(f"FAILED: {failure}; logs kept under {root}")
        return 1
    finally:
        workers.close()
        cluster.close()
    print(f"OK: {args.rounds} worker kills, every line copied; {time.monotonic() - started:.0f} s")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
