"""Free space on the disks a server writes to, in /metrics, with a warning before they fill.

A full disk takes a broker's log directory offline and stops a keeper's writes (see
docs/hostile-storage.md), so an operator should hear of it before: each directory's free and total
bytes, and a 0/1 gauge that turns 1 once the free share falls below the warning ratio (the broker's
`log.dir.free.space.warn.ratio`, 0.1 for a keeper's data directory). The crossing is logged once,
when the gauge turns, not on every scrape.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric

log = logging.getLogger("roost.metrics.disk_space")

KEEPER_WARN_RATIO = 0.1


def space_low(free: int, total: int, warn_ratio: float) -> bool:
    """True when `free` of `total` bytes is below the warning share (an unknown size is not low)."""
    assert 0.0 <= warn_ratio <= 1.0, warn_ratio
    return total > 0 and free < total * warn_ratio


@dataclass
class SpaceWatch:
    """The free-space series of some directories; remembers which were low, to log each crossing once."""

    prefix: str  # the series' names start with it: roost_log_dir, roost_keeper_data_dir
    what: str  # in the help text and the log: "log directory", "keeper data directory"
    _low: set[str] = field(default_factory=set)

    def collect(self, directories: Iterable[Path], warn_ratio: float) -> Iterator[Metric]:
        free_bytes = GaugeMetricFamily(f"{self.prefix}_free_bytes", f"Bytes free on the {self.what}'s disk",
                                       labels=["directory"])
        total_bytes = GaugeMetricFamily(f"{self.prefix}_total_bytes", f"Size of the {self.what}'s disk",
                                        labels=["directory"])
        low = GaugeMetricFamily(f"{self.prefix}_free_space_low",
                                f"1 when the {self.what}'s free share is below {warn_ratio:g}",
                                labels=["directory"])
        for directory in directories:
            name = str(directory)
            try:
                usage = shutil.disk_usage(directory)
            except OSError:
                continue  # a failed or missing directory: its offline gauge says so
            is_low = space_low(usage.free, usage.total, warn_ratio)
            self._crossed(name, is_low, usage.free, usage.total)
            free_bytes.add_metric([name], usage.free)
            total_bytes.add_metric([name], usage.total)
            low.add_metric([name], 1 if is_low else 0)
        yield free_bytes
        yield total_bytes
        yield low

    def _crossed(self, name: str, is_low: bool, free: int, total: int) -> None:
        if is_low and name not in self._low:
            self._low.add(name)
            log.warning("%s %s is nearly full: %d of %d bytes free; a full disk takes it offline",
                        self.what, name, free, total)
        elif not is_low and name in self._low:
            self._low.discard(name)
            log.info("%s %s has space again: %d of %d bytes free", self.what, name, free, total)
