"""The damaged-replica decision (roost.broker.replica.repair): cut and refetch only when another
replica is known to hold the damaged offsets, a cleanly elected other broker leads, and this
replica is out of the ISR; refuse (cut nothing) when this may be the only copy."""

from __future__ import annotations

from roost.broker.replica.repair import NO_LEADER, Damage, Verdict, holders_at_damage, plan_repair

ME = 3


def damage(offset: int = 40, high_watermark: int = 100, holders: frozenset[int] = frozenset({1, 2})) -> Damage:
    return Damage("/d/t-0/00000000000000000028.log", 700, offset, high_watermark, holders)


def test_a_clean_leader_elsewhere_with_this_replica_out_of_the_isr_cuts_at_the_damaged_batch() -> None:
    plan = plan_repair(damage(), ME, leader=1, isr=[1, 2], leader_recovered=True)
    assert plan.verdict is Verdict.TRUNCATE and plan.truncate_to == 40


def test_replication_factor_one_is_refused_whatever_the_state() -> None:
    sole = damage(holders=holders_at_damage(ME, True, ME, [ME]))
    assert sole.holders == frozenset()
    for leader in (ME, NO_LEADER, 1):
        plan = plan_repair(sole, ME, leader=leader, isr=[1], leader_recovered=True)
        assert plan.verdict is Verdict.REFUSE, leader
        assert "no other in-sync replica" in plan.reason


def test_the_only_in_sync_replica_of_three_is_refused() -> None:
    alone = damage(holders=holders_at_damage(ME, True, ME, [ME]))
    assert plan_repair(alone, ME, leader=1, isr=[1], leader_recovered=False).verdict is Verdict.REFUSE


def test_damage_at_or_above_the_high_watermark_is_refused() -> None:
    for offset in (100, 120):
        plan = plan_repair(damage(offset=offset, high_watermark=100), ME, leader=1, isr=[1, 2], leader_recovered=True)
        assert plan.verdict is Verdict.REFUSE and "high watermark" in plan.reason
    assert plan_repair(damage(offset=99, high_watermark=100), ME, 1, [1, 2], True).verdict is Verdict.TRUNCATE


def test_it_waits_while_it_still_leads_or_nobody_does() -> None:
    for leader in (ME, NO_LEADER):
        assert plan_repair(damage(), ME, leader=leader, isr=[ME, 1, 2], leader_recovered=True).verdict is Verdict.WAIT


def test_it_waits_while_it_is_still_counted_in_the_isr() -> None:
    # Cut while counted in-sync, it could be elected (or counted for acks=all) lacking records.
    plan = plan_repair(damage(), ME, leader=1, isr=[1, 2, ME], leader_recovered=True)
    assert plan.verdict is Verdict.WAIT and "ISR" in plan.reason


def test_it_waits_for_a_leader_from_an_unclean_election() -> None:
    plan = plan_repair(damage(), ME, leader=2, isr=[2], leader_recovered=False)
    assert plan.verdict is Verdict.WAIT and "unclean" in plan.reason


def test_holders_a_leader_knows_its_isr_a_follower_its_leader() -> None:
    assert holders_at_damage(ME, True, ME, [1, ME, 2]) == frozenset({1, 2})
    assert holders_at_damage(ME, False, 2, []) == frozenset({2})
    assert holders_at_damage(ME, False, NO_LEADER, []) == frozenset()
