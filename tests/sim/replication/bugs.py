"""Bugs to seed on purpose, to show that the checker catches them (each is a known way to lose
acknowledged messages; see the replication facts sheet's traps)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from roost.broker.controller.core import ControllerCore
from roost.broker.replica import fetcher as fetcher_module
from roost.broker.replica.state import PartitionState
from roost.broker.zk.layout import LeaderAndIsr


def _truncate_to_hw(epochs: Any, log_end_offset: int, high_watermark: int, leader_epoch: int,
                    leader_end_offset: int) -> int:
    return min(high_watermark, log_end_offset)


def _truncate_to_hw_on_follow(log_end_offset: int, high_watermark: int, latest_epoch: int) -> int:
    return min(high_watermark, log_end_offset)


def _elect_first_live(self: ControllerCore, tp: tuple[str, int]) -> bool:
    """The first live replica leads, in the ISR or not (and is put in it)."""
    current = self.states[tp].state
    live = [b for b in self._replicas(tp) if self._live(b) and b not in self.shutting_down]
    if not live:
        return self._no_leader(tp)
    leader = live[0]
    isr = tuple(b for b in current.isr if self._live(b))
    isr = isr if leader in isr else (leader, *isr)
    self._set_state(tp, LeaderAndIsr(leader, current.leader_epoch + 1, isr, self.epoch, current.recovery_state))
    self._send_leader_and_isr(tp, self._replicas(tp))
    return True


BUGS = {
    # KIP-101: a follower cuts its log at its own high watermark (when it starts following, and
    # when its log diverges), not where the leader's epochs say.
    "truncate-to-hw": [(fetcher_module, "truncation_offset", _truncate_to_hw),
                       (fetcher_module, "start_offset_without_epochs", _truncate_to_hw_on_follow)],
    # Trap 3: the controller elects a live replica outside the ISR (an unclean election, unasked).
    "elect-outside-isr": [(ControllerCore, "_elect_offline", _elect_first_live)],
    # Trap 2: the high watermark waits only for the ISR, not for a member being added.
    "hw-over-isr": [(PartitionState, "maximal_isr", property(lambda self: self.isr))],
}


@contextlib.contextmanager
def seeded(name: str | None) -> Iterator[None]:
    if name is None:
        yield
        return
    patches = BUGS[name]
    saved = [(owner, attribute, owner.__dict__[attribute] if isinstance(owner, type) else getattr(owner, attribute))
             for owner, attribute, _ in patches]
    try:
        for owner, attribute, replacement in patches:
            setattr(owner, attribute, replacement)
        yield
    finally:
        for owner, attribute, original in saved:
            setattr(owner, attribute, original)
