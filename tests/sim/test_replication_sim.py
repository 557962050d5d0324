"""Deterministic simulation of ZooKeeper-mode replication (tests/sim/replication) from fixed seeds.

Every seed runs Roost's controller (its activities and core), replica manager, fetchers, ISR
manager, produce handler, append door, purgatory and partition logs through crashes, power losses,
restarts, ZooKeeper session expiries, controller failover, partitions and delayed, dropped and
reordered messages, with the invariants checked after every step, then heals and checks that the
cluster converges. A failure names its seed and the replay command (scripts/replication_soak.py
--seed ...). The soak script runs thousands of seeds.
"""

from __future__ import annotations

import logging

import pytest

from roost.broker.zk import layout
from roost.zkclient import Create
from tests.sim.replication.bugs import BUGS, seeded
from tests.sim.replication.cluster import Cluster, Faults, SimulationFailure

CI_SEEDS = range(1, 9)
CI_STEPS = 6000
# The seeds a seeded bug is looked for in, in order, until one catches it (a bug that needs a
# rarer interleaving, like hw-over-isr, takes a few more seeds than the chaos tests run).
BUG_SEEDS = range(1, 25)


@pytest.fixture(autouse=True)
def _quiet_brokers(caplog: pytest.LogCaptureFixture) -> None:
    # The brokers log every role change; thousands of lines per seed say nothing the transcript
    # does not.
    caplog.set_level(logging.CRITICAL)


@pytest.mark.parametrize("seed", CI_SEEDS)
def test_replication_survives_chaos(seed: int) -> None:
    with Cluster(seed) as cluster:
        cluster.run(CI_STEPS)
        cluster.run_liveness()
        assert cluster.checker.acknowledged > 0, "no acks=all write was ever acknowledged"
        assert cluster.checker.state_writes > 0


def test_same_seed_same_history() -> None:
    histories = []
    for _ in range(2):
        with Cluster(42) as cluster:
            cluster.run(1500)
            histories.append((cluster.world.now, cluster.checker.acknowledged, dict(cluster.stats),
                              list(cluster.transcript)))
    assert histories[0] == histories[1]


def test_power_losses_drop_unsynced_data_and_no_acknowledged_write() -> None:
    # Seed 8 draws power losses (every topic then fsyncs before acknowledging), five of them in
    # CI_STEPS since the simulation runs the real controller activities (seed 4 did before; its
    # history changed with the controller's real ZooKeeper calls).
    with Cluster(8) as cluster:
        assert cluster.faults.power_loss
        cluster.run(CI_STEPS)
        assert cluster.stats["power_losses"] > 0 and cluster.stats["unsynced_bytes_lost"] > 0
        cluster.run_liveness()


def _caught(bug: str) -> tuple[int, str] | None:
    """The first CI seed whose invariant checks fail with `bug` seeded, and what they said."""
    for seed in BUG_SEEDS:
        with seeded(bug), Cluster(seed) as cluster:
            cluster.replay_extra = f" --bug {bug}"
            try:
                cluster.run(CI_STEPS)
            except SimulationFailure as failure:
                return seed, str(failure)
    return None


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_seeded_bug_is_caught(bug: str) -> None:
    caught = _caught(bug)
    assert caught is not None, f"the checker missed the seeded bug {bug!r} on seeds {list(BUG_SEEDS)}"
    seed, message = caught
    assert "replay: " in message and f"--seed {seed} " in message


def test_a_failure_names_its_seed_and_replay_command() -> None:
    with Cluster(3) as cluster:
        cluster.run(10)
        with pytest.raises(SimulationFailure, match=r"seed 3, step \d+.*\n.*replay: .*--seed 3 --steps \d+"):
            cluster.fail("a made-up violation")


# Seeds that find a bug the simulation once found, when its fix is reverted in src/ (the
# simulation runs the real fetchers, ISR manager, controller and logs: scripts/break_claims.py
# reverts each fix and these fail). With the fixes they must pass, liveness included. A change
# to what the simulation runs changes every seed's history: then search the seeds again with
# the fix reverted (the seeds were re-found when the simulation began to run the real
# controller activities, append door and long-poll).
FOUND_BUGS = {
    "fetcher-recheck": (169, 8000),  # ReplicaFetchers._out_of_range truncating after losing its role
    "isr-keep-pending": (14, 8000),  # IsrManager._apply forgetting a fenced or other-epoch change
    "epoch-cache-trim": (2, CI_STEPS),  # PartitionLog.truncate_to at the log end keeping an empty epoch
    # the controller's channel dropping a request a broker refused as stale before it learnt the
    # epoch of its new registration (found once the simulation ran the real controller activities)
    "epoch-not-learnt-yet": (1241, 8000),
}


