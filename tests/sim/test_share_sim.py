"""The share-partition simulation (tests/sim/share_sim.py) from fixed seeds: Roost's share-partition
core and share coordinator core through leader moves (the core rebuilt from the coordinator's
state) and coordinator moves (the committed log replayed), with writes lost, retried and failed;
the same share-group checker as the real fault run judges each history. Seeds replay exactly."""

from __future__ import annotations

import pytest

from roost.testing.history import share
from tests.sim.share_sim import CONFIG, ShareSim

CI_SEEDS = range(1, 4)
CI_STEPS = 3000


@pytest.mark.parametrize("seed", CI_SEEDS)
def test_share_partitions_through_leader_and_coordinator_moves(seed: int) -> None:
    sim = ShareSim(seed)
    sim.run(CI_STEPS)
    verdict = share.check(sim.history().ops, delivery_limit=CONFIG.delivery_limit)
    assert verdict.valid is True, f"seed {seed}: {verdict.explain()}"
    assert not sim.stats["persisted start behind"], "the coordinator's start offset lags its terminal batches"
    assert sim.stats["leader moves"] >= 10 and sim.stats["coordinator moves"] >= 10, sim.stats
    assert verdict.stats["redeliveries"] > 0 and verdict.stats["archived"] > 0, verdict.stats
    assert verdict.stats["acks ok"] > 20 and verdict.stats["acks unknown"] > 0, verdict.stats


def test_same_seed_same_history() -> None:
    runs = []
    for _ in range(2):
        sim = ShareSim(9)
        sim.run(800)
        runs.append([op.show() for op in sim.history().ops])
    assert runs[0] == runs[1]
