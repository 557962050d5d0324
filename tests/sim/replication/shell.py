"""The simulation's shell for Roost's activities: the effects the real fetchers, ISR manager and
controller yield (roost.broker.activity.effects, roost.broker.zk.effects, the liveness watch's
Connect) performed on a simulated
broker's tasks, its network, its committer and its ZooKeeper client, on the simulated clock. Like
the broker's asyncio shells it decides nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roost.broker.activity.effects import Activity, Request, Sleep, Sync, Unreachable, WaitForWork
from roost.broker.controller.liveness import Connect
from roost.broker.zk.effects import (
    ZK_EFFECTS,
    ZkBatch,
    ZkChildren,
    ZkCreate,
    ZkDelete,
    ZkExists,
    ZkGet,
    ZkMulti,
)
from roost.zkclient import Delete, ZkError
from tests.sim.replication.runtime import PeerError, Rpc, SimFuture, Task, TaskGen, TaskLoop, Wait, gather
from tests.sim.replication.runtime import Sleep as SimSleep


class SimShell:
    """Runs activities on one broker process's task loop. `reachable(broker)` says whether the
    broker's address is known (as the real shells' peer lookups do); `committer` makes logs
    durable (SimCommitter); `zk` makes ZooKeeper calls (SimZkClient)."""

    def __init__(self, loop: TaskLoop, reachable: Callable[[int], bool], committer: Any = None,
                 observe: Callable[[Request], None] | None = None, zk: Any = None,
                 connect: Callable[[int], TaskGen] | None = None) -> None:
        self._loop = loop
        self._reachable = reachable
        self._committer = committer
        self._zk = zk
        self._connect = connect  # a liveness.Connect to a broker (Network.connect)
        self.observe = observe  # sees each request sent (the simulation's counters)

    def spawn(self, activity: Activity, name: str) -> SimTask:
        return SimTask(self, activity, name)

    def drive(self, activity: Activity, waker: SimTask | None = None) -> TaskGen:
        """Run `activity` to its end inside the current task (`yield from`); `waker` is the task
        whose `wake` ends a WaitForWork."""
        outcome: Any = None
        failure: BaseException | None = None
        try:
            while True:
                try:
                    effect = activity.throw(failure) if failure is not None else activity.send(outcome)
                except StopIteration as stop:
                    return stop.value
                outcome, failure = None, None
                # The commonest effects first: the loop's own cost is in every simulated fetch.
                kind = type(effect)
                if kind is Request:
                    if not self._reachable(effect.broker):
                        failure = Unreachable(effect.broker, "address not known", no_address=True)
                        continue
                    if self.observe is not None:
                        self.observe(effect)
                    try:
                        outcome = yield Rpc(effect.broker, effect.api_key, effect.version, effect.body,
                                            int(effect.timeout_ms))
                    except PeerError as error:
                        failure = Unreachable(effect.broker, str(error))
                elif kind is WaitForWork:
                    wakeup = SimFuture()
                    if waker is not None:
                        waker._wakeup = wakeup
                    yield Wait(wakeup, timeout=int(effect.timeout_ms))
                elif kind is Sleep:
                    yield SimSleep(int(effect.ms))
                elif kind is Sync:
                    futures = [self._committer.request(plog) for plog in effect.logs]
                    yield Wait(gather(futures))
                    outcome = [future.exception() for future in futures]
                elif kind in ZK_EFFECTS:
                    try:
                        outcome = yield from self._zk_call(effect)
                    except ZkError as error:
                        failure = error
                elif kind is Connect:
                    assert self._connect is not None, "this shell makes no connections"
                    outcome = yield from self._connect(effect.broker)
                else:
                    raise AssertionError(f"unknown effect {effect!r}")
        finally:
            activity.close()

    def _zk_call(self, effect: Any) -> TaskGen:
        zk = self._zk
        kind = type(effect)
        if kind is ZkGet:
            return (yield from zk.get(effect.path, effect.watch))
        if kind is ZkChildren:
            return (yield from zk.get_children(effect.path, effect.watch))
        if kind is ZkExists:
            return (yield from zk.exists(effect.path, effect.watch))
        if kind is ZkCreate:
            return (yield from zk.create(effect.path, effect.data, ephemeral=effect.ephemeral))
        if kind is ZkDelete:
            return (yield from zk.write([Delete(effect.path, effect.version)], multi=False))
        if kind is ZkMulti:
            return (yield from zk.write(effect.ops))
        assert kind is ZkBatch, effect
        # One call after another: the simulated client has no pipelining.
        outcomes: list[Any] = []
        for call in effect.calls:
            try:
                outcomes.append((yield from self._zk_call(call)))
            except ZkError as error:
                outcomes.append(error)
        return outcomes


class SimTask:
    def __init__(self, shell: SimShell, activity: Activity, name: str) -> None:
        self._wakeup = SimFuture()
        self.task: Task = shell._loop.spawn(shell.drive(activity, self), name)

    def wake(self) -> None:
        self._wakeup.set_result(None)

    def done(self) -> bool:
        return self.task.done.done()

    def cancel(self) -> None:
        self.task.cancel()

    async def close(self) -> None:
        self.task.cancel()
