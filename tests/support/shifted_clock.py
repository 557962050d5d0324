"""Run `roost` with its wall clock shifted by the test: for what only changes after minutes or days
of wall-clock time (offset expiry), without waiting for them.

    python -m tests.support.shifted_clock CLOCK_FILE up --data-dir ...

CLOCK_FILE holds a number of seconds; `time.time()` (and `time.time_ns()`) in the process return
the real time plus that many. A thread reads the file every 20 ms and, once it applies a new
value, writes it to CLOCK_FILE.seen: a test waits for that before relying on the new time. The
monotonic clock (asyncio's timers, timeouts) is left alone: only the wall clock jumps, as when an
administrator sets it. Everything else is the real `roost` command.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

POLL_SECONDS = 0.02


class ShiftedClock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen = path.with_name(path.name + ".seen")
        self.shift = 0.0
        self._real_time = time.time
        self._real_time_ns = time.time_ns
        self._apply()

    def time(self) -> float:
        return self._real_time() + self.shift

    def time_ns(self) -> int:
        return self._real_time_ns() + int(self.shift * 1e9)

    def _apply(self) -> None:
        text = self.path.read_text().strip()
        shift = float(text) if text else 0.0
        if shift != self.shift or not self.seen.exists():
            self.shift = shift
            self.seen.write_text(text)

    def follow(self) -> None:
        while True:
            time.sleep(POLL_SECONDS)
            try:
                self._apply()
            except (OSError, ValueError):
                continue  # caught the test mid-write: read it again next time


def write_shift(path: Path, seconds: float) -> None:
    """Set the shift (from the test); `applied` tells when the process uses it."""
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(repr(float(seconds)))
    temp.replace(path)


def applied(path: Path, seconds: float) -> bool:
    seen = path.with_name(path.name + ".seen")
    try:
        return float(seen.read_text()) == float(seconds)
    except (OSError, ValueError):
        return False


def main() -> None:
    clock = ShiftedClock(Path(sys.argv[1]))
    time.time = clock.time  # before roost is imported, so that every module sees the shifted clock
    time.time_ns = clock.time_ns
    threading.Thread(target=clock.follow, daemon=True).start()
    from roost.cli.main import main as roost_main

    sys.exit(roost_main(sys.argv[2:]))


if __name__ == "__main__":
    main()
