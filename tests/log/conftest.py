"""Shared helpers for partition log tests: an injectable clock and batch builders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from roost.log import LogConfig, PartitionLog
from roost.wire.kafka.records import Record, build_batch, iter_records


class FakeClock:
    """Milliseconds that move only when a test says so."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


class LogFactory:
    def __init__(self, root: Path, clock: FakeClock) -> None:
        self.root = root
        self.clock = clock
        self.opened: list[PartitionLog] = []

    def open(self, name: str = "topic-0", **config: int | str) -> PartitionLog:
        log = PartitionLog.open(self.root / name, LogConfig(**config), self.clock)  # type: ignore[arg-type]
        self.opened.append(log)
        return log


@pytest.fixture
def logs(tmp_path: Path, clock: FakeClock) -> Iterator[LogFactory]:
    factory = LogFactory(tmp_path, clock)
    try:
        yield factory
    finally:
        for log in factory.opened:
            log.close()  # a no-op for logs a test closed or deleted itself


def batch(
    values: list[bytes], *, timestamp_ms: int = 1_000, key: bytes | None = b"k", **kwargs: int
) -> bytes:
    return build_batch([(key, value) for value in values], timestamp_ms=timestamp_ms, **kwargs)  # type: ignore[arg-type]


def read_all(log: PartitionLog, offset: int | None = None, max_bytes: int = 1 << 30) -> list[Record]:
    start = log.log_start_offset if offset is None else offset
    result = log.read(start, max_bytes)
    return [record for buffer in result.buffers for record in iter_records(buffer)]


def abandon(log: PartitionLog) -> None:
    """Drop a log as a crash would: no flush, no snapshot, no clean-shutdown marker."""
    log._release_fds()
