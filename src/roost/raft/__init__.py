"""Consensus for the keeper: Raft as a sans-IO core with an asyncio shell.

- `roost.raft.replicator`: the `Replicator` interface the keeper codes against, and `NoQuorum`.
- `roost.raft.node.RaftReplicator`: an ensemble member (peer TCP transport, durable storage).
- `roost.raft.local.LocalReplicator`: a durable single member, for the standalone keeper.
- `roost.raft.core.RaftCore`: the pure state machine; `roost.raft.storage`, `roost.raft.codec`,
  `roost.raft.transport`: its disk and wire. (The fault-injecting TCP proxy the ensemble tests put
  between members lives with the tests: `tests.support.faultproxy`.)

Depends on nothing else of Roost.
"""

from roost.raft.local import LocalReplicator
from roost.raft.node import RaftReplicator, ReplicatorConfig
from roost.raft.replicator import NoQuorum, Replicator

__all__ = ["LocalReplicator", "NoQuorum", "RaftReplicator", "Replicator", "ReplicatorConfig"]
