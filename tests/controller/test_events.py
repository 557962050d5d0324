"""The controller's activities (roost.broker.controller.events) driven by hand: the test is the
shell, answering each effect (a ZooKeeper call, a wait) as a scripted ZooKeeper would."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from roost.broker.controller.core import BrokerRequest, ClusterSnapshot, ControllerCore, ControllerSettings
from roost.broker.controller.events import ControllerEvents
from roost.broker.replica.effects import Activity, Request, Sleep, WaitForWork
from roost.broker.zk import layout
from roost.broker.zk.effects import ZkDelete, ZkGet, ZkMulti
from roost.broker.zk.layout import BrokerRegistration
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
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


def test_a_request_refused_because_the_broker_has_not_learnt_its_epoch_is_sent_again() -> None:
    """The controller saw broker 2's new registration (epoch 91) before broker 2 got the reply
    naming it: broker 2 refuses the LeaderAndIsr as stale. The channel sends it again while that
    registration lives (dropped, the broker would never lead or follow what it names)."""
    events, tasks, _ = controller()
    registration = BrokerRegistration(2, "localhost", 9092, epoch=91)
    events.core = ControllerCore(1, 5, ControllerSettings(), ClusterSnapshot({2: registration}, {}, {}), 1000)
    events._channel(registration)
    channel = tasks[-1].activity
    request = BrokerRequest(2, ApiKey.LEADER_AND_ISR, 7, {"broker_epoch": 91, "topic_states": []})
    events._channels[2].send(request)
    sent = channel.send(None)
    assert isinstance(sent, Request) and sent.body is request.body
    assert isinstance(channel.send({"error_code": ErrorCode.STALE_BROKER_EPOCH, "topics": []}), Sleep)
    again = channel.send(None)
    assert isinstance(again, Request) and again.body is request.body
    # Once the broker knows its epoch the answer is taken, and the channel waits for more.
    assert isinstance(channel.send({"error_code": ErrorCode.NONE, "topics": []}), WaitForWork)
    # A request for another registration than the live one is not sent again.
    events._channels[2].send(BrokerRequest(2, ApiKey.LEADER_AND_ISR, 7, {"broker_epoch": 73, "topic_states": []}))
    assert isinstance(channel.send(None), Request)
    assert isinstance(channel.send({"error_code": ErrorCode.STALE_BROKER_EPOCH, "topics": []}), WaitForWork)
