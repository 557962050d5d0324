"""The automatic balancer's shell (`balancer.mode`; the decisions are autocore's): every broker
runs one, and it acts only while its broker is the active controller (the ZooKeeper election of
roost.broker.controller: /controller and its epoch). Each `balancer.check.interval.ms` it reads
the cluster (Metadata, ListPartitionReassignments, the load samples in ZooKeeper), asks
`autocore.decide`, and on a Plan plans (the pure planner) and executes with the same shell as
`roost balance run` (roost.broker.balance.execution), throttled and in bounded batches.

The work runs in a thread (the execution's requests are blocking sockets to this broker's own
PLAINTEXT listener; its znodes go through the broker's ZooKeeper session, on the event loop).

A controller that moves: the execution's state (/roost/balancer/execution) names its owner
(broker id and controller epoch). The old controller's execution stops at its next step once
its broker is no longer active in that epoch, touching nothing more. The new one, finding an
unfinished execution owned by another, takes it over: removes the throttles it set, marks it
stopped, and plans nothing while the moves it left are in progress (Kafka's controller
finishes them); then it plans from what they left, so no move is made twice.

What it last decided and did is at /roost/balancer/auto (what `roost balance status` and the
`roost_balancer_*` metrics show).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from roost.broker.balance.autocore import BrokerLoad, Decision, Facts, Kind, Settings, decide, track_missing
from roost.broker.balance.execution import (
    AUTO_PATH,
    STOP_PATH,
    BalanceError,
    ClusterOps,
    cluster_model,
    execute,
    read_loads,
    read_state,
    remove_throttles,
    write_state,
)
from roost.broker.balance.executor import Phase
from roost.broker.balance.planner import OptimizationFailure, plan
from roost.config import BrokerConfig

log = logging.getLogger("roost.broker.balance")

OPERATOR_STALE_S = 120.0  # an operator's execution not updated for this long is taken as abandoned
STOP_HOLD_S = 600.0  # after `roost balance stop`, no automatic plan for this long
QUIET_CHECKS = 10  # after a plan that moved nothing, the same reason plans again only after this many checks
EXECUTION_POLL_S = 1.0
EXECUTION_TIMEOUT_S = 3600.0
FINISHED = (Phase.COMPLETED.value, Phase.STOPPED.value)


class SyncZk:
    """The broker's asyncio ZooKeeper client, called from the balancer's thread (the methods
    the execution shell uses, kazoo's names)."""

    def __init__(self, zk: Any, loop: asyncio.AbstractEventLoop, timeout_s: float = 15.0) -> None:
        self.zk, self.loop, self.timeout_s = zk, loop, timeout_s

    def _run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(self.timeout_s)

    def exists(self, path: str) -> Any:
        return self._run(self.zk.exists(path))

    def get(self, path: str) -> tuple[bytes, Any]:
        result: tuple[bytes, Any] = self._run(self.zk.get(path))
        return result

    def get_children(self, path: str) -> list[str]:
        result: list[str] = self._run(self.zk.get_children(path))
        return result

    def set(self, path: str, data: bytes) -> Any:
        return self._run(self.zk.set(path, data))

    def delete(self, path: str) -> None:
        self._run(self.zk.delete(path))

    def ensure_path(self, path: str) -> None:
        self._run(self.zk.ensure_path(path))


def settings_of(config: BrokerConfig) -> Settings:
    # A moved leader reports a rate after its first whole window; the smoothed load is the mean
    # of balancer.load.windows of them.
    sample_ms = int(config["balancer.load.sample.interval.ms"])
    return Settings(str(config["balancer.mode"]), int(config["balancer.broker.unavailable.delay.ms"]),
                    float(config["balancer.imbalance.threshold"]),
                    remeasure_ms=(int(config["balancer.load.windows"]) + 1) * sample_ms)


class AutoBalancer:
    def __init__(self, broker_id: int, zk: Any, controller: Any, config: BrokerConfig,
                 address: Callable[[], tuple[str, int] | None], clock_ms: Callable[[], int]) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.controller = controller
        self.config = config
        self.address = address  # this broker's PLAINTEXT listener (None: it has none)
        self.clock_ms = clock_ms
        self.settings = settings_of(config)
        self.interval_s = int(config["balancer.check.interval.ms"]) / 1000.0
        throttle = int(config["balancer.throttle.bytes.per.second"])
        self.throttle = throttle if throttle > 0 else None
        self.moves_per_broker = int(config["balancer.moves.per.broker"])
        self.max_actions = int(config["balancer.max.actions"])
        self.missing: dict[int, int] = {}
        self.last_moved_ms: int | None = None  # when an execution of ours that moved something ended
        self.quiet: tuple[str, int] = ("", 0)  # a reason whose plan moved nothing, and until when it is quiet
        self.last_decision: Decision | None = None
        self.last_action: dict[str, Any] = {}
        self.decisions: dict[str, int] = {}  # kind -> count
        self.executions: dict[str, int] = {}  # final phase -> count
        self.running = False  # acting now (this broker is in charge)
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._round: asyncio.Future[None] | None = None

    @property
    def mode(self) -> str:
        return self.settings.mode

    def start(self) -> None:
        if self.settings.mode != "off":
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        self._stopping = True  # an execution in progress stops at its next step
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        if self._round is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._round), EXECUTION_POLL_S * 20)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            await asyncio.sleep(self.interval_s)
            if not self.controller.active:
                self.running = False
                self.missing = {}  # a controller that takes over later counts the delay afresh
                continue
            try:
                self._round = loop.run_in_executor(None, self.check, SyncZk(self.zk, loop))
                await asyncio.shield(self._round)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("balancer: check failed")
            finally:
                self._round = None

    # one check, in the balancer's thread ---------------------------------------------------------
    def in_charge_now(self, epoch: int) -> bool:
        return not self._stopping and bool(self.controller.active) and self.controller.epoch == epoch

    def check(self, zk: Any) -> None:
        epoch = int(self.controller.epoch)
        address = self.address()
        if address is None:
            self._record(zk, Decision(Kind.HOLD, "this broker has no PLAINTEXT listener to balance through"), epoch)
            return
        self.running = True
        ops = ClusterOps(f"{address[0]}:{address[1]}")
        owner = {"controller": self.broker_id, "epoch": epoch}
        busy = self._take_over(ops, zk, owner)
        stopped = zk.exists(STOP_PATH)
        if not busy and stopped is not None:
            # An operator's stop holds the automatic balancer too (else it would plan again at its
            # next check): for STOP_HOLD_S after the stop was asked (the znode's mtime).
            age = time.time() - stopped.mtime / 1000
            if age < STOP_HOLD_S:
                busy = f"roost balance stop asked {age:.0f} s ago: no automatic plan for {STOP_HOLD_S:g} s after it"
        view = ops.view()
        moving = sum(1 for o in view.partitions.values() if o.reassigning)
        if not busy and moving:
            busy = f"{moving} reassignments in progress"
        brokers, partitions = cluster_model(view, read_loads(zk))
        loads: dict[int, BrokerLoad] = {b: BrokerLoad() for b in view.brokers}
        for p in partitions:
            for replica in p.replicas:
                had = loads.get(replica, BrokerLoad())
                loads[replica] = BrokerLoad(had.replicas + 1, had.leaders + (replica == p.leader),
                                            had.bytes_in + p.load.bytes_in)
        now = self.clock_ms()
        self.missing = track_missing(self.missing, view.brokers, {r for p in partitions for r in p.replicas}, now)
        facts = Facts(now, self.in_charge_now(epoch), frozenset(view.brokers), loads, dict(self.missing), busy,
                      self.last_moved_ms)
        decision = decide(self.settings, facts)
        if decision.acts and decision.reason == self.quiet[0] and now < self.quiet[1]:
            decision = Decision(Kind.HOLD, f"balanced as far as the planner can ({decision.reason})")
        self._record(zk, decision, epoch)
        if not decision.acts:
            return
        try:
            the_plan = plan(brokers, partitions, max_actions=self.max_actions)
        except OptimizationFailure as failure:
            self._acted(zk, decision, epoch, f"no plan: {failure}", 0)
            return
        if the_plan.empty:
            self.quiet = (decision.reason, now + int(QUIET_CHECKS * self.interval_s * 1000))
            self._acted(zk, decision, epoch, "planned: nothing to move", 0)
            return
        log.info("balancer: %s: %s; executing %d partition changes", decision.kind.value, decision.reason,
                 len(the_plan.proposals))
        self._acted(zk, decision, epoch, "executing", len(the_plan.proposals))
        executor = execute(ops, zk, the_plan, moves_per_broker=self.moves_per_broker, throttle=self.throttle,
                           poll_s=EXECUTION_POLL_S, timeout_s=EXECUTION_TIMEOUT_S,
                           in_charge=lambda: self.in_charge_now(epoch), owner=owner, dead_at_start=decision.heal)
        status = executor.status()
        self.last_moved_ms = self.clock_ms()
        self.executions[status["phase"]] = self.executions.get(status["phase"], 0) + 1
        outcome = f"{status['phase']}: {status['tasks']}" + (f" ({status['stop_reason']})" if status["stop_reason"]
                                                               else "")
        log.info("balancer: %s execution ended %s", decision.kind.value, outcome)
        if self.in_charge_now(epoch):
            self._acted(zk, decision, epoch, outcome, len(the_plan.proposals))

    def _take_over(self, ops: ClusterOps, zk: Any, owner: dict[str, Any]) -> str:
        """An unfinished execution not ours: an operator's still running is left alone (the reason
        to hold); one abandoned, or a previous controller's, is taken over."""
        state = read_state(zk) or {}
        executor = state.get("executor") or {}
        if not executor or executor.get("phase") in FINISHED or state.get("owner") == owner:
            return ""
        was = state.get("owner")
        updated = float(state.get("updated") or state.get("started") or 0)
        if was is None and time.time() - updated < OPERATOR_STALE_S:
            return "an operator's execution (roost balance run) is in progress"
        failures = remove_throttles(ops, state.get("throttles") or {})
        who = f"the controller on broker {was['controller']} (epoch {was['epoch']})" if was else "an operator"
        executor["phase"] = Phase.STOPPED.value
        executor["stop_reason"] = (f"taken over from {who} by the controller on broker {self.broker_id} "
                                   f"(epoch {owner['epoch']}): its moves in progress finish, then it plans again")
        state.update(executor=executor, owner=owner, updated=time.time())
        if not failures:
            state["throttles"] = {"rate": None, "brokers": [], "topics": {}}
        if self.in_charge_now(int(owner["epoch"])):
            write_state(zk, state)
            log.info("balancer: took over the execution of %s (throttles removed: %s)", who, not failures)
        return ""

    def _record(self, zk: Any, decision: Decision, epoch: int) -> None:
        self.decisions[decision.kind.value] = self.decisions.get(decision.kind.value, 0) + 1
        changed = self.last_decision is None or self.last_decision.reason != decision.reason
        self.last_decision = decision
        if changed and decision.reason != "not the active controller":
            log.info("balancer (%s): %s", self.settings.mode, decision.reason)
        if changed:
            self._publish(zk, epoch)

    def _acted(self, zk: Any, decision: Decision, epoch: int, outcome: str, partitions: int) -> None:
        self.last_action = {"kind": decision.kind.value, "reason": decision.reason, "outcome": outcome,
                            "partitions": partitions, "at": time.time()}
        self._publish(zk, epoch)

    def document(self, epoch: int) -> dict[str, Any]:
        decision = self.last_decision
        return {"mode": self.settings.mode, "controller": self.broker_id, "epoch": epoch,
                "unavailable_delay_ms": self.settings.unavailable_delay_ms, "threshold": self.settings.threshold,
                "decision": {"kind": decision.kind.value, "reason": decision.reason, "at": time.time()}
                if decision else None,
                "last_action": self.last_action or None,
                "brokers_down_since_ms": {str(b): t for b, t in self.missing.items()}}

    def _publish(self, zk: Any, epoch: int) -> None:
        if not self.in_charge_now(epoch):
            return
        data = json.dumps(self.document(epoch), sort_keys=True).encode()
        try:
            if zk.exists(AUTO_PATH) is None:
                zk.ensure_path(AUTO_PATH)
            zk.set(AUTO_PATH, data)
        except (BalanceError, OSError, TimeoutError, Exception) as error:  # a status, not a decision
            log.debug("balancer status not published: %r", error)

