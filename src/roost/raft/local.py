"""LocalReplicator: the standalone keeper's replicator, a durable single raft member.

It is a RaftReplicator with one member and no peer transport: proposals commit as soon as they
are fsynced (many proposals of one loop iteration share one fsync), and start() replays the log.
"""

from __future__ import annotations

import dataclasses
import os

from roost.raft.node import RaftReplicator, ReplicatorConfig


class LocalReplicator(RaftReplicator):
    def __init__(self, directory: str | os.PathLike[str], fsync: bool | None = None,
                 config: ReplicatorConfig | None = None) -> None:
        config = config or ReplicatorConfig()
        if fsync is not None:
            config = dataclasses.replace(config, fsync=fsync)
        super().__init__(1, {1: ("127.0.0.1", 0)}, directory, config)
