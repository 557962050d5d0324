"""KIP-848's consumer group protocol as a state machine: ConsumerGroupHeartbeat, member epochs,
server-side assignment and each member's reconciliation.

Pure: no I/O, no clock (every call takes `now` in milliseconds), no metadata lookups (the shell
passes the topics it knows). The shell is `GroupService`; the handlers are
`handlers/consumer_groups.py`.

The model (Kafka's GroupMetadataManager and CurrentAssignmentBuilder):

- The group epoch goes up on every change of membership, subscriptions, or the subscribed
  topics' metadata (a topic created, deleted, or given more partitions). The assignor then
  computes a target assignment for that epoch (the assignment epoch).
- Each member moves towards its target on its own heartbeats. A member that owns partitions
  outside its target is told its reduced assignment and stays at its epoch
  (UNREVOKED_PARTITIONS) until a heartbeat reports that it no longer owns them; only then does it
  reach the target epoch. Partitions of its target that another member still owns are withheld
  (UNRELEASED_PARTITIONS) until that member has released them.
- Safety: a partition belongs to at most one member at a time (`owners`); it is handed to a
  member only while no other member holds it, assigned or pending revocation. `check_invariants`
  states this; the unit tests call it after every step.
- Liveness: a member silent for the session timeout is removed (its partitions released); a
  member that does not revoke within its rebalance timeout is removed too.

Static members (`group.instance.id`) leave with epoch -2 and keep their partitions until their
session expires; the same instance joining again (epoch 0, a new member id) takes them over.

A member that joins again with epoch 0 under a member id the group still knows (after being
fenced, or after a lost response) replaces its old self: it owns nothing at epoch 0, so its old
partitions are free to assign. Kafka fences such a join unless the member's previous epoch was 0;
Roost accepts it, which lets librdkafka's fenced members rejoin at once instead of after a
session timeout.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import re2

from roost.broker.group.assignors import ASSIGNORS, TopicPartition
from roost.broker.group.classic_codec import read_subscription, subscription_version, write_assignment
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.exceptions import KafkaCodecError

log = logging.getLogger("roost.broker.group.consumer")

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is the client's error, answered; not the broker's log
MAX_REGEX_CHARS = 4096


@functools.lru_cache(maxsize=1024)
def compiled_regex(pattern: str) -> Any:
    """A subscription's regular expression, compiled with RE2 (as Kafka's RE2/J: linear time, so no
    pattern can stall the broker); re2.error if it is not one."""
    return re2.compile(pattern, _RE2_OPTIONS)

# The key under which the authorization rule (handlers/api_rules.py), when ACLs are on, puts into
# a ConsumerGroupHeartbeat's body whether the principal may describe a topic.
MAY_DESCRIBE_TOPIC = "roost_may_describe_topic"

CLASSIC_CONSUMER_PROTOCOL_TYPE = "consumer"  # the protocol type of classic members that may join

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


@dataclass(frozen=True)
class ClassicMetadata:
    """What a classic member (JoinGroup/SyncGroup/Heartbeat) of a consumer group brought with it:
    its session timeout and its JoinGroup protocols (name, consumer-protocol subscription)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        """The protocol its JoinGroup and SyncGroup answers name (Kafka: its first)."""
        return self.protocols[0][0]


class MemberState(Enum):
    STABLE = "Stable"
    UNREVOKED_PARTITIONS = "UnrevokedPartitions"
    UNRELEASED_PARTITIONS = "UnreleasedPartitions"


@dataclass(frozen=True)
class TopicMeta:
    """A topic as the shell's metadata knows it."""

    name: str
    topic_id: uuid.UUID
    partitions: int


@dataclass(frozen=True)
class ConsumerGroupConfig:
    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")


