"""RaftReplicator: the asyncio shell around the sans-IO core, an ensemble member.

It owns the clock (a tick task), the disk (DiskStorage) and the network (PeerTransport). Every
input is stepped into the core on the event loop thread, and the core's output is handled right
there (`_wake`), Ready by Ready: send the leader's early appends, persist (one fsync for everything
gathered since the last Ready: group commit), advance the core, send the rest, then apply committed
entries and resolve the futures of proposals and read barriers. A Ready with nothing to persist
applies first, so that replies leave before commit notices. With `fsync_on_loop=False` the fsyncs
run on one worker thread instead and a ready task handles every Ready; snapshots always are
written by that task, on the worker thread.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import os
import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from roost.raft.core import ProgressState, RaftConfig, RaftCore, Ready
from roost.raft.messages import EntryKind, Membership, Message, MessageType, Snapshot
from roost.raft.replicator import (
    AppliedFn,
    ApplyFn,
    LeaderMessageHandler,
    LeadershipHandler,
    NoQuorum,
    RestoreFn,
    SnapshotFn,
)
from roost.raft.storage import DiskStorage
from roost.raft.transport import Address, PeerTransport, TransportConfig

log = logging.getLogger(__name__)

MembershipHandler = Callable[[int, Membership], None]
AddressResolver = Callable[[Membership], dict[int, "Address"]]


class MembershipRefused(Exception):
    """The leader refused a membership change; `reason` says why (see RaftCore.propose_membership)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def next_membership_step(current: Membership, target: Membership,
                         leader: int | None = None) -> Membership | None:
    """The next single-server step from `current` toward `target`, or None once there. The
    context (the application's description) travels with the first step; `leader` leaves last."""
    if current.voters == target.voters and current.learners == target.learners:
        return None if current.context == target.context else target
    joining = target.members - current.members
    if joining:
        return Membership(current.voters, current.learners | joining, target.context)
    promote = sorted(target.voters - current.voters)
    if promote:
        return Membership(current.voters | {promote[0]}, current.learners - {promote[0]}, target.context)
    leave = sorted(current.voters - target.voters, key=lambda member: (member == leader, member))
    if leave:
        gone = leave[0]
        learners = current.learners | ({gone} & target.learners)
        return Membership(current.voters - {gone}, learners, target.context)
    return Membership(current.voters, target.learners, target.context)

_REFUSED = object()  # a proposal or read the core refused (no leader): safe to retry


@dataclass(frozen=True)
class ReplicatorConfig:
    tick_interval: float = 0.04  # seconds per raft tick
    election_ticks: int = 10  # election timeout 0.4-0.8 s; a leader lease of 0.4 s
    heartbeat_ticks: int = 2
    snapshot_entries: int = 20_000  # applied entries between two snapshots...
    snapshot_bytes: int = 64 << 20  # ...or applied entry bytes, whichever comes first (the log is in memory)
    keep_entries: int = 2_000  # entries kept behind a snapshot for slightly lagging members...
    keep_bytes: int = 8 << 20  # ...but no more bytes than this
    fsync: bool = True
    # fsync on the event loop, right where the work arises (fastest here, see `_wake`), or on an
    # I/O thread so that the loop never blocks on the disk (for a keeper sharing a process).
    fsync_on_loop: bool = True
    seed: int | None = None  # election timeout randomness; None draws from os.urandom
    listen: Address | None = None  # default: this member's address in `peers`, else 127.0.0.1:0
    transport: TransportConfig = field(default_factory=TransportConfig)
    raft: RaftConfig | None = None  # overrides election_ticks/heartbeat_ticks when given

    def raft_config(self) -> RaftConfig:
        if self.raft is not None:
            return self.raft
        return RaftConfig(election_ticks=self.election_ticks, heartbeat_ticks=self.heartbeat_ticks)


