"""Deterministic simulations of 3- and 5-member ensembles from fixed seeds."""

from __future__ import annotations

import pytest

from tests.sim.cluster import Cluster, Faults

SEEDS_3 = range(1, 31)
SEEDS_5 = range(101, 116)


@pytest.mark.parametrize("seed", SEEDS_3)
def test_three_members_survive_chaos(seed: int) -> None:
    cluster = Cluster(seed, members=3)
    cluster.run(8000)
    cluster.run_liveness()
    assert cluster.acknowledged, "the workload acknowledged no proposal at all"


@pytest.mark.parametrize("seed", SEEDS_5)
def test_five_members_survive_chaos(seed: int) -> None:
    cluster = Cluster(seed, members=5)
    cluster.run(8000)
    cluster.run_liveness()
    assert cluster.acknowledged


def test_single_member_commits_alone() -> None:
    cluster = Cluster(7, members=1, faults=Faults(nemesis_interval=10**9, crash_before_persist=0.0,
                                                  crash_between_persist_and_send=0.0))
    cluster.run(500)
    cluster.run_liveness()
    assert len(cluster.acknowledged) > 10


def test_same_seed_same_history() -> None:
    a, b = Cluster(42, members=3), Cluster(42, members=3)
    a.run(1500)
    b.run(1500)
    assert (a.now, a.max_commit, a.leaders, a.acknowledged) == (b.now, b.max_commit, b.leaders, b.acknowledged)
