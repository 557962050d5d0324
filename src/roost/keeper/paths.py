"""ZooKeeper path rules (PathUtils.validatePath) and parent/child splitting."""

from __future__ import annotations

import re

_ASCII_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class InvalidPath(ValueError):
    """The path breaks ZooKeeper's path rules; the reason is the message."""


def _invalid_char(code: int) -> bool:
    # ZooKeeper refuses control characters and the UTF-16 surrogate/private/special ranges; code
    # points above U+FFFF are surrogate pairs in Java, so they are refused as well.
    return (
        0 < code <= 0x1F
        or 0x7F <= code <= 0x9F
        or 0xD800 <= code <= 0xF8FF
        or code >= 0xFFF0
    )


def validate_path(path: str) -> None:
    """Raise InvalidPath unless `path` is an absolute, canonical ZooKeeper path."""
    if not path:
        raise InvalidPath("path length must be > 0")
    if path[0] != "/":
        raise InvalidPath("path must start with / character")
    if len(path) == 1:
        return
    if path[-1] == "/":
        raise InvalidPath("path must not end with / character")
    if path.isascii() and "//" not in path and "/." not in path:
        # Fast path: only the control characters (and NUL) remain to check.
        if _ASCII_CONTROL.search(path):
            raise InvalidPath("invalid character in path")
        return
    for name in path[1:].split("/"):
        if not name:
            raise InvalidPath("empty node name specified")
        if name in (".", ".."):
            raise InvalidPath("relative paths not allowed")
        for char in name:
            code = ord(char)
            if code == 0:
                raise InvalidPath("null character not allowed")
            if _invalid_char(code):
                raise InvalidPath(f"invalid character \\u{code:04x}")


def split(path: str) -> tuple[str, str]:
    """(parent, child name) of a path that contains a slash."""
    slash = path.rfind("/")
    assert slash >= 0, path
    return (path[:slash] or "/"), path[slash + 1 :]


def is_ancestor_or_self(base: str, path: str) -> bool:
    """True if `path` is `base` or lies under it (for recursive watches)."""
    if base == "/":
        return True
    return path == base or path.startswith(base + "/")