@dataclass(frozen=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: frozenset[TopicPartition] | None = None
    client_id: str = ""
    client_host: str = ""
    # With an authorizer: whether the member's principal may describe a topic; topics its
    # pattern matches but it may not describe are left out of its subscription (as Kafka does).
    may_describe: Callable[[str], bool] | None = None


@dataclass(frozen=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: frozenset[TopicPartition] | None = None  # None: unchanged, not sent


class HeartbeatError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_names: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: frozenset[TopicPartition] = frozenset()
    revoking: frozenset[TopicPartition] = frozenset()
    last_heard_ms: int = 0
    revocation_deadline_ms: int | None = None
    hidden_topics: frozenset[str] = frozenset()  # matched by its pattern, not describable by it
    classic: ClassicMetadata | None = None  # set for a member speaking the classic protocol
    # A classic member told to join again, or answered a JoinGroup, must join (or sync) by then
    # (Kafka's join and sync timeouts: its rebalance timeout); not written, as Kafka's timers.
    classic_deadline_ms: int | None = None

    def subscribes_to(self, topic: str) -> bool:
        if topic in self.subscribed_names:
            return True
        return self.matches_pattern(topic) and topic not in self.hidden_topics

    def matches_pattern(self, topic: str) -> bool:
        return self.subscribed_regex is not None and compiled_regex(self.subscribed_regex).fullmatch(topic) is not None


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, frozenset[TopicPartition]] = field(default_factory=dict)
    owners: dict[TopicPartition, str] = field(default_factory=dict)  # assigned or being revoked
    topics: dict[str, TopicMeta] = field(default_factory=dict)  # subscribed topics that exist
    assignor: str = "uniform"

    def state(self) -> str:
        """Kafka's ConsumerGroup states: Empty, Assigning, Reconciling, Stable."""
        if not self.members:
            return "Empty"
        if self.group_epoch != self.assignment_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE
               for m in self.members.values() if m.member_epoch != STATIC_LEAVE_EPOCH):
            return "Reconciling"
        return "Stable"

    def names_by_id(self) -> dict[uuid.UUID, str]:
        return {meta.topic_id: meta.name for meta in self.topics.values()}


