"""The values a page sends, read or refused with 400: a whole number in bounds, and a key, value
or header value given as text, base64 or hex."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from roost.console.errors import bad_request


def int_param(value: Any, name: str, default: int | None = None, low: int | None = None,
              high: int | None = None) -> int:
    if value in (None, ""):
        if default is None:
            raise bad_request(f"{name} is required")
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise bad_request(f"{name} must be a whole number, got {value!r}") from None
    if (low is not None and number < low) or (high is not None and number > high):
        raise bad_request(f"{name} must be between {low} and {high}, got {number}")
    return number


def payload(value: Any, encoding: str, name: str) -> bytes | None:
    """A key, value or header value sent by the page: text (UTF-8), base64, or hex; null is none."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise bad_request(f"{name} must be a string or null")
    try:
        if encoding == "text":
            return value.encode()
        if encoding == "base64":
            return base64.b64decode(value, validate=True)
        if encoding == "hex":
            return bytes.fromhex(value)
    except (binascii.Error, ValueError):
        raise bad_request(f"{name} is not valid {encoding}") from None
    raise bad_request(f"encoding must be text, base64 or hex, got {encoding!r}")
