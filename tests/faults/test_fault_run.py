"""The fault-injection harness, briefly, in CI: a keeper ensemble and a broker cluster each in
network namespaces, every fault kind (kill -9, SIGSTOP, a partition, a power cut) at least once,
every client operation recorded and checked (linearizability, ZooKeeper's guarantees, the broker's
lost/duplicate/reorder checks). Long runs: scripts/fault_run.py (docs/fault-testing.md).

These are also the tests of the harness-level mutations in scripts/break_claims.py (a keeper that
does not fsync, a broker that does not fsync, ...): under them the checkers must fail here.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from roost.testing.faults.keeper_workload import REGISTERS
from roost.testing.faults.nemesis import KINDS
from roost.testing.faults.netns import PREFIX, why_unavailable
from roost.testing.faults.run import run

WHY = why_unavailable()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"fault runs need network namespaces: {WHY}")

FAST = {"hold_s": (1.5, 3.0), "quiet_s": (1.0, 2.0)}


def leftovers(run_id_prefix: str) -> str:
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return "\n".join(line for line in (names + links).splitlines() if run_id_prefix in line)


def check_outcome(outcome, out: Path) -> None:
    explained = "\n".join(v.explain() for v in outcome.verdicts)
    assert outcome.valid is True, f"{explained}\nreport: {outcome.report}"
    for kind in KINDS:
        assert outcome.faults.get(kind, 0) >= 1, outcome.faults
    ops = [op for op in outcome.history.client_ops() if op.outcome == "ok"]
    assert len(ops) > 200, f"only {len(ops)} ok operations: the workload hardly ran"
    assert (out / "report.md").exists() and (out / "history.jsonl").exists()


@pytest.mark.timeout(240)
def test_a_keeper_ensemble_under_every_fault_stays_linearizable(tmp_path: Path) -> None:
    outcome = run("keeper", 11, 14.0, KINDS, tmp_path, clients=4, say=lambda _: None, key_lifetime_s=5.0, **FAST)
    check_outcome(outcome, tmp_path)
    registers = {op.key for op in outcome.history.client_ops() if op.f == "write"}
    assert len(registers) > REGISTERS, f"the workload never moved to fresh registers: {sorted(registers)}"
    assert not leftovers(PREFIX + outcome.run_id), leftovers(PREFIX + outcome.run_id)


@pytest.mark.timeout(300)
def test_a_broker_cluster_under_every_fault_loses_duplicates_and_reorders_nothing(tmp_path: Path) -> None:
    outcome = run("broker", 12, 14.0, KINDS, tmp_path, clients=4, say=lambda _: None, **FAST)
    check_outcome(outcome, tmp_path)
    assert outcome.verdicts[0].stats["acked"] > 100
    assert not leftovers(PREFIX + outcome.run_id), leftovers(PREFIX + outcome.run_id)
