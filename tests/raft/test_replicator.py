"""RaftReplicator members in one event loop, talking over real loopback sockets."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from roost.raft.codec import encode_hello
from roost.raft.local import LocalReplicator
from roost.raft.node import ReplicatorConfig
from roost.raft.replicator import NoQuorum, Replicator
from tests.raft.ensemble import FAST, Ensemble, ListMachine, eventually, run, small_snapshots, with_ensemble


def test_implements_the_replicator_protocol(tmp_path: Path) -> None:
    assert isinstance(LocalReplicator(tmp_path), Replicator)


@pytest.mark.parametrize(("loop", "fsync_on_loop"), [("asyncio", True), ("uvloop", True), ("uvloop", False)])
def test_propose_on_follower_then_read_barrier(tmp_path: Path, loop: str, fsync_on_loop: bool) -> None:
    async def body(e: Ensemble) -> None:
        leader = await e.wait_leader()
        follower, other = [i for i in e.ids if i != leader]
        index = await e.members[follower].propose(b"from-follower", timeout=10)
        # Committed and applied locally before propose() returned: the proposer reads its write.
        assert (index, b"from-follower") in e.machines[follower].applied
        assert e.members[follower].last_applied >= index
        index2 = await e.members[leader].propose(b"from-leader", timeout=10)
        assert index2 > index
        await e.members[other].read_barrier(timeout=10)
        assert e.members[other].last_applied >= index2
        assert (index2, b"from-leader") in e.machines[other].applied
        # Many concurrent proposals from every member all commit, in one order everywhere.
        results = await asyncio.gather(*(e.members[i].propose(b"c%d-%d" % (i, k), timeout=20)
                                         for i in e.ids for k in range(30)))
        assert len(set(results)) == 90
        top = max(results)
        await eventually(lambda: all(e.members[i].last_applied >= top for i in e.ids), what="all applied")
        assert e.machines[1].applied == e.machines[2].applied == e.machines[3].applied
        # Leadership news reached every member, and app messages reach the leader.
        assert all((False, leader) in e.leader_news[i] or (True, leader) in e.leader_news[i] for i in e.ids)
        got: list[tuple[int, bytes]] = []
        e.members[leader].set_leader_message_handler(lambda src, msg: got.append((src, msg)))
        assert e.members[follower].send_to_leader(b"touch")
        await eventually(lambda: got == [(follower, b"touch")], what="app message at the leader")

    config = dataclasses.replace(FAST, fsync=True, fsync_on_loop=fsync_on_loop)
    run(with_ensemble(tmp_path, 3, body, config), loop=loop)


def test_leader_loss_reelection_and_catch_up_by_snapshot(tmp_path: Path) -> None:
    async def body(e: Ensemble) -> None:
        old = await e.wait_leader()
        for k in range(10):
            await e.members[old].propose(b"before-%d" % k)
        await e.stop_member(old)
        survivors = [i for i in e.ids if i != old]
        new = await e.wait_leader(survivors)
        assert new != old
        # Writes resume on the survivors; enough of them that the new leader compacts past the
        # old leader's log, which must then catch up from a snapshot.
        for k in range(60):
            await e.members[survivors[k % 2]].propose(b"after-%d" % k)
        await e.restart_member(old)
        top = e.members[new].last_applied
        await eventually(lambda: e.members[old].last_applied >= top, what="restarted member catches up")
        assert e.machines[old].restores >= 1
        expected = e.machines[new].entries()
        await eventually(lambda: e.machines[old].entries()[:len(expected)] == expected, what="same sequence")
        assert [b"before-%d" % k for k in range(10)] == expected[:10]
        assert expected[10:] == [b"after-%d" % k for k in range(60)]

    run(with_ensemble(tmp_path, 3, body, config=small_snapshots()))


def test_cut_off_member_refuses_writes_majority_carries_on(tmp_path: Path) -> None:
    async def body(e: Ensemble) -> None:
        leader = await e.wait_leader()
        await e.members[leader].propose(b"x0")
        e.isolate(leader)  # the leader itself: it must step down when it cannot hear a majority
        with pytest.raises(NoQuorum):
            await e.members[leader].propose(b"lost", timeout=2.0)
        majority = [i for i in e.ids if i != leader]
        new = await e.wait_leader(majority)
        index = await e.members[majority[0]].propose(b"x1", timeout=10)
        assert not e.members[leader].is_leader
        assert e.members[leader].last_applied < index
        e.heal()
        await eventually(lambda: e.members[leader].last_applied >= index, what="healed member converges")
        assert e.members[leader].leader_id == new
        entries = e.machines[leader].entries()
        assert b"x1" in entries and entries == e.machines[new].entries()[:len(entries)]
        assert b"lost" not in e.machines[new].entries()

    run(with_ensemble(tmp_path, 3, body, with_proxies=True))


def test_local_replicator_survives_restart(tmp_path: Path) -> None:
    async def body() -> None:
        first = LocalReplicator(tmp_path / "solo", fsync=True)
        machine = ListMachine()
        first.set_state_machine(machine.apply, machine.snapshot, machine.restore)
        await first.start()
        assert first.is_leader and first.leader_id == 1
        indices = await asyncio.gather(*(first.propose(b"w%d" % k) for k in range(50)))
        await first.read_barrier()
        await first.stop()
        second = LocalReplicator(tmp_path / "solo", fsync=True)
        again = ListMachine()
        second.set_state_machine(again.apply, again.snapshot, again.restore)
        await second.start()
        try:
            # Everything durable was applied before start() returned.
            assert again.applied == machine.applied
            assert sorted(indices) == [i for i, _ in again.applied]
            index = await second.propose(b"more")
            assert index > max(indices) and again.applied[-1] == (index, b"more")
        finally:
            await second.stop()

    run(body())


def test_peer_port_garbage_closes_that_connection_only(tmp_path: Path) -> None:
    async def body(e: Ensemble) -> None:
        leader = await e.wait_leader()
        host, port = e.addresses[leader]
        for junk in (b"GET / HTTP/1.1\r\n\r\n", encode_hello(99) + b"x" * 20,
                     encode_hello(2 if leader != 2 else 1) + b"\xff\xff\xff\xff" + b"y" * 50):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(junk)
            await writer.drain()
            assert await asyncio.wait_for(reader.read(), 10) == b""  # closed on us
            writer.close()
        follower = next(i for i in e.ids if i != leader)
        index = await e.members[follower].propose(b"still-fine", timeout=10)
        assert (index, b"still-fine") in e.machines[follower].applied

    run(with_ensemble(tmp_path, 3, body))


def test_local_replicator_restarts_from_a_snapshot(tmp_path: Path) -> None:
    config = ReplicatorConfig(snapshot_bytes=2_000, keep_bytes=300, fsync=False)

    async def body() -> None:
        first = LocalReplicator(tmp_path, fsync=False, config=config)
        machine = ListMachine()
        first.set_state_machine(machine.apply, machine.snapshot, machine.restore)
        await first.start()
        for k in range(100):
            await first.propose(b"%03d" % k + bytes(97))
        # Snapshots are taken in the background (a proposal that commits at once never yields).
        for _ in range(500):
            if first.core is not None and first.core.log.offset > 0:
                break
            await asyncio.sleep(0.01)
        await first.stop()
        assert list(tmp_path.glob("snapshot-*.snap")), "byte-based snapshots were taken"
        second = LocalReplicator(tmp_path, fsync=False, config=config)
        again = ListMachine()
        second.set_state_machine(again.apply, again.snapshot, again.restore)
        await second.start()
        try:
            assert again.restores == 1 and again.applied == machine.applied
            assert second.core is not None and second.core.log.offset > 0
        finally:
            await second.stop()

    run(body())
