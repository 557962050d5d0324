"""Message bytes as the console shows them: attacker-controlled, so never interpreted here.

A key or value is returned as JSON-safe fields: `text` (UTF-8 with invalid bytes replaced),
`hex`, `json` (pretty, when the bytes are valid JSON), whether it was valid UTF-8, its full size,
and whether the shown part was cut at the display bound. The browser puts these into the page
with textContent only, and the templates autoescape, so no byte becomes markup.
"""

from __future__ import annotations

import json
from typing import Any


def shown_bytes(data: bytes | None, limit: int) -> dict[str, Any] | None:
    """`data` decoded for display, cut to `limit` bytes."""
    if data is None:
        return None
    assert limit > 0, limit
    cut = data[:limit]
    try:
        data.decode("utf-8")
        valid = True
    except UnicodeDecodeError:
        valid = False
    shown: dict[str, Any] = {
        "size": len(data),
        "truncated": len(data) > limit,
        "utf8": valid,
        # Cutting may split a character: the replacement marks it, as any invalid byte.
        "text": cut.decode("utf-8", errors="replace"),
        "hex": cut.hex(" "),
    }
    if valid and not shown["truncated"]:
        try:
            shown["json"] = json.dumps(json.loads(data), indent=2, ensure_ascii=False)
        except ValueError:
            pass
    return shown


def matches(data: bytes | None, needle: bytes) -> bool:
    return data is not None and needle in data


def header_list(headers: list[tuple[str, bytes | None]] | None, limit: int) -> list[dict[str, Any]]:
    return [{"key": key, "value": shown_bytes(value, limit)} for key, value in headers or []]
