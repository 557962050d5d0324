"""The controller shell of a simulated broker: `roost.broker.controller.shell.ControllerShell`
rewritten on the simulation's tasks, step for step, around the real `ControllerCore`.

Same rules as the real shell: election by one multi (create the ephemeral /controller, set
/controller_epoch at the version read); one event at a time from a queue; after each event the
core's writes are made, every multi starting with a Check of /controller_epoch at the version
this controller set (a deposed controller's writes fail as a whole), then its requests go to one
channel per broker (in order, one at a time, retried while that broker is live), then its
replies. A failed write resigns; the election runs again from what ZooKeeper holds.

Where it differs from the real shell: reads that the real shell makes concurrently (gather) are
made one after another; an exception the real shell would log and resign on (an assertion in
the core, say) is raised here instead: the simulation stops and reports it as a bug.

The shell's own decisions that bugs the simulation found were about (what to do after a failed
event, when to give up a /controller claim, which brokers bounced while no controller watched)
are the real ones: `roost.broker.controller.election`, which the real shell calls too.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from roost.broker.controller.core import (
    BrokerRequest,
    ClusterSnapshot,
    ControllerCore,
    ControllerSettings,
    PartitionState,
    Ready,
    ZkWrite,
)
from roost.broker.controller.election import (
    ELECTION_RETRY_MS,
    AfterFailure,
    after_failure,
    bounced_at_activation,
    give_up_claim,
)
from roost.broker.controller.liveness import CONFIRM_AFTER_S, Probe, verdict
from roost.broker.controller.shell import too_early
from roost.broker.zk import layout
from roost.broker.zk.layout import BrokerRegistration, LayoutError, LeaderAndIsr, TopicAssignment
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
from roost.zkclient import (
    BadVersionError,
    Check,
    Create,
    Delete,
    NodeExistsError,
    NoNodeError,
    SetData,
    ZkError,
)
from tests.sim.replication.runtime import SimFuture, SimQueue, Sleep, Task, Wait
from tests.sim.replication.zk import Event

if TYPE_CHECKING:
    from tests.sim.replication.broker import BrokerProcess

OPS_PER_MULTI = 500
REQUEST_TIMEOUT_MS = 1000  # the real shell's 30 s, scaled to the simulation's clock
CHANNEL_RETRY_MS = 100
TICK_MS = 1000

Gen = Generator[Any, Any, Any]


class ControllerMoved(Exception):
    """A fenced write failed: this broker is no longer (or never was) the controller."""


class PeerError(Exception):
    """No answer (the peer is down, unreachable, or too slow)."""


class Rpc:
    """What a task yields to send a request and wait for its answer (PeerError on failure)."""

    __slots__ = ("api_key", "body", "destination", "timeout_ms", "version")

    def __init__(self, destination: int, api_key: ApiKey, version: int, body: dict[str, Any], timeout_ms: int) -> None:
        self.destination = destination
        self.api_key = api_key
        self.version = version
        self.body = body
        self.timeout_ms = timeout_ms


CONFIRM_AFTER_MS = int(CONFIRM_AFTER_S * 1000)


def confirm_dead(proc: BrokerProcess, broker: int) -> Gen:
    """The fast failure detection after the idle connection to `broker` ended (liveness.py's
    watch_endpoint, its decision the real `verdict`): connection attempts until the verdict is
    dead (True) or an attempt connects or gets no answer (False: no evidence)."""
    outcomes: list[Probe] = []
    while True:
        outcome = yield from proc.cluster.network.probe(proc.broker_id, broker)
        outcomes.append(outcome)
        if verdict(outcomes):
            return True
        if outcome is not Probe.REFUSED:
            return False
        yield Sleep(CONFIRM_AFTER_MS)


class SimChannel:
    """Requests to one broker, sent one at a time in order (the real _Channel), and the fast
    failure detection on that broker's endpoint."""

    def __init__(self, shell: SimControllerShell, broker: BrokerRegistration) -> None:
        self.broker = broker
        self._shell = shell
        self._queue = SimQueue()
        self._task: Task = shell.proc.loop.spawn(self._run(), f"channel-{broker.broker_id}")
        # The real watcher's first act is a connection attempt (then it holds the connection).
        if shell.proc.cluster.faults.dead_signal and broker.broker_id != shell.broker_id:
            self.connection_ended()

    def send(self, request: BrokerRequest) -> None:
        self._queue.put_nowait(request)

    def _run(self) -> Gen:
        shell = self._shell
        while True:
            request = yield from self._queue.get()
            early = 0
            while True:
                try:
                    answer = yield Rpc(self.broker.broker_id, request.api_key, request.version, request.body,
                                       REQUEST_TIMEOUT_MS)
                    if too_early(answer, early) and shell.broker_is_live(self.broker):
                        early += 1
                        yield Sleep(CHANNEL_RETRY_MS)
                        continue
                    break
                except PeerError:
                    if not shell.broker_is_live(self.broker):
                        answer = None
                        break
                    yield Sleep(CHANNEL_RETRY_MS)
            if answer is not None:
                shell.answered(self.broker.broker_id, request, answer)

    def connection_ended(self) -> None:
        """The idle connection to this broker ended (the cluster says when: its process died)."""
        self._shell.proc.loop.spawn(self._confirm(), f"liveness-{self.broker.broker_id}")

    def _confirm(self) -> Gen:
        if (yield from confirm_dead(self._shell.proc, self.broker.broker_id)):
            self._shell.suspect(self.broker, "connection refused twice")

    def close(self) -> None:
        self._task.cancel()


