"""The offset grammar of `roost consume -o` (rpk's): where to start reading each partition, and
where to stop.

    start | oldest        from the first offset, then keep reading (the default)
    end | newest          only records produced from now on
    N                     from offset N            +N  N after the start     -N  N before the end
    A:B                   from A until B (exclusive); A is start, N, +N or -N (empty: start),
                          B is N or end (empty: end); `end` is the end offset when reading began
    :end                  everything there is now, then stop
    @T                    from the first record with a timestamp at or after T, then keep reading
    @T1:T2                from T1 until the first record at or after T2
    @T:end, @T:           from T until the end offset when reading began
    @:T                   from the start until T
    @T:DURATION           from T for DURATION (e.g. @2026-11-23T10:00:00Z:1h)

A time T is milliseconds since the epoch (digits), an ISO-8601/RFC 3339 date or date-time (a
date-time without a zone is UTC; a date alone is its midnight UTC), `now`, or a signed duration
relative to now (-1h, -30m, -1h30m, +10s; units ms s m h d w).

Resolving a spec against a partition's offsets is pure (`resolve`): the caller supplies the low
and high watermarks and a lookup of the first offset at or after a time (Kafka's ListOffsets by
timestamp).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

PositionKind = Literal["start", "end", "offset", "after_start", "before_end", "time"]

DURATION_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h|d|w))+")
DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
ISO_DATE_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:[Zz]|[+-]\d{2}:?\d{2})?)?")


def epoch_ms(moment: datetime) -> int:
    """Milliseconds since the epoch, exactly (no float on the way; a naive time is UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


class OffsetSpecError(ValueError):
    """An offset spec that does not parse."""


@dataclass(frozen=True)
class Position:
    kind: PositionKind
    value: int = 0  # the offset, the count, or the time in ms


@dataclass(frozen=True)
class OffsetSpec:
    begin: Position
    until: Position | None = None  # exclusive; None: keep reading as records arrive

    @property
    def bounded(self) -> bool:
        return self.until is not None


START = Position("start")
END = Position("end")


def parse_duration_ms(text: str) -> int:
    if not DURATION.fullmatch(text):
        raise OffsetSpecError(f"bad duration {text!r} (examples: 30s, 15m, 1h30m, 2d)")
    return round(sum(float(number) * DURATION_UNITS_MS[unit] for number, unit in DURATION_PART.findall(text)))


def epoch_digits_ms(digits: str) -> int:
    """Digits read by their count, as rpk's `group seek --to`: 10 or fewer are seconds, 11-13
    milliseconds, more nanoseconds."""
    number = int(digits)
    return number * 1000 if len(digits) <= 10 else number if len(digits) <= 13 else number // 1_000_000


def parse_time_ms(text: str, now_ms: int, *, digits_by_length: bool = False) -> int:
    """A point in time: epoch ms (or, with `digits_by_length`, seconds/ms/ns by the digit count),
    ISO-8601 date(-time), `now`, or a signed duration from now."""
    if re.fullmatch(r"\d+", text):
        return epoch_digits_ms(text) if digits_by_length else int(text)
    if text == "now":
        return now_ms
    if text[:1] in "+-" and len(text) > 1:
        delta = parse_duration_ms(text[1:])
        return now_ms - delta if text[0] == "-" else now_ms + delta
    if ISO_DATE_TIME.fullmatch(text):
        normalized = re.sub(r"(\.\d{6})\d+", r"\1", text)  # datetime keeps microseconds at most
        try:
            moment = datetime.fromisoformat(normalized)
        except ValueError as error:
            raise OffsetSpecError(f"bad date-time {text!r}: {error}") from None
        return epoch_ms(moment)
    if DURATION.fullmatch(text):
        raise OffsetSpecError(f"a duration as a point in time needs a sign: -{text} (ago) or +{text}")
    raise OffsetSpecError(f"bad time {text!r} (epoch ms, 2026-11-23, 2026-11-23T10:00:00Z, now, -1h)")


def _offset_position(text: str) -> Position:
    if text in ("start", "oldest", "beginning"):
        return START
    if text in ("end", "newest"):
        return END
    match = re.fullmatch(r"([+-]?)(\d+)", text)
    if not match:
        raise OffsetSpecError(f"bad offset {text!r} (start, end, N, +N or -N)")
    number = int(match[2])
    kind: PositionKind = {"": "offset", "+": "after_start", "-": "before_end"}[match[1]]  # type: ignore[assignment]
    return Position(kind, number)


def _time_range(body: str, now_ms: int) -> OffsetSpec:
    """`T`, `T1:T2`, `T:`, `T:end`, `:T` or `T:DURATION` (the part after '@'). ISO times hold
    colons themselves, so each colon is tried as the separator, the rightmost first."""
    try:
        return OffsetSpec(Position("time", parse_time_ms(body, now_ms)))
    except OffsetSpecError as single_error:
        error = single_error
    colons = [i for i, char in enumerate(body) if char == ":"]
    for colon in reversed(colons):
        left, right = body[:colon], body[colon + 1:]
        try:
            begin = START if left == "" else Position("time", parse_time_ms(left, now_ms))
            if right in ("", "end"):
                until = END
            elif DURATION.fullmatch(right):
                if begin.kind != "time":
                    raise OffsetSpecError(f"@:{right}: a duration end needs a start time")
                until = Position("time", begin.value + parse_duration_ms(right))
            else:
                until = Position("time", parse_time_ms(right, now_ms))
        except OffsetSpecError as split_error:
            error = split_error
            continue
        return OffsetSpec(begin, until)
    raise OffsetSpecError(f"bad time range @{body}: {error}")


def parse_offset_spec(text: str, now_ms: int) -> OffsetSpec:
    """Parse an `-o` value; `now_ms` anchors relative times."""
    text = text.strip()
    if not text:
        raise OffsetSpecError("empty offset")
    if text.startswith("@"):
        if text == "@":
            raise OffsetSpecError("'@' needs a time, e.g. @-1h or @2026-11-23T10:00:00Z")
        return _time_range(text[1:], now_ms)
    if ":" in text:
        left, _, right = text.partition(":")
        begin = START if left == "" else _offset_position(left)
        if right in ("", "end", "newest"):
            until = END
        elif re.fullmatch(r"\d+", right):
            until = Position("offset", int(right))
        else:
            raise OffsetSpecError(f"bad end {right!r} in {text!r} (an offset N, or end)")
        return OffsetSpec(begin, until)
    return OffsetSpec(_offset_position(text))


def resolve(spec: OffsetSpec, low: int, high: int, offset_for_time: Callable[[int], int]) -> tuple[int, int | None]:
    """(first offset to read, offset to stop before or None) for a partition whose watermarks are
    `low` and `high`. `offset_for_time(t)` is the first offset whose timestamp is at or after `t`
    (`high` when there is none). The start is kept within [low, high]; an empty range gives
    stop == start."""
    assert 0 <= low <= high, (low, high)

    def locate(position: Position) -> int:
        if position.kind == "start":
            return low
        if position.kind == "end":
            return high
        if position.kind == "offset":
            return position.value
        if position.kind == "after_start":
            return low + position.value
        if position.kind == "before_end":
            return high - position.value
        assert position.kind == "time", position
        return offset_for_time(position.value)

    start = min(max(locate(spec.begin), low), high)
    if spec.until is None:
        return start, None
    return start, max(locate(spec.until), start)
