"""The offset grammar of `roost consume -o`: parsing every form, refusing bad ones with a reason,
and resolving a spec against a partition's watermarks and its offsets by time."""

from __future__ import annotations

import bisect

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roost.admin.offset_spec import (
    END,
    START,
    OffsetSpec,
    OffsetSpecError,
    Position,
    parse_duration_ms,
    parse_offset_spec,
    parse_time_ms,
    resolve,
)

NOW = 1_795_516_800_000  # 2026-11-24T10:00:00Z
HOUR = 3_600_000
T_2026_11_23_10 = 1_795_428_000_000  # 2026-11-23T10:00:00Z


@pytest.mark.parametrize(("text", "spec"), [
    ("start", OffsetSpec(START)), ("oldest", OffsetSpec(START)), ("end", OffsetSpec(END)),
    ("newest", OffsetSpec(END)),
    ("47", OffsetSpec(Position("offset", 47))),
    ("+3", OffsetSpec(Position("after_start", 3))),
    ("-3", OffsetSpec(Position("before_end", 3))),
    (":end", OffsetSpec(START, END)), (":", OffsetSpec(START, END)), ("start:end", OffsetSpec(START, END)),
    ("10:20", OffsetSpec(Position("offset", 10), Position("offset", 20))),
    ("10:", OffsetSpec(Position("offset", 10), END)),
    ("-5:end", OffsetSpec(Position("before_end", 5), END)),
    ("@1700000000000", OffsetSpec(Position("time", 1_700_000_000_000))),
    ("@-1h", OffsetSpec(Position("time", NOW - HOUR))),
    ("@-1h30m", OffsetSpec(Position("time", NOW - HOUR - 30 * 60_000))),
    ("@-30m:end", OffsetSpec(Position("time", NOW - 30 * 60_000), END)),
    ("@-30m:", OffsetSpec(Position("time", NOW - 30 * 60_000), END)),
    ("@-48h:-24h", OffsetSpec(Position("time", NOW - 48 * HOUR), Position("time", NOW - 24 * HOUR))),
    ("@2026-11-23T10:00:00Z:1h", OffsetSpec(Position("time", T_2026_11_23_10), Position("time", T_2026_11_23_10 + HOUR))),
    ("@2026-11-23T10:00:00Z", OffsetSpec(Position("time", T_2026_11_23_10))),
    ("@2026-11-23T10:00", OffsetSpec(Position("time", T_2026_11_23_10))),
    ("@2026-11-23T11:00:00+01:00", OffsetSpec(Position("time", T_2026_11_23_10))),
    ("@2026-11-23T10:00:00.250Z", OffsetSpec(Position("time", T_2026_11_23_10 + 250))),
    ("@2026-11-23", OffsetSpec(Position("time", T_2026_11_23_10 - 10 * HOUR))),
    ("@2026-11-23T10:00:00Z:2026-11-23T11:00:00Z",
     OffsetSpec(Position("time", T_2026_11_23_10), Position("time", T_2026_11_23_10 + HOUR))),
    ("@:2026-11-23", OffsetSpec(START, Position("time", T_2026_11_23_10 - 10 * HOUR))),
    ("@now", OffsetSpec(Position("time", NOW))),
])
def test_every_form_parses(text: str, spec: OffsetSpec) -> None:
    assert parse_offset_spec(text, NOW) == spec


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty"), ("first", "bad offset"), ("1.5", "bad offset"), ("@", "needs a time"),
    ("@1h", "needs a sign"), ("@yesterday", "bad time"), ("@2026-13-01", "month must be in"),
    ("3:x", "bad end"), ("@-1h:soon", "bad time"), ("@:1h", "needs a start time"), ("@-1x", "bad duration"),
])
def test_bad_specs_are_refused_with_a_reason(text: str, message: str) -> None:
    with pytest.raises(OffsetSpecError, match=message):
        parse_offset_spec(text, NOW)


def test_durations_and_times() -> None:
    assert parse_duration_ms("1d2h3m4s5ms") == 86_400_000 + 2 * HOUR + 3 * 60_000 + 4_000 + 5
    assert parse_duration_ms("1.5h") == HOUR * 3 // 2
    assert parse_time_ms("+10s", NOW) == NOW + 10_000
    assert parse_time_ms("0", NOW) == 0


def lookup(timestamps: list[int], low: int) -> object:
    """offset_for_time over a partition whose records from `low` have these (ascending) times."""
    def offset_for_time(moment: int) -> int:
        return low + bisect.bisect_left(timestamps, moment)
    return offset_for_time


@pytest.mark.parametrize(("text", "expected"), [
    ("start", (10, None)), ("end", (20, None)), ("15", (15, None)), ("5", (10, None)), ("99", (20, None)),
    ("+3", (13, None)), ("+30", (20, None)), ("-3", (17, None)), ("-30", (10, None)),
    (":end", (10, 20)), ("12:14", (12, 14)), ("14:12", (14, 14)), ("12:99", (12, 99)),
    ("@1003", (13, None)), ("@1003:1005", (13, 15)), ("@1003:end", (13, 20)), ("@:1002", (10, 12)),
    ("@5000", (20, None)), ("@0:1", (10, 10)),
])
def test_resolve_against_watermarks_and_times(text: str, expected: tuple[int, int | None]) -> None:
    # Offsets 10..19 hold records with times 1000..1009.
    times = [1000 + i for i in range(10)]
    assert resolve(parse_offset_spec(text, NOW), 10, 20, lookup(times, 10)) == expected  # type: ignore[arg-type]


@given(st.lists(st.integers(0, 10_000), max_size=40).map(sorted), st.integers(0, 10_000), st.integers(0, 10_000),
       st.integers(0, 1_000))
def test_a_time_range_selects_exactly_the_records_in_it(times: list[int], t1: int, t2: int, low: int) -> None:
    """With ascending timestamps, @T1:T2 reads exactly the records with T1 <= time < T2."""
    start, stop = resolve(parse_offset_spec(f"@{t1}:{t2}", NOW), low, low + len(times), lookup(times, low))  # type: ignore[arg-type]
    assert stop is not None and low <= start <= stop <= low + len(times)
    assert [times[o - low] for o in range(start, stop)] == [t for t in times if t1 <= t < t2]
