"""The controller's activities (roost.broker.controller.events) driven by hand: the test is the
shell, answering each effect (a ZooKeeper call, a wait) as a scripted ZooKeeper would."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from roost.broker.controller.core import ControllerSettings
from roost.broker.controller.events import ControllerEvents
from roost.broker.replica.effects import Activity, WaitForWork
from roost.broker.zk import layout
from roost.broker.zk.effects import ZkDelete, ZkGet, ZkMulti
from roost.zkclient import ConnectionLossError, NoNodeError

SESSION = 0x51


class Task:
    def __init__(self, activity: Activity) -> None:
        self.activity = activity
        self.woken = False

    def wake(self) -> None:
        self.woken = True

    def done(self) -> bool:
        return False

    def cancel(self) -> None:
        self.activity.close()

    async def close(self) -> None:
        self.cancel()


class Waits:
    def __init__(self) -> None:
        self.timers: list[tuple[float, Callable[[], None]]] = []

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> Any:
        self.timers.append((delay_s, callback))
        return SimpleNamespace(cancel=lambda: None)


def controller() -> tuple[ControllerEvents, list[Task], Waits]:
    tasks: list[Task] = []
    waits = Waits()

    def spawn(activity: Activity, name: str) -> Task:
        tasks.append(Task(activity))
        return tasks[-1]

    events = ControllerEvents(1, ControllerSettings(), spawn, waits, lambda: 1000,  # type: ignore[arg-type]
                              lambda: SESSION)
    return events, tasks, waits


def test_an_election_whose_reply_was_lost_runs_again_and_gives_up_its_own_stale_claim() -> None:
    events, tasks, waits = controller()
    events.start()
    worker = tasks[0].activity
    assert worker.send(None) == ZkGet(layout.CONTROLLER, events._controller_watch)
    assert worker.throw(NoNodeError()) == ZkGet(layout.CONTROLLER_EPOCH)
    multi = worker.send((layout.encode_controller_epoch(4), SimpleNamespace(version=4)))
    assert isinstance(multi, ZkMulti)
    # The multi was applied but its reply is lost: the election is run again after a pause.
    assert isinstance(worker.throw(ConnectionLossError()), WaitForWork)
    assert not events.active and len(waits.timers) == 1
    delay_s, run_again = waits.timers[0]
    assert delay_s > 0
    run_again()
    assert tasks[0].woken
    assert worker.send(None) == ZkGet(layout.CONTROLLER, events._controller_watch)
    # /controller names this broker, made by this very session, yet no controller runs here.
    claim = (layout.encode_controller(1, 1000), SimpleNamespace(version=0, ephemeral_owner=SESSION))
    assert worker.send(claim) == ZkDelete(layout.CONTROLLER, 0)
    assert isinstance(worker.send(None), WaitForWork)
    assert not events.active


def test_a_claim_by_another_broker_is_learnt_and_left_alone() -> None:
    learnt: list[int] = []
    events, tasks, _ = controller()
    events.on_controller = learnt.append
    events.start()
    worker = tasks[0].activity
    worker.send(None)
    claim = (layout.encode_controller(2, 1000), SimpleNamespace(version=0, ephemeral_owner=SESSION + 1))
    assert isinstance(worker.send(claim), WaitForWork)
    assert learnt == [2] and events.controller_id == 2 and not events.active
