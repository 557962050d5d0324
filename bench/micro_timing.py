"""Timing of small functions for the micro benchmarks (codec_bench, record_decode_bench): how many
calls make a measurement, the CPU and wall time per call, and a before/after of two checkouts
measured one process per checkout and round."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

Action = Callable[[], object]
# Per (row label, checkout name): one figure in µs per round.
Figures = dict[tuple[str, str], list[float]]


def calls_for(action: Action, seconds: float) -> int:
    """How many calls of `action` take about `seconds` of CPU time."""
    calls = 16
    while True:
        start = time.process_time()
        for _ in range(calls):
            action()
        spent = time.process_time() - start
        if spent >= seconds / 4 or calls >= 50_000_000:
            return max(1, int(calls * seconds / max(spent, 1e-9)))
        calls *= 4


def time_calls(action: Action, calls: int) -> tuple[float, float]:
    """(CPU µs, wall µs) per call over `calls` calls."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        action()
    return ((time.process_time() - cpu) / calls * 1e6, (time.perf_counter() - wall) / calls * 1e6)


def checkout_figures(script: Path, other: Path, rounds: int, args: list[str]) -> tuple[dict[str, Path], Figures, Figures]:
    """Run `script` with `args` once per checkout and round, `other` as "before" and the checkout
    holding `script` as "after", each with its own src/ first on PYTHONPATH and the checkout that
    goes first alternating between rounds. The script prints {"module": the roost module it
    imported, "rows": {label: [CPU µs, wall µs]}}; returns the trees and the CPU and wall figures."""
    trees = {"before": other.resolve(), "after": script.resolve().parent.parent}
    cpu: Figures = {}
    wall: Figures = {}
    for round_index in range(rounds):
        for name in (list(trees) if round_index % 2 == 0 else list(reversed(trees))):
            env = {**os.environ, "PYTHONPATH": str(trees[name] / "src")}
            result = subprocess.run([sys.executable, str(script.resolve()), *args], env=env, capture_output=True,
                                    text=True, check=True, timeout=600)
            figures = json.loads(result.stdout)
            assert figures["module"].startswith(str(trees[name])), figures["module"]
            for label, (cpu_us, wall_us) in figures["rows"].items():
                cpu.setdefault((label, name), []).append(cpu_us)
                wall.setdefault((label, name), []).append(wall_us)
    return trees, cpu, wall
