"""The balancer's page, put together from what the balancer leaves in ZooKeeper and what the
cluster shows now (docs/balancing.md):

- the automatic balancer's status (/roost/balancer/auto: mode, the controller in charge, its
  last decision and why, its last action and outcome, the brokers it has seen down);
- the last execution's state (/roost/balancer/execution: phase, task counts, the moves in
  progress, those refused, the throttle, whose execution it is, when it was last updated), and
  the plan it carries out (/roost/balancer/plan, written once at its start: every proposal with
  the goals it serves, the goals' violations before and after, the load per broker before and
  after);
- the load model per broker now (the planner's own model, from the brokers' load samples and
  Metadata) and the reassignments in progress (ListPartitionReassignments).

Each proposal's progress is the execution's word where it has one (in progress, refused) and
otherwise the cluster's: done once the partition's replicas are the target's and it is not
moving. Pure: roost.console.balancer_side fetches, `balancer_view` decides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# The executor's phases (roost.broker.balance.executor.Phase) in which an execution is running.
RUNNING_PHASES = frozenset({"INTER_BROKER_REPLICA_MOVEMENT_TASK_IN_PROGRESS", "LEADER_MOVEMENT_TASK_IN_PROGRESS",
                            "STOPPING_EXECUTION"})
FINISHED_PHASES = frozenset({"COMPLETED", "STOPPED"})
STALE_S = 120.0  # a running execution not updated for this long may have lost its runner (as autocore judges)

Partition = tuple[str, int]


def partition_name(entry: str) -> str:
    """The partition an executor status line names ("orders-3: [1, 2] -> [2, 3]" -> "orders-3";
    a topic name holds no ':' nor space)."""
    return entry.split(":", 1)[0].strip()


def execution_summary(state: Mapping[str, Any] | None, now: float) -> dict[str, Any] | None:
    """The last execution: its phase, whether it runs, its progress (tasks finished of all)."""
    if not state:
        return None
    executor = state.get("executor") or {}
    phase = str(executor.get("phase", "NO_TASK_IN_PROGRESS"))
    counts = {str(k): int(v) for k, v in (executor.get("tasks") or {}).items()}
    total = sum(counts.values())
    finished = sum(counts.get(k, 0) for k in ("done", "refused", "cancelled"))
    updated = state.get("updated")
    running = phase in RUNNING_PHASES
    owner = state.get("owner") or None
    return {"phase": phase, "running": running, "stop_reason": executor.get("stop_reason") or "",
            "tasks": counts, "total": total, "finished": finished,
            "progress": finished / total if total else (1.0 if phase in FINISHED_PHASES else 0.0),
            "throttle": (state.get("throttles") or {}).get("rate"),
            "owner": f"controller {owner.get('controller')} (epoch {owner.get('epoch')})" if owner else "operator",
            "started": state.get("started"), "updated": updated,
            "stale": running and isinstance(updated, (int, float)) and now - updated > STALE_S,
            "moves_per_broker": executor.get("moves_per_broker"),
            "in_progress": list(executor.get("in_progress") or []), "refused": list(executor.get("refused") or []),
            "leadership_moves": executor.get("leadership_moves", 0),
            "most_in_progress_per_broker": dict(executor.get("most_in_progress_per_broker") or {})}


def proposal_state(proposal: Mapping[str, Any], in_progress: set[str], refused: set[str], running: bool,
                   current: Mapping[Partition, tuple[int, ...]], moving: set[Partition]) -> str:
    key = (str(proposal["topic"]), int(proposal["partition"]))
    name = f"{key[0]}-{key[1]}"
    if name in in_progress:
        return "in progress"
    if name in refused:
        return "refused"
    replicas = current.get(key)
    if replicas is not None and key not in moving and set(replicas) == set(proposal["new_replicas"]):
        return "done"
    return "pending" if running else "not done"


def plan_view(plan: Mapping[str, Any] | None, execution: Mapping[str, Any] | None,
              current: Mapping[Partition, tuple[int, ...]], moving: set[Partition]) -> dict[str, Any] | None:
    """The last execution's plan, each proposal with its progress. A plan published by another
    execution than the state's (its start differs) is shown by the cluster's word alone."""
    if not plan:
        return None
    same = execution is not None and plan.get("started") == execution.get("started")
    in_progress = {partition_name(e) for e in execution["in_progress"]} if same and execution else set()
    refused = {partition_name(e) for e in execution["refused"]} if same and execution else set()
    running = bool(same and execution and execution["running"])
    proposals = [{**p, "state": proposal_state(p, in_progress, refused, running, current, moving)}
                 for p in plan.get("proposals", [])]
    states: dict[str, int] = {}
    for p in proposals:
        states[p["state"]] = states.get(p["state"], 0) + 1
    return {**plan, "proposals": proposals, "states": states, "of_the_execution": same}


def broker_rows(model: Iterable[Mapping[str, Any]], loads: Mapping[int, Mapping[str, Any]],
                live: Iterable[int], now_ms: int) -> list[dict[str, Any]]:
    """The load model per broker, with each broker's share of the cluster's replicas, leaders
    and bytes in, and how old its load sample is (a broker that has published none weighs by
    replica counts only)."""
    rows = [dict(r) for r in model]
    live_set = set(live)
    totals = {k: sum(float(r.get(k) or 0.0) for r in rows) for k in ("replicas", "leaders", "bytes_in_per_s")}
    for row in rows:
        document = loads.get(int(row["broker"]))
        row["live"] = row["broker"] in live_set
        row["sampled"] = document is not None
        row["sample_age_s"] = max(0.0, (now_ms - int(document["time_ms"])) / 1000) \
            if document and isinstance(document.get("time_ms"), int) else None
        row["windows"] = document.get("windows") if document else None
        row["share"] = {k: (float(row.get(k) or 0.0) / total if total else None) for k, total in totals.items()}
    return rows


def balancer_view(*, auto: Mapping[str, Any] | None, state: Mapping[str, Any] | None,
                  plan: Mapping[str, Any] | None, model: Iterable[Mapping[str, Any]],
                  loads: Mapping[int, Mapping[str, Any]], live: Iterable[int], controller: int,
                  current: Mapping[Partition, tuple[int, ...]],
                  reassignments: Mapping[Partition, Mapping[str, list[int]]], now: float) -> dict[str, Any]:
    """The balancer page's answer (/api/balancer)."""
    execution = execution_summary(state, now)
    moving = set(reassignments)
    decision = (auto or {}).get("decision") or None
    return {"mode": (auto or {}).get("mode", "off"), "automatic": dict(auto) if auto else None,
            "decision": decision, "last_action": (auto or {}).get("last_action") or None,
            "controller": controller, "brokers": broker_rows(model, loads, live, int(now * 1000)),
            "execution": execution, "plan": plan_view(plan, execution, current, moving),
            "reassignments": [{"topic": t, "partition": p, "replicas": m.get("replicas", []),
                               "adding": m.get("adding", []), "removing": m.get("removing", [])}
                              for (t, p), m in sorted(reassignments.items())]}


def dry_run_view(plan: Mapping[str, Any], computed_at: float) -> dict[str, Any]:
    """A plan made now and not carried out (`roost balance plan`): every proposal is proposed."""
    return {**plan, "proposals": [{**p, "state": "proposed"} for p in plan.get("proposals", [])],
            "computed_at": computed_at}
