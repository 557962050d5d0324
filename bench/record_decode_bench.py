"""Micro benchmark of the three pure-Python walks over a batch's records, which share one zigzag
varint reader: `records.decode_batch_records` (Record objects), the cleaner's `summarize_batch`
(offset, key, tombstone, timestamp) and `record_columns.decode_records_into_py` (column buffers;
the reference of the compiled twin, called directly so the twin plays no part). Prints figures
with their conditions; never asserts on them.

    .venv/bin/python bench/record_decode_bench.py [--rounds 5] [--seconds 0.2]
    .venv/bin/python bench/record_decode_bench.py --compare-with /path/to/other/checkout

Two uncompressed batches of 1,000 records, no headers: "small" (8 B keys, 20 B values: every
varint but the offset deltas past 63 is one byte) and "wide" (8 B keys, 200 B values, timestamps
a few seconds apart: two- and three-byte varints). A figure is the median over the rounds of the
CPU time (time.process_time) of one call, in microseconds, wall clock in brackets.

`--compare-with DIR` times `DIR/src` ("before") against this checkout's src ("after"), one process
per checkout and round, the checkout that goes first alternating between rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from micro_timing import Action, calls_for, checkout_figures, time_calls  # a sibling module


def _batches() -> dict[str, bytes]:
    from roost.wire.kafka.records import Record, build_batch

    small = [(b"key-%04d" % (i % 1000), b"value-%014d" % i) for i in range(1000)]
    wide = [Record(b"key-%04d" % (i % 1000), bytes(200), timestamp=1_700_000_000_000 + i * 3_001)
            for i in range(1000)]
    return {"small": build_batch(small, timestamp_ms=1_700_000_000_000),
            "wide": build_batch(wide, timestamp_ms=1_700_000_000_000)}


def _actions() -> dict[str, Action]:
    from roost.log.cleaner_rules import summarize_batch
    from roost.wire.kafka.record_columns import RecordColumns, decode_records_into_py
    from roost.wire.kafka.records import HEADER_SIZE, decode_batch_records, parse_header

    actions: dict[str, Action] = {}
    for shape, batch in _batches().items():
        header = parse_header(batch)
        view = memoryview(batch)
        data = batch[HEADER_SIZE:]
        actions[f"decode_batch_records {shape}"] = lambda batch=batch: decode_batch_records(batch)
        actions[f"cleaner summarize_batch {shape}"] = lambda header=header, view=view: summarize_batch(header, view)
        actions[f"record_columns (pure) {shape}"] = (
            lambda header=header, data=data: decode_records_into_py(RecordColumns(), header, data, 0, 1 << 62))
    for label, action in actions.items():
        result = action()
        count = result if isinstance(result, int) else len(result)  # type: ignore[arg-type]
        assert count == 1000, f"{label}: {count} records"
    return actions


def measure(rounds: int, seconds: float) -> dict[str, tuple[float, float]]:
    """Median (CPU µs, wall µs) per call of every action over `rounds` rounds."""
    actions = _actions()
    calls = {label: calls_for(action, seconds) for label, action in actions.items()}
    figures: dict[str, list[tuple[float, float]]] = {label: [] for label in actions}
    for _ in range(rounds):
        for label, action in actions.items():
            figures[label].append(time_calls(action, calls[label]))
    return {label: (statistics.median(f[0] for f in values), statistics.median(f[1] for f in values))
            for label, values in figures.items()}


def _conditions(what: str) -> None:
    load = os.getloadavg()
    print(f"Record walks over a batch of 1,000 records, µs per batch ({what}; CPU time, wall clock in brackets)")
    print(f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")


def compare_checkouts(other: Path, rounds: int, seconds: float) -> None:
    trees, cpu, wall = checkout_figures(Path(__file__), other, rounds,
                                        ["--json", "--rounds", "1", "--seconds", str(seconds)])
    _conditions(f"{trees['before']} vs {trees['after']}, median of {rounds} alternating rounds, "
                "one process per checkout and round")
    labels = sorted({label for label, _ in cpu})
    width = max(map(len, labels))
    print(f"{'':{width}}  {'before':>17}  {'after':>17}  {'after/before':>12}")
    for label in labels:
        before, after = (statistics.median(cpu[(label, n)]) for n in trees)
        walls = [statistics.median(wall[(label, n)]) for n in trees]
        print(f"{label:{width}}  {before:8.1f} ({walls[0]:6.1f})  {after:8.1f} ({walls[1]:6.1f})  "
              f"{after / before:11.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.2, help="CPU time per measurement")
    parser.add_argument("--compare-with", type=Path, help="another checkout, measured as 'before'")
    parser.add_argument("--json", action="store_true", help="(internal) print the figures as JSON")
    args = parser.parse_args()
    if args.compare_with is not None:
        assert args.rounds >= 3, "medians of at least three rounds"
        compare_checkouts(args.compare_with, args.rounds, args.seconds)
        return
    figures = measure(args.rounds, args.seconds)
    if args.json:
        import roost

        print(json.dumps({"module": roost.__file__, "rows": figures}))
        return
    _conditions(f"this checkout, median of {args.rounds} rounds")
    width = max(map(len, figures))
    for label, (cpu_us, wall_us) in figures.items():
        print(f"{label:{width}}  {cpu_us:8.1f} ({wall_us:6.1f})")


if __name__ == "__main__":
    main()
