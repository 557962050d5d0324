"""Offline verification of a Raft member's storage (`roost check-logs` on a keeper's data
directory): the log's records (length and CRC-32C each, entries following each other) and every
snapshot (magic, version, length and CRC-32C). Reads and never writes: where a start-up would cut
a damaged tail, this reports where it begins.
"""

from __future__ import annotations

from pathlib import Path

from roost.raft.storage import LOG_NAME, DiskStorage, StorageError


def is_raft_dir(directory: Path) -> bool:
    return (directory / LOG_NAME).is_file() or any(directory.glob("snapshot-*.snap"))


def check_raft_dir(directory: Path) -> tuple[list[tuple[Path, int, str]], int]:
    """(damages as (file, position or -1, what), entries found) of the Raft storage in `directory`."""
    storage = DiskStorage(directory)
    damages: list[tuple[Path, int, str]] = []
    entries = 0
    try:
        _offset, _term, found, _hard_state, good_bytes, size = storage._replay_log()
        entries = len(found)
        if good_bytes < size:
            damages.append((storage.log_path, good_bytes,
                            f"the records stop checking here ({size - good_bytes} bytes after it: a torn tail "
                            "after a crash, or damage; a start-up cuts them)"))
    except StorageError as error:
        damages.append((storage.log_path, -1, str(error)))
    except OSError as error:
        damages.append((storage.log_path, -1, f"cannot be read: {error}"))
    for index, path in storage._snapshot_paths():
        snapshot = DiskStorage._read_snapshot(path)
        if snapshot is None or snapshot.index != index:
            damages.append((path, -1, "snapshot does not check (magic, version, length or CRC-32C)"))
    return damages, entries