class RaftReplicator:
    """An ensemble member implementing `roost.raft.replicator.Replicator`.

    `peers` maps every member id to its peer address (host, port); it may include this member,
    whose address is then where it listens. With no other members it is a standalone, durable
    single member. `learners` (ZooKeeper's observers) are the members among them that replicate
    and apply the log but never vote: the initial configuration, until the log holds another.
    """

    def __init__(self, node_id: int, peers: dict[int, Address], directory: str | os.PathLike[str],
                 config: ReplicatorConfig | None = None, learners: frozenset[int] = frozenset(),
                 context: bytes = b"") -> None:
        self.node_id = node_id
        self.config = config or ReplicatorConfig()
        self.members = sorted(set(peers) | {node_id})
        self.learners = frozenset(learners)
        self.context = context  # the application's description of the initial configuration
        assert self.learners < set(self.members), "learners are members that do not vote"
        self.directory = Path(directory)
        listen = self.config.listen or peers.get(node_id) or ("127.0.0.1", 0)
        self._peer_addresses = {i: a for i, a in peers.items() if i != node_id}
        self.transport = PeerTransport(node_id, self._peer_addresses, listen, self._on_peer_message,
                                       self.config.transport, self._wake,
                                       self._on_peer_gone) if self._peer_addresses else None
        self.storage = DiskStorage(self.directory, fsync=self.config.fsync)
        self.core: RaftCore | None = None
        self._apply: ApplyFn = lambda index, entry: None
        self._snapshot: SnapshotFn = lambda: b""
        self._restore: RestoreFn = lambda index, blob: None
        self._applied: AppliedFn | None = None
        self._leader_message_handler: LeaderMessageHandler | None = None
        self._membership_handler: MembershipHandler | None = None
        self._address_resolver: AddressResolver | None = None
        self._followed: Membership | None = None  # the configuration the transport was given
        self._leadership_handler: LeadershipHandler | None = None
        self._last_applied = 0
        self._snapshot_index = 0
        self._bytes_since_snapshot = 0
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"raft-io-{node_id}")
        self._wakeup = asyncio.Event()
        # True from taking a Ready until it is handled (by `_drain`, or by the ready task, which
        # may be awaiting an fsync): meanwhile nothing else may take the next Ready, or durability
        # and messages would reorder.
        self._ready_busy = False
        self._handoff: Ready | None = None  # a Ready `_drain` left for the ready task to save
        self._leader_changed = asyncio.Event()
        self._reported: tuple[bool, int | None] = (False, None)
        self._tasks: list[asyncio.Task[None]] = []
        self._running = False
        self._failure: BaseException | None = None
        self._request_ids = random.Random().getrandbits(48)
        self._requests: dict[int, asyncio.Future[object]] = {}  # request id -> proposal/read future
        # Forwarded requests still waiting for the leader's answer: request id -> (leader, is_read).
        self._forwarded: dict[int, tuple[int | None, bool]] = {}
        self._apply_waiters: dict[int, list[tuple[int, asyncio.Future[object]]]] = {}
        self._read_waiters: list[tuple[int, int, asyncio.Future[object]]] = []  # heap (index, seq, fut)
        self._read_seq = 0
        self.stats = {"readies": 0, "fsyncs": 0, "proposals": 0}

    # --- Replicator interface ----------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.core is not None and self.core.is_leader

    @property
    def leader_id(self) -> int | None:
        return None if self.core is None else self.core.leader

    @property
    def is_observer(self) -> bool:
        """True while this member is a learner (ZooKeeper's observer): it never votes."""
        return self.core is not None and not self.core.is_voter

    @property
    def last_applied(self) -> int:
        return self._last_applied

    def follower_counts(self) -> tuple[int, int]:
        """(members tracked, voting followers replicating in step) while leader, else (0, 0): what
        ZooKeeper's `learners` (followers and observers) and `synced_followers` metrics report."""
        core = self.core
        if core is None or not core.is_leader:
            return 0, 0
        synced = sum(1 for peer, pr in core.progress.items()
                     if peer in core.voters and pr.state == ProgressState.REPLICATE)
        return len(core.progress), synced

    @property
    def peer_address(self) -> Address | None:
        """Where this member listens for peers (after start)."""
        return self.transport.address if self.transport is not None else None

    def set_state_machine(self, apply: ApplyFn, snapshot: SnapshotFn, restore: RestoreFn,
                          applied: AppliedFn | None = None) -> None:
        self._apply, self._snapshot, self._restore = apply, snapshot, restore
        self._applied = applied

    def set_leader_message_handler(self, handler: LeaderMessageHandler) -> None:
        self._leader_message_handler = handler

    def set_leadership_handler(self, handler: LeadershipHandler) -> None:
        self._leadership_handler = handler

    def set_peer_address(self, peer_id: int, address: Address) -> None:
        assert self.transport is not None
        self.transport.set_peer_address(peer_id, address)

    def set_peers(self, addresses: dict[int, Address]) -> None:
        """After a membership change: dial the members in `addresses` (new ones, or at new
        addresses). Peers that left stay dialable: a leader that removed itself leads until its
        removal commits, and must hear the members' answers (the core sends them nothing else)."""
        if self.transport is None:
            return
        for peer_id, address in addresses.items():
            self.transport.add_peer(peer_id, address)

    async def start(self) -> None:
        assert self.core is None, "start() once"
        loop = asyncio.get_running_loop()
        recovered = await loop.run_in_executor(self._io, self.storage.load)
        seed = self.config.seed if self.config.seed is not None else int.from_bytes(os.urandom(8), "big")
        voters = [m for m in self.members if m not in self.learners]
        self.core = RaftCore(self.node_id, voters, self.config.raft_config(), random.Random(seed),
                             hard_state=recovered.hard_state, snapshot=recovered.snapshot,
                             entries=recovered.entries, learners=self.learners, context=self.context)
        if recovered.snapshot is not None:
            self._restore(recovered.snapshot.index, recovered.snapshot.data)
            self._last_applied = self._snapshot_index = recovered.snapshot.index
        # Apply what is known committed before anyone can see us (no network yet, nothing to send).
        while self.core.has_ready():
            rd = self.core.ready()
            assert not rd.messages and not rd.early_messages and not rd.entries
            self.core.advance(rd)
            self._apply_ready(rd)
        self._follow_membership()
        log.info("raft %d: recovered snapshot %d, log to %d, commit %d, term %d", self.node_id,
                 self._snapshot_index, self.core.log.last_index, self.core.commit, self.core.term)
        self._running = True
        if self.transport is not None:
            await self.transport.start()
        self._tasks = [asyncio.create_task(self._ready_loop(), name=f"raft-ready-{self.node_id}"),
                       asyncio.create_task(self._tick_loop(), name=f"raft-tick-{self.node_id}")]
        if len(self.members) == 1 and not self.learners:
            # Alone: become leader now and commit the durable tail before start() returns.
            last = self.core.log.last_index
            self.core.campaign()
            self._wake()
            deadline = loop.time() + 30.0
            while self._last_applied < last or not self.core.is_leader:
                assert self._failure is None, self._failure
                if loop.time() > deadline:
                    raise RuntimeError("single raft member could not commit its own log")
                await asyncio.sleep(0.001)

    async def stop(self) -> None:
        if not self._running:
            self._io.shutdown(wait=True)
            return
        self._running = False
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.transport is not None:
            await self.transport.stop()
        self._fail_all(NoQuorum("replicator stopped"))
        await asyncio.get_running_loop().run_in_executor(self._io, self.storage.close)
        self._io.shutdown(wait=True)

    async def propose(self, entry: bytes, timeout: float = 10.0) -> int:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            core = self._live_core()
            rid = self._next_request_id()
            future: asyncio.Future[object] = loop.create_future()
            self._requests[rid] = future
            if not core.propose(entry, rid):
                del self._requests[rid]
                await self._wait_for_leader(deadline, "propose")
                continue
            if not core.is_leader:
                self._forwarded[rid] = (core.leader, False)
            self.stats["proposals"] += 1
            self._wake()
            try:
                result = await self._wait(future, deadline, "propose")
            finally:
                self._forget(rid)
            if result is _REFUSED:
                await self._wait_for_leader(deadline, "propose", changed=True)
                continue
            assert isinstance(result, int)
            return result

    async def read_barrier(self, timeout: float = 10.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            core = self._live_core()
            rid = self._next_request_id()
            future: asyncio.Future[object] = loop.create_future()
            self._requests[rid] = future
            if not core.read_index(rid):
                del self._requests[rid]
                await self._wait_for_leader(deadline, "read_barrier")
                continue
            if not core.is_leader:
                self._forwarded[rid] = (core.leader, True)
            self._wake()
            try:
                result = await self._wait(future, deadline, "read_barrier")
            finally:
                self._forget(rid)
            if result is _REFUSED:
                await self._wait_for_leader(deadline, "read_barrier", changed=True)
                continue
            return

    def send_to_leader(self, message: bytes) -> bool:
        core = self.core
        if core is None or core.leader is None or not self._running:
            return False
        if core.leader == self.node_id:
            if self._leader_message_handler is None:
                return False
            asyncio.get_running_loop().call_soon(self._leader_message_handler, self.node_id, message)
            return True
        assert self.transport is not None
        self.transport.send(Message(MessageType.APP, self.node_id, core.leader, data=message))
        return True

    @property
    def membership(self) -> Membership | None:
        """The configuration in force on this member (as far as its log goes)."""
        return None if self.core is None else self.core.membership

    def set_address_resolver(self, resolver: AddressResolver) -> None:
        """`resolver(membership)` gives the other members' peer addresses (from the membership's
        context): the transport follows every configuration in force on this member, from its
        log (appended entries, not only committed ones) or a snapshot, at start-up too."""
        self._address_resolver = resolver

    def _follow_membership(self) -> None:
        core = self.core
        if core is None or self._address_resolver is None or core.membership is self._followed:
            return
        self._followed = core.membership
        self.set_peers(self._address_resolver(core.membership))

    def set_membership_handler(self, handler: MembershipHandler) -> None:
        """`handler(index, membership)` runs when a CONFIG entry is applied (committed), on
        every member in log order, between the state machine's entries."""
        self._membership_handler = handler

    async def change_membership(self, target: Membership, timeout: float = 30.0,
                                force: bool = False, catch_up_timeout: float | None = None) -> int:
        """Move the ensemble to `target` one step at a time (Raft's single-server changes): new
        members join as learners, each new voter is promoted once caught up, then voters leave
        one by one (the leader last, since it hands over when its removal commits), then
        learners. Each step is committed and applied here before the next. Works on any member
        (a follower forwards each step to the leader). `force` appends `target` even if it is in
        force already (to record the configuration in the log). Returns the log index of the
        last step (0 if nothing changed). Raises MembershipRefused ('in-progress' if another
        change was under way at the first step, 'catching-up' if a new voter did not catch up
        in time: `catch_up_timeout`, default `timeout`) or NoQuorum."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        catch_up_since: float | None = None
        last = 0
        first = True
        while True:
            core = self._live_core()
            step = next_membership_step(core.membership, target, core.leader)
            if step is None and force and first:
                step = target
            if step is None:
                return last
            rid = self._next_request_id()
            future: asyncio.Future[object] = loop.create_future()
            self._requests[rid] = future
            refusal = core.propose_membership(step, rid)
            if refusal is None:
                if not core.is_leader:
                    self._forwarded[rid] = (core.leader, False)
                self._wake()
                try:
                    result = await self._wait(future, deadline, "membership change")
                finally:
                    self._forget(rid)
                if isinstance(result, int):
                    last = result
                    first = False
                    continue
                refusal = result if isinstance(result, str) else "not-leader"
            else:
                self._forget(rid)
            if refusal == "in-progress" and first and core.config_change_pending:
                # Another change is under way (ours only ever starts once its previous step
                # is applied here, which the leader committed first). Otherwise the leader has
                # not yet committed an entry of its term: wait for that.
                raise MembershipRefused("in-progress")
            if refusal in ("too-many", "no-voter"):
                raise MembershipRefused(refusal)
            if refusal == "catching-up":
                catch_up_since = catch_up_since or loop.time()
                if catch_up_timeout is not None and loop.time() - catch_up_since > catch_up_timeout:
                    raise MembershipRefused(refusal)
            else:
                catch_up_since = None
            if loop.time() > deadline:
                raise MembershipRefused(refusal) if refusal == "catching-up" else NoQuorum(
                    f"membership change: {refusal} until the timeout")
            if refusal == "not-leader":
                await self._wait_for_leader(deadline, "membership change", changed=True)
            else:
                await asyncio.sleep(self.config.tick_interval)

    def transfer_leadership(self, to: int) -> bool:
        """Best effort: ask member `to` to take over (it must be up to date)."""
        ok = self._live_core().transfer_leadership(to)
        self._wake()
        return ok

    # --- plumbing ----------------------------------------------------------------------------

    def _live_core(self) -> RaftCore:
        if self._failure is not None:
            raise NoQuorum(f"replicator failed: {self._failure!r}")
        if self.core is None or not self._running:
            raise NoQuorum("replicator is not running")
        return self.core

    def _forget(self, rid: int) -> None:
        self._requests.pop(rid, None)
        self._forwarded.pop(rid, None)

    def _next_request_id(self) -> int:
        self._request_ids += 1
        return self._request_ids

    async def _wait(self, future: asyncio.Future[object], deadline: float, what: str) -> object:
        remaining = deadline - asyncio.get_running_loop().time()
        try:
            async with asyncio.timeout(max(remaining, 0)):
                return await asyncio.shield(future)
        except TimeoutError:
            raise NoQuorum(f"{what} timed out (leader {self.leader_id})") from None

    async def _wait_for_leader(self, deadline: float, what: str, changed: bool = False) -> None:
        """Wait until a leader is known (or, if `changed`, until the next leadership news)."""
        loop = asyncio.get_running_loop()
        while changed or self.leader_id is None:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise NoQuorum(f"{what}: no leader within the timeout")
            event = self._leader_changed
            try:
                async with asyncio.timeout(min(remaining, self.config.tick_interval * 5)):
                    await event.wait()
                changed = False
            except TimeoutError:
                changed = False  # poll: a refused request is retried at least every few ticks
            self._live_core()

    def _wake(self) -> None:
        """The core has new work: handle it now, in this callback, or leave it to the ready task.

        Handling it here saves a loop turn, and with `fsync_on_loop` the fsync thread's two
        hand-offs, on every step of a write's critical path (propose -> append -> fsync -> ack ->
        commit -> apply -> reply); on this 2-core machine that was a third of a write's latency, and
        it raised throughput too, since there is no idle core for the overlap to use.
        """
        if self._failure is not None:
            return
        if self._ready_busy or not self.config.fsync_on_loop or self.core is None:
            self._wakeup.set()
            return
        self._drain()

    def _drain(self) -> None:
        """Handle every Ready the core has, now (the `fsync_on_loop` path of `_wake`)."""
        core = self.core
        assert core is not None and not self._ready_busy
        self._ready_busy = True  # re-entrant calls (from apply, say) leave their work to this loop
        try:
            while core.has_ready():
                rd = core.ready()
                if rd.snapshot is not None:
                    # A snapshot from the leader can be large: the ready task writes it on the I/O
                    # thread, and stays busy (holding back later Readies) until it is durable.
                    self._handoff = rd
                    self._wakeup.set()
                    return
                self._handle_ready(rd)
        except Exception as exc:
            self._fail(exc)  # logged there; raising into a protocol callback would add nothing
            return
        finally:
            if self._handoff is None:
                self._ready_busy = False
        if self._snapshot_due():
            self._wakeup.set()  # the ready task takes snapshots: they are written off the loop

    def _on_peer_message(self, message: Message) -> None:
        core = self.core
        if core is None or not self._running or self._failure is not None:
            return
        if message.type is MessageType.APP:
            if core.is_leader and self._leader_message_handler is not None:
                try:
                    self._leader_message_handler(message.src, message.data)
                except Exception:
                    log.exception("raft %d: leader message handler failed", self.node_id)
            return
        # The transport calls `_wake` once all messages of one read are stepped, so that several
        # appends arriving together share one fsync (group commit on followers).
        core.step(message)

    def _on_peer_gone(self, peer: int) -> None:
        core = self.core
        if core is None or not self._running or self._failure is not None:
            return
        if core.leader == peer and not core.is_leader:
            log.info("raft %d: leader %d refuses connections: campaigning early", self.node_id, peer)
            core.leader_unreachable(peer)
            self._wake()

    async def _tick_loop(self) -> None:
        loop = asyncio.get_running_loop()
        interval = self.config.tick_interval
        next_tick = loop.time() + interval
        while True:
            await asyncio.sleep(max(0.0, next_tick - loop.time()))
            next_tick += interval
            if loop.time() - next_tick > 10 * interval:
                next_tick = loop.time() + interval  # we were stalled: do not burst ticks to catch up
            assert self.core is not None
            self.core.tick()
            self._wake()
            if not self._ready_busy:
                # A leader that lost its lease steps down in tick() with nothing to send or save,
                # so no Ready follows: tell the handlers now.
                self._report_leadership()

    async def _ready_loop(self) -> None:
        """Handles what `_wake` left over: all Readies when fsyncs run on the I/O thread, and
        snapshots (received and taken) either way."""
        try:
            while True:
                await self._wakeup.wait()
                self._wakeup.clear()
                if self._failure is not None:
                    return
                core = self.core
                assert core is not None
                self._ready_busy = True
                try:
                    if self._handoff is not None:
                        rd, self._handoff = self._handoff, None
                        await self._save_on_thread(rd)
                        self._handle_ready(rd, saved=True)
                    while core.has_ready():
                        rd = core.ready()
                        if rd.must_sync and (not self.config.fsync_on_loop or rd.snapshot is not None):
                            await self._save_on_thread(rd)
                            self._handle_ready(rd, saved=True)
                        else:
                            self._handle_ready(rd)
                    await self._maybe_snapshot()
                finally:
                    self._ready_busy = False
                if core.has_ready():
                    self._wakeup.set()  # a snapshot's await let new work in
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self._fail(exc)
            raise

    async def _save_on_thread(self, rd: Ready) -> None:
        """Make `rd` durable on the I/O thread. The appends leave first (early messages); the loop
        keeps taking requests during the fsync, and they form the next batch."""
        self._follow_membership()
        self._send_all(rd.early_messages)
        rd.early_messages = []
        await asyncio.get_running_loop().run_in_executor(self._io, self.storage.save, rd)

    def _fail(self, exc: BaseException) -> None:
        # An invariant broke (or the disk failed): stop serving rather than risk divergence.
        if self._failure is not None:
            return
        log.critical("raft %d: ready handling failed; member stops serving", self.node_id, exc_info=exc)
        self._failure = exc
        self._fail_all(NoQuorum(f"replicator failed: {exc!r}"))

    def _handle_ready(self, rd: Ready, saved: bool = False) -> None:
        """One Ready, in the order `RaftCore` prescribes; `saved` if the caller already made it
        durable."""
        core = self.core
        assert core is not None
        self.stats["readies"] += 1
        if not rd.must_sync:
            # Nothing to make durable. A commit-index-only change is not written at all: the
            # commit index is only a lower bound (a leader teaches it again after a restart), and
            # it rides along with the next entries written. If entries proposed here commit,
            # apply first, so that this member's clients get their replies before the commit
            # notices go out; otherwise the notices go first (a follower's client may wait).
            waiters = self._apply_waiters
            if waiters and any(entry.index in waiters for entry in rd.committed_entries):
                core.advance(rd)
                self._apply_ready(rd)
                self._send_all(rd.early_messages)
                self._send_all(rd.messages)
            else:
                self._send_all(rd.early_messages)
                self._send_all(rd.messages)
                core.advance(rd)
                self._apply_ready(rd)
            self._report_leadership()
            return
        self._follow_membership()  # a CONFIG entry in force once appended: its members reachable
        self._send_all(rd.early_messages)
        if not saved:
            self.storage.save(rd)
        self.stats["fsyncs"] += 1
        core.advance(rd)
        self._send_all(rd.messages)
        self._apply_ready(rd)
        self._report_leadership()

    def _send_all(self, messages: list[Message]) -> None:
        if self.transport is None or not messages:
            return
        self.transport.send_many(messages)

    def _apply_ready(self, rd: Ready) -> None:
        if rd.snapshot is not None:
            self._restore(rd.snapshot.index, rd.snapshot.data)
            self._last_applied = self._snapshot_index = rd.snapshot.index
            self._bytes_since_snapshot = 0
            for index in [i for i in self._apply_waiters if i <= rd.snapshot.index]:
                for _, future in self._apply_waiters.pop(index):
                    _settle(future, NoQuorum("outcome unknown: replaced by the leader's snapshot"))
        for entry in rd.committed_entries:
            assert entry.index == self._last_applied + 1, f"apply {entry.index} after {self._last_applied}"
            if entry.kind is EntryKind.NORMAL:
                self._apply(entry.index, entry.data)
            elif entry.kind is EntryKind.CONFIG:
                self._on_membership_applied(entry.index, Membership.decode(entry.data))
            self._last_applied = entry.index
            self._bytes_since_snapshot += len(entry.data)
            for term, future in self._apply_waiters.pop(entry.index, ()):
                if term == entry.term:
                    _settle(future, entry.index)
                else:
                    _settle(future, _REFUSED)  # another leader's entry won the index: ours never commits
        if rd.committed_entries and self._applied is not None:
            self._applied()
        for result in rd.proposal_results:
            self._forwarded.pop(result.request_id, None)
            proposed = self._requests.pop(result.request_id, None)
            if proposed is None or proposed.done():
                continue
            if result.refused:
                _settle(proposed, result.reason or _REFUSED)
            elif result.index <= self._last_applied:
                # Forwarded, and the commit overtook the leader's answer.
                core = self.core
                assert core is not None
                logged_term = core.log.term(result.index)
                if logged_term == result.term:
                    _settle(proposed, result.index)
                else:
                    _settle(proposed, NoQuorum("outcome unknown" if logged_term is None else "leadership lost"))
            else:
                self._apply_waiters.setdefault(result.index, []).append((result.term, proposed))
        for read in rd.read_states:
            self._forwarded.pop(read.request_id, None)
            reading = self._requests.pop(read.request_id, None)
            if reading is None or reading.done():
                continue
            if read.refused:
                _settle(reading, _REFUSED)
            else:
                self._read_seq += 1
                heapq.heappush(self._read_waiters, (read.index, self._read_seq, reading))
        while self._read_waiters and self._read_waiters[0][0] <= self._last_applied:
            _settle(heapq.heappop(self._read_waiters)[2], None)

    def _snapshot_due(self) -> bool:
        core = self.core
        assert core is not None
        applied = self._last_applied
        due = (applied - self._snapshot_index >= self.config.snapshot_entries
               or self._bytes_since_snapshot >= self.config.snapshot_bytes)
        return due and applied <= core.log.persisted

    async def _maybe_snapshot(self) -> None:
        core = self.core
        assert core is not None
        if not self._snapshot_due():
            return
        applied = self._last_applied
        term = core.log.term(applied)
        assert term is not None
        snap = Snapshot(applied, term, self._snapshot(), core.membership_at(applied))
        compact_to = core.compaction_point(applied, self.config.keep_entries)
        kept_bytes = 0
        for index in range(applied, compact_to, -1):  # keep fewer entries if they are big
            kept_bytes += len(core.log.entry(index).data)
            if kept_bytes > self.config.keep_bytes:
                compact_to = index
                break
        base_term = core.log.term(compact_to)
        assert base_term is not None
        kept = core.log.entries[compact_to - core.log.offset:core.log.handed - core.log.offset]
        await asyncio.get_running_loop().run_in_executor(
            self._io, self.storage.compact, snap, compact_to, base_term, kept)
        core.compact(snap, compact_to)
        self._snapshot_index = applied
        self._bytes_since_snapshot = 0
        log.info("raft %d: snapshot at %d (%d bytes), log kept from %d", self.node_id, applied,
                 len(snap.data), compact_to + 1)

    def _on_membership_applied(self, index: int, membership: Membership) -> None:
        if self._membership_handler is not None:
            self._membership_handler(index, membership)

    def _report_leadership(self) -> None:
        core = self.core
        if core is None:
            return
        now = (core.is_leader, core.leader)
        if now == self._reported:
            return
        self._reported = now
        log.info("raft %d: term %d, leader %s%s", self.node_id, core.term, core.leader,
                 " (me)" if core.is_leader else "")
        self._leader_changed.set()
        self._leader_changed = asyncio.Event()
        self._abandon_forwarded(core.leader)
        if self._leadership_handler is not None:
            try:
                self._leadership_handler(*now)
            except Exception:
                log.exception("raft %d: leadership handler failed", self.node_id)

    def _abandon_forwarded(self, leader: int | None) -> None:
        """Requests forwarded to a member that is no longer the leader may never be answered: a read
        is retried at once; a proposal fails, its outcome unknown (the old leader may have logged
        it, and a retry could apply it twice)."""
        for rid, (target, is_read) in list(self._forwarded.items()):
            if target == leader:
                continue
            del self._forwarded[rid]
            future = self._requests.pop(rid, None)
            if future is not None:
                _settle(future, _REFUSED if is_read else NoQuorum(
                    f"leader {target} changed to {leader} before answering; outcome unknown"))

    def _fail_all(self, exc: Exception) -> None:
        for future in self._requests.values():
            _settle(future, exc)
        self._requests.clear()
        self._forwarded.clear()
        for waiters in self._apply_waiters.values():
            for _, future in waiters:
                _settle(future, exc)
        self._apply_waiters.clear()
        for _, _, future in self._read_waiters:
            _settle(future, exc)
        self._read_waiters.clear()


def _settle(future: asyncio.Future[object], outcome: object) -> None:
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
