"""The simulation's shell for the replication cores: the effects the real fetchers and ISR
manager yield (roost.broker.replica.effects) performed on a simulated broker's tasks, its network
and its committer, on the simulated clock. Like the broker's AsyncioShell it decides nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roost.broker.replica.effects import Activity, Request, Sleep, Sync, Unreachable, WaitForWork
from tests.sim.replication.controller import PeerError, Rpc
from tests.sim.replication.runtime import SimFuture, Task, TaskGen, TaskLoop, Wait, gather
from tests.sim.replication.runtime import Sleep as SimSleep


class SimShell:
    """Runs activities on one broker process's task loop. `reachable(broker)` says whether the
    broker's address is known (as the real shells' peer lookups do); `committer` makes logs
    durable (SimCommitter)."""

    def __init__(self, loop: TaskLoop, reachable: Callable[[int], bool], committer: Any = None,
                 observe: Callable[[Request], None] | None = None) -> None:
        self._loop = loop
        self._reachable = reachable
        self._committer = committer
        self.observe = observe  # sees each request sent (the simulation's counters)

    def spawn(self, activity: Activity, name: str) -> SimTask:
        return SimTask(self, activity, name)


class SimTask:
    def __init__(self, shell: SimShell, activity: Activity, name: str) -> None:
        self._shell = shell
        self._wakeup = SimFuture()
        self.task: Task = shell._loop.spawn(self._drive(activity), name)

    def wake(self) -> None:
        self._wakeup.set_result(None)

    def done(self) -> bool:
        return self.task.done.done()

    async def close(self) -> None:
        self.task.cancel()

    def _drive(self, activity: Activity) -> TaskGen:
        shell = self._shell
        outcome: Any = None
        failure: BaseException | None = None
        try:
            while True:
                try:
                    effect = activity.throw(failure) if failure is not None else activity.send(outcome)
                except StopIteration:
                    return
                outcome, failure = None, None
                # The commonest effects first: the loop's own cost is in every simulated fetch.
                if type(effect) is Request:
                    if not shell._reachable(effect.broker):
                        failure = Unreachable(effect.broker, "address not known", no_address=True)
                        continue
                    if shell.observe is not None:
                        shell.observe(effect)
                    try:
                        outcome = yield Rpc(effect.broker, effect.api_key, effect.version, effect.body,
                                            int(effect.timeout_ms))
                    except PeerError as error:
                        failure = Unreachable(effect.broker, str(error))
                elif type(effect) is WaitForWork:
                    self._wakeup = SimFuture()
                    yield Wait(self._wakeup, timeout=int(effect.timeout_ms))
                elif type(effect) is Sleep:
                    yield SimSleep(int(effect.ms))
                elif type(effect) is Sync:
                    futures = [shell._committer.request(plog) for plog in effect.logs]
                    yield Wait(gather(futures))
                    outcome = [future.exception() for future in futures]
                else:
                    raise AssertionError(f"unknown effect {effect!r}")
        finally:
            activity.close()
