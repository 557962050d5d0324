"""The controller's activities (roost.broker.controller.events) driven by hand: the test is the
shell, answering each effect (a ZooKeeper call, a wait) as a scripted ZooKeeper would."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from roost.broker.activity.effects import Activity, Request, Sleep, WaitForWork
from roost.broker.controller.core import BrokerRequest, ClusterSnapshot, ControllerCore, ControllerSettings
from roost.broker.controller.events import ControllerEvents
from roost.broker.controller.liveness import Connect, Probe
from roost.broker.zk import layout
from roost.broker.zk.effects import ZkDelete, ZkExists, ZkGet, ZkMulti
from roost.broker.zk.layout import BrokerRegistration
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
from roost.zkclient import Check, ConnectionLossError, Delete, NoNodeError

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
    events, _, _ = controller()
    registration = BrokerRegistration(2, "localhost", 9092, epoch=91)
    events.core = ControllerCore(1, 5, ControllerSettings(), ClusterSnapshot({2: registration}, {}, {}), 1000)
    events._channel(registration)
    channel = events._channels[2].task.activity  # type: ignore[attr-defined]
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


# The fast failure detection's watches (controller/liveness.py), as activities.
def test_a_brokers_endpoint_refused_twice_after_its_connection_ended_is_declared_dead() -> None:
    events, _, _ = controller()
    registration = BrokerRegistration(2, "localhost", 9092, epoch=91)
    events.core = ControllerCore(1, 5, ControllerSettings(), ClusterSnapshot({2: registration}, {}, {}), 1000)
    events._channel(registration)
    watch = events._channels[2].watch.activity  # type: ignore[union-attr]
    assert watch.send(None) == Connect(2, "localhost", 9092)
    # Connected, held; it ended (the process died); attempts again: a refusal is confirmed once.
    assert watch.send(Probe.CONNECTED) == Connect(2, "localhost", 9092)
    assert isinstance(watch.send(Probe.REFUSED), Sleep)
    assert watch.send(None) == Connect(2, "localhost", 9092)
    posted = len(events._events)
    try:
        watch.send(Probe.REFUSED)
        raise AssertionError("the watch went on after its verdict")
    except StopIteration:
        pass
    assert len(events._events) == posted + 1  # the verdict is handed to the core as an event
    # A refusal followed by a success (a quick restart) is no verdict.
    events._channel(BrokerRegistration(3, "localhost", 9093, epoch=92))
    other = events._channels[3].watch.activity  # type: ignore[union-attr]
    other.send(None)
    assert isinstance(other.send(Probe.REFUSED), Sleep)
    assert other.send(None) == Connect(3, "localhost", 9093)
    assert other.send(Probe.CONNECTED) == Connect(3, "localhost", 9093)
    assert isinstance(other.send(Probe.NO_ANSWER), Sleep)


def test_a_dead_controllers_claim_is_given_up_only_at_the_epoch_read_before_it() -> None:
    events, tasks, _ = controller()
    events.start()
    worker = tasks[0].activity
    worker.send(None)
    claim = (layout.encode_controller(2, 1000), SimpleNamespace(version=0, ephemeral_owner=SESSION + 1))
    assert isinstance(worker.send(claim), WaitForWork)
    watcher = tasks[-1].activity
    assert watcher.send(None) == ZkGet(layout.CONTROLLER_EPOCH)
    assert watcher.send((layout.encode_controller_epoch(6), SimpleNamespace(version=6))) == ZkGet(layout.CONTROLLER)
    assert watcher.send(claim) == ZkGet(layout.broker_path(2))
    registration = BrokerRegistration(2, "localhost", 9092).encode()
    assert watcher.send((registration, SimpleNamespace(czxid=77))) == Connect(2, "localhost", 9092)
    assert events.watched_controller is not None
    watcher.send(Probe.REFUSED)
    watcher.send(None)
    give_up = watcher.send(Probe.REFUSED)
    assert give_up == ZkMulti([Check(layout.CONTROLLER_EPOCH, 6), Delete(layout.CONTROLLER)])


def test_an_active_controller_whose_claim_was_given_up_resigns() -> None:
    events, tasks, _ = controller()
    events.core = ControllerCore(1, 5, ControllerSettings(), ClusterSnapshot({}, {}, {}), 1000)
    events.start()
    worker = tasks[0].activity
    assert worker.send(None) == ZkExists(layout.CONTROLLER, events._controller_watch)
    assert worker.send(None) == ZkGet(layout.CONTROLLER)  # gone: resigning reads it once more
    assert not events.active
