"""A plan and the load model as JSON-ready documents, in numbers (bytes, bytes per second, cores),
for the readers that are not a terminal: the plan an execution publishes at
/roost/balancer/plan (roost.broker.balance.execution) and the console's balancer page. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from roost.broker.balance.model import BrokerInfo, Resource
from roost.broker.balance.planner import BrokerLoad, Plan

MAX_PROPOSALS_SHOWN = 2000  # a plan holds at most max_actions (1000 by default) moves


def load_fields(load: BrokerLoad) -> dict[str, Any]:
    return {"replicas": load.replicas, "leaders": load.leaders,
            "disk_bytes": load.load[Resource.DISK], "bytes_in_per_s": load.load[Resource.NW_IN],
            "bytes_out_per_s": load.load[Resource.NW_OUT], "cpu_cores": load.load[Resource.CPU]}


def capacity_fields(broker: BrokerInfo) -> dict[str, float | None]:
    """A broker's configured capacities (None: unlimited), by the load fields' names."""
    names = {Resource.DISK: "disk_bytes", Resource.NW_IN: "bytes_in_per_s", Resource.NW_OUT: "bytes_out_per_s",
             Resource.CPU: "cpu_cores"}
    return {names[r]: broker.capacity.get(r) for r in (Resource.DISK, Resource.NW_IN, Resource.NW_OUT, Resource.CPU)}


def model_document(brokers: Mapping[int, BrokerInfo], loads: Mapping[int, BrokerLoad]) -> list[dict[str, Any]]:
    """One row per broker of the model: its load now, its rack, capacity and whether it is alive
    or being drained."""
    rows = []
    for broker_id in sorted(loads):
        info = brokers.get(broker_id)
        rows.append({"broker": broker_id, "rack": info.rack if info else None,
                     "alive": info.alive if info else False, "excluded": info.excluded if info else False,
                     "capacity": capacity_fields(info) if info else {}, **load_fields(loads[broker_id])})
    return rows


def plan_document(the_plan: Plan) -> dict[str, Any]:
    """Every proposal with the goals it serves, the goals' violations before and after (0: met),
    and the load per broker before and after."""
    goals_of = the_plan.goals_of()
    proposals = [{"topic": p.partition[0], "partition": p.partition[1], "old_replicas": list(p.old_replicas),
                  "new_replicas": list(p.new_replicas), "old_leader": p.old_leader, "new_leader": p.new_leader,
                  "moves_data": p.moves_data, "goals": list(goals_of.get(p.partition, ()))}
                 for p in the_plan.proposals[:MAX_PROPOSALS_SHOWN]]
    hard = set(the_plan.hard_goals)
    return {"proposals": proposals, "proposals_total": len(the_plan.proposals), "actions": len(the_plan.actions),
            "bytes_to_move": the_plan.bytes_to_move, "truncated": the_plan.truncated,
            "goals": [{"goal": g, "hard": g in hard, "before": the_plan.violations_before.get(g, 0.0),
                       "after": the_plan.violations_after.get(g, 0.0),
                       "proposals": sum(g in names for names in goals_of.values())} for g in the_plan.goal_order],
            "brokers": [{"broker": b, "before": load_fields(the_plan.before[b]), "after": load_fields(the_plan.after[b])}
                        for b in sorted(the_plan.before)]}
