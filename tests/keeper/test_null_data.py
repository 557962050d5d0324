"""Null data is not empty data: a znode created or set with a null buffer reads back as null
(kazoo shows None), one with an empty buffer as b"", and both have dataLength 0. Compared with a
real ZooKeeper 3.8 through kazoo, on a standalone keeper and on a three-member ensemble (every
member must agree), and across keeper restarts with and without a snapshot on disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.serialization import Create, SetData
from kazoo.security import OPEN_ACL_UNSAFE

from roost.keeper.tree import DataTree
from roost.raft.storage import DiskStorage
from tests.keeper.conftest import differential
from tests.keeper.zkharness import Recorder, kazoo, keeper_ensemble, keeper_process, unique_root
from tests.support.procs import start_roost

pytestmark = pytest.mark.zookeeper


def _null_multi(zk: KazooClient, ops: list[Any]) -> list[Any]:
    """A multi with the given kazoo records: kazoo's transaction helpers refuse None data, but
    the protocol (and ZooKeeper) allow it, so the records are added as they are."""
    transaction = zk.transaction()
    for op in ops:
        transaction._add(op)
    return transaction.commit()


def _data(rec: Recorder, path: str) -> tuple[bytes | None, int, int, Any]:
    """getData's data and the Stat fields about data, without times: a set right after a create
    may fall in the same millisecond on one server and not on the other."""
    data, stat = rec.zk.get(path)
    return data, stat.dataLength, stat.version, rec.zxid(stat.mzxid)


def null_and_empty_data(address: str, rec: Recorder) -> None:
    zk, r = rec.zk, rec.root
    rec.start()
    rec.do("create null", lambda: zk.create(f"{r}/null", None))
    rec.do("create empty", lambda: zk.create(f"{r}/empty", b""))
    rec.do("create2 null", lambda: zk.create(f"{r}/null2", None, include_data=True))
    rec.do("get null", lambda: zk.get(f"{r}/null"))
    rec.do("get empty", lambda: zk.get(f"{r}/empty"))
    rec.do("exists null", lambda: zk.exists(f"{r}/null"))
    rec.do("get null, watching", lambda: zk.get(f"{r}/null", watch=rec.watcher("null")))
    rec.do("set null to empty", lambda: zk.set(f"{r}/null", b"", version=0))
    rec.flush_events("data watch on the null node", expect=1)
    rec.do("get it", lambda: zk.get(f"{r}/null"))
    rec.do("get empty, watching", lambda: zk.get(f"{r}/empty", watch=rec.watcher("empty")))
    rec.do("set empty to null", lambda: zk.set(f"{r}/empty", None))
    rec.flush_events("data watch on the empty node", expect=1)
    rec.do("get it", lambda: zk.get(f"{r}/empty"))
    rec.do("create full", lambda: zk.create(f"{r}/full", b"abc"))
    rec.do("set full to null", lambda: zk.set(f"{r}/full", None).dataLength)
    rec.do("get full", lambda: _data(rec, f"{r}/full"))
    acl = list(OPEN_ACL_UNSAFE)
    rec.do("multi with null and empty data", lambda: len(_null_multi(zk, [
        Create(f"{r}/m-null", None, acl, 0), Create(f"{r}/m-empty", b"", acl, 0),
        SetData(f"{r}/full", b"", -1), SetData(f"{r}/null2", None, 0), SetData(f"{r}/m-empty", None, 0),
    ])))
    for name in ("m-null", "m-empty", "full", "null2"):
        rec.do(f"get {name} after the multi", lambda name=name: _data(rec, f"{r}/{name}"))
    rec.do("failed multi with null data", lambda: _null_multi(zk, [
        SetData(f"{r}/m-null", b"x", -1), Create(f"{r}/nope/x", None, acl, 0)]))
    rec.do("m-null unchanged", lambda: _data(rec, f"{r}/m-null"))
    rec.do("children", lambda: sorted(zk.get_children(r)))


def test_null_data_matches_zookeeper(zookeeper: str, keeper: str) -> None:
    records = dict(differential(zookeeper, keeper, null_and_empty_data))
    # What ZooKeeper does, spelled out (the comparison above is the proof; this is the claim).
    assert records["get null"][0] is None and records["get empty"][0] == b""
    assert records["get null"][1]["dataLength"] == records["get empty"][1]["dataLength"] == 0


# ----------------------------------------------------------------- every member, every restart

EXPECTED = {"null": None, "empty": b"", "set-null": None, "set-empty": b"", "m-null": None, "m-empty": b""}


def write_null_and_empty(zk: KazooClient, root: str) -> None:
    zk.create(root, b"root")
    zk.create(f"{root}/null", None)
    zk.create(f"{root}/empty", b"")
    zk.create(f"{root}/set-null", b"was full")
    zk.set(f"{root}/set-null", None)
    zk.create(f"{root}/set-empty", None)
    zk.set(f"{root}/set-empty", b"")
    acl = list(OPEN_ACL_UNSAFE)
    _null_multi(zk, [Create(f"{root}/m-null", b"x", acl, 0), SetData(f"{root}/m-null", None, 0),
                     Create(f"{root}/m-empty", None, acl, 0), SetData(f"{root}/m-empty", b"", 0)])


def read_back(address: str, root: str) -> dict[str, tuple[bytes | None, int]]:
    zk = kazoo(address)
    try:
        zk.sync(root)  # a follower answers reads from its own tree: catch up first
        found = {}
        for name in EXPECTED:
            data, stat = zk.get(f"{root}/{name}")
            found[name] = (data, stat.dataLength)
        return found
    finally:
        zk.stop()
        zk.close()


def expected_reads() -> dict[str, tuple[bytes | None, int]]:
    return {name: (data, 0) for name, data in EXPECTED.items()}


def test_null_data_on_every_member_of_an_ensemble(zookeeper: str, tmp_path: Path) -> None:
    with keeper_ensemble(tmp_path) as procs:
        addresses = [proc.address("keeper") for proc in procs]
        differential(zookeeper, addresses[1], null_and_empty_data)
        root = unique_root("null-ensemble")
        zk = kazoo(addresses[0])
        try:
            write_null_and_empty(zk, root)
        finally:
            zk.stop()
            zk.close()
        for address in addresses:
            assert read_back(address, root) == expected_reads(), address


def _snapshot_tree(data_dir: Path) -> DataTree | None:
    """The newest tree snapshot a stopped keeper left on disk, if any."""
    storage = DiskStorage(data_dir / "raft", fsync=False)
    try:
        snapshot = storage.load().snapshot
    finally:
        storage.close()
    return None if snapshot is None else DataTree.from_snapshot(snapshot.data)


@pytest.mark.parametrize("snap_count", [1, 20_000], ids=["from-a-snapshot", "from-the-log"])
def test_a_restart_keeps_null_data_null(tmp_path: Path, snap_count: int) -> None:
    root = "/null-restart"
    with keeper_process(tmp_path, extra={"snapCount": snap_count}) as proc:
        zk = kazoo(proc.address("keeper"))
        try:
            write_null_and_empty(zk, root)
            assert read_back(proc.address("keeper"), root) == expected_reads()
        finally:
            zk.stop()
            zk.close()
    snapshot = _snapshot_tree(tmp_path / "data")
    if snap_count == 1:
        # A snapshot after every entry: the tree on disk already holds the nodes, null as null.
        assert snapshot is not None
        assert {name: snapshot.get(f"{root}/{name}").data for name in EXPECTED} == EXPECTED
    else:
        assert snapshot is None, "this case is meant to recover from the log alone"
    restarted = start_roost(proc.args, expect=("keeper",))
    try:
        assert read_back(restarted.address("keeper"), root) == expected_reads()
    finally:
        restarted.stop()