class SimControllerShell:
    def __init__(self, proc: BrokerProcess, settings: ControllerSettings) -> None:
        self.proc = proc
        self.zk = proc.zk
        self.broker_id = proc.broker_id
        self.settings = settings
        self.core: ControllerCore | None = None
        self.controller_id = -1
        self.epoch = -1
        self._epoch_version = -1
        self._events = SimQueue()
        self._worker: Task | None = None
        self._ticker: Task | None = None
        self._channels: dict[int, SimChannel] = {}
        self._waiting: dict[int, SimFuture] = {}
        self._tokens = 0
        self._topic_watched: set[str] = set()
        self._state_mzxid: dict[tuple[str, int], int] = {}
        self._stopped = False
        # The controller this broker watches (liveness.py): its id, /controller_epoch's version
        # read before its claim was, and its registration; None until read.
        self.watched_controller: tuple[int, int, BrokerRegistration] | None = None
        self.zk.listeners.append(self._on_session)

    @property
    def active(self) -> bool:
        return self.core is not None

    # lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        self._worker = self.proc.loop.spawn(self._work(), "controller-worker")
        self._post(self._run_election)

    def stop(self) -> Gen:
        self._stopped = True
        yield from self._resign("shutting down")
        for task in (self._worker, self._ticker):
            if task is not None:
                task.cancel()

    def _post(self, event: Callable[[], Gen]) -> None:
        if not self._stopped:
            self._events.put_nowait(event)

    def _work(self) -> Gen:
        while True:
            event = yield from self._events.get()
            try:
                yield from event()
            except ControllerMoved as moved:
                yield from self._resign(str(moved))
                self._post(self._run_election)
            except ZkError as error:
                if after_failure(self.active) is AfterFailure.RESIGN_AND_ELECT:
                    yield from self._resign(f"ZooKeeper error {error!r}")
                    self._post(self._run_election)
                else:
                    self.proc.world.after(ELECTION_RETRY_MS, self._post, self._run_election)

    def _on_session(self, state: str, session: int, new_session: bool) -> None:
        if state == "expired" and self.active:
            self._post(lambda: self._resign("ZooKeeper session expired"))
        elif state == "connected" and new_session:
            self._post(self._run_election)

    # election ---------------------------------------------------------------------------------
    def _run_election(self) -> Gen:
        if self._stopped:
            return
        if self.active:
            if not self.proc.cluster.fast_detection:  # see Cluster.fast_detection
                return
            # The real shell: our claim given up by a broker that found us dead (wrongly)?
            stat = yield from self.zk.exists(layout.CONTROLLER, watch=self._controller_watch)
            if stat is None or stat.ephemeral_owner != self.zk.session_id:
                yield from self._resign(f"{layout.CONTROLLER} is no longer this controller's claim")
                self._post(self._run_election)
            return
        try:
            data, stat = yield from self.zk.get(layout.CONTROLLER, watch=self._controller_watch)
            controller_id = layout.decode_controller(data)
            if give_up_claim(controller_id, stat.ephemeral_owner, self.broker_id, self.zk.session_id, self.active):
                yield from self.zk.write([Delete(layout.CONTROLLER, stat.version)], multi=False)
                self._post(self._run_election)
                return
            self._learn_controller(controller_id)
            return
        except NoNodeError:
            pass
        except LayoutError:
            return
        try:
            data, stat = yield from self.zk.get(layout.CONTROLLER_EPOCH)
            epoch, version = layout.decode_controller_epoch(data), stat.version
        except NoNodeError:
            try:
                yield from self.zk.create(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(0))
            except NodeExistsError:
                pass
            data, stat = yield from self.zk.get(layout.CONTROLLER_EPOCH)
            epoch, version = layout.decode_controller_epoch(data), stat.version
        try:
            yield from self.zk.write([
                Create(layout.CONTROLLER, layout.encode_controller(self.broker_id, self.proc.world.now),
                       ephemeral=True),
                SetData(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(epoch + 1), version),
            ])
        except (NodeExistsError, BadVersionError):
            self._post(self._run_election)
            return
        self.epoch, self._epoch_version = epoch + 1, version + 1
        self.proc.cluster.note(f"b{self.broker_id} elected controller, epoch {self.epoch}")
        yield from self.zk.exists(layout.CONTROLLER, watch=self._controller_watch)
        self._learn_controller(self.broker_id)
        yield from self._activate()

    def _controller_watch(self, event: Event) -> None:
        self._post(self._run_election)

    def _learn_controller(self, controller_id: int) -> None:
        if controller_id != self.controller_id:
            self.watched_controller = None
            if controller_id not in (-1, self.broker_id) and self.proc.cluster.fast_detection:
                self.proc.loop.spawn(self._read_watched_controller(controller_id), "watch-controller")
        self.controller_id = controller_id

    def _read_watched_controller(self, controller_id: int) -> Gen:
        """ControllerShell._watch_controller's reads (before it holds the connection)."""
        try:
            _, epoch_stat = yield from self.zk.get(layout.CONTROLLER_EPOCH)
            data, _ = yield from self.zk.get(layout.CONTROLLER)
            if layout.decode_controller(data) != controller_id:
                return
            data, stat = yield from self.zk.get(layout.broker_path(controller_id))
        except (ZkError, LayoutError):
            return
        if self.controller_id == controller_id:
            self.watched_controller = (controller_id, epoch_stat.version,
                                       BrokerRegistration.decode(controller_id, data, stat.czxid))

    def controller_connection_ended(self) -> None:
        """The idle connection to the watched controller ended: confirm, then give its claim up."""
        if self.watched_controller is not None:
            self.proc.loop.spawn(self._controller_looks_dead(self.watched_controller, confirm=True), "controller-dead")

    def give_up_controller(self) -> None:
        """A verdict "dead" on the watched controller without confirming (the false signal)."""
        if self.watched_controller is not None:
            self.proc.loop.spawn(self._controller_looks_dead(self.watched_controller, confirm=False), "controller-dead")

    def _controller_looks_dead(self, watched: tuple[int, int, BrokerRegistration], confirm: bool) -> Gen:
        controller_id, epoch_version, _ = watched
        if confirm and not (yield from confirm_dead(self.proc, controller_id)):
            return
        if self.controller_id != controller_id or self.active or self._stopped:
            return
        self.proc.cluster.note(f"b{self.broker_id} finds controller b{controller_id} dead: gives its claim up")
        try:
            yield from self.zk.write([Check(layout.CONTROLLER_EPOCH, epoch_version), Delete(layout.CONTROLLER)])
        except ZkError:
            pass

    def _activate(self) -> Gen:
        snapshot = yield from self._load()
        bounced = bounced_at_activation(snapshot, self._state_mzxid)
        everyone = dict(snapshot.brokers)
        snapshot.brokers = {b: r for b, r in everyone.items() if b not in bounced}
        self.core = ControllerCore(self.broker_id, self.epoch, self.settings, snapshot, self.proc.world.now)
        if bounced:
            self.proc.cluster.note(f"b{self.broker_id} activation: brokers {sorted(bounced)} re-registered since "
                                   f"the states naming them were written: handled as bounced")
            self.core.brokers_changed(everyone)
        self.core.check()
        for broker in everyone.values():
            self._channel(broker)
        yield from self._execute(self.core.ready())
        self._ticker = self.proc.loop.spawn(self._tick_loop(), "controller-ticker")

    def _resign(self, reason: str) -> Gen:
        if self.core is None:
            return
        self.proc.cluster.note(f"b{self.broker_id} resigns as controller (epoch {self.epoch}): {reason}")
        self.core = None
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()
        self._topic_watched.clear()
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(ControllerMoved(reason))
        self._waiting.clear()
        try:
            data, stat = yield from self.zk.get(layout.CONTROLLER)
            if layout.decode_controller(data) == self.broker_id and stat.ephemeral_owner == self.zk.session_id:
                yield from self.zk.write([Delete(layout.CONTROLLER, stat.version)], multi=False)
        except (ZkError, LayoutError):
            pass
        self.controller_id = -1

    # reading the cluster -----------------------------------------------------------------------
    def _load(self) -> Gen:
        brokers = yield from self._read_brokers()
        names = yield from self.zk.get_children(layout.BROKER_TOPICS, watch=self._topics_watch)
        topics: dict[str, TopicAssignment] = {}
        for name in names:
            assignment = yield from self._read_topic(name)
            if assignment is not None:
                topics[name] = assignment
        states: dict[tuple[str, int], PartitionState] = {}
        for name, assignment in topics.items():
            for index in assignment.partitions:
                state = yield from self._read_state(name, index)
                if state is not None:
                    states[(name, index)] = state
        configs = {}
        for name in topics:
            configs[name] = yield from self._read_config(name)
        deleting = set((yield from self.zk.get_children(layout.DELETE_TOPICS, watch=self._deletions_watch)))
        yield from self.zk.get_children(layout.CONFIG_CHANGES, watch=self._config_changes_watch)
        return ClusterSnapshot(brokers, topics, states, configs, deleting)

    def _read_brokers(self) -> Gen:
        children = yield from self.zk.get_children(layout.BROKER_IDS, watch=self._brokers_watch)
        found: dict[int, BrokerRegistration] = {}
        for child in children:
            if not child.isdigit():
                continue
            broker = int(child)
            try:
                data, stat = yield from self.zk.get(layout.broker_path(broker))
            except NoNodeError:
                continue
            found[broker] = BrokerRegistration.decode(broker, data, stat.czxid)
        return found

    def _read_topic(self, name: str) -> Gen:
        try:
            data, stat = yield from self.zk.get(layout.topic_path(name), watch=self._topic_watch)
            self._topic_watched.add(name)
            return TopicAssignment.decode(name, data, stat.version)
        except NoNodeError:
            return None

    def _read_state(self, topic: str, index: int) -> Gen:
        path = layout.partition_state_path(topic, index)
        try:
            data, stat = yield from self.zk.get(path)
        except NoNodeError:
            return None
        self._state_mzxid[(topic, index)] = stat.mzxid
        return PartitionState(LeaderAndIsr.decode(path, data), stat.version)

    def _read_config(self, topic: str) -> Gen:
        try:
            data, _ = yield from self.zk.get(layout.topic_config_path(topic))
            return layout.decode_topic_config(topic, data)
        except (NoNodeError, LayoutError):
            return {}

    # watches -----------------------------------------------------------------------------------
    def _brokers_watch(self, event: Event) -> None:
        self._post(self._brokers_changed)

    def _brokers_changed(self) -> Gen:
        if self.core is None:
            return
        brokers = yield from self._read_brokers()
        for broker_id in list(self._channels):
            channel = self._channels[broker_id]
            known = brokers.get(broker_id)
            if known is None or known.epoch != channel.broker.epoch:
                channel.close()
                del self._channels[broker_id]
        for broker in brokers.values():
            self._channel(broker)
        yield from self._run(lambda core: core.brokers_changed(brokers))

    def _topics_watch(self, event: Event) -> None:
        self._post(self._topics_changed)

    def _topic_watch(self, event: Event) -> None:
        self._topic_watched.discard(event.path.rsplit("/", 1)[-1])
        self._post(self._topics_changed)

    def _topics_changed(self) -> Gen:
        if self.core is None:
            return
        names = yield from self.zk.get_children(layout.BROKER_TOPICS, watch=self._topics_watch)
        topics: dict[str, TopicAssignment] = {}
        for name in names:
            if self.core is None:
                return  # resigned meanwhile (stop() runs beside the events)
            known = self.core.topics.get(name)
            if known is not None and name in self._topic_watched:
                topics[name] = known
                continue
            assignment = yield from self._read_topic(name)
            if assignment is not None:
                topics[name] = assignment
        if self.core is None:
            return
        new = [n for n in topics if n not in self.core.topics]
        for name in new:
            config = yield from self._read_config(name)
            if self.core is not None:
                self.core.topic_configs[name] = config
        yield from self._run(lambda core: core.topics_changed(topics))

    def _deletions_watch(self, event: Event) -> None:
        self._post(self._deletions_changed)

    def _deletions_changed(self) -> Gen:
        if self.core is None:
            return
        names = yield from self.zk.get_children(layout.DELETE_TOPICS, watch=self._deletions_watch)
        yield from self._run(lambda core: core.delete_requested(names))

    def _config_changes_watch(self, event: Event) -> None:
        pass  # topic config changes are not simulated

    def _tick_loop(self) -> Gen:
        while True:
            yield Sleep(TICK_MS)
            self._post(lambda: self._run(lambda core: core.tick(self.proc.world.now)))

    # requests from brokers ----------------------------------------------------------------------
    def call(self, action: Callable[[ControllerCore, int], None]) -> Gen:
        """Run `action(core, token)` as a controller event and wait for its reply (raises
        ControllerMoved when this broker is not, or stops being, the controller)."""
        if self.core is None:
            raise ControllerMoved("not the controller")
        self._tokens += 1
        token = self._tokens
        future = SimFuture()
        self._waiting[token] = future
        self._post(lambda: self._run(lambda core: action(core, token)))
        return (yield Wait(future))

    # running the core -------------------------------------------------------------------------
    def _run(self, step: Callable[[ControllerCore], None]) -> Gen:
        core = self.core
        if core is None:
            return
        step(core)
        core.check()
        yield from self._execute(core.ready())

    def _execute(self, ready: Ready) -> Gen:
        if ready.empty():
            return
        for path in ready.ensure_paths:
            yield from self.zk.ensure_path(path)
        ops = []
        for write in ready.writes:
            if write.op == "delete_if_present":
                yield from self._fenced(ops)
                ops = []
                try:
                    yield from self.zk.write([Check(layout.CONTROLLER_EPOCH, self._epoch_version), Delete(write.path)])
                except NoNodeError:
                    pass  # gone already (the simulated multi names the failing op's error only)
                except ZkError as error:
                    raise ControllerMoved(f"a fenced write failed: {error!r}") from error
            else:
                ops.extend((yield from self._ops(write)))
        yield from self._fenced(ops)
        for request in ready.requests:
            channel = self._channels.get(request.broker_id)
            if channel is not None:
                channel.send(request)
        for reply in ready.replies:
            future = self._waiting.pop(reply.token, None) if isinstance(reply.token, int) else None
            if future is not None and not future.done():
                future.set_result(reply.body)

    def _fenced(self, ops: list[Any]) -> Gen:
        for start in range(0, len(ops), OPS_PER_MULTI):
            chunk = ops[start:start + OPS_PER_MULTI]
            try:
                yield from self.zk.write([Check(layout.CONTROLLER_EPOCH, self._epoch_version), *chunk])
            except ZkError as error:
                raise ControllerMoved(f"a fenced write failed: {error!r}") from error

    def _ops(self, write: ZkWrite) -> Gen:
        if write.op == "create":
            return [Create(write.path, write.data)]
        if write.op == "set":
            return [SetData(write.path, write.data, write.version)]
        if write.op == "delete":
            return [Delete(write.path, write.version)]
        assert write.op == "delete_tree", write.op
        return (yield from self._subtree(write.path))

    def _subtree(self, path: str) -> Gen:
        try:
            children = yield from self.zk.get_children(path)
        except NoNodeError:
            return []
        below: list[Delete] = []
        for child in children:
            below.extend((yield from self._subtree(f"{path}/{child}")))
        return [*below, Delete(path)]

    def _channel(self, broker: BrokerRegistration) -> None:
        known = self._channels.get(broker.broker_id)
        if known is None or known.broker.epoch != broker.epoch:
            if known is not None:
                known.close()
            self._channels[broker.broker_id] = SimChannel(self, broker)

    def channel(self, broker: int) -> SimChannel | None:
        return self._channels.get(broker)

    def suspect(self, broker: BrokerRegistration, evidence: str) -> None:
        """ControllerShell.suspect: the core decides."""
        self.proc.cluster.note(f"b{self.broker_id} declares b{broker.broker_id} (epoch {broker.epoch}) dead: "
                               f"{evidence}")
        self._post(lambda: self._run(lambda core: core.broker_suspected_dead(broker.broker_id, broker.epoch,
                                                                             evidence)))

    def broker_is_live(self, broker: BrokerRegistration) -> bool:
        core = self.core
        return core is not None and core.brokers.get(broker.broker_id) == broker

    def answered(self, broker: int, request: BrokerRequest, answer: dict[str, Any]) -> None:
        if request.api_key == ApiKey.STOP_REPLICA:
            if answer.get("error_code", 0) != ErrorCode.NONE:
                return
            results = [(e["topic_name"], e["partition_index"], e["error_code"])
                       for e in answer.get("partition_errors", [])]
            self._post(lambda: self._run(lambda core: core.stop_replica_answered(broker, results)))
