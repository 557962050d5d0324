#!/usr/bin/env python3
"""Run Roost's keepers or brokers under real faults and check the history (roost.testing.faults).

    sudo .venv/bin/python scripts/fault_run.py --system keeper --seed 1 --duration 1800 --out runs/k1
    sudo .venv/bin/python scripts/fault_run.py --system broker --seed 1 --duration 1800 --out runs/b1
    sudo .venv/bin/python scripts/fault_run.py --system share --seed 1 --duration 600 --out runs/s1

Needs root, iproute2 and nftables (network namespaces); see docs/fault-testing.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from roost.testing.faults.run import main

if __name__ == "__main__":
    sys.exit(main())
