#!/usr/bin/env python3
"""Share groups under kill -9 (roost.testing.faults.share_run): a keeper and three brokers in network
namespaces, share consumers (explicit acknowledgement, commit_sync) taking records a producer
appends, while the data partition's leader and the share coordinator's broker are killed in turn
with acknowledgements in flight. Then quiescence, and the share-group checker
(roost.testing.history.share): no record whose accept or reject was answered is delivered again,
none acknowledged-produced is lost, delivery counts never go down. Bounded by --kills and --minutes.

    sudo .venv/bin/python scripts/share_chaos.py --kills 12 --minutes 10 --seed 1 --out runs/share-1

Prints the figures (records, kills per role, redeliveries, acknowledgements by answer, the
verdict). Exit status 0 valid, 1 a violation, 2 no quiescence (undecided), 77 no namespaces here.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from roost.testing.faults.netns import why_unavailable
from roost.testing.faults.share_run import run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=12, help="kills in all, alternating the two roles")
    parser.add_argument("--minutes", type=float, default=10.0, help="stop starting kills after this long")
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--rate", type=float, default=100.0, help="records/s the producer offers")
    parser.add_argument("--out", type=Path, default=None, help="output directory (default runs/share-SEED)")
    args = parser.parse_args()
    why = why_unavailable()
    if why:
        print(f"share_chaos: cannot run here: {why}", file=sys.stderr)
        return 77
    out = args.out or Path("runs") / f"share-{args.seed}"
    outcome = run(args.seed, args.kills, out, consumers=args.consumers, rate=args.rate,
                  hold_s=(1.0, 4.0), quiet_s=(3.0, 8.0), deadline_s=args.minutes * 60,
                  say=lambda line: print(line, flush=True))
    stats = outcome.verdict.stats
    print(outcome.verdict.explain())
    print(f"seed {args.seed}: {stats['records']} records acknowledged by the brokers, kills {dict(outcome.kills)}, "
          f"{stats['deliveries']} deliveries ({stats['redeliveries']} redeliveries), {stats['accepted']} accepted, "
          f"{stats['archived']} archived; acknowledgements answered ok {stats['acks ok']}, unknown "
          f"{stats['acks unknown']}; quiesced {outcome.quiesced}; {outcome.seconds:.0f} s; "
          f"verdict {({True: 'VALID', False: 'INVALID', None: 'UNDECIDED'})[outcome.valid]}")
    print(f"report: {outcome.report}")
    return {True: 0, False: 1, None: 2}[outcome.valid]


if __name__ == "__main__":
    sys.exit(main())
