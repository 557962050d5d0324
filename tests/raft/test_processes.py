"""Three RaftReplicator processes on loopback: kill -9 the leader, re-elect, restart, catch up."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.support.procs import free_ports

ROOT = Path(__file__).resolve().parents[2]


class Member:
    def __init__(self, node_id: int, peers: str, directory: Path) -> None:
        self.id = node_id
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.raft.member_proc", "--id", str(node_id), "--peers", peers,
             "--dir", str(directory)],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        assert "started" in self._next(60)

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def _next(self, timeout: float) -> dict:
        return json.loads(self.lines.get(timeout=timeout))

    def ask(self, command: str, timeout: float = 30.0) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._next(timeout)

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(30)
            except (subprocess.TimeoutExpired, OSError):
                self.proc.kill()
                self.proc.wait(30)


def wait_for_leader(members: list[Member], timeout: float = 30.0) -> Member:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        statuses = {m.id: m.ask("status") for m in members}
        leaders = {s["leader"] for s in statuses.values()}
        if len(leaders) == 1:
            (leader,) = leaders
            if leader in statuses and statuses[leader]["is_leader"]:
                return next(m for m in members if m.id == leader)
        time.sleep(0.05)
    raise AssertionError(f"no agreed leader among {[m.id for m in members]}")


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
