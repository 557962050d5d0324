"""The balancer's operator-side entry points (`roost balance`, `roost broker decommission`, the
tests and bench): the shell lives in roost.broker.balance.execution, which the active
controller's automatic balancer (`balancer.mode`) uses too; its names are re-exported here."""

from __future__ import annotations

from roost.broker.balance.execution import (
    AUTO_PATH,
    BROKER_RESOURCE,
    EXECUTION_PATH,
    LOAD_PATH,
    PLAN_PATH,
    STOP_PATH,
    TOPIC_RESOURCE,
    BalanceError,
    ClusterOps,
    ClusterView,
    OptimizationFailure,
    Throttles,
    apply_throttles,
    ask,
    cluster_model,
    execute,
    make_plan,
    model_rows,
    plan_document,
    read_auto,
    read_loads,
    read_plan,
    read_state,
    remove_throttles,
    stop,
    write_state,
)

__all__ = ["AUTO_PATH", "BROKER_RESOURCE", "EXECUTION_PATH", "LOAD_PATH", "PLAN_PATH", "STOP_PATH", "TOPIC_RESOURCE",
           "BalanceError", "ClusterOps", "ClusterView", "OptimizationFailure", "Throttles", "apply_throttles", "ask", "cluster_model",
           "execute", "make_plan", "model_rows", "plan_document", "read_auto", "read_loads", "read_plan", "read_state",
           "remove_throttles", "stop", "write_state"]
