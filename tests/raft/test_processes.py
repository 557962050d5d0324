"""Three RaftReplicator processes on loopback: kill -9 the leader, re-elect, restart, catch up."""

from __future__ import annotations

from pathlib import Path

from tests.raft.member_proc import Member, wait_for_leader
from tests.support.procs import free_ports


def test_kill_leader_reelect_restart_catch_up(tmp_path: Path) -> None:
    ports = free_ports(3)
    peers = ",".join(f"{i}=127.0.0.1:{p}" for i, p in zip((1, 2, 3), ports, strict=True))
    members: dict[int, Member] = {}
    try:
        for i in (1, 2, 3):
            members[i] = Member(i, peers, tmp_path / f"m{i}")
        leader = wait_for_leader(list(members.values()))
        follower = next(m for m in members.values() if m is not leader)
        acked = {}
        for k in range(20):
            answer = follower.ask(f"propose before-{k}")
            acked[f"before-{k}"] = answer["ok"]
        leader.kill9()
        survivors = [m for m in members.values() if m is not leader]
        new_leader = wait_for_leader(survivors)
        assert new_leader is not leader
        for k in range(120):  # enough to pass two snapshots: the restarted member needs one
            answer = survivors[k % 2].ask(f"propose after-{k}")
            assert "ok" in answer, answer
            acked[f"after-{k}"] = answer["ok"]
        members[leader.id] = restarted = Member(leader.id, peers, tmp_path / f"m{leader.id}")
        assert restarted.ask("read")["ok"] >= max(acked.values())
        dumps = {m.id: m.ask("dump")["entries"] for m in members.values()}
        expected = dumps[new_leader.id]
        for entries in dumps.values():
            assert entries[:len(expected)] == expected[:len(entries)]
        assert {data: index for index, data in dumps[restarted.id]} == acked
    finally:
        for member in members.values():
            member.stop()
