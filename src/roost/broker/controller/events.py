"""The controller's event handling as activities: election through ZooKeeper, the watches that
feed the core, the fenced writes and the requests to brokers that the core asks for.

Election (Kafka's): one multi creates the ephemeral /controller and sets /controller_epoch to the
next epoch at the version just read; losing it (NODEEXISTS, BADVERSION) means another broker won.
Every broker watches /controller and runs for it again when it disappears.

Once elected, it reads the cluster from ZooKeeper, builds a ControllerCore and feeds it one event
at a time (a queue and one worker: Kafka's controller event thread). After each event it makes
the core's writes, each multi starting with a check of /controller_epoch at the version this
controller set (so a deposed controller's writes fail as a whole), then hands the broker requests
to one channel per broker (sent in order, retried while that broker lives), then gives the
replies. A write that fails means the controller moved or ZooKeeper changed under it: it resigns,
drops /controller if still its own, and the election runs again from what ZooKeeper holds.

Everything here decides and sequences; nothing does I/O. The worker, the ticker and each
channel are activities (generators yielding effects: ZooKeeper calls, `roost.broker.zk.effects`;
requests to brokers, sleeps and waits for work, `roost.broker.activity.effects`) started with an
injected `spawn`; futures and timers come from an injected `Waits`, the time from an injected
clock. The broker's shell (`shell.py`) performs them with its ZooKeeper client, its peers and its
event loop; the replication simulation performs the very same activities on its simulated
ZooKeeper, network and clock.
"""

from __future__ import annotations

import logging
import operator
from collections import deque
from collections.abc import Callable, Generator
from typing import Any

from roost.broker.activity.effects import Request, ShellTask, Sleep, Spawn, Unreachable, WaitForWork
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
from roost.broker.controller.liveness import watch_endpoint
from roost.broker.replica.waits import Waits
from roost.broker.zk import layout
from roost.broker.zk.effects import ZkBatch, ZkChildren, ZkCreate, ZkDelete, ZkExists, ZkGet, ZkMulti
from roost.broker.zk.layout import BrokerRegistration, LayoutError, LeaderAndIsr, TopicAssignment
from roost.clock import Clock
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

log = logging.getLogger("roost.controller")

OPS_PER_MULTI = 500
REQUEST_TIMEOUT_MS = 30_000
CHANNEL_RETRY_MS = 100
TICK_MS = 1000
IDLE_WAIT_MS = 60_000  # an idle worker or channel looks at its queue again this often

# An activity of this module; `yield from` one inside another.
Gen = Generator[Any, Any, Any]
Event = Callable[[], Gen]


class ControllerMoved(Exception):
    """A fenced write failed: this broker is no longer (or never was) the controller."""


class _Channel:
    """Requests to one broker, sent one at a time in order (Kafka's RequestSendThread)."""

    def __init__(self, events: ControllerEvents, broker: BrokerRegistration) -> None:
        self.broker = broker
        self.queue: deque[BrokerRequest] = deque()
        self.task: ShellTask = events.spawn(events._channel_run(self), f"controller-channel-{broker.broker_id}")
        # The fast failure detection (liveness.py): an idle connection to the broker's registered
        # endpoint, whose end followed by two refusals declares this incarnation dead.
        self.watch: ShellTask | None = None
        if events.fast_detection and broker.broker_id != events.broker_id:
            self.watch = events.spawn(events._watch_broker(broker), f"controller-liveness-{broker.broker_id}")

    def send(self, request: BrokerRequest) -> None:
        self.queue.append(request)
        self.task.wake()

    def close(self) -> None:
        self.task.cancel()
        if self.watch is not None:
            self.watch.cancel()


