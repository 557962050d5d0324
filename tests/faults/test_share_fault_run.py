"""Share groups under kill -9, briefly, in CI (roost.testing.faults.share_run): three share
consumers (explicit acknowledgement, commit_sync) on a one-partition topic a producer keeps
appending to, while the data partition's leader and then the share coordinator's broker are
killed with acknowledgements in flight; after quiescence the share-group checker must find
nothing delivered again after its accept or reject was answered, nothing lost, no delivery count
going down, and the coordinator's start offset past every record. The long run is
scripts/share_chaos.py. This is also the test of scripts/break_claims.py's share failover
mutations."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from roost.testing.faults.netns import PREFIX, why_unavailable
from roost.testing.faults.share_run import ROLES, run

WHY = why_unavailable()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"fault runs need network namespaces: {WHY}")


@pytest.mark.timeout(240)
def test_share_acknowledgements_survive_kills_of_the_data_leader_and_the_share_coordinator(tmp_path: Path) -> None:
    outcome = run(5, 2, tmp_path, consumers=3, rate=100.0, hold_s=(1.0, 1.5), quiet_s=(1.0, 1.5),
                  quiesce_s=30.0, say=lambda _: None)
    verdict = outcome.verdict
    assert outcome.valid is True, f"{verdict.explain()}\nquiesced {outcome.quiesced}; report: {outcome.report}"
    assert all(outcome.kills[role] == 1 for role in ROLES), outcome.kills
    assert verdict.stats["records"] > 300 and verdict.stats["acks ok"] > 20, verdict.stats
    kills = [op for op in outcome.history.faults() if op.f == "kill"]
    # mid-stream: acknowledgements were answered after each kill
    for kill in kills:
        assert any(op.f == "share-ack" and op.outcome == "ok" and op.invoke > kill.complete + 1
                   for op in outcome.history.client_ops()), f"nothing acknowledged after {kill.value}"
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert PREFIX + outcome.run_id not in names
