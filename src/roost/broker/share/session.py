"""Share sessions (KIP-932) on one broker, as a pure object: Kafka's ShareSessionCache and the
session part of SharePartitionManager.newContext.

One session per (group, member) per broker, created by a ShareFetch at epoch 0, which replaces
any earlier one and fetches the partitions it lists. The server's epoch is then 1; every later
ShareFetch or ShareAcknowledge (they share the counter) must carry exactly the current epoch,
after which it goes up by one (Integer.MAX_VALUE wraps to 1). Epoch -1 closes the session once
its acknowledgements are processed: the member's acquired records on this broker are released
(the shell does that), as they are when the session's connection closes.

Errors (top level): no session for a non-zero epoch is SHARE_SESSION_NOT_FOUND (122), a wrong
epoch INVALID_SHARE_SESSION_EPOCH (123) (also ShareAcknowledge at epoch 0), a full cache
SHARE_SESSION_LIMIT_REACHED (133), a member id empty or longer than 36 characters
INVALID_REQUEST.

Partitions: an incremental request adds the partitions in Topics and removes those in
ForgottenTopicsData; every request fetches all of the session's partitions. A topic listed twice
in one request (librdkafka may) is merged, never overwritten: `merge_topics`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from roost.wire.kafka.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 0x7FFFFFFF
MAX_MEMBER_ID_CHARS = 36

TopicPartition = tuple[uuid.UUID, int]


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= MAX_EPOCH else epoch + 1


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # what the next request must carry
    partitions: dict[TopicPartition, None] = field(default_factory=dict)  # ordered
    connection: object = None  # the connection that opened it (closing it ends the session)


@dataclass(frozen=True)
class SessionAnswer:
    """The session a request uses now (None when refused), or the error to answer."""

    error: ErrorCode
    session: ShareSession | None = None
    message: str | None = None
    closing: bool = False  # epoch -1: process the acks, then close and release


def merge_topics(topics: Iterable[dict[str, Any]]) -> dict[TopicPartition, list[dict[str, Any]]]:
    """The request's partitions (topic id, index) -> their acknowledgement batches, entries of the
    same topic or partition merged in request order."""
    merged: dict[TopicPartition, list[dict[str, Any]]] = {}
    for topic in topics:
        for partition in topic["partitions"]:
            key = (topic["topic_id"], partition["partition_index"])
            merged.setdefault(key, []).extend(partition.get("acknowledgement_batches") or [])
    return merged


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        assert max_sessions >= 1
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def check_member(self, group_id: str | None, member_id: str | None) -> SessionAnswer | None:
        if not group_id:
            return SessionAnswer(ErrorCode.INVALID_REQUEST, message="GroupId can't be empty.")
        if not member_id or len(member_id) > MAX_MEMBER_ID_CHARS:
            return SessionAnswer(ErrorCode.INVALID_REQUEST,
                                 message=f"MemberId must be 1 to {MAX_MEMBER_ID_CHARS} characters.")
        return None

    def for_fetch(self, group_id: str, member_id: str, epoch: int, added: Iterable[TopicPartition],
                  forgotten: Iterable[TopicPartition], has_acks: bool, connection: object) -> SessionAnswer:
        """The session a ShareFetch at `epoch` uses, opened, updated or found; the epoch moves on."""
        refused = self.check_member(group_id, member_id)
        if refused is not None:
            return refused
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            if has_acks:
                return SessionAnswer(ErrorCode.INVALID_REQUEST,
                                     message="Acknowledgements are not allowed when opening a share session.")
            if key not in self.sessions and len(self.sessions) >= self.max_sessions:
                return SessionAnswer(ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                                     message=f"The broker has {self.max_sessions} share sessions.")
            opened = ShareSession(group_id, member_id, next_epoch(INITIAL_EPOCH), dict.fromkeys(added), connection)
            self.sessions[key] = opened
            return SessionAnswer(ErrorCode.NONE, opened)
        answer = self._current(key, epoch, closing_allowed=True)
        if answer.error != ErrorCode.NONE or answer.closing:
            return answer
        session = answer.session
        assert session is not None
        for tp in forgotten:
            session.partitions.pop(tp, None)
        for tp in added:
            session.partitions.setdefault(tp, None)
        session.connection = connection
        return answer

    def for_acknowledge(self, group_id: str, member_id: str, epoch: int, connection: object) -> SessionAnswer:
        refused = self.check_member(group_id, member_id)
        if refused is not None:
            return refused
        if epoch == INITIAL_EPOCH:
            return SessionAnswer(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                 message="ShareAcknowledge cannot open a share session.")
        answer = self._current((group_id, member_id), epoch, closing_allowed=True)
        if answer.session is not None and not answer.closing:
            answer.session.connection = connection
        return answer

    def _current(self, key: tuple[str, str], epoch: int, closing_allowed: bool) -> SessionAnswer:
        session = self.sessions.get(key)
        if session is None:
            return SessionAnswer(ErrorCode.SHARE_SESSION_NOT_FOUND,
                                 message=f"No share session for member {key[1]} of group {key[0]}.")
        if epoch == FINAL_EPOCH and closing_allowed:
            return SessionAnswer(ErrorCode.NONE, session, closing=True)
        if epoch != session.epoch:
            return SessionAnswer(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                 message=f"The share session expects epoch {session.epoch}, not {epoch}.")
        session.epoch = next_epoch(session.epoch)
        return SessionAnswer(ErrorCode.NONE, session)

    def close(self, session: ShareSession) -> bool:
        key = (session.group_id, session.member_id)
        if self.sessions.get(key) is session:
            del self.sessions[key]
            return True
        return False

    def closed_connection(self, connection: object) -> list[ShareSession]:
        """The sessions whose connection closed, removed."""
        gone = [s for s in self.sessions.values() if s.connection is connection]
        for session in gone:
            del self.sessions[(session.group_id, session.member_id)]
        return gone

    def partition_count(self) -> int:
        return sum(len(s.partitions) for s in self.sessions.values())
