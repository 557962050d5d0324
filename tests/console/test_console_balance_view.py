"""The balancer page's pure part (roost.console.balance_view): each proposal's progress (the
execution's word where it has one, else the cluster's: done only once the partition holds the
target's replicas and is not moving), an execution's summary (running, finished, stale), each
broker's share and sample age; and the phase names it shares with the executor."""

from __future__ import annotations

from roost.broker.balance.executor import Phase
from roost.console.balance_view import (
    FINISHED_PHASES,
    RUNNING_PHASES,
    STALE_S,
    balancer_view,
    dry_run_view,
    execution_summary,
    partition_name,
)

NOW = 1_800_000_000.0


def proposal(topic: str, index: int, old: list[int], new: list[int]) -> dict[str, object]:
    return {"topic": topic, "partition": index, "old_replicas": old, "new_replicas": new, "old_leader": old[0],
            "new_leader": new[0], "moves_data": set(old) != set(new), "goals": ["ReplicaDistributionGoal"]}


def state(phase: Phase, updated: float = NOW, **executor: object) -> dict[str, object]:
    return {"started": NOW - 30, "updated": updated, "throttles": {"rate": 100_000},
            "owner": None, "executor": {"phase": phase.value, "tasks": executor.pop("tasks", {}),
                                        "in_progress": [], "refused": [], "moves_per_broker": 5, **executor}}


PLAN = {"started": NOW - 30, "proposals": [proposal("orders-eu", 0, [1, 2], [1, 3]), proposal("orders-eu", 1, [2, 1], [2, 3]),
                                           proposal("orders-eu", 2, [1, 2], [3, 2]), proposal("pay", 0, [1, 2], [2, 3])],
        "proposals_total": 4, "goals": [], "brokers": []}


def view(the_state: dict[str, object] | None, current: dict[tuple[str, int], tuple[int, ...]],
         moving: dict[tuple[str, int], dict[str, list[int]]], plan: dict[str, object] | None = PLAN) -> dict[str, object]:
    return balancer_view(auto=None, state=the_state, plan=plan, model=[], loads={}, live=[1, 2, 3], controller=1,
                         current=current, reassignments=moving, now=NOW)


def test_the_phases_are_the_executors():
    assert RUNNING_PHASES | FINISHED_PHASES | {Phase.NO_TASK_IN_PROGRESS.value} == {p.value for p in Phase}
    assert partition_name("orders-eu-3: [1, 2] -> [2, 3]") == "orders-eu-3"


def test_a_proposal_is_done_only_once_its_partition_holds_the_target_and_is_not_moving():
    running = state(Phase.INTER_BROKER_REPLICA_MOVEMENT, tasks={"in_progress": 1, "done": 1, "pending": 1, "refused": 1},
                    in_progress=["orders-eu-1: [2, 1] -> [2, 3]"], refused=["pay-0: target names broker 9, not alive"])
    current = {("orders-eu", 0): (3, 1), ("orders-eu", 1): (2, 1, 3), ("orders-eu", 2): (3, 2), ("pay", 0): (1, 2)}
    # orders-eu-2 holds its target's replicas, but a reassignment of it is still listed: not done yet.
    moving = {("orders-eu", 1): {"replicas": [2, 1, 3], "adding": [3], "removing": [1]},
              ("orders-eu", 2): {"replicas": [3, 2], "adding": [], "removing": []}}
    shown = view(running, current, moving)
    states = {f"{p['topic']}-{p['partition']}": p["state"] for p in shown["plan"]["proposals"]}
    assert states == {"orders-eu-0": "done", "orders-eu-1": "in progress", "orders-eu-2": "pending",
                      "pay-0": "refused"}
    assert shown["plan"]["of_the_execution"] and shown["plan"]["states"] == {"done": 1, "in progress": 1, "pending": 1,
                                                                               "refused": 1}
    assert [r["partition"] for r in shown["reassignments"]] == [1, 2]
    execution = shown["execution"]
    assert execution["running"] and not execution["stale"] and execution["finished"] == 2 and execution["total"] == 4
    assert execution["progress"] == 0.5 and execution["throttle"] == 100_000 and execution["owner"] == "operator"


def test_after_the_execution_ended_what_is_not_done_says_so_and_another_executions_plan_is_the_clusters_word():
    ended = state(Phase.STOPPED, tasks={"done": 1, "cancelled": 3}, stop_reason="stop asked (roost balance stop)")
    current = {("orders-eu", 0): (1, 3), ("orders-eu", 1): (2, 1), ("orders-eu", 2): (1, 2), ("pay", 0): (1, 2)}
    shown = view(ended, current, {})
    assert [p["state"] for p in shown["plan"]["proposals"]] == ["done", "not done", "not done", "not done"]
    assert not shown["execution"]["running"] and shown["execution"]["progress"] == 1.0
    other = view(state(Phase.INTER_BROKER_REPLICA_MOVEMENT, in_progress=["orders-eu-1: [2, 1] -> [2, 3]"]), current, {},
                 plan={**PLAN, "started": NOW - 999})
    assert not other["plan"]["of_the_execution"]
    assert [p["state"] for p in other["plan"]["proposals"]] == ["done", "not done", "not done", "not done"]


def test_a_running_execution_not_updated_for_long_is_stale():
    assert execution_summary(state(Phase.INTER_BROKER_REPLICA_MOVEMENT, updated=NOW - STALE_S - 1), NOW)["stale"]
    assert not execution_summary(state(Phase.COMPLETED, updated=NOW - 3600), NOW)["stale"]
    assert execution_summary(None, NOW) is None and view(None, {}, {}, plan=None)["plan"] is None


def test_each_broker_shows_its_share_and_how_old_its_sample_is():
    model = [{"broker": 1, "replicas": 6, "leaders": 3, "bytes_in_per_s": 3000.0},
             {"broker": 2, "replicas": 2, "leaders": 1, "bytes_in_per_s": 1000.0},
             {"broker": 4, "replicas": 0, "leaders": 0, "bytes_in_per_s": 0.0}]
    loads = {1: {"time_ms": int(NOW * 1000) - 2500, "windows": 5}, 2: {"time_ms": int(NOW * 1000), "windows": 1}}
    shown = balancer_view(auto={"mode": "continuous", "decision": {"kind": "hold", "reason": "balanced"}}, state=None,
                          plan=None, model=model, loads=loads, live=[1, 2], controller=2, current={}, reassignments={},
                          now=NOW)
    rows = {r["broker"]: r for r in shown["brokers"]}
    assert rows[1]["share"] == {"replicas": 0.75, "leaders": 0.75, "bytes_in_per_s": 0.75}
    assert rows[1]["sample_age_s"] == 2.5 and rows[1]["windows"] == 5 and rows[1]["live"]
    assert not rows[4]["live"] and not rows[4]["sampled"] and rows[4]["sample_age_s"] is None
    assert shown["mode"] == "continuous" and shown["decision"]["reason"] == "balanced"
    assert [p["state"] for p in dry_run_view(PLAN, NOW)["proposals"]] == ["proposed"] * 4
