"""A brief transaction chaos run in CI (scripts/txn_chaos.py runs it long; issue 20): a
consume-transform-produce application works through kill -9 of its transaction coordinator's
broker, of an output partition's leader and of itself, one each, in the middle of transactions;
its read_committed output holds every input record exactly once, no transaction stays open, and no
output partition's LSO ever goes back (run_txn_chaos asserts those). About 25 s."""

from __future__ import annotations

import os
from pathlib import Path

from tests.cluster.txn_chaos import CLUSTER_SETTINGS, FAULTS, run_txn_chaos
from tests.support.cluster import LocalCluster

ROUNDS = int(os.environ.get("ROOST_TXN_CHAOS_ROUNDS", "3"))
SEED = int(os.environ.get("ROOST_TXN_CHAOS_SEED", "7"))


def test_txn_chaos_brief(tmp_path: Path) -> None:
    cluster = LocalCluster.start(tmp_path, brokers=3, keepers=1, settings=CLUSTER_SETTINGS)
    try:
        report = run_txn_chaos(cluster, rounds=ROUNDS, seed=SEED, say=print, deadline_s=120, records=300, rate=100)
    finally:
        cluster.close()
    print(report)
    assert len(report.rounds) == ROUNDS, "the deadline cut the rounds short"
    if len(FAULTS) <= ROUNDS:  # the first rounds deliver each kind of fault once
        assert set(report.faults) == set(FAULTS), report.rounds
    assert report.mid_transaction >= 1, "no fault struck while a transaction was open"
    assert report.committed_output == report.records > 0