@pytest.mark.parametrize("bug", sorted(FOUND_BUGS))
def test_a_seed_that_found_a_bug_passes_on_the_real_code(bug: str) -> None:
    seed, steps = FOUND_BUGS[bug]
    with Cluster(seed) as cluster:
        cluster.run(steps)
        cluster.run_liveness()


def test_a_lost_reply_to_a_re_registration_is_asked_again() -> None:
    """A broker's session expires (cut from ZooKeeper); when it is back, its new registration is
    applied but the reply is lost. The broker must ask again and learn its new epoch (the bug:
    it gave up and kept the old one, and every controller request was refused as stale)."""
    calm = Faults(drop=0.0, slow=0.0, nemesis_interval=10**9, max_down=0, power_loss=False, zk_lost_reply=0.0)
    with Cluster(2, brokers=3, faults=calm) as cluster:
        cluster.replay_command = ".venv/bin/python -m pytest tests/sim/test_replication_sim.py -k re_registration"
        cluster.run_for(1000)
        victim = next(b for b in cluster.broker_ids if b != cluster.controller())
        path = layout.broker_path(victim)
        cluster.cut_from_zookeeper(victim, 3000)
        cluster.lose_reply_of = lambda ops: any(isinstance(op, Create) and op.path == path for op in ops)
        cluster.run_for(6000)
        assert cluster.lose_reply_of is None, "the registration's reply was never lost"
        proc = cluster.process(victim)
        node = cluster.zk.tree.get(path)
        assert proc is not None and node is not None
        assert proc.replicas.broker_epoch == node.czxid, "the broker does not know its registration's epoch"


# Bugs the simulation found in the controller shell's decisions (roost.broker.controller.election,
# which the simulation's controller shell calls): scripts/break_claims.py reverts each fix there
# and its scenario fails.
def _controller_after_lost_election_reply() -> list[int]:
    calm = Faults(drop=0.0, slow=0.0, nemesis_interval=10**9, max_down=0, power_loss=False, zk_lost_reply=0.0)
    with Cluster(1, brokers=3, faults=calm) as cluster:
        cluster.replay_command = ".venv/bin/python -m pytest tests/sim/test_replication_sim.py -k lost_election"
        cluster.lose_reply_of = lambda ops: any(isinstance(op, Create) and op.path == "/controller" for op in ops)
        cluster.run_for(5000)
        return [proc.broker_id for proc in cluster.live_processes() if proc.controller.active]


def test_a_lost_election_reply_still_leaves_a_controller() -> None:
    assert _controller_after_lost_election_reply(), "no active controller 5 s after the election"


def _bounce_during_failover() -> None:
    """A partition leader is killed and restarts while the controller is cut off from
    ZooKeeper: the leader's old session expires (nobody acts on it), it registers again, then
    the controller's session expires and a new controller loads the cluster from ZooKeeper."""
    calm = Faults(drop=0.0, slow=0.0, nemesis_interval=10**9, max_down=0, power_loss=False, zk_lost_reply=0.0)
    with Cluster(5, brokers=4, faults=calm) as cluster:
        cluster.replay_command = ".venv/bin/python -m pytest tests/sim/test_replication_sim.py -k bouncing"
        cluster.run_for(1000)
        controller = cluster.controller()
        # A leader of a partition the controller does not replicate (else the new controller
        # takes the dead controller out of its ISR, and that bumps the leader epoch anyway).
        victim = min(state.leader for tp in cluster.partitions
                     if (state := cluster.checker.zk_state(tp)) is not None and state.leader not in (controller, -1)
                     and controller not in cluster.replicas(tp))
        cluster.crash_broker(victim, power_loss=False)
        cluster.restart_later(victim, 50)
        cluster.run_for(300)
        assert controller is not None
        cluster.cut_from_zookeeper(controller, 5000)
        cluster.run_for(6000)
        assert cluster.incarnations[victim] == 2


def test_a_broker_bouncing_during_controller_failover_gets_new_leader_epochs() -> None:
    _bounce_during_failover()


def test_power_losses_where_topics_do_not_fsync_lose_acknowledged_writes() -> None:
    # Not a Roost bug: without fsync before acknowledging, an acknowledged write may live only in
    # page caches, and Kafka's rules (ZooKeeper mode) lose it when those machines lose power. The
    # checker must see it (seed 21: topic a, replication factor 3, min.insync.replicas 2; seed 29
    # did before the simulation ran the real controller activities, which changed its history).
    with Cluster(21, power_loss_without_fsync=True) as cluster:
        with pytest.raises(SimulationFailure, match=r"\('a', \d\): acknowledged write .* is not in the log of broker"):
            cluster.run(CI_STEPS)
        assert "a" not in cluster.fsync_topics


