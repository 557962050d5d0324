"""A brief chaos run in CI (scripts/cluster_chaos.py runs it long): brokers and the controller killed
or stopped and restarted at random while a producer and a consumer group work; nothing
acknowledged is lost, order per key holds, no committed group offset goes back."""

from __future__ import annotations

import os

import pytest

from tests.cluster.chaos import run_chaos
from tests.support.cluster import LocalCluster

ROUNDS = int(os.environ.get("ROOST_CHAOS_ROUNDS", "3"))


@pytest.mark.parametrize("seed", [int(os.environ.get("ROOST_CHAOS_SEED", "7"))])
def test_chaos_brief(tmp_path, seed: int) -> None:
    cluster = LocalCluster.start(tmp_path, brokers=3, keepers=1)
    try:
        report = run_chaos(cluster, rounds=ROUNDS, seed=seed, say=print, deadline_s=240)
    finally:
        cluster.close()
    assert report.rounds, "no chaos happened"
    assert report.acked > 0 and report.failed == 0, report
