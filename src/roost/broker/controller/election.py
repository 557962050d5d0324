"""The controller shell's own decisions around elections and activation, as pure functions (the
asyncio shell, controller/shell.py, acts on them; so does the replication simulation's shell).
Each was a bug the replication simulation found; docs/replication-core.md lists them."""

from __future__ import annotations

from enum import Enum

from roost.broker.controller.core import ClusterSnapshot

ELECTION_RETRY_MS = 200  # pause before an election that broke off runs again


class AfterFailure(Enum):
    RESIGN_AND_ELECT = "resign, then run the election again"
    ELECT_AGAIN_LATER = "run the election again after ELECTION_RETRY_MS"


def after_failure(active: bool) -> AfterFailure:
    """A controller event failed (a ZooKeeper error, a bug). An active controller resigns and
    runs for election again. An election or activation that broke off (say the election's multi
    was applied and its reply lost) runs again after a pause: else /controller may name a broker
    that never activates, and nobody elects again. Kafka's controller re-checks /controller the
    same way."""
    return AfterFailure.RESIGN_AND_ELECT if active else AfterFailure.ELECT_AGAIN_LATER


def give_up_claim(controller_id: int, owner_session: int, broker_id: int, session_id: int | None,
                  active: bool) -> bool:
    """/controller names this broker, made by this very session, yet no controller runs here:
    an election or activation broke off. The claim is given up (deleted), and the deletion's
    watch runs the election again."""
    return not active and controller_id == broker_id and owner_session == session_id


def bounced_at_activation(snapshot: ClusterSnapshot, state_mzxid: dict[tuple[str, int], int]) -> set[int]:
    """Brokers that a partition state names (leader or ISR) but that registered after that state
    was last written (`state_mzxid`): they restarted or re-registered while no controller
    watched. The new controller handles them as bounced (their failure, then their startup), so
    they lose their leaderships and ISR places and every partition they led gets a new leader
    epoch. Otherwise one would lead again in an epoch it led before a crash that may have cut its
    unsynced tail, and the replicas diverge under one epoch."""
    return {broker for tp, known in snapshot.states.items()
            for broker in {known.state.leader, *known.state.isr}
            if broker in snapshot.brokers and snapshot.brokers[broker].epoch > state_mzxid.get(tp, 0)}