class ControllerEvents:
    def __init__(self, broker_id: int, settings: ControllerSettings, spawn: Spawn, waits: Waits,
                 clock_ms: Clock, session_id: Callable[[], int | None],
                 on_controller: Callable[[int], None] | None = None,
                 drop_peer: Callable[[int], None] | None = None) -> None:
        self.broker_id = broker_id
        self.settings = settings
        self.spawn = spawn
        self._waits = waits
        self.clock_ms = clock_ms
        self._session_id = session_id  # this broker's ZooKeeper session now (None: none)
        self.on_controller = on_controller or (lambda controller_id: None)
        self._drop_peer = drop_peer or (lambda broker_id: None)
        # What to do with an exception no rule expects (a bug): None logs it and resigns, as a
        # broker must; the simulation raises it, failing the run.
        self.on_bug: Callable[[BaseException], None] | None = None
        self.request_timeout_ms: float = REQUEST_TIMEOUT_MS
        self.core: ControllerCore | None = None
        self.controller_id = -1
        self.epoch = -1
        self._epoch_version = -1
        self._events: deque[Event] = deque()
        self.worker: ShellTask | None = None
        self.ticker: ShellTask | None = None
        self._channels: dict[int, _Channel] = {}
        self._waiting: dict[int, Any] = {}  # token -> the future of a `submit`
        self._tokens = 0
        self._topic_watched: set[str] = set()
        # The zxid of the last write of each partition state read at activation.
        self._state_mzxid: dict[tuple[str, int], int] = {}
        self._stopped = False
        # The fast failure detection (liveness.py): on by default; the replication simulation
        # turns it (and the ZooKeeper calls only it needs) off where it does not simulate it.
        self.fast_detection = True
        self._controller_watcher: ShellTask | None = None  # on another broker's controller
        # (controller id, /controller_epoch's version read before its claim, its registration)
        self.watched_controller: tuple[int, int, BrokerRegistration] | None = None

    @property
    def active(self) -> bool:
        return self.core is not None

    # lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        self.worker = self.spawn(self._work(), "controller-worker")
        self._post(self._run_election)

    def stop(self) -> Gen:
        """No event is taken any more; the activity to run resigns and ends the worker and ticker."""
        self._stopped = True
        return self._stopping()

    def _stopping(self) -> Gen:
        self._stop_watching_controller()
        yield from self._resign("shutting down")
        for task in (self.worker, self.ticker):
            if task is not None:
                task.cancel()

    def _post(self, event: Event) -> None:
        if not self._stopped:
            self._events.append(event)
            if self.worker is not None:
                self.worker.wake()

    def _work(self) -> Gen:
        events = self._events
        while True:
            while not events:
                yield WaitForWork(IDLE_WAIT_MS)
            event = events.popleft()
            try:
                yield from event()
            except ControllerMoved as moved:
                yield from self._resign(str(moved))
                self._post(self._run_election)
            except ZkError as error:
                log.warning("controller event failed on ZooKeeper: %r", error)
                yield from self._after_failure(f"ZooKeeper error {error!r}")
            except Exception as error:
                if self.on_bug is not None:
                    self.on_bug(error)
                log.exception("controller event failed")
                yield from self._after_failure("internal error")

    def _after_failure(self, reason: str) -> Gen:
        if after_failure(self.active) is AfterFailure.RESIGN_AND_ELECT:
            yield from self._resign(reason)
            self._post(self._run_election)
        else:
            self._waits.call_later(ELECTION_RETRY_MS / 1000, lambda: self._post(self._run_election))

    def session_expired(self) -> None:
        if self.active:
            # Our /controller is gone with the session: someone else may be elected any moment.
            self._post(lambda: self._resign("ZooKeeper session expired"))

    def session_connected(self, new_session: bool) -> None:
        if new_session:
            self._post(self._run_election)

    # election ---------------------------------------------------------------------------------
    def _run_election(self) -> Gen:
        if self._stopped:
            return
        if self.active:
            if self.fast_detection:
                # A broker that found this controller dead (a wrong verdict: we live) may have
                # given our claim up; another controller may be elected any moment: step aside now
                # rather than at our first fenced write.
                stat = yield ZkExists(layout.CONTROLLER, self._controller_watch)
                if stat is None or stat.ephemeral_owner != self._session_id():
                    yield from self._resign(f"{layout.CONTROLLER} is no longer this controller's claim")
                    self._post(self._run_election)
            return
        try:
            data, stat = yield ZkGet(layout.CONTROLLER, self._controller_watch)
            controller_id = layout.decode_controller(data)
            if give_up_claim(controller_id, stat.ephemeral_owner, self.broker_id, self._session_id(), self.active):
                log.warning("%s names this broker but no controller runs here: giving it up", layout.CONTROLLER)
                yield ZkDelete(layout.CONTROLLER, stat.version)
                return
            self._learn_controller(controller_id)
            return
        except NoNodeError:
            pass
        except LayoutError as error:
            log.warning("unreadable %s: %s", layout.CONTROLLER, error)
            return
        try:
            data, stat = yield ZkGet(layout.CONTROLLER_EPOCH)
            epoch, version = layout.decode_controller_epoch(data), stat.version
        except NoNodeError:
            try:
                yield ZkCreate(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(0))
            except NodeExistsError:
                pass
            data, stat = yield ZkGet(layout.CONTROLLER_EPOCH)
            epoch, version = layout.decode_controller_epoch(data), stat.version
        try:
            yield ZkMulti([
                Create(layout.CONTROLLER, layout.encode_controller(self.broker_id, self.clock_ms()), ephemeral=True),
                SetData(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(epoch + 1), version),
            ])
        except (NodeExistsError, BadVersionError):
            # Another broker won; learn who and watch for its end.
            self._post(self._run_election)
            return
        self.epoch, self._epoch_version = epoch + 1, version + 1
        log.info("broker %d is the controller (epoch %d)", self.broker_id, self.epoch)
        yield ZkExists(layout.CONTROLLER, self._controller_watch)
        self._learn_controller(self.broker_id)
        yield from self._activate()

    def _controller_watch(self, event: Any) -> None:
        self._post(self._run_election)

    def _learn_controller(self, controller_id: int) -> None:
        if controller_id != self.controller_id:
            self.controller_id = controller_id
            self.on_controller(controller_id)
            self._stop_watching_controller()
            if controller_id not in (-1, self.broker_id) and self.fast_detection and not self._stopped:
                self._controller_watcher = self.spawn(self._watch_controller(controller_id),
                                                      f"controller-watch-{controller_id}")

    def _stop_watching_controller(self) -> None:
        self.watched_controller = None
        if self._controller_watcher is not None:
            self._controller_watcher.cancel()
            self._controller_watcher = None

    def _watch_controller(self, controller_id: int) -> Gen:
        """The fast failure detection (liveness.py) for the controller itself, run by every other
        broker: when the controller's process is gone, give its claim up (delete /controller) so
        that the election runs now rather than when its session expires. The delete is conditional
        on /controller_epoch's version read *before* the claim was read, so it can only delete the
        claim of the controller that was watched, never a newer one. A controller found dead
        wrongly sees its claim gone and resigns (and its writes were fenced by the next
        controller's epoch anyway)."""
        try:
            _, epoch_stat = yield ZkGet(layout.CONTROLLER_EPOCH)
            data, _ = yield ZkGet(layout.CONTROLLER)
            if layout.decode_controller(data) != controller_id:
                return
            data, stat = yield ZkGet(layout.broker_path(controller_id))
            registration = BrokerRegistration.decode(controller_id, data, stat.czxid)
        except (ZkError, LayoutError):
            return  # no fast path this time: the session's expiry still ends the claim
        if self.controller_id != controller_id:
            return
        watched = (controller_id, epoch_stat.version, registration)
        self.watched_controller = watched
        evidence = yield from watch_endpoint(controller_id, registration.host, registration.port, self.clock_ms)
        yield from self._give_up_controller(watched, evidence)

    def give_up_controller(self, evidence: str) -> None:
        """A verdict "dead" on the watched controller from elsewhere (the simulation's false
        signals): give its claim up as `_watch_controller` does."""
        if self.watched_controller is not None:
            self.spawn(self._give_up_controller(self.watched_controller, evidence), "controller-give-up")

    def _give_up_controller(self, watched: tuple[int, int, BrokerRegistration], evidence: str) -> Gen:
        controller_id, epoch_version, _ = watched
        if self.controller_id != controller_id or self.active or self._stopped:
            return
        log.warning("the controller, broker %d, looks dead: %s; giving its claim up", controller_id, evidence)
        try:
            yield ZkMulti([Check(layout.CONTROLLER_EPOCH, epoch_version), Delete(layout.CONTROLLER)])
        except ZkError:
            pass  # an election ran meanwhile, or the claim is gone already

    def _activate(self) -> Gen:
        snapshot = yield from self._load()
        bounced = bounced_at_activation(snapshot, self._state_mzxid)
        everyone = dict(snapshot.brokers)
        snapshot.brokers = {b: r for b, r in everyone.items() if b not in bounced}
        self.core = ControllerCore(self.broker_id, self.epoch, self.settings, snapshot, self.clock_ms())
        if bounced:
            log.warning("brokers %s registered after the partition states naming them were written: "
                        "handled as bounced", sorted(bounced))
            self.core.brokers_changed(everyone)
        self.core.check()
        for broker in everyone.values():
            self._channel(broker)
        yield from self._execute(self.core.ready())
        self.ticker = self.spawn(self._tick_loop(), "controller-ticker")
        yield from self._log_dir_events()

    def _resign(self, reason: str) -> Gen:
        if self.core is None:
            return
        log.warning("controller %d resigns (epoch %d): %s", self.broker_id, self.epoch, reason)
        self.core = None
        if self.ticker is not None:
            self.ticker.cancel()
            self.ticker = None
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()
        self._topic_watched.clear()
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(ControllerMoved(reason))
        self._waiting.clear()
        try:
            data, stat = yield ZkGet(layout.CONTROLLER)
            if layout.decode_controller(data) == self.broker_id and stat.ephemeral_owner == self._session_id():
                yield ZkDelete(layout.CONTROLLER, stat.version)
        except (ZkError, LayoutError):
            pass
        self.controller_id = -1

    # reading the cluster -----------------------------------------------------------------------
    def _load(self) -> Gen:
        self._state_mzxid.clear()
        brokers = yield from self._read_brokers()
        names = yield ZkChildren(layout.BROKER_TOPICS, self._topics_watch)
        topics: dict[str, TopicAssignment] = {}
        for name, assignment in zip(names, (yield from self._read_topics(names)), strict=True):
            if assignment is not None:
                topics[name] = assignment
        wanted = [(name, index) for name, a in topics.items() for index in a.partitions]
        found = yield from self._read_states(wanted)
        states = {tp: state for tp, state in zip(wanted, found, strict=True) if state is not None}
        configs = dict(zip(topics, (yield from self._read_configs(list(topics))), strict=True))
        deleting = set((yield ZkChildren(layout.DELETE_TOPICS, self._deletions_watch)))
        yield ZkChildren(layout.CONFIG_CHANGES, self._config_changes_watch)
        return ClusterSnapshot(brokers, topics, states, configs, deleting)

    def _read_brokers(self) -> Gen:
        children = yield ZkChildren(layout.BROKER_IDS, self._brokers_watch)
        ids = [int(c) for c in children if c.isdigit()]
        found = yield ZkBatch([ZkGet(layout.broker_path(broker)) for broker in ids])
        brokers: dict[int, BrokerRegistration] = {}
        for broker, outcome in zip(ids, found, strict=True):
            if isinstance(outcome, NoNodeError):
                continue
            if isinstance(outcome, ZkError):
                raise outcome
            data, stat = outcome
            try:
                brokers[broker] = BrokerRegistration.decode(broker, data, stat.czxid)
            except LayoutError as error:
                log.warning("ignoring broker %d: %s", broker, error)
        return brokers

    def _read_topics(self, names: list[str]) -> Gen:
        found = yield ZkBatch([ZkGet(layout.topic_path(name), self._topic_watch) for name in names])
        assignments: list[TopicAssignment | None] = []
        for name, outcome in zip(names, found, strict=True):
            assignment = None
            if isinstance(outcome, NoNodeError):
                pass
            elif isinstance(outcome, ZkError):
                raise outcome
            else:
                data, stat = outcome
                self._topic_watched.add(name)
                try:
                    assignment = TopicAssignment.decode(name, data, stat.version)
                except LayoutError as error:
                    log.warning("ignoring topic %s: %s", name, error)
            assignments.append(assignment)
        return assignments

    def _read_states(self, wanted: list[tuple[str, int]]) -> Gen:
        paths = [layout.partition_state_path(topic, index) for topic, index in wanted]
        found = yield ZkBatch([ZkGet(path) for path in paths])
        states: list[PartitionState | None] = []
        for tp, path, outcome in zip(wanted, paths, found, strict=True):
            if isinstance(outcome, NoNodeError):
                states.append(None)
                continue
            if isinstance(outcome, ZkError):
                raise outcome
            data, stat = outcome
            self._state_mzxid[tp] = stat.mzxid
            states.append(PartitionState(LeaderAndIsr.decode(path, data), stat.version))
        return states

    def _read_configs(self, topics: list[str]) -> Gen:
        found = yield ZkBatch([ZkGet(layout.topic_config_path(topic)) for topic in topics])
        configs: list[dict[str, str]] = []
        for topic, outcome in zip(topics, found, strict=True):
            if isinstance(outcome, NoNodeError):
                configs.append({})
                continue
            if isinstance(outcome, ZkError):
                raise outcome
            try:
                configs.append(layout.decode_topic_config(topic, outcome[0]))
            except LayoutError:
                configs.append({})
        return configs

    # watches (each posts an event; the event reads what is there now) ---------------------------
    def _brokers_watch(self, event: Any) -> None:
        self._post(self._brokers_changed)

    def _brokers_changed(self) -> Gen:
        if self.core is None:
            return
        brokers = yield from self._read_brokers()
        if self.core is None:
            return
        for broker_id in list(self._channels):
            channel = self._channels[broker_id]
            known = brokers.get(broker_id)
            if known is None or known.epoch != channel.broker.epoch:
                channel.close()
                del self._channels[broker_id]
                self._drop_peer(broker_id)
        for broker in brokers.values():
            self._channel(broker)
        yield from self._run(lambda core: core.brokers_changed(brokers))

    def _topics_watch(self, event: Any) -> None:
        self._post(self._topics_changed)

    def _topic_watch(self, event: Any) -> None:
        self._topic_watched.discard(event.path.rsplit("/", 1)[-1])
        self._post(self._topics_changed)

    def _topics_changed(self) -> Gen:
        if self.core is None:
            return
        names = yield ZkChildren(layout.BROKER_TOPICS, self._topics_watch)
        topics: dict[str, TopicAssignment] = {}
        for name in names:
            known = self.core.topics.get(name) if self.core is not None else None
            if known is not None and name in self._topic_watched:
                topics[name] = known  # unchanged since we read it (its data watch is armed)
                continue
            assignment = (yield from self._read_topics([name]))[0]
            if assignment is not None:
                topics[name] = assignment
        if self.core is None:  # resigned meanwhile (the broker is stopping)
            return
        new = [n for n in topics if n not in self.core.topics]
        configs = yield from self._read_configs(new)
        if self.core is None:
            return
        for name, config in zip(new, configs, strict=True):
            self.core.topic_configs[name] = config
        yield from self._run(lambda core: core.topics_changed(topics))

    def _deletions_watch(self, event: Any) -> None:
        self._post(self._deletions_changed)

    def _deletions_changed(self) -> Gen:
        if self.core is None:
            return
        names = yield ZkChildren(layout.DELETE_TOPICS, self._deletions_watch)
        yield from self._run(lambda core: core.delete_requested(names))

    def _log_dir_events_watch(self, event: Any) -> None:
        self._post(self._log_dir_events)

    def _log_dir_events(self) -> Gen:
        """Brokers' failed log directories: each notification is acted on, then deleted."""
        if self.core is None:
            return
        try:
            children = yield ZkChildren(layout.LOG_DIR_EVENTS, self._log_dir_events_watch)
        except NoNodeError:
            return
        for child in sorted(children):
            path = f"{layout.LOG_DIR_EVENTS}/{child}"
            try:
                data, _ = yield ZkGet(path)
                broker = layout.decode_log_dir_event(data)
            except (NoNodeError, LayoutError):
                continue
            yield from self._run(operator.methodcaller("log_dir_failed", broker))  # core.log_dir_failed(broker)
            try:
                yield ZkDelete(path)
            except NoNodeError:
                pass

    def _config_changes_watch(self, event: Any) -> None:
        self._post(self._config_changes)

    def _config_changes(self) -> Gen:
        if self.core is None:
            return
        children = yield ZkChildren(layout.CONFIG_CHANGES, self._config_changes_watch)
        for child in sorted(children)[-50:]:  # the recent ones; each names a topic to re-read
            try:
                data, _ = yield ZkGet(f"{layout.CONFIG_CHANGES}/{child}")
                topic = layout.decode_config_change(data)
            except (NoNodeError, LayoutError):
                continue
            if topic is not None and self.core is not None and topic in self.core.topics:
                config = (yield from self._read_configs([topic]))[0]
                if self.core is not None and self.core.topic_configs.get(topic) != config:
                    yield from self._run(operator.methodcaller("topic_configs_changed", topic, config))

    def _tick_loop(self) -> Gen:
        while True:
            yield Sleep(TICK_MS)
            self._post(lambda: self._run(lambda core: core.tick(self.clock_ms())))

    # requests from brokers ----------------------------------------------------------------------
    def submit(self, action: Callable[[ControllerCore, int], None]) -> Any:
        """Run `action(core, token)` as a controller event; the returned future (of the injected
        `Waits`) gets the reply it produces, or ControllerMoved. Raises ControllerMoved at once
        when this broker is not the controller."""
        if self.core is None:
            raise ControllerMoved("not the controller")
        self._tokens += 1
        token = self._tokens
        future = self._waits.future()
        self._waiting[token] = future
        self._post(lambda: self._run(lambda core: action(core, token)))
        return future

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
        yield from self._ensure_paths(ready.ensure_paths)
        ops: list[Any] = []
        for write in ready.writes:
            if write.op == "delete_if_present":
                yield from self._fenced(ops)
                ops = []
                yield from self._delete_if_present(write.path)
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
                yield ZkMulti([Check(layout.CONTROLLER_EPOCH, self._epoch_version), *chunk])
            except ZkError as error:
                raise ControllerMoved(f"a fenced write failed: {error!r}") from error

    def _delete_if_present(self, path: str) -> Gen:
        """Delete `path` under the controller-epoch check; a node already gone is no failure."""
        try:
            yield ZkMulti([Check(layout.CONTROLLER_EPOCH, self._epoch_version), Delete(path)])
        except NoNodeError as error:
            # The failing op's index where the client names it (the simulated one does not: the
            # check's node, /controller_epoch, is never deleted, so the delete's node is gone).
            if getattr(error, "op_index", None) not in (None, 1):
                raise ControllerMoved(f"a fenced write failed: {error!r}") from error
        except ZkError as error:
            raise ControllerMoved(f"a fenced write failed: {error!r}") from error

    def _ensure_paths(self, paths: list[str]) -> Gen:
        """Create the paths and their missing ancestors, level by level, each level's creates
        pipelined (a thousand new partitions must not cost a thousand round trips in a row)."""
        wanted: set[str] = set()
        for path in paths:
            parts = path.strip("/").split("/")
            wanted.update("/" + "/".join(parts[:depth]) for depth in range(1, len(parts) + 1))
        by_depth: dict[int, list[str]] = {}
        for path in wanted:
            by_depth.setdefault(path.count("/"), []).append(path)
        for depth in sorted(by_depth):
            outcomes = yield ZkBatch([ZkCreate(path) for path in sorted(by_depth[depth])])
            for outcome in outcomes:
                if isinstance(outcome, ZkError) and not isinstance(outcome, NodeExistsError):
                    raise outcome

    def _ops(self, write: ZkWrite) -> Gen:
        if write.op == "create":
            return [Create(write.path, write.data)]
        if write.op == "set":
            return [SetData(write.path, write.data, write.version)]
        if write.op == "delete":
            return [Delete(write.path, write.version)]
        assert write.op == "delete_tree", write.op
        return [Delete(path) for path in (yield from self._subtree(write.path))]

    def _subtree(self, path: str) -> Gen:
        """`path` and everything below it, deepest first (what exists now)."""
        try:
            children = yield ZkChildren(path)
        except NoNodeError:
            return []
        below = []
        for child in children:
            below.extend((yield from self._subtree(f"{path}/{child}")))
        return [*below, path]

    # the channels to brokers ----------------------------------------------------------------------
    def _channel(self, broker: BrokerRegistration) -> None:
        known = self._channels.get(broker.broker_id)
        if known is None or known.broker.epoch != broker.epoch:
            if known is not None:
                known.close()
            self._channels[broker.broker_id] = _Channel(self, broker)

    def _watch_broker(self, broker: BrokerRegistration) -> Gen:
        evidence = yield from watch_endpoint(broker.broker_id, broker.host, broker.port, self.clock_ms)
        self.suspect(broker, evidence)

    def suspect(self, broker: BrokerRegistration, evidence: str) -> None:
        """The fast failure detection's verdict on `broker` (this incarnation): the core decides."""
        log.warning("broker %d (epoch %d) looks dead: %s", broker.broker_id, broker.epoch, evidence)
        self._post(lambda: self._run(lambda core: core.broker_suspected_dead(broker.broker_id, broker.epoch,
                                                                             evidence)))

    def registration(self, broker_id: int) -> BrokerRegistration | None:
        """Where the channel to `broker_id` sends (the registration it was opened for)."""
        channel = self._channels.get(broker_id)
        return channel.broker if channel is not None else None

    def _channel_run(self, channel: _Channel) -> Gen:
        queue = channel.queue
        broker = channel.broker
        while True:
            while not queue:
                yield WaitForWork(IDLE_WAIT_MS)
            request = queue.popleft()
            while True:
                try:
                    answer = yield Request(broker.broker_id, request.api_key, request.version, request.body,
                                           self.request_timeout_ms)
                except Unreachable as error:
                    if not self.broker_is_live(broker):
                        answer = None
                        break
                    log.info("request %s to broker %d failed: %s; retrying", request.api_key.name,
                             broker.broker_id, error)
                    yield Sleep(CHANNEL_RETRY_MS)
                    continue
                if not self._epoch_not_learnt_yet(broker, request, answer):
                    break
                # The broker has not learnt the epoch of the registration this request is for (the
                # reply to its create is late, or was lost and is asked again) and refused it as
                # stale. Sent again while that registration lives: dropped, the broker would never
                # get this LeaderAndIsr (found by the replication simulation, seed 1241).
                log.info("broker %d does not know its epoch %d yet; %s sent again", broker.broker_id,
                         broker.epoch, request.api_key.name)
                yield Sleep(CHANNEL_RETRY_MS)
            if answer is not None:
                self.answered(broker.broker_id, request, answer)

    def _epoch_not_learnt_yet(self, broker: BrokerRegistration, request: BrokerRequest,
                              answer: dict[str, Any]) -> bool:
        return (answer.get("error_code", 0) == ErrorCode.STALE_BROKER_EPOCH
                and request.body.get("broker_epoch") == broker.epoch and self.broker_is_live(broker))

    def broker_is_live(self, broker: BrokerRegistration) -> bool:
        core = self.core
        return core is not None and core.brokers.get(broker.broker_id) == broker

    def answered(self, broker: int, request: BrokerRequest, answer: dict[str, Any]) -> None:
        """A broker answered a request: StopReplica answers drive topic deletion; LeaderAndIsr
        answers name the replicas on failed log directories."""
        if request.api_key == ApiKey.LEADER_AND_ISR and answer.get("error_code", 0) == ErrorCode.NONE:
            by_id = {topic["topic_id"]: topic["topic_name"] for topic in request.body["topic_states"]}
            offline = [(by_id[topic["topic_id"]], error["partition_index"])
                       for topic in answer.get("topics", []) if topic.get("topic_id") in by_id
                       for error in topic["partition_errors"] if error["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR]
            if offline:
                self._post(lambda: self._run(lambda core: core.replicas_offline(broker, offline)))
            # A replica answering NONE is hosted on a healthy disk: one offline before (a
            # damaged replica that cut its log and follows again) may lead and be counted again.
            hosted = [(by_id[topic["topic_id"]], error["partition_index"])
                      for topic in answer.get("topics", []) if topic.get("topic_id") in by_id
                      for error in topic["partition_errors"] if error["error_code"] == ErrorCode.NONE]
            core = self.core
            if core is not None and any(broker in core.offline_replicas.get(tp, ()) for tp in hosted):
                self._post(lambda: self._run(lambda core: core.replicas_online(broker, hosted)))
        elif request.api_key == ApiKey.STOP_REPLICA:
            if answer.get("error_code", 0) != ErrorCode.NONE:
                return
            results = [(e["topic_name"], e["partition_index"], e["error_code"])
                       for e in answer.get("partition_errors", [])]
            self._post(lambda: self._run(lambda core: core.stop_replica_answered(broker, results)))
        elif answer.get("error_code", 0) != ErrorCode.NONE:
            log.warning("broker %d answered %s with error %d", broker, request.api_key.name, answer["error_code"])
