"""The replication interface between the keeper and the consensus core.

The keeper codes against `Replicator` only; `roost.raft.node.RaftReplicator` (an ensemble member)
and `roost.raft.local.LocalReplicator` (a standalone, durable single member) implement it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable


class NoQuorum(Exception):
    """No leader reachable, or leadership was lost before the entry committed.

    The outcome of a proposal that raised NoQuorum may be unknown: the entry can still commit later
    (like ZooKeeper's ConnectionLoss). A caller that retries must tolerate a duplicate.
    """


ApplyFn = Callable[[int, bytes], None]
SnapshotFn = Callable[[], bytes]
RestoreFn = Callable[[int, bytes], None]
AppliedFn = Callable[[], None]
LeaderMessageHandler = Callable[[int, bytes], None]
LeadershipHandler = Callable[[bool, int | None], None]


@runtime_checkable
class Replicator(Protocol):
    node_id: int

    @property
    def is_leader(self) -> bool: ...

    @property
    def leader_id(self) -> int | None: ...

    async def start(self) -> None:
        """Recover from disk (snapshot + log), then start peers and timers.

        Before start() returns, every durable committed entry has been handed to the apply
        callback (or restored via the snapshot hook).
        """

    async def stop(self) -> None: ...

    async def propose(self, entry: bytes, timeout: float = 10.0) -> int:
        """Replicate `entry`; works on any member (a follower forwards to the leader).

        Returns the entry's log index once it is committed (on a majority, durable) AND has been
        applied locally via the apply callback, so a client of this member reads its own write.
        Raises NoQuorum.
        """

    async def read_barrier(self, timeout: float = 10.0) -> None:
        """ZooKeeper `sync`: returns when the local applied index >= the leader's commit index at
        the time of the call. Raises NoQuorum."""

    def set_state_machine(self, apply: ApplyFn, snapshot: SnapshotFn, restore: RestoreFn,
                          applied: AppliedFn | None = None) -> None:
        """apply(index, entry) for every committed entry exactly once per process lifetime, in order;
        snapshot() serialises the state machine as of the last applied index; restore(index, blob)
        replaces it (on start from a snapshot, or when the leader sends one to a lagging member);
        applied(), if given, after each run of entries applied together (to send their replies
        before anything else goes out)."""

    def send_to_leader(self, message: bytes) -> bool:
        """Best effort, unreplicated (e.g. session touches). False if no leader is known."""

    def set_leader_message_handler(self, handler: LeaderMessageHandler) -> None:
        """handler(from_node_id, message) runs on the leader for each send_to_leader message."""

    def set_leadership_handler(self, handler: LeadershipHandler) -> None:
        """handler(is_leader, leader_id): this member became/stopped being leader or learnt a new
        leader id."""

    @property
    def last_applied(self) -> int: ...
