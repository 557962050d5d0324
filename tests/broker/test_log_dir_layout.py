"""What a start makes of the log directories (roost.storage.directories): every state a move between
directories can be cut off in by a crash, built on disk from real partition logs, and the rules
on placement and identity. (The move itself, with a real broker, is in test_log_dirs.py.)"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from roost.log import LogConfig, PartitionLog
from roost.storage.directories import META_PROPERTIES, LogDirError, LogDirs, moving_name
from roost.wire.kafka.records import build_batch

MOVE_ID = uuid.UUID(int=7).hex


def write_log(path: Path, records: int) -> None:
    """A closed partition log at `path` holding `records` one-record batches."""
    log = PartitionLog.open(path, LogConfig(), lambda: 1_700_000_000_000)
    for n in range(records):
        log.append(build_batch([(b"k", f"v{n}".encode())], timestamp_ms=1_000))
    log.close()


def log_end(path: Path) -> int:
    log = PartitionLog.open(path, LogConfig(), lambda: 1_700_000_000_000)
    try:
        return log.log_end_offset
    finally:
        log.close()


@pytest.fixture
def disks(tmp_path: Path) -> tuple[Path, Path]:
    first, second = tmp_path / "a", tmp_path / "b"
    for disk in (first, second):
        (disk / "logs").mkdir(parents=True)
    return first, second


def test_partitions_are_found_in_every_directory_and_new_ones_go_to_the_emptiest(disks: tuple[Path, Path]) -> None:
    first, second = disks
    write_log(first / "logs" / "t-0", 3)
    write_log(first / "logs" / "t-1", 3)
    write_log(second / "logs" / "u-0", 3)
    dirs = LogDirs(disks, broker_id=1)
    assert dirs.dir_of("t", 0).path == first
    assert dirs.dir_of("u", 0).path == second
    assert dirs.place("new", 0).path == second  # 1 partition there against 2
    assert dirs.place("new", 1).path in (first, second)
    assert dirs.place("new", 0).path == second  # placed once, found again


def test_a_partition_in_two_directories_is_refused(disks: tuple[Path, Path]) -> None:
    first, second = disks
    write_log(first / "logs" / "t-0", 3)
    write_log(second / "logs" / "t-0", 3)
    with pytest.raises(LogDirError, match="two log directories"):
        LogDirs(disks, broker_id=1)


def test_each_directory_keeps_its_identity_and_refuses_another_brokers(disks: tuple[Path, Path]) -> None:
    _first, second = disks
    ids = [d.directory_id for d in LogDirs(disks, broker_id=1).dirs]
    assert len(set(ids)) == 2
    assert [d.directory_id for d in LogDirs(disks, broker_id=1).dirs] == ids  # kept across starts
    assert "broker.id=1" in (second / META_PROPERTIES).read_text()
    with pytest.raises(LogDirError, match="belongs to broker 1"):
        LogDirs(disks, broker_id=2)


def test_crash_while_copying_discards_the_future_copy(disks: tuple[Path, Path]) -> None:
    first, second = disks
    write_log(first / "logs" / "t-0", 10)
    write_log(second / "logs" / moving_name("t", 0, MOVE_ID, "future"), 4)
    dirs = LogDirs(disks, broker_id=1)
    assert dirs.dir_of("t", 0).path == first
    assert sorted(p.name for p in (second / "logs").iterdir() if p.is_dir()) == []
    assert log_end(first / "logs" / "t-0") == 10


def test_crash_after_the_current_copy_was_renamed_finishes_the_move(disks: tuple[Path, Path]) -> None:
    first, second = disks
    write_log(first / "logs" / moving_name("t", 0, MOVE_ID, "delete"), 10)
    write_log(second / "logs" / moving_name("t", 0, MOVE_ID, "future"), 10)  # closed, complete
    dirs = LogDirs(disks, broker_id=1)
    assert dirs.dir_of("t", 0).path == second
    assert log_end(second / "logs" / "t-0") == 10
    assert not any(p.is_dir() for p in (first / "logs").iterdir())


def test_crash_after_the_swap_removes_the_old_copy(disks: tuple[Path, Path]) -> None:
    first, second = disks
    write_log(first / "logs" / moving_name("t", 0, MOVE_ID, "delete"), 10)
    write_log(second / "logs" / "t-0", 10)
    dirs = LogDirs(disks, broker_id=1)
    assert dirs.dir_of("t", 0).path == second
    assert not any(p.is_dir() for p in (first / "logs").iterdir())


def test_a_lone_delete_copy_is_never_lost(disks: tuple[Path, Path]) -> None:
    first, _second = disks
    write_log(first / "logs" / moving_name("t", 0, MOVE_ID, "delete"), 10)
    dirs = LogDirs(disks, broker_id=1)
    assert dirs.dir_of("t", 0).path == first
    assert log_end(first / "logs" / "t-0") == 10


def test_an_unusable_directory_starts_offline_and_the_others_serve(disks: tuple[Path, Path]) -> None:
    first, second = disks
    write_log(first / "logs" / "t-0", 3)
    shutil.rmtree(second / "logs")
    (second / "logs").write_bytes(b"a file where the directory was")
    dirs = LogDirs(disks, broker_id=1)
    assert dirs.dirs[0].online and not dirs.dirs[1].online
    assert dirs.dir_of("t", 0).path == first
    assert dirs.place("new", 0).path == first  # never the offline one
