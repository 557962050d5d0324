#!/usr/bin/env python3
"""Run mypy over src/roost and hold it to the baseline: new errors fail, fixed ones must leave it.

The packages `[tool.mypy]` in pyproject.toml checks strictly (raft, keeper, log, wire and the
broker's replica, txn and group) must have no error at all: the baseline may not name them. The
rest of src/roost may keep the errors listed in `mypy-baseline.txt`, which only ever shrinks:

- an error mypy reports that the baseline does not list fails the run (fix it, or, where mypy is
  wrong, `# type: ignore[code]  # why`: mypy's `ignore-without-code` and `unused-ignore` checks
  keep every ignore named and needed);
- an error the baseline lists that mypy no longer reports fails the run too, until
  `--shrink` removes it from the file (so the file is always what is left to fix);
- `--shrink` only removes lines; nothing here adds one. A baseline that grows is a hand edit a
  reviewer sees.

An error is matched by file, error code and message, not by line number, so edits above an old
error do not make it new. mypy's cache is `.mypy_cache` (gitignored): a warm run takes seconds.

    .venv/bin/python scripts/type_check.py            # what `make test` runs
    .venv/bin/python scripts/type_check.py --shrink   # drop what was fixed from the baseline
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASELINE = REPO / "mypy-baseline.txt"
# The strict packages (pyproject.toml's [[tool.mypy.overrides]] with strict = true): no baseline.
STRICT = ("src/roost/raft/", "src/roost/keeper/", "src/roost/log/", "src/roost/wire/",
          "src/roost/broker/replica/", "src/roost/broker/txn/", "src/roost/broker/group/")
ERROR = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+)(?::\d+)?: error: (?P<message>.*?)(?:  \[(?P<code>[a-z-]+)\])?$")


def run_mypy() -> list[str]:
    """The error lines of mypy's output."""
    command = [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml")]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    output = done.stdout + done.stderr
    if done.returncode not in (0, 1):  # 2: mypy itself failed (a crash, a bad config)
        sys.exit(f"mypy failed (exit {done.returncode}):\n{output}")
    return [line for line in output.splitlines() if ERROR.match(line)]


def key(line: str) -> str:
    """An error without its line number: `file: [code] message`."""
    match = ERROR.match(line)
    assert match is not None
    return f"{match['file']}: [{match['code'] or 'misc'}] {match['message']}"


def read_baseline() -> Counter[str]:
    if not BASELINE.exists():
        return Counter()
    return Counter(line for line in BASELINE.read_text().splitlines() if line and not line.startswith("#"))


def write_baseline(entries: Counter[str]) -> None:
    header = ("# mypy errors left to fix outside the strict packages (scripts/type_check.py).\n"
              "# This file only shrinks: `scripts/type_check.py --shrink` removes what was fixed.\n")
    BASELINE.write_text(header + "".join(f"{entry}\n" for entry in sorted(entries.elements())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shrink", action="store_true", help="remove the errors fixed from the baseline")
    args = parser.parse_args(argv)
    started = time.monotonic()
    lines = run_mypy()
    found = Counter(key(line) for line in lines)
    baseline = read_baseline()
    problems: list[str] = []
    strict_listed = [entry for entry in baseline if entry.startswith(STRICT)]
    if strict_listed:
        problems.append("the baseline names errors in strict packages (they must be fixed, not listed):\n  "
                        + "\n  ".join(strict_listed))
    new = found - baseline
    fixed = baseline - found
    if new:
        shown = [line for line in lines if key(line) in new]
        problems.append(f"{sum(new.values())} new mypy error(s) (not in {BASELINE.name}):\n  " + "\n  ".join(shown))
    if fixed and args.shrink:
        write_baseline(baseline - fixed)
        print(f"{BASELINE.name}: {sum(fixed.values())} fixed error(s) removed, {sum((baseline - fixed).values())} left")
    elif fixed:
        problems.append(f"{sum(fixed.values())} error(s) in {BASELINE.name} are fixed; run "
                        "scripts/type_check.py --shrink to remove them:\n  " + "\n  ".join(sorted(fixed)))
    elapsed = time.monotonic() - started
    if problems:
        print("\n\n".join(problems))
        print(f"type check failed ({elapsed:.1f} s)")
        return 1
    print(f"type check: no new errors; {sum(baseline.values()) - sum(fixed.values())} left in "
          f"{BASELINE.name} ({elapsed:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
