"""Crash safety of compaction: a pass cut short at any rename or delete leaves, after reopening,
a log that holds either the old or the new form of every segment, loses nothing that should
survive, and cleans completely on the next pass."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from roost.log import LogConfig, PartitionLog
from roost.log.files import TEMP_SUFFIX
from tests.log.compaction_checks import Appended, append_records, check_compacted_view, check_fully_compacted
from tests.log.conftest import FakeClock, abandon

CONFIG = LogConfig(segment_bytes=1_000, index_interval_bytes=120)
RETENTION = 10_000


class InjectedCrash(Exception):
    pass


@contextmanager
def crash_at(step: int | None) -> Iterator[list[str]]:
    """Count every os.replace and os.unlink (Path.unlink uses it); raise at call `step`."""
    calls: list[str] = []
    real = {"replace": os.replace, "unlink": os.unlink}

    def wrap(name: str) -> Callable[..., None]:
        def fake(*args: object, **kwargs: object) -> None:
            calls.append(f"{name} {Path(str(args[0])).name}")
            if step is not None and len(calls) - 1 == step:
                raise InjectedCrash(calls[-1])
            real[name](*args, **kwargs)  # type: ignore[operator]

        return fake

    os.replace, os.unlink = wrap("replace"), wrap("unlink")  # type: ignore[assignment]
    try:
        yield calls
    finally:
        os.replace, os.unlink = real["replace"], real["unlink"]  # type: ignore[assignment]


def _prepared_log(directory: Path, clock: FakeClock, *, flushed: bool) -> tuple[PartitionLog, list[Appended]]:
    """A log that one pass has cleaned already (leaving small segments), then more writes: the
    next pass merges small old segments, removes superseded values and an old tombstone, and
    empties some segments completely."""
    log = PartitionLog.open(directory, CONFIG, clock)
    appended: list[Appended] = []
    for n in range(60):
        key = b"unique-%d" % n if n % 4 == 0 else b"shared-%d" % (n % 3)
        appended += append_records(log, [(key, b"v%d-" % n + b"x" * 60, clock.now_ms)])
        if n % 10 == 0:
            appended += append_records(log, [(None, b"keyless-%d" % n, clock.now_ms)])
        clock.advance(100)
    appended += append_records(log, [(b"unique-0", None, clock.now_ms)])
    log.clean(clock.now_ms, delete_retention_ms=RETENTION)
    for n in range(60, 90):
        appended += append_records(log, [(b"shared-%d" % (n % 3), b"v%d-" % n + b"y" * 60, clock.now_ms)])
        clock.advance(100)
    appended += append_records(log, [(b"unique-4", None, clock.now_ms)])
    for n in range(90, 105):
        appended += append_records(log, [(b"tail", b"v%d-" % n + b"z" * 60, clock.now_ms)])
    clock.advance(2 * RETENTION)
    if flushed:
        log.flush()
    return log, appended


def _first_of_each_kind(steps: list[str]) -> Iterator[int]:
    seen: set[tuple[str, str]] = set()
    previous = ""
    for n, step in enumerate(steps):
        kind = re.sub(r"\d{20}", "N", step)
        if (previous, kind) not in seen:
            seen.add((previous, kind))
            yield n
        previous = kind


@pytest.mark.parametrize("flushed", [True, False], ids=["flushed", "unflushed"])
def test_a_pass_cut_short_at_every_step_loses_nothing(
    tmp_path: Path, flushed: bool, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    log, appended = _prepared_log(tmp_path / "reference-0", clock, flushed=flushed)
    with crash_at(None) as steps:
        stats = log.clean(clock.now_ms, delete_retention_ms=RETENTION)
    assert stats.cleaned and stats.tombstones_removed == 2
    horizon = clock.now_ms - RETENTION
    check_compacted_view(log, appended, tombstone_horizon_ms=horizon)
    log.close()
    # Every kind of step is there: index removal, the renames of a swap, deletions of merged
    # and of emptied segments and of unused temp files, the checkpoint's rename.
    kinds = {step.split(".")[-1] for step in steps}
    assert {"index", "timeindex", "log", "tmp"} <= kinds, steps
    # Steps of the same kind after a step of the same kind (say, deleting the .index of a merged
    # segment after deleting its .log) leave alike states: cut short once at each such pair.
    interesting = list(_first_of_each_kind(steps))
    assert len(interesting) >= 10

    caplog.set_level(logging.WARNING, logger="roost.log")
    for step in interesting:
        clock = FakeClock()
        directory = tmp_path / f"crash-{step}-0"
        log, appended = _prepared_log(directory, clock, flushed=flushed)
        with crash_at(step), pytest.raises(InjectedCrash):
            log.clean(clock.now_ms, delete_retention_ms=RETENTION)
        # The object that failed still serves its old view, and refuses to clean again.
        check_compacted_view(log, appended, tombstone_horizon_ms=horizon)
        assert not log.clean(clock.now_ms, delete_retention_ms=RETENTION).cleaned
        abandon(log)

        log = PartitionLog.open(directory, CONFIG, clock)
        try:
            assert not [p for p in directory.iterdir() if p.name.endswith(TEMP_SUFFIX)]
            check_compacted_view(log, appended, tombstone_horizon_ms=horizon)
            log.clean(clock.now_ms, delete_retention_ms=RETENTION, min_cleanable_ratio=0.0)
            check_compacted_view(log, appended, tombstone_horizon_ms=horizon)
            check_fully_compacted(log, appended, tombstone_horizon_ms=horizon)
        finally:
            log.close()
    # Both ways of healing a half-done swap on open were needed somewhere above.
    assert "it starts inside" in caplog.text  # segments a merged segment already holds
    assert "index files missing" in caplog.text or flushed is False  # (unflushed: all rebuilt anyway)
