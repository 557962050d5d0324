"""The keeper's side of the ensemble's membership: `/zookeeper/config`, peers, and `reconfig`.

- Every applied raft CONFIG entry that completes a change is rendered into `/zookeeper/config`
  (a zxid of its own, a data-changed watch); the peer transport learns the members' addresses
  from each configuration's context (`addresses`) as soon as it is in force.
- A new leader of an ensemble with `reconfigEnabled` whose `/zookeeper/config` is still empty
  records the static configuration in the log, so that members joining later learn the real
  configuration from the log rather than from their own config file.
- A `reconfig` request is checked (enabled, super user, spec, version) and then carried out by
  this member through `RaftReplicator.change_membership`, whichever member it is (each step is
  forwarded to the leader). Its answer is `/zookeeper/config`'s data and Stat once the last step
  is applied here, as ZooKeeper's answer is the new configuration.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from roost.keeper.config import KeeperConfig
from roost.keeper.core import DONE
from roost.keeper.reconfig import (
    Refusal,
    config_version,
    context_mtime,
    decode_context,
    is_complete,
    plan,
    render,
    same_servers,
)
from roost.keeper.tree import CONFIG_PATH
from roost.raft.messages import Membership
from roost.wire.zk.constants import Err
from roost.wire.zk.jute import STAT, JuteWriter
from roost.wire.zk.records import ReconfigRequest

if TYPE_CHECKING:
    from roost.keeper.core import Client, KeeperCore, Slot
    from roost.raft.node import RaftReplicator

log = logging.getLogger(__name__)

RECONFIG_TIMEOUT = 30.0  # seconds for a whole change (a new voter must catch up within it)
CATCH_UP_TIMEOUT = 8.0  # seconds a new voter may take to catch up before NEW_CONFIG_NO_QUORUM


class MembershipKeeper:
    def __init__(self, config: KeeperConfig, core: KeeperCore, replicator: RaftReplicator) -> None:
        self.config = config
        self.core = core
        self.replicator = replicator
        self._busy = False  # a reconfig of ours is under way
        # Its caller and target: answered the moment the target is applied here (a leader that
        # removed itself stops serving right after, in the same turn of the loop).
        self._awaiting: tuple[Client, Slot, Membership] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- replicator callbacks

    def on_membership_applied(self, index: int, membership: Membership) -> None:
        specs = decode_context(membership.context)
        node = self.core.tree.get(CONFIG_PATH)
        mtime = context_mtime(membership.context)
        # The way back from a failed change restores the configuration before it, with its time.
        restored = node is not None and node.mtime == mtime and same_servers(node.data, render(membership, 0))
        if is_complete(membership, specs) and not restored:
            # A reconfig's last step (or the initial record): one new version, as in ZooKeeper.
            # Its intermediate steps (a joiner still a learner, a leaver still a voter) are not.
            self.core.apply_config(lambda zxid: render(membership, zxid), mtime)
        awaiting = self._awaiting
        if awaiting is not None and membership == awaiting[2]:
            self._awaiting = None
            self._answer(awaiting[0], awaiting[1])

    def _answer(self, client: Client, slot: Slot) -> None:
        """The reconfig succeeded: its answer is the new configuration's data and Stat."""
        node = self.core.tree.get(CONFIG_PATH)
        assert node is not None
        body = JuteWriter().buffer(node.data).getvalue() + STAT.pack(*node.stat())
        self.core.finish_reconfig(client, slot, Err.OK, body)

    def addresses(self, membership: Membership) -> dict[int, tuple[str, int]]:
        """The other members' peer addresses, from the configuration's context."""
        return {sid: (spec.host, spec.peer_port) for sid, spec in decode_context(membership.context).items()
                if sid in membership.members and sid != self.replicator.node_id}

    def on_leadership(self, is_leader: bool) -> None:
        if not (is_leader and self.config.reconfig_enabled):
            return
        node = self.core.tree.get(CONFIG_PATH)
        if node is not None and node.data:
            return
        self._spawn(self._record_initial_configuration())

    async def _record_initial_configuration(self) -> None:
        from roost.raft.replicator import NoQuorum

        membership = self.replicator.membership
        assert membership is not None
        try:
            await self.replicator.change_membership(membership, timeout=RECONFIG_TIMEOUT, force=True)
        except (NoQuorum, Exception) as exc:  # the next leader tries again
            log.info("keeper: initial configuration not recorded: %s", exc)

    # -- the request

    def start(self, client: Client, slot: Slot) -> None:
        self._spawn(self._reconfig(client, slot))

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def authorized(self, client: Client) -> bool:
        if self.config.skip_acl:
            return True
        for ident in client.auth_ids:
            if ident.scheme == "super":
                return True
            if ident.scheme == "digest" and self.config.super_digest and ident.id == self.config.super_digest:
                return True
        return False

    async def _reconfig(self, client: Client, slot: Slot) -> None:
        err = await self._carry_out(client, slot)
        if err is not None:
            self.core.finish_reconfig(client, slot, err)

    async def _carry_out(self, client: Client, slot: Slot) -> int | None:
        """Check and carry out a reconfig; its error, or None once answered with success."""
        from roost.raft.node import MembershipRefused
        from roost.raft.replicator import NoQuorum

        if not self.config.reconfig_enabled or not self.config.is_ensemble:
            return Err.RECONFIG_DISABLED
        request = slot.request
        assert isinstance(request, ReconfigRequest)
        current = self.replicator.membership
        assert current is not None
        core = self.replicator.core
        # A configuration between two steps (a joiner still a learner, say) means a change is
        # under way somewhere; a whole new member list may take over from one that was abandoned.
        midway = not is_complete(current, decode_context(current.context)) and not request.new_members
        if self._busy or midway or (core is not None and core.config_change_pending):
            return Err.RECONFIG_IN_PROGRESS
        node = self.core.tree.get(CONFIG_PATH)
        target = plan(request, current, config_version(node.data if node else None), int(time.time() * 1000))
        if isinstance(target, Refusal):
            log.info("keeper: reconfig refused (%s): %s", target.err.name, target.reason)
            return target.err
        # ZooKeeper checks the caller's right last (after the new configuration's quorum, which
        # here is known only by trying: a refused caller must not start anything).
        if not self.authorized(client):
            return Err.NO_AUTH
        self._busy = True
        self._awaiting = (client, slot, target)
        try:
            await self.replicator.change_membership(target, timeout=RECONFIG_TIMEOUT,
                                                    catch_up_timeout=CATCH_UP_TIMEOUT)
        except MembershipRefused as exc:
            if exc.reason == "in-progress":
                return Err.RECONFIG_IN_PROGRESS
            log.info("keeper: reconfig to %s failed: %s; going back", target, exc.reason)
            await self._roll_back(current)
            if exc.reason == "catching-up":
                return Err.NEW_CONFIG_NO_QUORUM
            return Err.BAD_ARGUMENTS
        except NoQuorum as exc:
            log.info("keeper: reconfig failed: %s", exc)
            return Err.CONNECTION_LOSS
        finally:
            self._busy = False
            self._awaiting = None
        if slot.state != DONE:  # the target was in force already (a no-op): nothing was applied
            self._answer(client, slot)
        return None

    async def _roll_back(self, before: Membership) -> None:
        """Undo the steps of a failed change (learners added for it, say), best effort."""
        from roost.raft.replicator import NoQuorum

        try:
            await self.replicator.change_membership(before, timeout=RECONFIG_TIMEOUT)
        except (NoQuorum, Exception) as exc:
            log.warning("keeper: could not undo a failed reconfig: %s", exc)
