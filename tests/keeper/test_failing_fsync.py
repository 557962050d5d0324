"""A failing fsync of the keeper's Raft log, on a real `roost keeper` process (forceSync on): from
the first failure the member stops taking writes (a write's client gets ConnectionLoss, the
outcome unknown, as ZooKeeper does) instead of acknowledging what may not be on disk, while a
session that only reads keeps being answered; after a power cut and a restart every acknowledged
write is there.

The fault comes from the LD_PRELOAD shim in tests/support/faultfs.c (fsync and fdatasync of files
under the keeper's data directory return EIO). After the kill -9 the test cuts the Raft log back
to what its last successful fsync covered, as Linux may drop pages whose writeback failed. A
keeper that ignored the failed fsync (the `keeper-failed-fsync-ignored` mutation in
scripts/break_claims.py) acknowledges writes that the cut then loses.
"""

from __future__ import annotations

from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from tests.keeper.zkharness import kazoo, keeper_config, unique_root
from tests.support.faultfs import FaultFs
from tests.support.procs import RoostProcess, start_roost


def start(config: Path, fs: FaultFs) -> RoostProcess:
    return start_roost(["keeper", "--config", str(config)], expect=("keeper",), env=fs.env())


def close(client: KazooClient) -> None:
    client.stop()
    client.close()


def test_after_a_failed_fsync_the_keeper_acknowledges_no_write_and_loses_none(tmp_path: Path) -> None:
    fs = FaultFs.build(tmp_path / "faultfs", prefix=tmp_path / "keeper" / "data")
    config = keeper_config(tmp_path / "keeper", extra={"forceSync": True})
    root = unique_root("fsync")
    acked: list[str] = []
    proc = start(config, fs)
    try:
        writer = kazoo(proc.address("keeper"))
        reader = kazoo(proc.address("keeper"))
        try:
            writer.create(root, b"root")
            acked.append(root)
            for n in range(20):
                acked.append(writer.create(f"{root}/before-{n}", b"x"))
            fs.fail_fsync()
            acked_after = []
            for n in range(5):  # bounded; every one must go unacknowledged
                try:
                    path = writer.create_async(f"{root}/after-{n}", b"x").get(timeout=10)
                except (KazooException, KazooTimeoutError):
                    continue
                acked.append(path)
                acked_after.append(path)
            assert fs.failed_files(), "the shim never failed an fsync: the fault was not injected"
            # Reads still answered on a session that does not write.
            assert len(reader.get_children(root)) >= 20
            assert reader.get(f"{root}/before-0")[0] == b"x"
        finally:
            close(writer)
            close(reader)
    finally:
        proc.kill9()
    cut = fs.drop_unsynced(suffixes=("raft.log",))
    fs.heal()
    proc = start(config, fs)
    try:
        client = kazoo(proc.address("keeper"))
        try:
            lost = [path for path in acked if client.exists(path) is None]
        finally:
            close(client)
    finally:
        proc.stop()
    assert not lost, f"{len(lost)} acknowledged writes lost after the failed fsync (first {lost[:3]}; cut {cut})"
    assert not acked_after, f"{len(acked_after)} writes acknowledged after the failed fsync"
