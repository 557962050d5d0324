"""`roost check-logs` over every file kind Roost keeps, each damaged three ways (a flipped byte, a
zeroed range, a cut): the damage is reported naming the file (and the position where the file has
positions), and an undamaged copy is reported clean. The files are made by the real writers (a
PartitionLog with producer state and leader epochs, a Raft DiskStorage with entries and a
snapshot); the checks run in process for speed, and the command itself once per outcome (exit
status 0 clean, 1 damaged).

Where a damage cannot be seen, the test says so rather than skipping it: Kafka's text checkpoints
carry no CRC, so a flipped digit that still parses and stays inside the log is indistinguishable
from a real value (`UNDETECTABLE`).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from roost.log import LogConfig, PartitionLog
from roost.log.check import check_partition
from roost.raft.check import check_raft_dir
from roost.raft.core import Ready
from roost.raft.messages import Entry, HardState, Snapshot
from roost.raft.storage import DiskStorage
from roost.wire.kafka.records import build_batch
from tests.support.procs import ROOST

KINDS = {
    "segment": "00000000000000000000.log",
    "offset-index": "00000000000000000000.index",
    "time-index": "00000000000000000000.timeindex",
    "producer-snapshot": "00000000000000000052.snapshot",
    "leader-epochs": "leader-epoch-checkpoint",
    "recovery-point": "recovery-point-offset-checkpoint",
    "raft-log": "raft.log",
    "raft-snapshot": "snapshot-00000000000000000010.snap",
}
DAMAGES = ("flip", "zero", "truncate")
# (kind, damage) whose result still reads as valid (none in this matrix: the epochs are checked against the batches).
UNDETECTABLE: set[tuple[str, str]] = set()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pristine")
    log = PartitionLog.open(root / "logs" / "orders-0", LogConfig(segment_bytes=3000, index_interval_bytes=100),
                            lambda: 1_700_000_000_000)
    log.leader_epochs.assign(0, 0)
    for n in range(60):
        if n == 30:
            log.leader_epochs.assign(3, log.log_end_offset)
        log.append(bytearray(build_batch([(b"k", b"%04d" % n + b"v" * 40)], timestamp_ms=1_000 + n, producer_id=7,
                                         producer_epoch=0, base_sequence=n, partition_leader_epoch=0 if n < 30 else 3)))
    log.close()
    storage = DiskStorage(root / "keeper" / "raft")
    storage.load()
    storage.save(Ready(hard_state=HardState(2, 1, 15), entries=[Entry(2, i, b"z" * 30) for i in range(1, 21)],
                       must_sync=True))
    storage.save_snapshot(Snapshot(10, 2, b"tree" * 50))
    storage.close()
    return root


def file_of(root: Path, kind: str) -> Path:
    where = root / "keeper" / "raft" if kind.startswith("raft") else root / "logs" / "orders-0"
    return where / KINDS[kind]


def damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    if how == "flip":
        data[middle] ^= 0x04
    elif how == "zero":
        data[middle:middle + 16] = bytes(len(data[middle:middle + 16]))
    else:
        del data[middle:]
    path.write_bytes(bytes(data))


def findings(root: Path, kind: str) -> list[str]:
    if kind.startswith("raft"):
        found, _entries = check_raft_dir(root / "keeper" / "raft")
        return [f"{path}: {why}" for path, _at, why in found]
    return [str(d) for d in check_partition(root / "logs" / "orders-0").damages]


def test_the_pristine_files_check_clean(pristine: Path) -> None:
    for kind in KINDS:
        assert file_of(pristine, kind).exists(), f"the fixture made no {kind} file"
    assert findings(pristine, "segment") == [] and findings(pristine, "raft-log") == []
    result = subprocess.run([*ROOST, "check-logs", str(pristine)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 checked, 0 damaged" in result.stdout


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("kind", KINDS)
def test_damage_is_reported_naming_the_file(pristine: Path, tmp_path: Path, kind: str, how: str) -> None:
    root = tmp_path / "copy"
    shutil.copytree(pristine, root)
    path = file_of(root, kind)
    damage(path, how)
    found = findings(root, kind)
    if (kind, how) in UNDETECTABLE:
        return
    assert any(str(path) in line for line in found), f"{how} of the {kind} not reported: {found}"


def test_the_command_exits_1_and_prints_where(pristine: Path, tmp_path: Path) -> None:
    root = tmp_path / "copy"
    shutil.copytree(pristine, root)
    damage(file_of(root, "segment"), "flip")
    damage(file_of(root, "raft-snapshot"), "zero")
    result = subprocess.run([*ROOST, "check-logs", str(root)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{file_of(root, 'segment')} at position " in result.stdout
    assert str(file_of(root, "raft-snapshot")) in result.stdout
    assert "2 checked, 2 damaged" in result.stdout
