"""Moving a consumer group's committed offsets: the target grammar of `roost group seek --to` and
of the console's reset (start, end, OFFSET, @TIME, +N or -N), and the plan of each partition's new
offset. Pure: the caller asks the cluster for the offsets and commits the plan."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from roost.admin import offset_spec
from roost.admin.errors import SeekTargetError

Partition = tuple[str, int]


@dataclass(frozen=True)
class SeekTarget:
    """Where `--to` sends each partition: kind is start, end, offset, time or shift."""

    kind: str
    value: int = 0  # the offset, the timestamp in ms, or the shift


def parse_time_ms(text: str, now_ms: int | None = None) -> int:
    """`--to @TIME`: the consume offset grammar's time (ISO 8601, `now`, -2h, -1h30m), except that
    bare digits are read by their count as rpk's group seek does (seconds, ms or ns)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    try:
        return offset_spec.parse_time_ms(text, now, digits_by_length=True)
    except offset_spec.OffsetSpecError as error:
        raise SeekTargetError(str(error)) from None


def parse_seek_target(text: str) -> SeekTarget:
    """`--to`: start, end, OFFSET, @TIME, +N or -N."""
    if text in ("start", "end"):
        return SeekTarget(text)
    if text.startswith("@"):
        return SeekTarget("time", parse_time_ms(text[1:]))
    if re.fullmatch(r"[+-]\d+", text):
        return SeekTarget("shift", int(text))
    if text.isdigit():
        return SeekTarget("offset", int(text))
    raise SeekTargetError(f"expected start, end, OFFSET, @TIME, +N or -N; got {text!r}")


def plan_seek(to: SeekTarget, partitions: list[Partition], committed: dict[Partition, int],
              starts: dict[Partition, int], ends: dict[Partition, int],
              at_time: dict[Partition, int]) -> list[dict[str, Any]]:
    """Each partition's current and new offset. New offsets stay within [log start, log end], as
    kafka-consumer-groups keeps them; a shift moves from the committed offset (from the log start
    where there is none); a time past the last record goes to the log end."""
    rows = []
    for key in partitions:
        start, end = starts[key], ends[key]
        current = committed.get(key)
        if to.kind == "start":
            new = start
        elif to.kind == "end":
            new = end
        elif to.kind == "offset":
            new = to.value
        elif to.kind == "shift":
            new = (start if current is None else current) + to.value
        else:
            assert to.kind == "time", to
            new = at_time[key] if at_time[key] >= 0 else end
        new = min(max(new, start), end)
        rows.append({"topic": key[0], "partition": key[1], "current": current, "new": new,
                     "log_start_offset": start, "log_end_offset": end})
    return rows
