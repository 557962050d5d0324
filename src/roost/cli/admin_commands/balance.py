"""`roost balance`: Roost's built-in balancer (docs/balancing.md), Cruise Control's loop from the
command line: the brokers' sampled load, a plan a person can read, and its throttled execution.

    roost balance plan                                  # a dry run: every move, load before/after
    roost balance run --throttle 10485760               # plan and execute, 10 MiB/s per broker
    roost balance run --mode continuous --threshold 0.1 --interval 60
    roost balance status                                # the execution's phase and progress
    roost balance stop                                  # cancel the moves in progress, remove throttles
    roost broker decommission 4                         # drain broker 4 (then stop it)

Modes of `run`: `once` (plan, execute, end), `node_add` (act only while some live broker holds
no replica: a new broker takes its share), `continuous` (re-plan every --interval seconds and
execute whenever the imbalance exceeds --threshold, or a replica sits on a dead or drained
broker). The brokers' `balancer.*` settings say how they sample their load.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from roost.admin.balancer import BalanceError, ClusterOps, execute, make_plan, read_auto, read_state, stop
from roost.admin.errors import AdminError
from roost.admin.target import DEFAULT_ZOOKEEPER, Target
from roost.broker.balance.executor import Executor, Phase
from roost.broker.balance.model import ReplicaMove, ReplicaSwap, Resource, single_moves
from roost.broker.balance.planner import OptimizationFailure, Plan
from roost.cli.client.admin_output import emit_document
from roost.cli.client.client_options import CliError, format_option, kafka_target_options

ZK_OPTION = click.option("--zookeeper", envvar="ROOST_ZOOKEEPER", default=None, metavar="HOST:PORT[,...]",
                         help="the cluster's ZooKeeper: the brokers' load and the execution's state "
                              "(env ROOST_ZOOKEEPER; default: the brokers' zookeeper.connect)")
MODES = ("once", "node_add", "continuous")


@contextmanager
def _session(target: Target, zookeeper: str | None) -> Iterator[tuple[ClusterOps, Any]]:
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    ops = ClusterOps(target.bootstrap, target.timeout_s)
    hosts = zookeeper or (target.zookeeper if target.zookeeper != DEFAULT_ZOOKEEPER else None) \
        or _brokers_zookeeper(ops) or DEFAULT_ZOOKEEPER
    client = KazooClient(hosts=hosts, timeout=target.timeout_s)
    try:
        client.start(timeout=target.timeout_s)
    except KazooTimeoutError:
        raise CliError(f"cannot reach ZooKeeper at {hosts} within {target.timeout_s:g}s") from None
    try:
        yield ops, client
    except (AdminError, BalanceError) as error:
        raise CliError(str(error)) from None
    finally:
        client.stop()
        client.close()


def _brokers_zookeeper(ops: ClusterOps) -> str | None:
    try:
        view = ops.view()
    except (AdminError, BalanceError):
        return None
    for broker in sorted(view.brokers):
        from roost.wire.kafka import ApiKey

        try:
            answer = ops._any(ApiKey.DESCRIBE_CONFIGS, 1, {"resources": [
                {"resource_type": 4, "resource_name": str(broker), "configuration_keys": ["zookeeper.connect"]}]})
        except (AdminError, BalanceError):
            continue
        for result in answer["results"]:
            for entry in result["configs"]:
                if entry["name"] == "zookeeper.connect" and entry["value"]:
                    return str(entry["value"]).split("/", 1)[0]
    return None


def plan_document(the_plan: Plan) -> dict[str, Any]:
    """The dry run, JSON-ready: every move and the load per broker before and after."""
    moves = []
    for action in the_plan.actions:
        for move in single_moves(action):
            moves.append({"partition": f"{move.partition[0]}-{move.partition[1]}",
                          "kind": "swap" if isinstance(action, ReplicaSwap) else
                          "replica" if isinstance(move, ReplicaMove) else "leadership",
                          "from": move.source, "to": move.destination})
    brokers = []
    for broker in sorted(the_plan.before):
        before, after = the_plan.before[broker], the_plan.after[broker]
        brokers.append({"broker": broker, "replicas": f"{before.replicas} -> {after.replicas}",
                        "leaders": f"{before.leaders} -> {after.leaders}",
                        "disk_mb": f"{before.load[Resource.DISK] / 1e6:.1f} -> {after.load[Resource.DISK] / 1e6:.1f}",
                        "in_kb_s": f"{before.load[Resource.NW_IN] / 1e3:.1f} -> {after.load[Resource.NW_IN] / 1e3:.1f}",
                        "out_kb_s": f"{before.load[Resource.NW_OUT] / 1e3:.1f} -> "
                                    f"{after.load[Resource.NW_OUT] / 1e3:.1f}",
                        "cpu": f"{before.load[Resource.CPU]:.3f} -> {after.load[Resource.CPU]:.3f}"})
    goals_of = the_plan.goals_of()
    changes = [{"partition": f"{p.partition[0]}-{p.partition[1]}", "replicas": f"{list(p.old_replicas)} -> "
                f"{list(p.new_replicas)}", "leader": f"{p.old_leader} -> {p.new_leader}",
                "goals": ", ".join(goals_of.get(p.partition, ()))} for p in the_plan.proposals]
    return {"summary": [{"partitions_changed": len(the_plan.proposals), "actions": len(the_plan.actions),
                         "mb_to_move": round(the_plan.bytes_to_move / 1e6, 1), "truncated": the_plan.truncated}],
            "brokers": brokers, "proposals": changes, "moves": moves,
            "violations": [{"goal": g, "before": round(the_plan.violations_before[g], 6),
                            "after": round(the_plan.violations_after[g], 6)} for g in the_plan.goal_order]}


def imbalance(the_plan: Plan) -> float:
    """The largest relative distance from the mean, over live brokers, of replicas, leaders and
    bytes in: what `--threshold` is compared with."""
    loads = the_plan.before
    worst = 0.0
    for measure in (lambda b: float(b.replicas), lambda b: float(b.leaders), lambda b: b.load[Resource.NW_IN]):
        values = [measure(b) for b in loads.values()]
        mean = sum(values) / len(values) if values else 0.0
        if mean > 0:
            worst = max(worst, max(abs(v - mean) / mean for v in values))
    return worst


def _emit_plan(the_plan: Plan, output_format: str) -> None:
    emit_document(plan_document(the_plan), [
        ("summary", "plan", ["partitions_changed", "actions", "mb_to_move", "truncated"]),
        ("brokers", "load per broker (before -> after)",
         ["broker", "replicas", "leaders", "disk_mb", "in_kb_s", "out_kb_s", "cpu"]),
        ("proposals", "partitions changed", ["partition", "replicas", "leader", "goals"])], output_format)


def _plan(ops: ClusterOps, zk: Any, excluded: tuple[int, ...], max_actions: int) -> Plan:
    try:
        return make_plan(ops, zk, excluded=excluded, max_actions=max_actions)
    except OptimizationFailure as failure:
        raise CliError(f"no plan: {failure}") from None


def _progress(executor: Executor) -> None:
    status = executor.status()
    click.echo(f"{status['phase']}: {status['tasks']}", err=True)


@click.group("balance")
def command() -> None:
    """The built-in balancer: plan, run, status, stop (docs/balancing.md)."""


EXCLUDE_OPTION = click.option("--decommission", "excluded", type=int, multiple=True, metavar="BROKER",
                              help="drain this broker: move every replica off it (repeatable)")
MAX_ACTIONS_OPTION = click.option("--max-actions", type=click.IntRange(1, 100_000), default=1000, show_default=True,
                                  help="at most this many moves in one plan")


@command.command("plan")
@EXCLUDE_OPTION
@MAX_ACTIONS_OPTION
@ZK_OPTION
@kafka_target_options
@format_option
def plan_command(excluded: tuple[int, ...], max_actions: int, zookeeper: str | None, target: Target,
                 output_format: str) -> None:
    """A dry run: the moves the balancer would make and the load per broker before and after."""
    with _session(target, zookeeper) as (ops, zk):
        _emit_plan(_plan(ops, zk, excluded, max_actions), output_format)


RUN_OPTIONS = (
    click.option("--throttle", type=click.IntRange(min=1), default=None, metavar="BYTES/S",
                 help="replication throttle on every broker a move touches (Kafka's KIP-73 rates; default none)"),
    click.option("--moves-per-broker", type=click.IntRange(1, 1000), default=5, show_default=True,
                 help="partition moves in progress at once per broker (num.concurrent.partition.movements.per.broker)"),
    click.option("--poll", "poll_s", type=click.FloatRange(min=0.05), default=2.0, show_default=True,
                 metavar="SECONDS", help="how often progress is checked"),
    click.option("--max-time", "max_time_s", type=click.FloatRange(min=1), default=3600.0, show_default=True,
                 metavar="SECONDS", help="stop (cancelling the moves in progress) if not done by then"),
)


def _with(options: tuple[Any, ...]) -> Any:
    def decorate(function: Any) -> Any:
        for option in reversed(options):
            function = option(function)
        return function
    return decorate


def _execute(ops: ClusterOps, zk: Any, the_plan: Plan, throttle: int | None, moves_per_broker: int, poll_s: float,
             max_time_s: float, output_format: str) -> Executor:
    if the_plan.empty:
        click.echo("balanced: nothing to move", err=True)
    executor = execute(ops, zk, the_plan, moves_per_broker=moves_per_broker, throttle=throttle, poll_s=poll_s,
                       timeout_s=max_time_s, report=_progress if output_format == "text" else lambda e: None)
    status = executor.status()
    emit_document({"execution": [{"phase": status["phase"], "stop_reason": status["stop_reason"],
                                  **{f"tasks_{k}": v for k, v in status["tasks"].items()}}], **status},
                  [("execution", "execution", ["phase", "stop_reason", *(f"tasks_{k}" for k in status["tasks"])])],
                  output_format)
    return executor


@command.command("run")
@click.option("--mode", type=click.Choice(MODES), default="once", show_default=True,
              help="once; node_add: only while a live broker holds no replica; continuous: re-plan every --interval")
@click.option("--threshold", type=click.FloatRange(min=0.0), default=0.10, show_default=True,
              help="continuous/node_add: act when a broker's replicas, leaders or bytes in are this far from the mean")
@click.option("--interval", "interval_s", type=click.FloatRange(min=0.1), default=60.0, show_default=True,
              metavar="SECONDS", help="continuous/node_add: time between plans")
@click.option("--rounds", type=click.IntRange(min=1), default=None,
              help="continuous/node_add: end after this many plans (default: until interrupted)")
@EXCLUDE_OPTION
@MAX_ACTIONS_OPTION
@_with(RUN_OPTIONS)
@ZK_OPTION
@kafka_target_options
@format_option
def run_command(mode: str, threshold: float, interval_s: float, rounds: int | None, excluded: tuple[int, ...],
                max_actions: int, throttle: int | None, moves_per_broker: int, poll_s: float, max_time_s: float,
                zookeeper: str | None, target: Target, output_format: str) -> None:
    """Plan and execute: replicas added first, old ones removed once the new are in sync, in
    batches, throttled; then preferred-leader elections; the throttles removed at the end."""
    with _session(target, zookeeper) as (ops, zk):
        if mode == "once":
            executor = _execute(ops, zk, _plan(ops, zk, excluded, max_actions), throttle, moves_per_broker,
                                poll_s, max_time_s, output_format)
            if executor.phase != Phase.COMPLETED:
                raise SystemExit(2)
            return
        done = 0
        while rounds is None or done < rounds:
            done += 1
            the_plan = _plan(ops, zk, excluded, max_actions)
            empty_broker = any(b.replicas == 0 for b in the_plan.before.values())
            must = the_plan.violations_before.get("OfflineReplicaGoal", 0.0) > 0
            wanted = must or (empty_broker if mode == "node_add" else imbalance(the_plan) > threshold)
            if wanted and not the_plan.empty:
                click.echo(f"round {done}: imbalance {imbalance(the_plan):.2f}; {len(the_plan.proposals)} "
                           "partitions to change", err=True)
                _execute(ops, zk, the_plan, throttle, moves_per_broker, poll_s, max_time_s, output_format)
            if rounds is None or done < rounds:
                time.sleep(interval_s)


@command.command("status")
@ZK_OPTION
@kafka_target_options
@format_option
def status_command(zookeeper: str | None, target: Target, output_format: str) -> None:
    """The automatic balancer's mode and what it last decided and did (and why), the last
    execution's phase, its tasks and throttles, and the reassignments in progress."""
    with _session(target, zookeeper) as (ops, zk):
        state = read_state(zk) or {}
        executor = state.get("executor", {})
        moving = ops.list_reassignments()
        auto = read_auto(zk) or {}
        decision, action = auto.get("decision") or {}, auto.get("last_action") or {}
        owner = state.get("owner") or {}
        document = {
            "balancer": [{"mode": auto.get("mode", "off"), "controller": auto.get("controller"),
                          "decision": decision.get("reason", ""), "last_action": action.get("kind", ""),
                          "why": action.get("reason", ""), "outcome": action.get("outcome", ""),
                          "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(action["at"])) if action else ""}],
            "owner": f"controller {owner['controller']} (epoch {owner['epoch']})" if owner else "operator",
            "automatic": auto,
            "execution": [{"phase": executor.get("phase", "NO_TASK_IN_PROGRESS"),
                           "stop_reason": executor.get("stop_reason", ""),
                           "tasks": executor.get("tasks", {}), "throttle": state.get("throttles", {}).get("rate")}],
            "reassignments": [{"partition": f"{t}-{p}", "replicas": m["replicas"], "adding": m["adding"],
                               "removing": m["removing"]} for (t, p), m in sorted(moving.items())],
            "detail": executor}
        emit_document(document, [("balancer", "automatic balancer (balancer.mode)",
                                  ["mode", "controller", "decision", "last_action", "why", "outcome", "at"]),
                                 ("execution", "execution", ["phase", "stop_reason", "tasks", "throttle"]),
                                 ("reassignments", "reassignments in progress",
                                  ["partition", "replicas", "adding", "removing"])], output_format)


@command.command("stop")
@ZK_OPTION
@kafka_target_options
@format_option
def stop_command(zookeeper: str | None, target: Target, output_format: str) -> None:
    """Stop the execution: the moves in progress are cancelled (back to their old replicas) and
    the throttles removed; a running `roost balance run` stops at its next check."""
    with _session(target, zookeeper) as (ops, zk):
        result = stop(ops, zk)
        emit_document({"stop": [{"cancelled": len(result["cancelled"]), "not_cancelled": len(result["not_cancelled"]),
                                 "throttle_failures": len(result["throttle_failures"])}], **result},
                      [("stop", "stop", ["cancelled", "not_cancelled", "throttle_failures"])], output_format)


@command.command("decommission")
@click.argument("brokers", type=int, nargs=-1, required=True)
@MAX_ACTIONS_OPTION
@_with(RUN_OPTIONS)
@ZK_OPTION
@kafka_target_options
@format_option
def decommission_command(brokers: tuple[int, ...], max_actions: int, throttle: int | None, moves_per_broker: int,
                         poll_s: float, max_time_s: float, zookeeper: str | None, target: Target,
                         output_format: str) -> None:
    """Drain BROKERS: move every replica off them (also `roost broker decommission N`). Exits 0
    once they hold none, so they can be stopped with no partition under-replicated."""
    with _session(target, zookeeper) as (ops, zk):
        the_plan = _plan(ops, zk, brokers, max_actions)
        executor = _execute(ops, zk, the_plan, throttle, moves_per_broker, poll_s, max_time_s, output_format)
        view = ops.view()
        left = {b: sum(b in o.replicas for o in view.partitions.values()) for b in brokers}
        if executor.phase != Phase.COMPLETED or any(left.values()):
            raise CliError(f"not drained: replicas left {left} ({executor.phase.value} {executor.stop_reason})")
        click.echo(f"drained brokers {list(brokers)}: they hold no replica", err=True)
