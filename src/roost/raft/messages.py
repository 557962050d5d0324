"""The consensus core's data: log entries, hard state, snapshots and peer messages.

One `Message` shape serves every message type (as in etcd-io/raft): each type uses the fields it
needs and leaves the rest at their defaults, which keeps the codec and the simulation simple.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field


class EntryKind(enum.IntEnum):
    NORMAL = 0
    NOOP = 1  # appended by every new leader so that it can commit entries of its term (Raft §5.4.2)
    CONFIG = 2  # a membership change: takes effect on every member as soon as it is appended


@dataclass(frozen=True, slots=True)
class Entry:
    term: int
    index: int
    data: bytes = b""
    kind: EntryKind = EntryKind.NORMAL


@dataclass(frozen=True, slots=True)
class Membership:
    """Who is in the ensemble: voters elect leaders and count toward every quorum; learners
    (ZooKeeper's observers) receive and apply the log, and never vote or campaign. `context` is
    the application's own description of the configuration (addresses, say), opaque here."""

    voters: frozenset[int]
    learners: frozenset[int] = frozenset()
    context: bytes = b""

    def __post_init__(self) -> None:
        assert not self.voters & self.learners, "a member is a voter or a learner, not both"
        assert all(0 < m < 2**32 for m in self.voters | self.learners)

    @property
    def members(self) -> frozenset[int]:
        return self.voters | self.learners

    @property
    def quorum(self) -> int:
        return len(self.voters) // 2 + 1

    def encode(self) -> bytes:
        head = struct.pack(">HH", len(self.voters), len(self.learners))
        ids = struct.pack(f">{len(self.voters) + len(self.learners)}I",
                          *sorted(self.voters), *sorted(self.learners))
        return head + ids + self.context

    @classmethod
    def decode(cls, data: bytes) -> Membership:
        if len(data) < 4:
            raise ValueError("membership record truncated")
        n_voters, n_learners = struct.unpack_from(">HH", data, 0)
        end = 4 + 4 * (n_voters + n_learners)
        if len(data) < end:
            raise ValueError("membership record truncated")
        ids = struct.unpack_from(f">{n_voters + n_learners}I", data, 4)
        return cls(frozenset(ids[:n_voters]), frozenset(ids[n_voters:]), bytes(data[end:]))


@dataclass(frozen=True, slots=True)
class HardState:
    """What must be durable before a member answers a vote or an append."""

    term: int = 0
    vote: int = 0  # 0 = no vote in `term`
    commit: int = 0


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The state machine as of `index` (whose entry had `term`)."""

    index: int
    term: int
    data: bytes
    membership: Membership | None = None  # the configuration as of `index` (None: the initial one)


class MessageType(enum.IntEnum):
    PREVOTE = 1
    PREVOTE_RESP = 2
    VOTE = 3
    VOTE_RESP = 4
    APPEND = 5
    APPEND_RESP = 6  # also answers SNAPSHOT
    HEARTBEAT = 7
    HEARTBEAT_RESP = 8
    SNAPSHOT = 9
    # Termless messages (term 0): a follower forwarding proposals / read requests to the leader.
    PROPOSE = 10
    PROPOSE_RESP = 11
    READ_INDEX = 12
    READ_INDEX_RESP = 13
    TIMEOUT_NOW = 14  # leader transfer: "campaign now, ignoring the lease"
    APP = 15  # an application message for the leader, never seen by the core


TERMLESS = frozenset({
    MessageType.PROPOSE, MessageType.PROPOSE_RESP, MessageType.READ_INDEX,
    MessageType.READ_INDEX_RESP, MessageType.APP,
})


@dataclass(slots=True)
class Message:
    type: MessageType
    src: int
    dst: int
    term: int = 0
    log_term: int = 0  # APPEND: term of the entry at `index`; VOTE/PREVOTE: last log term
    index: int = 0  # APPEND: previous index; *_RESP: matched index; VOTE: last log index
    commit: int = 0
    entries: tuple[Entry, ...] = ()
    reject: bool = False
    # APPEND: a commit notice (no entries) to a follower the leader is replicating to; it is
    # answered only if it does not match, since a match would tell the leader nothing new.
    quiet: bool = False
    hint_index: int = 0  # APPEND_RESP reject: where the leader should try next
    hint_term: int = 0  # APPEND_RESP reject: the follower's term at the rejected index (0 = none)
    context: int = 0  # HEARTBEAT(_RESP): read-index round; READ_INDEX(_RESP): request id
    request_ids: tuple[int, ...] = ()  # PROPOSE(_RESP): one id per entry
    snapshot: Snapshot | None = None
    data: bytes = field(default=b"")  # APP payload
