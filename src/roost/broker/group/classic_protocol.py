"""The consumer group coordinator as a state machine: joins, syncs, heartbeats, leaves, expiry.

Kafka's classic group protocol. The coordinator does no I/O and reads no clock: every call takes
`now` (milliseconds), timers advance through `tick(now)`, and a delayed answer (JoinGroup and
SyncGroup wait for the rest of the group) is delivered through the `reply` callable the request
came with. The broker's asyncio shell turns those into futures.

States: Empty -> PreparingRebalance -> CompletingRebalance -> Stable, back to PreparingRebalance
when a member joins, leaves, changes its subscription or misses its session timeout.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from roost.wire.kafka.consumer_protocol import subscription_topics
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.exceptions import KafkaCodecError

log = logging.getLogger("roost.broker.group")

CONSUMER_PROTOCOL_TYPE = "consumer"

Reply = Callable[[dict[str, Any]], None]


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class GroupLimits:
    min_session_timeout_ms: int
    max_session_timeout_ms: int
    initial_rebalance_delay_ms: int
    max_size: int


@dataclass
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    last_heard_ms: int
    assignment: bytes = b""
    join_reply: Reply | None = None
    sync_reply: Reply | None = None
    # Kafka's rule for the first JoinGroup of a generation: a new member that joined before the
    # group finished rebalancing must answer again within the rebalance.
    is_new: bool = False

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise AssertionError(f"member {self.member_id} does not support {protocol}")

    def same_protocols(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in self.protocols] == [(n, bytes(m)) for n, m in protocols]


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)  # member ids handed out, not yet joined: deadline
    static: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    rebalance_deadline_ms: int = 0
    initial_delay_until_ms: int = 0
    state_since_ms: int = 0
    # The topics the members of the current generation subscribe to (a "consumer" group's
    # metadata, read at each new generation as Kafka does); None: unknown, taken as every topic.
    subscribed_topics: frozenset[str] | None = None

    def is_empty(self) -> bool:
        return not self.members

    def all_rejoined(self) -> bool:
        return all(m.join_reply is not None for m in self.members.values()) and not self.pending

    def candidate_protocols(self) -> set[str]:
        names: set[str] | None = None
        for member in self.members.values():
            member_names = {n for n, _ in member.protocols}
            names = member_names if names is None else names & member_names
        return names or set()

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that all members support."""
        candidates = self.candidate_protocols()
        assert candidates, "members were admitted only with a common protocol"
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = next(n for n, _ in member.protocols if n in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(sorted(votes), key=lambda name: votes[name])

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """Kafka's GroupMetadata.computeSubscribedTopics: the union of the members' subscriptions
        in the selected protocol, for a "consumer" group; None when unknown (another protocol
        type, or metadata that is no subscription)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                topics.update(subscription_topics(member.metadata_for(self.protocol)))
            except KafkaCodecError as error:
                log.warning("group %s: member %s's metadata is no consumer subscription (%s)",
                            self.group_id, member.member_id, error)
                return None
        return frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics


class GroupCoordinator:
    def __init__(self, limits: GroupLimits) -> None:
        self.limits = limits
        self.groups: dict[str, Group] = {}

    # JoinGroup --------------------------------------------------------------------------------
    def join(self, now: int, *, group_id: str, member_id: str, instance_id: str | None, client_id: str,
             client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
             protocols: list[tuple[str, bytes]], require_known_member_id: bool, reply: Reply) -> None:
        def fail(code: ErrorCode, member: str = member_id) -> None:
            reply(join_error(code, member))

        if not group_id:
            return fail(ErrorCode.INVALID_GROUP_ID)
        if not (self.limits.min_session_timeout_ms <= session_timeout_ms <= self.limits.max_session_timeout_ms):
            return fail(ErrorCode.INVALID_SESSION_TIMEOUT)
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return fail(ErrorCode.UNKNOWN_MEMBER_ID)
            group = self.groups[group_id] = Group(group_id, state_since_ms=now)
        if not protocols or (not group.is_empty() and (
                protocol_type != group.protocol_type
                or not ({n for n, _ in protocols} & group.candidate_protocols()))):
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)

        if not member_id:
            self._join_unknown_member(now, group, instance_id, client_id, client_host, session_timeout_ms,
                                      rebalance_timeout_ms, protocol_type, protocols,
                                      require_known_member_id, reply)
            return None

        if member_id in group.pending:
            del group.pending[member_id]
            self._add_member(now, group, member_id, instance_id, client_id, client_host, session_timeout_ms,
                             rebalance_timeout_ms, protocol_type, protocols, reply)
            return None
        refused = member_error(group, member_id, instance_id)
        if refused is not None:
            return fail(refused)
        member = group.members[member_id]
        member.last_heard_ms = now
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        if group.state == GroupState.PREPARING_REBALANCE:
            member.protocols = list(protocols)
            member.join_reply = reply
            self._maybe_complete_join(now, group)
        elif group.state == GroupState.COMPLETING_REBALANCE:
            if member.same_protocols(protocols):
                # The member lost our JoinGroup answer; give it the same one again.
                reply(self._join_response(group, member))
            else:
                member.protocols = list(protocols)
                member.join_reply = reply
                self._prepare_rebalance(now, group, f"member {member_id} changed its subscription")
        elif group.state == GroupState.STABLE:
            if member_id == group.leader or not member.same_protocols(protocols):
                member.protocols = list(protocols)
                member.join_reply = reply
                self._prepare_rebalance(now, group, f"member {member_id} rejoined")
            else:
                reply(self._join_response(group, member))
        else:
            fail(ErrorCode.UNKNOWN_MEMBER_ID)
        return None

    def _join_unknown_member(self, now: int, group: Group, instance_id: str | None, client_id: str,
                             client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
                             protocol_type: str, protocols: list[tuple[str, bytes]],
                             require_known_member_id: bool, reply: Reply) -> None:
        new_id = f"{client_id or 'member'}-{uuid.uuid4()}"
        if instance_id is not None:
            old_id = group.static.get(instance_id)
            if old_id is not None and old_id in group.members:
                self._replace_static_member(now, group, old_id, new_id, protocols, reply)
                return
            self._add_member(now, group, new_id, instance_id, client_id, client_host, session_timeout_ms,
                             rebalance_timeout_ms, protocol_type, protocols, reply)
            return
        if len(group.members) + len(group.pending) >= self.limits.max_size:
            reply(join_error(ErrorCode.GROUP_MAX_SIZE_REACHED, ""))
            return
        if require_known_member_id:
            # KIP-394: hand out the id first; the member must join again with it.
            group.pending[new_id] = now + session_timeout_ms
            reply(join_error(ErrorCode.MEMBER_ID_REQUIRED, new_id))
            return
        self._add_member(now, group, new_id, None, client_id, client_host, session_timeout_ms,
                         rebalance_timeout_ms, protocol_type, protocols, reply)

    def _replace_static_member(self, now: int, group: Group, old_id: str, new_id: str,
                               protocols: list[tuple[str, bytes]], reply: Reply) -> None:
        """A static member came back with a new process: it takes over its old identity."""
        leader_before = group.leader
        old = group.members.pop(old_id)
        _fail_pending(old, ErrorCode.FENCED_INSTANCE_ID)
        old.member_id = new_id
        old.last_heard_ms = now
        group.members[new_id] = old
        assert old.instance_id is not None
        group.static[old.instance_id] = new_id
        if group.leader == old_id:
            group.leader = new_id
        if group.state == GroupState.STABLE:
            before, old.protocols = old.protocols, list(protocols)
            if group.select_protocol() == group.protocol:
                # No rebalance (KIP-345), as in Kafka: its subscription may have changed, but
                # only a change of the protocol the group would select makes one. The answer
                # names the leader as it was before the replacement, and no members: a
                # restarted leader sees another's id as the leader's, so it assigns nothing
                # (a Stable group would not hand out what it assigned) and keeps its partitions.
                reply({**self._join_response(group, old), "leader": leader_before or "", "members": []})
                return
            old.protocols = before
        old.protocols = list(protocols)
        old.join_reply = reply
        if group.state == GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(now, group)
        else:
            self._prepare_rebalance(now, group, f"static member {old.instance_id} rejoined")

    def _add_member(self, now: int, group: Group, member_id: str, instance_id: str | None, client_id: str,
                    client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
                    protocol_type: str, protocols: list[tuple[str, bytes]], reply: Reply) -> None:
        if group.is_empty():
            group.protocol_type = protocol_type
        member = Member(member_id, instance_id, client_id, client_host, session_timeout_ms,
                        rebalance_timeout_ms, protocol_type, list(protocols), now, join_reply=reply,
                        is_new=True)
        group.members[member_id] = member
        if instance_id is not None:
            group.static[instance_id] = member_id
        if group.state == GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(now, group)
        else:
            self._prepare_rebalance(now, group, f"member {member_id} joined")

    def _prepare_rebalance(self, now: int, group: Group, reason: str) -> None:
        if group.state == GroupState.COMPLETING_REBALANCE:
            # Members waiting in SyncGroup learn that another round started.
            for member in group.members.values():
                if member.sync_reply is not None:
                    member.sync_reply(sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
                    member.sync_reply = None
        was_empty = group.state == GroupState.EMPTY
        group.state = GroupState.PREPARING_REBALANCE
        group.state_since_ms = now
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        group.rebalance_deadline_ms = now + timeout
        # An empty group waits a little for more members, so a consumer group starting up
        # rebalances once instead of once per member.
        group.initial_delay_until_ms = now + self.limits.initial_rebalance_delay_ms if was_empty else 0
        log.info("group %s rebalancing (generation %d): %s", group.group_id, group.generation, reason)
        self._maybe_complete_join(now, group)

    def _maybe_complete_join(self, now: int, group: Group) -> None:
        if group.state != GroupState.PREPARING_REBALANCE:
            return
        if now < group.initial_delay_until_ms and now < group.rebalance_deadline_ms:
            return
        if not group.all_rejoined() and now < group.rebalance_deadline_ms:
            return
        # Whoever did not rejoin in time is out of the group.
        for member_id in [m.member_id for m in group.members.values() if m.join_reply is None]:
            self._remove_member(group, member_id, "did not rejoin within the rebalance timeout")
        group.pending.clear()
        group.generation += 1
        if group.is_empty():
            group.state = GroupState.EMPTY
            group.state_since_ms = now
            group.protocol = group.leader = None
            group.subscribed_topics = group.compute_subscribed_topics()
            return
        group.protocol = group.select_protocol()
        group.subscribed_topics = group.compute_subscribed_topics()
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.state = GroupState.COMPLETING_REBALANCE
        group.state_since_ms = now
        log.info("group %s generation %d: %d members, leader %s, protocol %s", group.group_id,
                 group.generation, len(group.members), group.leader, group.protocol)
        for member in group.members.values():
            member.assignment = b""
            member.is_new = False
            member.last_heard_ms = now
            reply, member.join_reply = member.join_reply, None
            assert reply is not None
            reply(self._join_response(group, member))

    def _join_response(self, group: Group, member: Member) -> dict[str, Any]:
        is_leader = member.member_id == group.leader
        members = []
        if is_leader:
            assert group.protocol is not None
            members = [{"member_id": m.member_id, "group_instance_id": m.instance_id,
                        "metadata": m.metadata_for(group.protocol)} for m in group.members.values()]
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "generation_id": group.generation,
                "protocol_type": group.protocol_type, "protocol_name": group.protocol,
                "leader": group.leader or "", "skip_assignment": False, "member_id": member.member_id,
                "members": members}

    # SyncGroup --------------------------------------------------------------------------------
    def sync(self, now: int, *, group_id: str, generation: int, member_id: str, instance_id: str | None,
             assignments: list[tuple[str, bytes]], reply: Reply, protocol_type: str | None = None,
             protocol_name: str | None = None) -> None:
        """`protocol_type` and `protocol_name` (SyncGroup v5+; None before) must be the group's."""
        def answer(code: ErrorCode) -> None:
            reply(sync_error(code))

        group = self.groups.get(group_id)
        refused = ErrorCode.UNKNOWN_MEMBER_ID if group is None else member_error(group, member_id, instance_id)
        if refused is not None:
            return answer(refused)
        assert group is not None
        member = group.members[member_id]
        if generation != group.generation:
            return answer(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol):
            return answer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)  # as Kafka's validateSyncGroup
        member.last_heard_ms = now
        if group.state == GroupState.PREPARING_REBALANCE:
            return answer(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.state == GroupState.STABLE:
            return reply(self._sync_response(group, member))
        assert group.state == GroupState.COMPLETING_REBALANCE
        member.sync_reply = reply
        if member_id == group.leader:
            given = {mid: bytes(data) for mid, data in assignments}
            for other in group.members.values():
                other.assignment = given.get(other.member_id, b"")
            group.state = GroupState.STABLE
            group.state_since_ms = now
            for other in group.members.values():
                if other.sync_reply is not None:
                    pending_reply, other.sync_reply = other.sync_reply, None
                    pending_reply(self._sync_response(group, other))
        return None

    def _sync_response(self, group: Group, member: Member) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "protocol_type": group.protocol_type,
                "protocol_name": group.protocol, "assignment": member.assignment}

    # Heartbeat and LeaveGroup -----------------------------------------------------------------
    def heartbeat(self, now: int, *, group_id: str, generation: int, member_id: str,
                  instance_id: str | None) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        refused = member_error(group, member_id, instance_id)
        if refused is not None:
            return refused
        # The generation before the state, as Kafka's validateHeartbeat: a heartbeat of another
        # generation is ILLEGAL_GENERATION also while a rebalance is prepared.
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        group.members[member_id].last_heard_ms = now
        if group.state == GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(self, now: int, *, group_id: str, member_id: str, instance_id: str | None) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if instance_id is not None:
            known = group.static.get(instance_id)
            if known is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if member_id and known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            member_id = known
        if member_id in group.pending:
            del group.pending[member_id]
            return ErrorCode.NONE
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._remove_member(group, member_id, "left the group")
        self._after_departure(now, group, f"member {member_id} left")
        return ErrorCode.NONE

    def _remove_member(self, group: Group, member_id: str, why: str) -> None:
        member = group.members.pop(member_id)
        if member.instance_id is not None and group.static.get(member.instance_id) == member_id:
            del group.static[member.instance_id]
        _fail_pending(member, ErrorCode.UNKNOWN_MEMBER_ID)
        if group.leader == member_id:
            group.leader = next(iter(group.members), None)
        log.info("group %s: member %s %s", group.group_id, member_id, why)

    def _after_departure(self, now: int, group: Group, reason: str) -> None:
        if group.state == GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(now, group)
        elif group.is_empty():
            group.state = GroupState.EMPTY
            group.state_since_ms = now
            group.generation += 1
            group.protocol = group.leader = None
            group.subscribed_topics = group.compute_subscribed_topics()
        else:
            self._prepare_rebalance(now, group, reason)

    # timers -----------------------------------------------------------------------------------
    def tick(self, now: int) -> None:
        """Expire silent members and pending ids; finish rebalances whose wait is over."""
        for group in list(self.groups.values()):
            for member_id, deadline in list(group.pending.items()):
                if now >= deadline:
                    del group.pending[member_id]
            expired = [m.member_id for m in group.members.values()
                       if m.join_reply is None and now - m.last_heard_ms > m.session_timeout_ms]
            for member_id in expired:
                self._remove_member(group, member_id, "missed its session timeout")
            if expired:
                self._after_departure(now, group, f"{len(expired)} member(s) timed out")
            elif group.state == GroupState.PREPARING_REBALANCE:
                self._maybe_complete_join(now, group)

    # questions from OffsetCommit, DescribeGroups, ListGroups -----------------------------------
    def check_commit(self, group_id: str, generation: int, member_id: str,
                     instance_id: str | None) -> ErrorCode:
        """Whether a member may commit offsets for this group now (Kafka's rules)."""
        group = self.groups.get(group_id)
        if generation < 0 and (group is None or group.is_empty()):
            # A standalone consumer (assign(), no group membership) commits freely while the
            # group has no members, whatever member id it sends (librdkafka's consumer protocol
            # sends its own): Kafka's ClassicGroup.validateOffsetCommit looks at the generation only.
            return ErrorCode.NONE
        refused = ErrorCode.UNKNOWN_MEMBER_ID if group is None else member_error(group, member_id, instance_id)
        if refused is not None:
            return refused
        assert group is not None
        if generation != group.generation:  # before the state, as in Kafka's validateOffsetCommit
            return ErrorCode.ILLEGAL_GENERATION
        if group.state == GroupState.COMPLETING_REBALANCE:
            # The new assignment is being handed out; the old generation's owners are unknown.
            return ErrorCode.REBALANCE_IN_PROGRESS
        # During PreparingRebalance a member of the current generation still owns its
        # partitions and may commit what it consumed (Kafka allows this too).
        return ErrorCode.NONE

    def touch(self, now: int, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group else None
        if member is not None:
            member.last_heard_ms = now

    def describe(self, group_id: str) -> dict[str, Any]:
        group = self.groups.get(group_id)
        if group is None:
            return {"error_code": ErrorCode.NONE, "group_id": group_id, "group_state": GroupState.DEAD.value,
                    "protocol_type": "", "protocol_data": "", "members": [],
                    "authorized_operations": -2147483648}
        members = []
        # Metadata and assignments are shown only in a stable group (the protocol is chosen).
        protocol = group.protocol if group.state == GroupState.STABLE else None
        for member in group.members.values():
            members.append({"member_id": member.member_id, "group_instance_id": member.instance_id,
                            "client_id": member.client_id, "client_host": member.client_host,
                            "member_metadata": member.metadata_for(protocol) if protocol is not None else b"",
                            "member_assignment": member.assignment if protocol is not None else b""})
        return {"error_code": ErrorCode.NONE, "group_id": group_id, "group_state": group.state.value,
                "protocol_type": group.protocol_type or "",
                "protocol_data": group.protocol if group.state == GroupState.STABLE else "",
                "members": members, "authorized_operations": -2147483648}

    def listing(self) -> list[tuple[str, str, str]]:
        return [(g.group_id, g.protocol_type or "", g.state.value) for g in self.groups.values()]

    # DeleteGroups and OffsetDelete ------------------------------------------------------------
    def remove_empty(self, group_id: str) -> Group | None:
        """A group deleted (DeleteGroups, or its last offsets deleted): it must have no members.
        Members that only hold an id handed out by MEMBER_ID_REQUIRED learn UNKNOWN_MEMBER_ID
        when they join with it, and start over. Returns the group, None if it was not known."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        assert group.is_empty() and group.state == GroupState.EMPTY, f"group {group_id} is not empty"
        del self.groups[group_id]
        group.state = GroupState.DEAD
        group.pending.clear()
        log.info("group %s deleted (generation %d)", group_id, group.generation)
        return group

    # online migration between the protocols (broker/group/migration.py) ------------------------
    def take_for_upgrade(self, group_id: str) -> Group:
        """The group leaves this coordinator to become a consumer group: members waiting in
        JoinGroup or SyncGroup learn REBALANCE_IN_PROGRESS and join again (Kafka's
        convertToConsumerGroup); ids handed out and not yet used stay valid there."""
        group = self.groups.pop(group_id)
        for member in group.members.values():
            _fail_pending(member, ErrorCode.REBALANCE_IN_PROGRESS)
        log.info("group %s (generation %d) leaves the classic protocol", group_id, group.generation)
        return group

    def adopt(self, now: int, group: Group, reason: str) -> None:
        """A consumer group converted back: it rebalances at once (its members join again)."""
        assert group.group_id not in self.groups, group.group_id
        self.groups[group.group_id] = group
        self._prepare_rebalance(now, group, reason)

    # coordination moving away ------------------------------------------------------------------
    def unload(self, group_ids: Iterable[str]) -> int:
        """Another broker coordinates these groups now: forget them, and answer members waiting
        in JoinGroup or SyncGroup with NOT_COORDINATOR so they look for the new one. Returns how
        many groups were known."""
        unloaded = 0
        for group_id in group_ids:
            group = self.groups.pop(group_id, None)
            if group is None:
                continue
            unloaded += 1
            group.state = GroupState.DEAD
            for member in group.members.values():
                _fail_pending(member, ErrorCode.NOT_COORDINATOR)
        return unloaded


def member_error(group: Group, member_id: str, instance_id: str | None) -> ErrorCode | None:
    """Whether a request names a current member (Kafka's validateCurrentMember): with an instance
    id, the instance must be known (else UNKNOWN_MEMBER_ID) and held by `member_id` (else
    FENCED_INSTANCE_ID, also when `member_id` is no member at all: an old process of that
    instance); without one, `member_id` must be a member. None: it is."""
    if instance_id is not None:
        holder = group.static.get(instance_id)
        if holder is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if holder != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
    return None if member_id in group.members else ErrorCode.UNKNOWN_MEMBER_ID


def join_error(code: ErrorCode, member_id: str) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": code, "generation_id": -1, "protocol_type": None,
            "protocol_name": "", "leader": "", "skip_assignment": False, "member_id": member_id,
            "members": []}


def sync_error(code: ErrorCode) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": code, "protocol_type": None, "protocol_name": None,
            "assignment": b""}


def _fail_pending(member: Member, code: ErrorCode) -> None:
    """Answer a member's outstanding JoinGroup/SyncGroup, e.g. when it is removed or fenced."""
    join_reply, sync_reply = member.join_reply, member.sync_reply
    member.join_reply = member.sync_reply = None
    if join_reply is not None:
        join_reply(join_error(code, member.member_id))
    if sync_reply is not None:
        sync_reply(sync_error(code))
