"""RaftReplicator.change_membership on real members in one event loop (loopback sockets)."""

from __future__ import annotations

from pathlib import Path

from roost.raft.messages import Membership
from tests.raft.ensemble import Ensemble, eventually, run, with_ensemble


def test_the_leader_removes_itself_reports_it_and_a_survivor_leads(tmp_path: Path) -> None:
    async def body(ens: Ensemble) -> None:
        leader = await ens.wait_leader()
        member = ens.members[leader]
        for k in range(5):
            await member.propose(b"w%d" % k)
        remaining = frozenset(ens.ids) - {leader}
        applied: list[Membership] = []
        member.set_membership_handler(lambda index, m: applied.append(m))
        await member.change_membership(Membership(remaining), timeout=20)
        assert applied and applied[-1].voters == remaining
        await eventually(lambda: not member.is_leader and member.leader_id is None, 10,
                         "the removed leader to report that it leads no more")
        assert ens.leader_news[leader][-1] == (False, None)
        new = await ens.wait_leader(sorted(remaining))
        await ens.members[new].propose(b"after")
        await eventually(lambda: all(ens.machines[i].entries()[-1:] == [b"after"] for i in remaining), 10,
                         "the survivors to apply a write")

    run(with_ensemble(tmp_path, 3, body))
