"""Online migration of a live group between the classic and the consumer protocol (KIP-848), as
Kafka 4 does it (GroupMetadataManager's validateOnlineUpgrade / convertToConsumerGroup and
validateOnlineDowngrade* / convertToClassicGroup; ConsumerGroup.fromClassicGroup,
ClassicGroup.fromConsumerGroup), under `group.consumer.migration.policy`.

- Upgrade: a ConsumerGroupHeartbeat joining (epoch 0) a classic group with members, all of
  protocol type "consumer", converts it into a consumer group. Its classic members stay, each at
  member epoch = the classic generation, with the subscription of its JoinGroup metadata and the
  partitions of its SyncGroup assignment; the target assignment is what they have. The new
  member's join then raises the group epoch: the classic members are told to join again
  (REBALANCE_IN_PROGRESS on Heartbeat) and the new member gets only partitions nobody holds.
- Downgrade: when a member leaves (or is removed from) a consumer group whose remaining members
  all speak the classic protocol, the group becomes a classic group again (generation = the group
  epoch, each member's assignment its assigned partitions) and rebalances.

Pure: decisions and conversions only; the shell (GroupService) swaps the groups between the two
coordinators and writes the records.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

from roost.broker.group.assignors import TopicPartition
from roost.broker.group.classic_codec import (
    read_assignment,
    read_subscription,
    subscription_version,
    write_assignment,
)
from roost.broker.group.classic_protocol import CONSUMER_PROTOCOL_TYPE, Group, GroupState, Member
from roost.broker.group.consumer_protocol import (
    ClassicMetadata,
    ConsumerGroup,
    ConsumerGroupCoordinator,
    ConsumerMember,
    MemberState,
    TopicMeta,
)
from roost.wire.kafka.exceptions import KafkaCodecError


class MigrationPolicy(Enum):
    """`group.consumer.migration.policy` (Kafka's ConsumerGroupMigrationPolicy)."""

    DISABLED = "disabled"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    BIDIRECTIONAL = "bidirectional"

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.UPGRADE, MigrationPolicy.BIDIRECTIONAL)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.DOWNGRADE, MigrationPolicy.BIDIRECTIONAL)


class MigrationRefused(Exception):
    """The group cannot convert; the message is what the refused member is told."""


def upgrade_refusal(group: Group, policy: MigrationPolicy, consumer_max_size: int) -> str | None:
    """Why a classic group with members cannot become a consumer group (None: it can)."""
    gid = group.group_id
    if not policy.upgrade_enabled:
        return f"Cannot upgrade classic group {gid} to consumer group because online upgrade is disabled."
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE or any(
            m.protocol_type != CONSUMER_PROTOCOL_TYPE for m in group.members.values()):
        return (f"Cannot upgrade classic group {gid} to consumer group because the group does not use the "
                "consumer embedded protocol.")
    if len(group.members) > consumer_max_size:
        return (f"Cannot upgrade classic group {gid} to consumer group because the group size exceeds the "
                "consumer group maximum size.")
    return None


def consumer_group_from_classic(group: Group, topics: Mapping[str, TopicMeta], now: int,
                                assignor: str) -> ConsumerGroup:
    """ConsumerGroup.fromClassicGroup. Each member holds what its assignment gives it and, in a
    group mid-rebalance, also what its latest JoinGroup says it still owns (a cooperative member
    keeps its partitions while it rejoins): the coordinator never believes a member holds less than
    it does. MigrationRefused if the metadata is unreadable or two members claim one partition."""
    converted = ConsumerGroup(group.group_id, group_epoch=group.generation, assignment_epoch=group.generation,
                              assignor=assignor)
    for classic in group.members.values():
        protocols = list(classic.protocols)
        if group.protocol is not None:  # the chosen protocol's metadata first, as the group uses it
            protocols.sort(key=lambda p: p[0] != group.protocol)
        try:
            subscription = read_subscription(protocols, topics)
            held = read_assignment(classic.assignment, topics)
        except KafkaCodecError as error:
            raise MigrationRefused(f"Cannot upgrade classic group {group.group_id} to consumer group because "
                                   f"the embedded consumer protocol is malformed: {error}") from None
        if group.state != GroupState.STABLE and subscription.owned:
            held |= subscription.owned
        member = ConsumerMember(
            classic.member_id, classic.instance_id, subscription.rack_id or None, classic.client_id,
            classic.client_host, rebalance_timeout_ms=classic.rebalance_timeout_ms,
            subscribed_names=subscription.topics, member_epoch=group.generation,
            previous_epoch=group.generation, state=MemberState.STABLE, assigned=held, last_heard_ms=now,
            classic=ClassicMetadata(classic.session_timeout_ms, tuple(protocols)))
        for tp in held:
            if tp in converted.owners:
                raise MigrationRefused(f"Cannot upgrade classic group {group.group_id} to consumer group now: "
                                       f"members {converted.owners[tp]} and {member.member_id} both hold {tp}.")
            converted.owners[tp] = member.member_id
        converted.members[member.member_id] = member
        converted.target[member.member_id] = held
        if member.instance_id is not None:
            converted.static[member.instance_id] = member.member_id
    converted.topics = {name: meta for name, meta in topics.items()
                        if any(m.subscribes_to(name) for m in converted.members.values())}
    ConsumerGroupCoordinator.check_invariants(converted)
    return converted


def downgrade_allowed(group: ConsumerGroup, policy: MigrationPolicy, classic_max_size: int) -> bool:
    """validateOnlineDowngradeWithFencedMembers, asked after members left or were removed: the
    group has members, all classic, and may and can be a classic group."""
    classic = [m.classic for m in group.members.values()]
    if not classic or any(c is None for c in classic) or not policy.downgrade_enabled \
            or len(classic) > classic_max_size:
        return False
    # A classic group needs one protocol all its members support.
    return bool(set.intersection(*({name for name, _ in c.protocols} for c in classic if c is not None)))


def classic_group_from_consumer(group: ConsumerGroup, now: int) -> Group:
    """ClassicGroup.fromConsumerGroup: a Stable classic group, each member's assignment its
    assigned partitions (plus those it is still revoking, which it owns until it joins again); the
    shell then starts a rebalance. The generation is the epoch the members reached (Kafka's: the
    group epoch before the departure that triggers the downgrade), so that their commits with it
    stay valid while they rejoin."""
    names = group.names_by_id()
    generation = max(m.member_epoch for m in group.members.values())
    converted = Group(group.group_id, state=GroupState.STABLE, generation=generation,
                      protocol_type=CONSUMER_PROTOCOL_TYPE, state_since_ms=now)
    for member in group.members.values():
        assert member.classic is not None, f"{member.member_id} is no classic member"
        held: frozenset[TopicPartition] = member.assigned | member.revoking
        converted.members[member.member_id] = Member(
            member.member_id, member.instance_id, member.client_id, member.client_host,
            member.classic.session_timeout_ms, member.rebalance_timeout_ms, CONSUMER_PROTOCOL_TYPE,
            list(member.classic.protocols), now,
            assignment=write_assignment(held, names, subscription_version(member.classic.protocols)))
        if member.instance_id is not None:
            converted.static[member.instance_id] = member.member_id
    converted.protocol = converted.select_protocol()
    converted.leader = next(iter(converted.members))
    converted.subscribed_topics = converted.compute_subscribed_topics()
    return converted
