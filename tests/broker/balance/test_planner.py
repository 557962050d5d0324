"""The balancer's pure planner on random clusters: hard goals never broken, min ISR kept at every
step of every reassignment, determinism, convergence (planning the planned cluster proposes
nothing), bounded plans; and the cases the balancer exists for, each with its figures checked."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roost.broker.balance.goals import RackAwareGoal, default_goals
from roost.broker.balance.model import BrokerInfo, ClusterModel, PartitionInfo, PartitionLoad, Resource
from roost.broker.balance.planner import OptimizationFailure, Plan, plan, steps
from roost.broker.balance.report import plan_document


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[BrokerInfo], list[PartitionInfo]]:
    broker_count = draw(st.integers(3, 7))
    racks = draw(st.sampled_from([None, 2, 3, 4]))
    dead = draw(st.sets(st.integers(1, broker_count), max_size=1))
    excluded = draw(st.sets(st.integers(1, broker_count), max_size=1)) - dead
    brokers = [BrokerInfo(b, rack=None if racks is None else f"rack-{b % racks}", alive=b not in dead,
                          excluded=b in excluded) for b in range(1, broker_count + 1)]
    # Partitions first placed on the first brokers only (as on a cluster that just grew).
    placed_on = list(range(1, min(broker_count, draw(st.integers(3, broker_count))) + 1))
    partitions = []
    for index in range(draw(st.integers(1, 24))):
        rf = draw(st.integers(1, min(3, len(placed_on))))
        replicas = tuple(draw(st.permutations(placed_on))[:rf])
        leader = replicas[draw(st.integers(0, rf - 1))]
        load = PartitionLoad(draw(st.floats(0, 1e6)), draw(st.floats(0, 1e6)), draw(st.floats(0, 1e9)),
                             draw(st.floats(0, 0.5)))
        partitions.append(PartitionInfo(f"topic-{index % 4}", index, replicas, leader, load,
                                        min_insync_replicas=min(2, rf)))
    return brokers, partitions


def applied(partitions: list[PartitionInfo], result: Plan) -> list[PartitionInfo]:
    by_key = {p.key: p for p in partitions}
    for proposal in result.proposals:
        by_key[proposal.partition] = dataclasses.replace(
            by_key[proposal.partition], replicas=proposal.new_replicas, leader=proposal.new_leader)
    return list(by_key.values())


def plan_or_none(brokers: list[BrokerInfo], partitions: list[PartitionInfo], **kwargs: int) -> Plan | None:
    try:
        return plan(brokers, partitions, **kwargs)
    except OptimizationFailure:
        return None


# Bounded for CI; a failure prints its seed (scripts can run more with --hypothesis-profile).
PROPERTY = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(clusters())
def test_no_hard_goal_gets_worse_and_a_met_one_stays_met(cluster: tuple[list[BrokerInfo], list[PartitionInfo]]) -> None:
    brokers, partitions = cluster
    result = plan_or_none(brokers, partitions)
    if result is None:
        return
    def racks_shared(placement: list[PartitionInfo]) -> int:  # counted here, not by the planner's goal
        rack = {b.broker_id: b.rack or f"broker-{b.broker_id}" for b in brokers}
        return sum(len(p.replicas) - len({rack[r] for r in p.replicas}) for p in placement)

    assert racks_shared(applied(partitions, result)) <= racks_shared(partitions)
    if not result.truncated:
        assert racks_shared(applied(partitions, result)) == 0
    for goal in default_goals():
        if goal.hard:
            assert result.violations_after[goal.name] <= result.violations_before[goal.name] + 1e-6, goal.name
            if not result.truncated:
                assert result.violations_after[goal.name] <= 1e-6, goal.name


@PROPERTY
@given(clusters())
def test_every_step_keeps_min_isr_and_the_replication_factor(cluster: tuple[list[BrokerInfo], list[PartitionInfo]]) -> None:
    brokers, partitions = cluster
    result = plan_or_none(brokers, partitions)
    if result is None:
        return
    alive = {b.broker_id for b in brokers if b.alive}
    usable = {b.broker_id for b in brokers if b.alive and not b.excluded}
    by_key = {p.key: p for p in partitions}
    for proposal in result.proposals:
        original = by_key[proposal.partition]
        assert len(proposal.new_replicas) == len(original.replicas)
        assert set(proposal.adding) <= usable, "a replica placed on a dead or leaving broker"
        in_sync = {r for r in original.replicas if r in alive}
        floor = min(original.min_insync_replicas, len(in_sync))
        for replica_set in steps(proposal):
            # An added replica counts only once in sync, which the executor waits for before the
            # next step: in the adding step only the old live replicas are in sync.
            counted = {r for r in replica_set if r in in_sync} if replica_set != proposal.new_replicas else \
                {r for r in replica_set if r in alive}
            assert len(counted) >= floor, (proposal, replica_set)
        assert proposal.new_leader in proposal.new_replicas and proposal.new_leader in alive


@PROPERTY
@given(clusters())
def test_the_plan_is_deterministic_and_a_fixed_point(cluster: tuple[list[BrokerInfo], list[PartitionInfo]]) -> None:
    brokers, partitions = cluster
    first = plan_or_none(brokers, partitions)
    if first is None:
        return
    again = plan(brokers, partitions)
    assert again.actions == first.actions and again.proposals == first.proposals
    if not first.truncated:
        replanned = plan(brokers, applied(partitions, first))
        assert replanned.empty, replanned.proposals


@PROPERTY
@given(clusters(), st.integers(0, 6))
def test_the_action_budget_bounds_the_plan(cluster: tuple[list[BrokerInfo], list[PartitionInfo]], budget: int) -> None:
    brokers, partitions = cluster
    result = plan_or_none(brokers, partitions, max_actions=budget)
    if result is not None:
        assert len(result.actions) <= budget
        assert len(result.proposals) <= budget


def test_an_added_broker_takes_its_share_of_replicas_and_leaders() -> None:
    brokers = [BrokerInfo(b) for b in (1, 2, 3)]
    partitions = [PartitionInfo("hot" if p < 9 else "cold", p, ((p % 3) + 1, ((p + 1) % 3) + 1, ((p + 2) % 3) + 1),
                                (p % 3) + 1, PartitionLoad(5e6 if p < 9 else 1e5, 5e6 if p < 9 else 1e5, 1e8, 0.01), 2)
                  for p in range(30)]
    assert plan(brokers, partitions).empty, "a balanced three-broker cluster needs nothing"
    result = plan([*brokers, BrokerInfo(4)], partitions)
    after = result.after[4]
    assert after.replicas >= 0.2 * 90 and after.leaders >= 0.2 * 30, after
    nw_in = [result.after[b].load[Resource.NW_IN] for b in (1, 2, 3, 4)]
    mean = sum(nw_in) / 4
    assert all(abs(value - mean) <= 0.15 * mean for value in nw_in), nw_in


def test_a_decommissioned_broker_is_drained_of_replicas_and_leadership() -> None:
    brokers = [BrokerInfo(1), BrokerInfo(2), BrokerInfo(3), BrokerInfo(4, excluded=True)]
    partitions = [PartitionInfo("t", p, (4, (p % 3) + 1, ((p + 1) % 3) + 1), 4, PartitionLoad(1e5, 1e5, 1e7), 2)
                  for p in range(12)]
    result = plan(brokers, partitions)
    assert result.after[4].replicas == 0 and result.after[4].leaders == 0
    assert all(4 not in p.new_replicas for p in result.proposals)


def test_a_dead_broker_past_the_healing_time_has_its_replicas_recreated_on_the_living() -> None:
    brokers = [BrokerInfo(1), BrokerInfo(2), BrokerInfo(3, alive=False), BrokerInfo(4)]
    partitions = [PartitionInfo("t", p, (1, 2, 3), 1 if p % 2 else 2, PartitionLoad(1e5, 1e5, 1e7), 2)
                  for p in range(6)]
    result = plan(brokers, partitions)
    assert all(set(p.new_replicas) == {1, 2, 4} for p in result.proposals)
    assert len(result.proposals) == 6


def test_rack_awareness_is_kept_and_an_impossible_one_fails_the_plan() -> None:
    brokers = [BrokerInfo(1, rack="a"), BrokerInfo(2, rack="a"), BrokerInfo(3, rack="b"), BrokerInfo(4, rack="c")]
    partitions = [PartitionInfo("t", 0, (1, 2, 3), 1, PartitionLoad(), 2)]
    result = plan(brokers, partitions)
    model = ClusterModel(brokers, applied(partitions, result))
    assert RackAwareGoal().violation(model) == 0
    with pytest.raises(OptimizationFailure, match="RackAwareGoal"):
        plan([BrokerInfo(1, rack="a"), BrokerInfo(2, rack="a"), BrokerInfo(3, rack="b")],
             [PartitionInfo("t", 0, (1, 2, 3), 1)])


def test_a_broker_over_its_capacity_sheds_load_below_the_threshold() -> None:
    capacity = {Resource.NW_IN: 10e6}
    brokers = [BrokerInfo(b, capacity=capacity) for b in (1, 2, 3, 4)]
    partitions = [PartitionInfo("t", p, (1, 2), 1, PartitionLoad(3e6, 0, 1e6), 1) for p in range(4)]
    result = plan(brokers, partitions)
    assert all(result.after[b].load[Resource.NW_IN] <= 0.8 * 10e6 + 1 for b in (1, 2, 3, 4))
    assert math.isclose(sum(result.after[b].load[Resource.NW_IN] for b in (1, 2, 3, 4)), 8 * 3e6)


@pytest.mark.parametrize(("size", "moves"), [(10e6, True), (1e9, False)])
def test_a_replica_is_copied_for_network_rates_only_when_the_rate_pays_for_the_copy(size: float,
                                                                                   moves: bool) -> None:
    """Bytes in 300 and 200 kB/s on two brokers (20 kB/s over the band on each side): swapping a
    150 kB/s partition with a 100 kB/s one evens them, taking 50 kB/s off (180 MB over the hour
    of move_payback_s). Two 10 MB replicas are worth copying for that; two 1 GB ones are not."""
    brokers = [BrokerInfo(1), BrokerInfo(2)]
    partitions = [PartitionInfo("t", index, (broker,), broker, PartitionLoad(rate, 0.0, size), 1)
                  for index, (broker, rate) in enumerate([(1, 1.5e5), (1, 1.5e5), (2, 1e5), (2, 1e5)])]
    result = plan(brokers, partitions)
    assert result.empty is not moves, result.proposals
    if moves:
        assert result.after[1].load[Resource.NW_IN] == result.after[2].load[Resource.NW_IN] == 2.5e5


@PROPERTY
@given(clusters())
def test_every_proposal_names_the_goals_it_was_made_for(cluster: tuple[list[BrokerInfo], list[PartitionInfo]]) -> None:
    """What the console shows beside each proposal (roost.broker.balance.report): the goals whose
    kept actions moved the partition, in priority order; a moved partition always has one."""
    brokers, partitions = cluster
    result = plan_or_none(brokers, partitions)
    if result is None:
        return
    assert len(result.action_goals) == len(result.actions)
    assert set(result.hard_goals) == {g.name for g in default_goals() if g.hard}
    goals_of = result.goals_of()
    rank = {name: index for index, name in enumerate(result.goal_order)}
    for proposal in result.proposals:
        names = goals_of[proposal.partition]
        assert names and [rank[n] for n in names] == sorted(rank[n] for n in names), names
    document = plan_document(result)
    assert [p["goals"] for p in document["proposals"]] == [list(goals_of[p.partition]) for p in result.proposals]
    assert sum(g["proposals"] for g in document["goals"]) >= len(result.proposals)
