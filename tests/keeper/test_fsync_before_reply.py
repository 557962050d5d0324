"""`forceSync`: a write's reply leaves only after its log entry is fsynced, observed with strace on
real keeper processes (tests/support/syscall_trace.py).

For every write a kazoo client sends (create, setData, delete; one at a time and many in flight),
the raft log write carrying its path must have been fsynced before the first byte of the reply
left: on the member that replies, and on a majority of an ensemble. Standalone keepers are
checked both ways they run (`roost keeper`: fsync on the event loop; inside `roost up`: on an I/O
thread). With `forceSync=false` the same check must find every reply sent without an fsync.

Only the ZooKeeper protocol (to pair a request with its reply by xid) and the log's file name are
known to the test.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tests.keeper.zkharness import four_letter, keeper_ensemble, keeper_process
from tests.support.procs import RoostProcess, start_roost, wait_for
from tests.support.syscall_trace import Durability, SyscallTrace, durable_before_answer, zookeeper_exchanges

PROBE = re.compile(rb"/fsync-[0-9a-f]{8}/n-\d{3}")


def is_raft_log(path: str) -> bool:
    return path.endswith("/raft.log")


def client(address: str) -> KazooClient:
    zk = KazooClient(hosts=address, timeout=10.0)
    zk.start(timeout=30)
    return zk


def make_parent(address: str) -> str:
    parent = f"/fsync-{uuid.uuid4().hex[:8]}"
    zk = client(address)
    try:
        zk.create(parent)
    finally:
        zk.stop()
        zk.close()
    return parent


def write_probes(address: str, parent: str, first: int) -> list[bytes]:
    """Writes whose requests name paths `parent/n-NNN`: creates, sets and deletes one at a time,
    then a burst of creates in flight together; returns the path of each write. The client
    connects now (after tracing began), so that its connection's first frame is the handshake."""
    zk = client(address)
    try:
        one_by_one = [f"{parent}/n-{first + k:03d}" for k in range(4)]
        burst = [f"{parent}/n-{first + k:03d}" for k in range(4, 14)]
        for path in one_by_one:
            zk.create(path, b"v0")
        for path in one_by_one[:2]:
            zk.set(path, b"v1")
        zk.delete(one_by_one[0])
        for pending in [zk.create_async(path, b"b") for path in burst]:
            pending.get(timeout=30)
    finally:
        zk.stop()
        zk.close()
    return [p.encode() for p in one_by_one + one_by_one[:2] + one_by_one[:1] + burst]


def reply_durability(trace: SyscallTrace, addresses: list[str], probes: list[bytes]) -> list[Durability]:
    answers = []
    ports = [int(address.rpartition(":")[2]) for address in addresses]
    for exchange in zookeeper_exchanges(trace.calls, ports):
        found = PROBE.search(exchange.request)
        if found is not None:
            assert exchange.answered is not None, f"no reply to the write of {found[0]!r}"
            answers.append(durable_before_answer(trace.calls, exchange, found[0], is_raft_log))
    assert sorted(a.probe for a in answers) == sorted(probes), "not every write was seen once"
    return answers


def settled_modes(addresses: list[str]) -> dict[str, str] | None:
    """Each member's mode once the ensemble has one leader and the rest follow it, else None."""
    modes = {}
    for address in addresses:
        found = re.search(r"^Mode: (\w+)$", four_letter(address, "srvr"), re.MULTILINE)
        modes[address] = found[1] if found else "none"
    ordered = sorted(modes.values())
    return modes if ordered == ["follower"] * (len(addresses) - 1) + ["leader"] else None


@pytest.fixture(params=["roost keeper", "roost up"])
def standalone(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RoostProcess]:
    if request.param == "roost keeper":
        with keeper_process(tmp_path / "keeper", extra={"forceSync": True}) as proc:
            yield proc
    else:
        proc = start_roost(["up", "--data-dir", str(tmp_path / "up"), "--kafka-port", "0", "--keeper-port", "0"],
                           expect=("kafka", "keeper"))
        try:
            yield proc
        finally:
            proc.stop()


def test_standalone_replies_after_the_fsync(standalone: RoostProcess, tmp_path: Path) -> None:
    address = standalone.address("keeper")
    parent = make_parent(address)
    with SyscallTrace([standalone.popen.pid], tmp_path / "strace.txt") as trace:
        probes = write_probes(address, parent, 0)
    for answer in reply_durability(trace, [address], probes):
        assert answer.written == {standalone.popen.pid}, answer.describe()
        assert answer.synced == {standalone.popen.pid}, "replied before the fsync: " + answer.describe()


def test_without_force_sync_the_check_sees_replies_before_any_fsync(tmp_path: Path) -> None:
    with keeper_process(tmp_path / "keeper", extra={"forceSync": False}) as proc:
        address = proc.address("keeper")
        parent = make_parent(address)
        with SyscallTrace([proc.popen.pid], tmp_path / "strace.txt") as trace:
            probes = write_probes(address, parent, 0)
    for answer in reply_durability(trace, [address], probes):
        assert answer.written == {proc.popen.pid}, answer.describe()
        assert answer.synced == set(), "an fsync with forceSync=false: " + answer.describe()


def test_ensemble_replies_after_a_majority_and_the_replying_member_fsynced(tmp_path: Path) -> None:
    with keeper_ensemble(tmp_path, extra={"forceSync": True}) as procs:
        addresses = [proc.address("keeper") for proc in procs]
        modes = wait_for(lambda: settled_modes(addresses), timeout=60, what="a leader and two followers")
        leader = next(a for a in addresses if modes[a] == "leader")
        follower = next(a for a in addresses if modes[a] == "follower")
        parent = make_parent(leader)
        pids = [proc.popen.pid for proc in procs]
        with SyscallTrace(pids, tmp_path / "strace.txt") as trace:
            probes = write_probes(leader, parent, 0) + write_probes(follower, parent, 100)
    answers = reply_durability(trace, addresses, probes)
    assert {a.exchange.pid for a in answers} == {procs[addresses.index(leader)].popen.pid,
                                                 procs[addresses.index(follower)].popen.pid}
    for answer in answers:
        assert answer.exchange.pid in answer.synced, "replied before its own fsync: " + answer.describe()
        assert len(answer.synced) >= 2, "replied before a majority fsynced: " + answer.describe()