class ConsumerGroupCoordinator:
    def __init__(self, config: ConsumerGroupConfig) -> None:
        assert config.assignors and all(a in ASSIGNORS for a in config.assignors), config.assignors
        self.config = config
        self.groups: dict[str, ConsumerGroup] = {}

    # ConsumerGroupHeartbeat ---------------------------------------------------------------------
    def invalid(self, request: HeartbeatRequest) -> HeartbeatResult | None:
        """The answer to a malformed heartbeat, None if it is well formed (checked before a live
        classic group is converted for it)."""
        try:
            _validate(request, self.config.assignors)
        except HeartbeatError as error:
            return HeartbeatResult(error.code, error.message, member_id=None, member_epoch=0)
        return None

    def heartbeat(self, now: int, request: HeartbeatRequest, topics: Mapping[str, TopicMeta]) -> HeartbeatResult:
        try:
            return self._heartbeat(now, request, topics)
        except HeartbeatError as error:
            return HeartbeatResult(error.code, error.message, member_id=None, member_epoch=0)

    def _heartbeat(self, now: int, request: HeartbeatRequest, topics: Mapping[str, TopicMeta]) -> HeartbeatResult:
        _validate(request, self.config.assignors)
        epoch = request.member_epoch
        if epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(now, request)
        group = self.groups.get(request.group_id)
        if group is None:
            if epoch != JOIN_EPOCH:
                # A coordinator that lost the group (moved, restarted): the member rejoins.
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"group {request.group_id} is unknown")
            group = self.groups[request.group_id] = ConsumerGroup(request.group_id,
                                                                  assignor=self.config.assignors[0])
        member_id = request.member_id or str(uuid.uuid4())
        if member_id not in group.members and len(group.members) >= self.config.max_size and (
                request.instance_id is None or request.instance_id not in group.static):
            raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                 f"the group has reached its maximum of {self.config.max_size} members")
        before: frozenset[TopicPartition] | None
        reasons: list[str] = []  # why the group epoch goes up (once per heartbeat, as in Kafka)
        if epoch == JOIN_EPOCH:
            member = self._join(now, group, member_id, request, reasons)
            before = None
        else:
            member = self._known_member(group, member_id, request)
            before = member.assigned
        member.last_heard_ms = now
        member.client_id, member.client_host = request.client_id, request.client_host
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.server_assignor is not None:
            member.server_assignor = request.server_assignor
        changed = False
        if request.subscribed_topic_names is not None and \
                tuple(sorted(request.subscribed_topic_names)) != member.subscribed_names:
            member.subscribed_names = tuple(sorted(request.subscribed_topic_names))
            changed = True
        if request.subscribed_topic_regex is not None and \
                (request.subscribed_topic_regex or None) != member.subscribed_regex:
            member.subscribed_regex = request.subscribed_topic_regex or None
            changed = True
        if member.subscribed_regex is not None and request.may_describe is not None:
            hidden = frozenset(t for t in topics if member.matches_pattern(t) and not request.may_describe(t))
            if hidden != member.hidden_topics:
                member.hidden_topics = hidden
                changed = True
        if changed:
            log.info("group %s: member %s subscribes to %s%s", group.group_id, member.member_id,
                     list(member.subscribed_names),
                     f" and /{member.subscribed_regex}/" if member.subscribed_regex else "")
            reasons.append(f"member {member.member_id} changed its subscription")
        if self._refresh_topics(group, topics):
            reasons.append("the subscribed topics changed")
        if reasons:
            self._bump(group, "; ".join(reasons))
        self._maybe_assign(group)
        self._reconcile(now, group, member, request.owned)
        self.check_invariants(group)
        send = before is None or request.owned is not None or member.assigned != before
        return HeartbeatResult(ErrorCode.NONE, None, member.member_id, member.member_epoch,
                               self.config.heartbeat_interval_ms, member.assigned if send else None)

    def _join(self, now: int, group: ConsumerGroup, member_id: str, request: HeartbeatRequest,
              reasons: list[str]) -> ConsumerMember:
        instance = request.instance_id
        if instance is not None and instance in group.static:
            old = group.members[group.static[instance]]
            if old.member_id != member_id and old.member_epoch != STATIC_LEAVE_EPOCH:
                raise HeartbeatError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                     f"instance {instance} is still used by member {old.member_id}")
            # The instance is back (a new process): it takes over its predecessor's partitions
            # and target; nobody else had them meanwhile.
            new = ConsumerMember(member_id, instance, rebalance_timeout_ms=old.rebalance_timeout_ms,
                                 subscribed_names=old.subscribed_names, subscribed_regex=old.subscribed_regex,
                                 server_assignor=old.server_assignor, member_epoch=0, previous_epoch=-1,
                                 assigned=old.assigned | old.revoking, last_heard_ms=now)
            del group.members[old.member_id]
            group.members[member_id] = new
            group.static[instance] = member_id
            for tp in new.assigned:
                group.owners[tp] = member_id
            if old.member_id in group.target:
                group.target[member_id] = group.target.pop(old.member_id)
            log.info("group %s: static member %s rejoins as %s", group.group_id, instance, member_id)
            return new
        if member_id in group.members:
            # Rejoining under its id with nothing owned (see the module docstring).
            self._remove(group, member_id, "rejoins with epoch 0")
        member = ConsumerMember(member_id, instance, last_heard_ms=now)
        group.members[member_id] = member
        if instance is not None:
            group.static[instance] = member_id
        reasons.append(f"member {member_id} joined")
        return member

    def _known_member(self, group: ConsumerGroup, member_id: str, request: HeartbeatRequest) -> ConsumerMember:
        if request.instance_id is not None:
            static_id = group.static.get(request.instance_id)
            if static_id is None:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"instance {request.instance_id} is unknown")
            if static_id != member_id:
                raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID,
                                     f"instance {request.instance_id} belongs to member {static_id}")
        member = group.members.get(member_id)
        if member is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"member {member_id} is not in the group")
        epoch = request.member_epoch
        if epoch > member.member_epoch:
            raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"epoch {epoch} is ahead of the member's {member.member_epoch}")
        # The answer that raised the epoch may have been lost: the previous epoch is fine if the
        # member owns nothing beyond what it has now.
        if epoch < member.member_epoch and (
                epoch != member.previous_epoch or request.owned is None or not request.owned <= member.assigned):
            raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                     f"epoch {epoch} is behind the member's {member.member_epoch}")
        return member

    def _leave(self, now: int, request: HeartbeatRequest) -> HeartbeatResult:
        group = self.groups.get(request.group_id)
        member_id = request.member_id
        if request.instance_id is not None and group is not None:
            static_id = group.static.get(request.instance_id)
            if static_id is None:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"instance {request.instance_id} is unknown")
            if static_id != member_id:
                raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID,
                                     f"instance {request.instance_id} belongs to member {static_id}")
        if group is None or member_id not in group.members:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"member {member_id} is not in the group")
        member = group.members[member_id]
        if request.member_epoch == STATIC_LEAVE_EPOCH:
            # Gone for a while: it keeps its partitions (nobody else gets them) until its session ends.
            member.previous_epoch, member.member_epoch = member.member_epoch, STATIC_LEAVE_EPOCH
            member.last_heard_ms = now
            log.info("group %s: static member %s (%s) left for now", group.group_id, request.instance_id, member_id)
            return HeartbeatResult(ErrorCode.NONE, None, member_id, STATIC_LEAVE_EPOCH,
                                   self.config.heartbeat_interval_ms)
        self._remove(group, member_id, "left the group")
        self._bump(group, f"member {member_id} left")
        return HeartbeatResult(ErrorCode.NONE, None, member_id, LEAVE_EPOCH, self.config.heartbeat_interval_ms)

    # classic members (JoinGroup, SyncGroup, Heartbeat, LeaveGroup into a consumer group) ---------
    def classic_join(self, now: int, group_id: str, member_id: str, instance_id: str | None, client_id: str,
                     client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                     protocols: list[tuple[str, bytes]], require_known_member_id: bool,
                     topics: Mapping[str, TopicMeta]) -> dict[str, Any]:
        """Kafka's classicGroupJoinToConsumerGroup: the member's subscription comes from its
        protocol metadata, the group epoch goes up if it changed, and the member reconciles at
        once with the partitions its subscription says it still owns (an eager member: none).
        The answer names no leader and no members: the member's SyncGroup gets its assignment
        from the group. Its generation is its member epoch."""
        group = self.groups[group_id]

        def refused(code: ErrorCode, member: str = member_id) -> dict[str, Any]:
            return {"throttle_time_ms": 0, "error_code": code, "generation_id": -1, "protocol_type": None,
                    "protocol_name": "", "leader": "", "skip_assignment": False, "member_id": member,
                    "members": []}
        known = group.members.get(member_id) if member_id else None
        if protocol_type != CLASSIC_CONSUMER_PROTOCOL_TYPE or not protocols:
            return refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if known is not None and known.classic is None:
            return refused(ErrorCode.UNKNOWN_MEMBER_ID)  # a consumer-protocol member's id
        # Kafka's supportsClassicProtocols: one protocol every classic member supports, so that
        # the group can become a classic group again.
        shared: set[str] | None = None  # the protocols every other classic member supports
        for other in group.members.values():
            if other.classic is not None and other.member_id != member_id:
                names = {n for n, _ in other.classic.protocols}
                shared = names if shared is None else shared & names
        if shared is not None and not shared & {n for n, _ in protocols}:
            return refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if known is None and len(group.members) >= self.config.max_size:
            return refused(ErrorCode.GROUP_MAX_SIZE_REACHED)
        if not member_id:
            member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if require_known_member_id and instance_id is None:
                return refused(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        if instance_id is not None and group.static.get(instance_id, member_id) != member_id:
            # Roost does not hand a static member's identity over across the protocols.
            return refused(ErrorCode.FENCED_INSTANCE_ID)
        try:
            subscription = read_subscription(protocols, topics)
        except KafkaCodecError as error:
            log.warning("group %s: classic member %s's metadata is no consumer subscription (%s)",
                        group_id, member_id, error)
            return refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        reasons: list[str] = []
        member = known
        if member is None:
            member = ConsumerMember(member_id, instance_id, last_heard_ms=now)
            group.members[member_id] = member
            if instance_id is not None:
                group.static[instance_id] = member_id
            reasons.append(f"classic member {member_id} joined")
        member.classic = ClassicMetadata(session_timeout_ms, tuple((n, bytes(m)) for n, m in protocols))
        member.last_heard_ms = now
        member.classic_deadline_ms = now + rebalance_timeout_ms  # its SyncGroup is due
        member.client_id, member.client_host = client_id, client_host
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.server_assignor = None
        if subscription.rack_id:
            member.rack_id = subscription.rack_id
        if subscription.topics != member.subscribed_names or member.subscribed_regex is not None:
            member.subscribed_names, member.subscribed_regex = subscription.topics, None
            reasons.append(f"classic member {member_id} subscribes to {list(subscription.topics)}")
        if self._refresh_topics(group, topics):
            reasons.append("the subscribed topics changed")
        if reasons:
            self._bump(group, "; ".join(reasons))
        self._maybe_assign(group)
        # A member rejoining has given up what its subscription does not list (eager: everything).
        self._reconcile(now, group, member, subscription.owned if subscription.owned is not None else frozenset())
        self.check_invariants(group)
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "generation_id": member.member_epoch,
                "protocol_type": CLASSIC_CONSUMER_PROTOCOL_TYPE, "protocol_name": member.classic.protocol_name,
                "leader": "", "skip_assignment": False, "member_id": member_id, "members": []}

    def _classic_member(self, group_id: str, member_id: str, instance_id: str | None) -> ConsumerMember:
        """Kafka's validateConsumerGroupMember and throwIfMemberDoesNotUseClassicProtocol."""
        group = self.groups[group_id]
        if instance_id is not None:
            static_id = group.static.get(instance_id)
            if static_id is None:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"instance {instance_id} is unknown")
            if static_id != member_id:
                raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID, f"instance {instance_id} belongs to {static_id}")
        member = group.members.get(member_id)
        if member is None or member.classic is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"member {member_id} is no classic member")
        return member

    def classic_sync(self, now: int, group_id: str, member_id: str, instance_id: str | None, generation: int,
                     protocol_type: str | None, protocol_name: str | None) -> tuple[ErrorCode, bytes]:
        """Kafka's classicGroupSyncToConsumerGroup: (error, the member's assignment, encoded)."""
        try:
            member = self._classic_member(group_id, member_id, instance_id)
        except HeartbeatError as error:
            return error.code, b""
        assert member.classic is not None
        group = self.groups[group_id]
        if generation != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION, b""
        if (protocol_type is not None and protocol_type != CLASSIC_CONSUMER_PROTOCOL_TYPE) or \
                (protocol_name is not None and protocol_name != member.classic.protocol_name):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL, b""
        if group.group_epoch > member.member_epoch and member.state != MemberState.UNREVOKED_PARTITIONS:
            self._rejoin_due(now, member)
            return ErrorCode.REBALANCE_IN_PROGRESS, b""
        member.last_heard_ms = now
        member.classic_deadline_ms = None
        return ErrorCode.NONE, write_assignment(member.assigned, group.names_by_id(),
                                                subscription_version(member.classic.protocols))

    def classic_heartbeat(self, now: int, group_id: str, member_id: str, instance_id: str | None,
                          generation: int) -> ErrorCode:
        """Kafka's classicGroupHeartbeatToConsumerGroup: REBALANCE_IN_PROGRESS tells the member to
        join again, when the group moved on, it must revoke, or partitions it waits for are free."""
        try:
            member = self._classic_member(group_id, member_id, instance_id)
        except HeartbeatError as error:
            return error.code
        group = self.groups[group_id]
        if generation != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        member.last_heard_ms = now
        rejoin = member.member_epoch < group.group_epoch or member.state == MemberState.UNREVOKED_PARTITIONS
        if not rejoin and member.state == MemberState.UNRELEASED_PARTITIONS:
            waiting = group.target.get(member_id, frozenset()) - member.assigned
            rejoin = any(tp not in group.owners for tp in waiting)
        if rejoin:
            self._rejoin_due(now, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    @staticmethod
    def _rejoin_due(now: int, member: ConsumerMember) -> None:
        """Kafka's scheduleConsumerGroupJoinTimeoutIfAbsent."""
        if member.classic_deadline_ms is None:
            member.classic_deadline_ms = now + member.rebalance_timeout_ms

    def classic_leave(self, group_id: str, member_id: str, instance_id: str | None) -> ErrorCode:
        """A classic member's LeaveGroup (by member id, or by instance id with no member id)."""
        group = self.groups[group_id]
        if instance_id is not None and not member_id:
            member_id = group.static.get(instance_id, "")
        try:
            self._classic_member(group_id, member_id, instance_id)
        except HeartbeatError as error:
            return error.code
        self._remove(group, member_id, "left the group (classic LeaveGroup)")
        self._bump(group, f"classic member {member_id} left")
        self._maybe_assign(group)
        self.check_invariants(group)
        return ErrorCode.NONE

    # epochs and the target assignment ------------------------------------------------------------
    def _bump(self, group: ConsumerGroup, reason: str) -> None:
        group.group_epoch += 1
        log.info("group %s: epoch %d (%s)", group.group_id, group.group_epoch, reason)

    def _refresh_topics(self, group: ConsumerGroup, topics: Mapping[str, TopicMeta]) -> bool:
        """The subscribed topics that exist, with their ids and partition counts; whether they
        changed (a topic created, deleted, recreated, or grown: the group epoch goes up)."""
        found = {name: meta for name, meta in topics.items()
                 if any(m.subscribes_to(name) for m in group.members.values())}
        if found == group.topics:
            return False
        group.topics = found
        return True

    def _maybe_assign(self, group: ConsumerGroup) -> None:
        if group.group_epoch == group.assignment_epoch:
            return
        subscriptions = {
            m.member_id: frozenset(meta.topic_id for name, meta in group.topics.items() if m.subscribes_to(name))
            for m in group.members.values()}
        counts = {meta.topic_id: meta.partitions for meta in group.topics.values()}
        preferred = [m.server_assignor for m in group.members.values() if m.server_assignor]
        group.assignor = max(sorted(set(preferred)), key=preferred.count) if preferred else self.config.assignors[0]
        target = ASSIGNORS[group.assignor](subscriptions, counts, group.target)
        group.target = {m: target.get(m, frozenset()) for m in group.members}
        group.assignment_epoch = group.group_epoch
        log.info("group %s: target assignment of epoch %d by %s: %s", group.group_id, group.assignment_epoch,
                 group.assignor, {m: len(p) for m, p in group.target.items()})

    # reconciliation ------------------------------------------------------------------------------
    def _reconcile(self, now: int, group: ConsumerGroup, member: ConsumerMember,
                   owned: frozenset[TopicPartition] | None) -> None:
        if member.state == MemberState.UNREVOKED_PARTITIONS:
            if owned is None or owned & member.revoking:
                return  # still owns partitions it must give up
            self._release(group, member, member.revoking)
            member.revoking = frozenset()
            member.revocation_deadline_ms = None
        elif member.state == MemberState.STABLE and member.member_epoch == group.assignment_epoch:
            return
        target = group.target.get(member.member_id, frozenset())
        keep = member.assigned & target
        revoke = member.assigned - target
        if revoke and (owned is None or owned & revoke):
            member.assigned, member.revoking = keep, revoke
            member.state = MemberState.UNREVOKED_PARTITIONS
            member.revocation_deadline_ms = now + member.rebalance_timeout_ms
            return
        # What it no longer owns (as it reports: an eager classic member has revoked everything
        # before it joins again) is free at once, as in Kafka's CurrentAssignmentBuilder.
        self._release(group, member, revoke)
        wanted = target - member.assigned
        free = frozenset(tp for tp in wanted if group.owners.get(tp, member.member_id) == member.member_id)
        for tp in free:
            group.owners[tp] = member.member_id
        member.assigned = keep | free
        if member.member_epoch != group.assignment_epoch:
            member.previous_epoch, member.member_epoch = member.member_epoch, group.assignment_epoch
        member.state = MemberState.STABLE if free == wanted else MemberState.UNRELEASED_PARTITIONS

    def _release(self, group: ConsumerGroup, member: ConsumerMember, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            if group.owners.get(tp) == member.member_id:
                del group.owners[tp]

    def _remove(self, group: ConsumerGroup, member_id: str, why: str) -> None:
        member = group.members.pop(member_id)
        self._release(group, member, member.assigned | member.revoking)
        group.target.pop(member_id, None)
        if member.instance_id is not None and group.static.get(member.instance_id) == member_id:
            del group.static[member.instance_id]
        log.info("group %s: member %s %s", group.group_id, member_id, why)

    # timers ---------------------------------------------------------------------------------------
    def tick(self, now: int) -> list[str]:
        """Remove members whose session expired or that did not revoke within their rebalance
        timeout; returns the groups that changed."""
        changed = []
        for group in list(self.groups.values()):
            gone = []
            for member in list(group.members.values()):
                session_timeout = member.classic.session_timeout_ms if member.classic is not None \
                    else self.config.session_timeout_ms
                if now - member.last_heard_ms > session_timeout:
                    gone.append((member.member_id, "missed its session timeout"))
                elif member.classic_deadline_ms is not None and now > member.classic_deadline_ms:
                    gone.append((member.member_id, "did not join or sync again within its rebalance timeout"))
                elif member.revocation_deadline_ms is not None and now > member.revocation_deadline_ms:
                    gone.append((member.member_id, "did not revoke its partitions within its rebalance timeout"))
            for member_id, why in gone:
                self._remove(group, member_id, why)
            if gone:
                self._bump(group, f"{len(gone)} member(s) removed")
                self.check_invariants(group)
                changed.append(group.group_id)
        return changed

    # offsets ---------------------------------------------------------------------------------------
    def check_commit(self, group_id: str, member_id: str, member_epoch: int, api_version: int) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetCommit for a consumer-protocol group."""
        group = self.groups.get(group_id)
        if member_epoch < 0 and (group is None or not group.members):
            return ErrorCode.NONE  # an admin or a standalone consumer, the group has no members
        member = group.members.get(member_id) if group is not None else None
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.classic is not None:
            # A classic member commits with its generation (its member epoch), any version.
            return ErrorCode.NONE if member_epoch == member.member_epoch else ErrorCode.ILLEGAL_GENERATION
        if api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def check_fetch(self, group_id: str, member_id: str, member_epoch: int) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetFetch, for OffsetFetch v9 naming a member."""
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def touch(self, now: int, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is not None:
            member.last_heard_ms = now

    # questions ------------------------------------------------------------------------------------
    def is_active(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    def describe(self, group_id: str) -> dict[str, Any] | None:
        """ConsumerGroupDescribe's entry for the group, None if there is no such consumer group."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        names = group.names_by_id()

        def topic_partitions(partitions: frozenset[TopicPartition]) -> dict[str, Any]:
            by_topic: dict[uuid.UUID, list[int]] = {}
            for topic_id, index in sorted(partitions):
                by_topic.setdefault(topic_id, []).append(index)
            return {"topic_partitions": [{"topic_id": t, "topic_name": names.get(t, ""), "partitions": p}
                                         for t, p in by_topic.items()]}

        members = [{
            "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
            "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed_names), "subscribed_topic_regex": m.subscribed_regex,
            "assignment": topic_partitions(m.assigned),
            "target_assignment": topic_partitions(group.target.get(m.member_id, frozenset())),
        } for m in group.members.values()]
        return {"error_code": ErrorCode.NONE, "error_message": None, "group_id": group_id,
                "group_state": group.state(), "group_epoch": group.group_epoch,
                "assignment_epoch": group.assignment_epoch, "assignor_name": group.assignor,
                "members": members, "authorized_operations": -2147483648}

    def listing(self) -> list[tuple[str, str]]:
        """(group, state) of every consumer-protocol group."""
        return [(g.group_id, g.state()) for g in self.groups.values()]

    # groups going away ------------------------------------------------------------------------------
    def remove_empty(self, group_id: str) -> bool:
        """Drop a group without members (deleted, or switching to the classic protocol)."""
        group = self.groups.get(group_id)
        if group is None:
            return False
        assert not group.members, f"group {group_id} has members"
        del self.groups[group_id]
        return True

    def unload(self, group_ids: Iterable[str]) -> int:
        """Another broker coordinates these groups now: forget them (members learn
        UNKNOWN_MEMBER_ID or NOT_COORDINATOR and join again with epoch 0)."""
        return sum(1 for g in group_ids if self.groups.pop(g, None) is not None)

    # invariants ------------------------------------------------------------------------------------
    @staticmethod
    def check_invariants(group: ConsumerGroup) -> None:
        """No partition is held by two members; `owners` is exactly what members hold."""
        held: dict[TopicPartition, str] = {}
        for member in group.members.values():
            assert not member.assigned & member.revoking, f"{member.member_id} assigned and revoking the same"
            for tp in member.assigned | member.revoking:
                assert tp not in held, f"partition {tp} held by {held[tp]} and {member.member_id}"
                held[tp] = member.member_id
        assert held == group.owners, f"owners {group.owners} != held {held}"


def _validate(request: HeartbeatRequest, assignors: tuple[str, ...]) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
    def invalid(why: str) -> HeartbeatError:
        return HeartbeatError(ErrorCode.INVALID_REQUEST, why)

    epoch = request.member_epoch
    if not request.group_id:
        raise invalid("GroupId can't be empty.")
    if request.instance_id is not None and not request.instance_id:
        raise invalid("InstanceId can't be empty.")
    if request.rack_id is not None and not request.rack_id:
        raise invalid("RackId can't be empty.")
    if epoch < STATIC_LEAVE_EPOCH:
        raise invalid(f"MemberEpoch {epoch} is invalid.")
    if epoch == JOIN_EPOCH:
        if request.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if request.owned:
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    elif not request.member_id:
        raise invalid("MemberId can't be empty.")
    if epoch == STATIC_LEAVE_EPOCH and request.instance_id is None:
        raise invalid("InstanceId can't be null when leaving with MemberEpoch -2.")
    if request.server_assignor is not None and request.server_assignor not in assignors:
        raise HeartbeatError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                             f"ServerAssignor {request.server_assignor} is not supported; supported: {list(assignors)}")
    if request.subscribed_topic_regex:
        if len(request.subscribed_topic_regex) > MAX_REGEX_CHARS:
            raise HeartbeatError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                                 f"SubscribedTopicRegex is longer than {MAX_REGEX_CHARS} characters")
        try:
            compiled_regex(request.subscribed_topic_regex)
        except re2.error as error:
            reason = error.args[0].decode(errors="replace") if error.args and isinstance(error.args[0], bytes) \
                else str(error)
            raise HeartbeatError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                                 f"SubscribedTopicRegex is invalid: {reason}") from None
