"""File helpers for the log: names, crash-safe small files, whole reads and writes on raw fds."""

from __future__ import annotations

import os
import re
from pathlib import Path

OFFSET_DIGITS = 20  # Kafka names segment files by their base offset, zero-padded to 20 digits
TEMP_SUFFIX = ".tmp"
_OFFSET_NAME = re.compile(r"^(\d{20})(\.[a-z]+)$")
_CHECKPOINT = re.compile(rb"^(\d{1,19})\n$")


def offset_file_name(offset: int, suffix: str) -> str:
    assert 0 <= offset < 10**OFFSET_DIGITS
    return f"{offset:0{OFFSET_DIGITS}d}{suffix}"


def parse_offset_file_name(name: str, suffix: str) -> int | None:
    """The offset in `<20 digits><suffix>`, or None for any other name."""
    match = _OFFSET_NAME.match(name)
    if match is None or match.group(2) != suffix:
        return None
    return int(match.group(1))


def fsync_directory(directory: Path) -> None:
    """Make new, renamed or deleted names in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, durable_name: bool = True, durable_data: bool = True) -> None:
    """Replace `path` with `data`: after a crash it holds either the old or the new content.

    The temp file is fsynced before the rename so the new name never points at missing data.
    `durable_name=False` skips the directory fsync, for files where losing the rename (and so
    keeping the old content) is harmless. `durable_data=False` skips the temp file's fsync too,
    for hints whose loss or damage is harmless (a checkpoint that fails to parse reads as absent).
    """
    temp = path.with_name(path.name + TEMP_SUFFIX)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data, 0)
        if durable_data:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)
    if durable_name:
        fsync_directory(path.parent)


def write_checkpoint(path: Path, value: int, *, durable: bool = True) -> None:
    """`durable=False` for hints: after a crash the file may hold the old value or nothing
    readable (the format needs the trailing newline, so a torn write never parses)."""
    assert value >= 0
    atomic_write(path, b"%d\n" % value, durable_name=durable, durable_data=durable)


def read_checkpoint(path: Path) -> int | None:
    """The integer in a checkpoint file; None when it is missing or unreadable."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    match = _CHECKPOINT.match(data)
    return int(match.group(1)) if match else None


def write_all(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
    """pwrite every byte of `data` at `position` (pwrite may write less than asked)."""
    view = memoryview(data)
    done = 0
    while done < len(view):
        written = os.pwrite(fd, view[done:], position + done)
        assert written > 0, "pwrite wrote nothing"
        done += written


def read_at(fd: int, size: int, position: int) -> bytes:
    """pread up to `size` bytes at `position`; shorter only at the end of the file."""
    data = os.pread(fd, size, position)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, position + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)
