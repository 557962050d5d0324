"""The balancer page's shell: reads what `roost balance status` reads (the balancer's znodes
through the console's keeper client; Metadata, the topics' min.insync.replicas and the
reassignments in progress through roost.admin.balancer's requests) and the brokers' load samples,
and makes a dry-run plan on request. roost.console.balance_view decides what the page shows.

The balancer's requests go over plaintext listeners only (roost.broker.balance.execution), so
against a console that reaches its cluster over TLS or SASL the page says it cannot show it.
A dry run plans the whole cluster in the console's process (0.7 s of CPU for 1,000 partitions on
6 brokers, 11 s for 10,000 on 12: bench/RESULTS.md): one runs at a time, and its answer is kept
for DRY_RUN_KEPT_S, so that viewers asking together share it."""

from __future__ import annotations

import threading
import time
from typing import Any

from kazoo.exceptions import KazooException

from roost.admin.balancer import (
    BalanceError,
    ClusterOps,
    OptimizationFailure,
    make_plan,
    model_rows,
    plan_document,
    read_auto,
    read_loads,
    read_plan,
    read_state,
)
from roost.console.balance_view import balancer_view, dry_run_view
from roost.console.errors import ConsoleError
from roost.console.keeper_side import KeeperSide
from roost.console.settings import ConsoleSettings

DRY_RUN_KEPT_S = 10.0
PLAINTEXT = ("", "PLAINTEXT")


class BalancerSide:
    def __init__(self, settings: ConsoleSettings, keeper: KeeperSide | None) -> None:
        self.settings = settings
        self.keeper = keeper
        self._dry_run_lock = threading.Lock()
        self._dry_run: tuple[float, dict[str, Any]] | None = None

    def _ops(self) -> ClusterOps:
        protocol = str(self.settings.client_settings.get("security.protocol", "")).upper()
        if protocol not in PLAINTEXT:
            raise ConsoleError(501, f"the balancer's requests go over plaintext listeners only; this console "
                                    f"reaches the cluster over {protocol} (roost balance status shows it)")
        return ClusterOps(self.settings.bootstrap, self.settings.request_timeout_s)

    def _zk(self) -> Any:
        if self.keeper is None:
            raise ConsoleError(404, "the balancer keeps its state and the brokers' load in ZooKeeper: start the "
                                    "console with --zookeeper HOST:PORT to see it")
        return self.keeper.client()

    def status(self) -> dict[str, Any]:
        ops, zk = self._ops(), self._zk()
        try:
            auto, state, plan, loads = read_auto(zk), read_state(zk), read_plan(zk), read_loads(zk)
        except (KazooException, ValueError) as error:
            raise ConsoleError(503, f"the balancer's state: the keeper did not answer ({type(error).__name__})") \
                from None
        try:
            view = ops.view()
            moving = ops.list_reassignments(view.controller)
        except BalanceError as error:
            raise ConsoleError(503, f"the cluster did not answer: {error}") from None
        current = {key: observed.replicas for key, observed in view.partitions.items()}
        return balancer_view(auto=auto, state=state, plan=plan, model=model_rows(view, loads), loads=loads,
                             live=view.brokers, controller=view.controller, current=current, reassignments=moving,
                             now=time.time())

    def dry_run(self) -> dict[str, Any]:
        """`roost balance plan`: the plan the balancer would make now (nothing is carried out)."""
        ops, zk = self._ops(), self._zk()
        with self._dry_run_lock:
            kept = self._dry_run
            if kept is not None and time.monotonic() - kept[0] < DRY_RUN_KEPT_S:
                return kept[1]
            try:
                the_plan = make_plan(ops, zk)
            except BalanceError as error:
                raise ConsoleError(409, f"no plan: {error.message}") from None
            except OptimizationFailure as failure:
                raise ConsoleError(409, f"no plan: {failure}") from None
            except KazooException as error:
                raise ConsoleError(503, f"the brokers' load: the keeper did not answer ({type(error).__name__})") \
                    from None
            answer = dry_run_view(plan_document(the_plan), time.time())
            self._dry_run = (time.monotonic(), answer)
            return answer
