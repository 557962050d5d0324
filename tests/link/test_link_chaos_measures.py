"""The measures scripts/link_chaos.py prints (RPO) and the check it makes (nothing acknowledged
below the promotion point missing), on made-up acknowledgements: the run itself needs root and
minutes, so only these pure parts run in the CI."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

spec = importlib.util.spec_from_file_location("link_chaos", Path(__file__).resolve().parents[2] / "scripts/link_chaos.py")
assert spec is not None and spec.loader is not None
chaos = importlib.util.module_from_spec(spec)
sys.modules["link_chaos"] = chaos  # its dataclasses look their module up
spec.loader.exec_module(chaos)
Ack = chaos.Ack


def test_rpo_counts_acknowledged_records_past_the_mirror_end_and_their_ages() -> None:
    acks = [Ack(0, o, f"v{o}", 100.0 + o) for o in range(10)] + [Ack(1, o, f"w{o}", 100.5 + o) for o in range(4)]
    loss = chaos.rpo(acks, {0: 7, 1: 4}, lost_at=110.0)
    assert loss.lost == 3 and loss.per_partition == {0: 3}
    assert loss.oldest_age_s == 3.0 and loss.newest_age_s == 1.0
    assert chaos.rpo(acks, {0: 10, 1: 4}, 110.0).lost == 0
    assert chaos.rpo(acks, {0: 0, 1: 0}, 103.2).lost == 7  # acknowledged after the loss: not counted


def test_missing_below_end_names_lost_or_changed_records() -> None:
    acks = [Ack(0, 0, "a", 1.0), Ack(0, 1, "b", 2.0), Ack(0, 2, "c", 3.0)]
    assert chaos.missing_below_end(acks, {0: 2}, {(0, 0): "a", (0, 1): "b"}) == []
    assert chaos.missing_below_end(acks, {0: 2}, {(0, 0): "a", (0, 1): "x"}) == [acks[1]]
    assert chaos.missing_below_end(acks, {0: 3}, {(0, 0): "a", (0, 1): "b"}) == [acks[2]]