# The fast failure detection (roost.broker.controller.liveness): a killed broker's end is seen at
# once (its connections end, its port refuses), and false verdicts declare live brokers and
# controllers dead. Nothing acknowledged may be lost either way.
@pytest.mark.parametrize("seed", CI_SEEDS)
def test_replication_survives_chaos_with_fast_failure_detection(seed: int) -> None:
    with Cluster(seed, fast_detection=True) as cluster:
        cluster.replay_extra = " --fast-detection"
        cluster.run(CI_STEPS)
        cluster.run_liveness()
        assert cluster.checker.acknowledged > 0


def test_a_seed_where_trusting_a_verdict_loses_acknowledged_writes_passes() -> None:
    """Seed 11 with the signals: a verdict trusted further than a session expiry (a partition left
    without a leader by it given to a replica outside the ISR) loses an acknowledged write here
    (scripts/break_claims.py --only fast-detection-verdict-trusted); the real rules lose nothing."""
    with Cluster(11, fast_detection=True) as cluster:
        cluster.replay_extra = " --fast-detection"
        cluster.run(CI_STEPS)
        cluster.run_liveness()


def _calm(dead_signal: float) -> Faults:
    # false_dead_interval: the signals are simulated (Cluster.fast_detection), a false one never.
    return Faults(drop=0.0, slow=0.0, nemesis_interval=10**9, max_down=0, power_loss=False, zk_lost_reply=0.0,
                  dead_signal=dead_signal, false_dead_interval=10**12)


def _led_by(cluster: Cluster, broker: int) -> list[tuple[str, int]]:
    return [tp for tp in cluster.partitions if (s := cluster.checker.zk_state(tp)) is not None and s.leader == broker]


def test_a_killed_leader_is_replaced_before_its_session_could_expire() -> None:
    with Cluster(11, brokers=3, faults=_calm(dead_signal=1.0)) as cluster:
        cluster.replay_command = ".venv/bin/python -m pytest tests/sim/test_replication_sim.py -k before_its_session"
        cluster.run_for(1500)
        controller = cluster.controller()
        victim = next(b for b in cluster.broker_ids if b != controller and _led_by(cluster, b))
        led = _led_by(cluster, victim)
        epochs = {tp: cluster.checker.zk_state(tp).leader_epoch for tp in led}  # type: ignore[union-attr]
        cluster.crash_broker(victim, power_loss=False)
        cluster.run_for(300)  # the session timeout is 1200 ms
        for tp in led:
            state = cluster.checker.zk_state(tp)
            assert state is not None and state.leader != victim and state.leader_epoch > epochs[tp], (tp, state)
        assert cluster.zk.tree.get(layout.broker_path(victim)) is None
        cluster.run_liveness()


def test_a_killed_controller_is_replaced_before_its_session_could_expire() -> None:
    with Cluster(12, brokers=3, faults=_calm(dead_signal=1.0)) as cluster:
        cluster.replay_command = ".venv/bin/python -m pytest tests/sim/test_replication_sim.py -k killed_controller"
        cluster.run_for(1500)
        controller = cluster.controller()
        assert controller is not None
        cluster.crash_broker(controller, power_loss=False)
        cluster.run_for(400)
        now = cluster.controller()
        assert now not in (None, controller)
        assert all(s is not None and s.leader != controller for tp in cluster.partitions
                   if (s := cluster.checker.zk_state(tp)) is not None and s.leader >= 0)
        cluster.run_liveness()


def test_a_live_leader_declared_dead_is_fenced_and_comes_back_as_after_a_bounce() -> None:
    with Cluster(13, brokers=3, faults=_calm(dead_signal=0.0)) as cluster:
        cluster.replay_command = ".venv/bin/python -m pytest tests/sim/test_replication_sim.py -k declared_dead"
        cluster.run_for(1500)
        controller = cluster.process(cluster.controller())  # type: ignore[arg-type]
        assert controller is not None
        victim = next(b for b in cluster.broker_ids if b != controller.broker_id and _led_by(cluster, b))
        proc = cluster.process(victim)
        assert proc is not None
        old_epoch = proc.replicas.broker_epoch
        led = _led_by(cluster, victim)
        registration = controller.controller.events.registration(victim)
        assert registration is not None
        controller.controller.events.suspect(registration, "a false verdict (test)")
        cluster.run_for(300)
        # Still the same process; it registered again, and lost its leaderships to new epochs.
        assert cluster.process(victim) is proc
        node = cluster.zk.tree.get(layout.broker_path(victim))
        assert node is not None and proc.replicas.broker_epoch == node.czxid != old_epoch
        for tp in led:
            state = cluster.checker.zk_state(tp)
            assert state is not None and (state.leader != victim or state.leader_epoch >= 2), (tp, state)
        # The producer kept going throughout: the checker found nothing acknowledged lost.
        cluster.run_liveness()
