"""Online migration between the classic and the consumer protocol (`roost.broker.group.migration`
and the classic-member requests of `ConsumerGroupCoordinator`), without I/O.

The safety claim: after a live classic group becomes a consumer group, no partition is held by
two members at once, whichever protocol each speaks. Simulated clients hold a partition from the
answer that gives it (SyncGroup for a classic member, a heartbeat for a consumer-protocol member)
until they give it up: an eager classic member before its next JoinGroup, a consumer-protocol
member in the heartbeat that reports it gone. Every step checks that no two clients hold one
partition, and that the coordinator's `owners` covers what each client holds.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from roost.broker.group.classic_codec import read_assignment, write_assignment
from roost.broker.group.classic_protocol import GroupCoordinator, GroupLimits, GroupState
from roost.broker.group.consumer_protocol import (
    ConsumerGroupConfig,
    ConsumerGroupCoordinator,
    HeartbeatRequest,
    MemberState,
    TopicMeta,
)
from roost.broker.group.consumer_protocol_records import GroupRecords, snapshot
from roost.broker.group.migration import (
    MigrationPolicy,
    classic_group_from_consumer,
    consumer_group_from_classic,
    downgrade_allowed,
    upgrade_refusal,
)
from roost.wire.kafka.consumer_protocol import encode_consumer_subscription
from roost.wire.kafka.errors import ErrorCode

T1 = TopicMeta("orders", uuid.UUID(int=1), 6)
TOPICS = {T1.name: T1}
NAMES = {T1.topic_id: T1.name}
GROUP = "g"
LIMITS = GroupLimits(min_session_timeout_ms=1, max_session_timeout_ms=600_000, initial_rebalance_delay_ms=1000,
                     max_size=100)

Partitions = frozenset[tuple[uuid.UUID, int]]


def subscription(owned: Partitions = frozenset(), version: int = 1) -> bytes:
    return encode_consumer_subscription(version, {
        "topics": [T1.name], "user_data": None,
        "owned_partitions": [{"topic": T1.name, "partitions": sorted(i for _, i in owned)}] if owned else []})


def stable_classic_group(members: int = 2) -> tuple[GroupCoordinator, list[str], dict[str, Partitions]]:
    """A Stable classic group of eager consumers, its leader having assigned by range."""
    classic = GroupCoordinator(LIMITS)
    replies: dict[str, dict[str, Any]] = {}
    for n in range(members):
        classic.join(0, group_id=GROUP, member_id="", instance_id=None, client_id=f"c{n}", client_host="h",
                     session_timeout_ms=10_000, rebalance_timeout_ms=10_000, protocol_type="consumer",
                     protocols=[("range", subscription())], require_known_member_id=False,
                     reply=lambda r, n=n: replies.__setitem__(f"c{n}", r))
    classic.tick(1001)
    ids = [replies[f"c{n}"]["member_id"] for n in range(members)]
    generation = replies["c0"]["generation_id"]
    share = {mid: frozenset((T1.topic_id, i) for i in range(T1.partitions) if i % members == k)
             for k, mid in enumerate(ids)}
    leader = classic.groups[GROUP].leader
    assert leader is not None
    classic.sync(1001, group_id=GROUP, generation=generation, member_id=leader, instance_id=None,
                 assignments=[(m, write_assignment(p, NAMES, 1)) for m, p in share.items()], reply=lambda r: None)
    assert classic.groups[GROUP].state == GroupState.STABLE
    return classic, ids, share


def consumer_coordinator() -> ConsumerGroupCoordinator:
    return ConsumerGroupCoordinator(ConsumerGroupConfig(heartbeat_interval_ms=500, session_timeout_ms=10_000))


def test_the_policy_names_kafkas_values() -> None:
    assert [p.value for p in MigrationPolicy] == ["disabled", "upgrade", "downgrade", "bidirectional"]
    assert [p.upgrade_enabled for p in MigrationPolicy] == [False, True, False, True]
    assert [p.downgrade_enabled for p in MigrationPolicy] == [False, False, True, True]


def test_which_classic_groups_may_upgrade() -> None:
    classic, _, _ = stable_classic_group()
    group = classic.groups[GROUP]
    assert upgrade_refusal(group, MigrationPolicy.BIDIRECTIONAL, 10) is None
    assert upgrade_refusal(group, MigrationPolicy.UPGRADE, 10) is None
    assert "online upgrade is disabled" in (upgrade_refusal(group, MigrationPolicy.DISABLED, 10) or "")
    assert "online upgrade is disabled" in (upgrade_refusal(group, MigrationPolicy.DOWNGRADE, 10) or "")
    assert "maximum size" in (upgrade_refusal(group, MigrationPolicy.BIDIRECTIONAL, 1) or "")
    group.protocol_type = "connect"
    assert "consumer embedded protocol" in (upgrade_refusal(group, MigrationPolicy.BIDIRECTIONAL, 10) or "")


def test_the_classic_members_keep_their_subscriptions_and_assignments() -> None:
    classic, ids, share = stable_classic_group()
    generation = classic.groups[GROUP].generation
    converted = consumer_group_from_classic(classic.groups[GROUP], TOPICS, 5, "uniform")
    assert converted.group_epoch == converted.assignment_epoch == generation
    for mid in ids:
        member = converted.members[mid]
        assert member.classic is not None and member.classic.protocol_name == "range"
        assert member.subscribed_names == (T1.name,) and member.assigned == share[mid]
        assert member.member_epoch == generation and converted.target[mid] == share[mid]
    assert set(converted.owners) == set().union(*share.values())


def test_a_member_joining_mid_rebalance_counts_what_a_cooperative_member_still_owns() -> None:
    classic, ids, share = stable_classic_group()
    group = classic.groups[GROUP]
    # The first member rejoins (cooperative: it still owns its partitions); the group is rebalancing.
    classic.join(2, group_id=GROUP, member_id=ids[0], instance_id=None, client_id="c0", client_host="h",
                 session_timeout_ms=10_000, rebalance_timeout_ms=10_000, protocol_type="consumer",
                 protocols=[("range", subscription(share[ids[0]]))], require_known_member_id=False,
                 reply=lambda r: None)
    group.members[ids[0]].assignment = b""  # as if its assignment had been reset
    assert group.state == GroupState.PREPARING_REBALANCE
    converted = consumer_group_from_classic(group, TOPICS, 5, "uniform")
    assert converted.members[ids[0]].assigned == share[ids[0]]


class World:
    """Classic clients (eager) and consumer-protocol clients against one converted group."""

    def __init__(self) -> None:
        classic, self.classic_ids, share = stable_classic_group()
        self.coordinator = consumer_coordinator()
        self.coordinator.groups[GROUP] = consumer_group_from_classic(classic.groups[GROUP], TOPICS, 0, "uniform")
        self.held: dict[str, Partitions] = dict(share)
        self.generation = {mid: self.coordinator.groups[GROUP].members[mid].member_epoch for mid in share}
        self.epoch: dict[str, int] = {}
        self.now = 0

    def check(self) -> None:
        seen: dict[tuple[uuid.UUID, int], str] = {}
        owners = self.coordinator.groups[GROUP].owners if GROUP in self.coordinator.groups else {}
        for who, partitions in self.held.items():
            for tp in partitions:
                assert tp not in seen, f"{tp} held by {seen[tp]} and {who}"
                seen[tp] = who
                assert owners.get(tp) == who, f"{who} holds {tp}; the coordinator says {owners.get(tp)}"

    def consumer_heartbeat(self, mid: str) -> None:
        self.now += 100
        joining = mid not in self.epoch
        result = self.coordinator.heartbeat(self.now, HeartbeatRequest(
            GROUP, mid, self.epoch.get(mid, 0), rebalance_timeout_ms=60_000 if joining else -1,
            subscribed_topic_names=(T1.name,) if joining else None, owned=self.held.get(mid, frozenset())),
            TOPICS)
        assert result.error == ErrorCode.NONE, result
        self.epoch[mid] = result.member_epoch
        if result.assignment is not None:
            # Partitions taken away are given up before the next heartbeat reports them.
            self.held[mid] = result.assignment
        self.check()

    def classic_round(self, mid: str) -> ErrorCode:
        """Heartbeat; if told to rebalance: revoke everything (eager), JoinGroup, SyncGroup."""
        self.now += 100
        code = self.coordinator.classic_heartbeat(self.now, GROUP, mid, None, self.generation[mid])
        if code != ErrorCode.REBALANCE_IN_PROGRESS:
            return code
        self.held[mid] = frozenset()
        joined = self.coordinator.classic_join(self.now, GROUP, mid, None, "c", "h", 10_000, 10_000, "consumer",
                                               [("range", subscription())], True, TOPICS)
        assert joined["error_code"] == ErrorCode.NONE and joined["leader"] == "" and not joined["members"]
        self.generation[mid] = joined["generation_id"]
        code, assignment = self.coordinator.classic_sync(self.now, GROUP, mid, None, self.generation[mid],
                                                         "consumer", "range")
        assert code == ErrorCode.NONE
        self.held[mid] = read_assignment(assignment, TOPICS)
        self.check()
        return ErrorCode.REBALANCE_IN_PROGRESS


def test_a_consumer_protocol_member_joins_a_converted_group_and_nobody_shares_a_partition() -> None:
    world = World()
    world.check()
    world.consumer_heartbeat("new")
    assert world.held.get("new", frozenset()) == frozenset()  # everything is still held by classic members
    group = world.coordinator.groups[GROUP]
    assert group.group_epoch > world.generation[world.classic_ids[0]]
    for _ in range(10):
        for mid in world.classic_ids:
            world.classic_round(mid)
        world.consumer_heartbeat("new")
    group = world.coordinator.groups[GROUP]
    assert len(world.held["new"]) == 2 and all(len(world.held[m]) == 2 for m in world.classic_ids)
    assert all(m.state == MemberState.STABLE and m.member_epoch == group.group_epoch for m in group.members.values())
    assert all(world.classic_round(m) == ErrorCode.NONE for m in world.classic_ids)  # settled: no more rejoins
    # Offsets: a classic member commits with its generation, not the consumer-protocol checks.
    classic_id = world.classic_ids[0]
    assert world.coordinator.check_commit(GROUP, classic_id, world.generation[classic_id], 2) == ErrorCode.NONE
    assert world.coordinator.check_commit(GROUP, classic_id, world.generation[classic_id] - 1, 2) \
        == ErrorCode.ILLEGAL_GENERATION

    # The consumer-protocol member leaves: only classic members remain, the group may go back.
    world.coordinator.heartbeat(world.now, HeartbeatRequest(GROUP, "new", -1), TOPICS)
    group = world.coordinator.groups[GROUP]
    assert downgrade_allowed(group, MigrationPolicy.BIDIRECTIONAL, 10)
    assert downgrade_allowed(group, MigrationPolicy.DOWNGRADE, 10)
    assert not downgrade_allowed(group, MigrationPolicy.UPGRADE, 10)
    assert not downgrade_allowed(group, MigrationPolicy.BIDIRECTIONAL, 1)
    back = classic_group_from_consumer(group, world.now)
    assert back.state == GroupState.STABLE and back.protocol == "range"
    assert back.generation == group.group_epoch - 1 == world.generation[world.classic_ids[0]]  # before the leave
    for mid in world.classic_ids:
        assert read_assignment(back.members[mid].assignment, TOPICS) == world.held[mid]
        assert back.members[mid].session_timeout_ms == 10_000


def test_a_group_with_a_consumer_protocol_member_does_not_downgrade() -> None:
    world = World()
    world.consumer_heartbeat("new")
    assert not downgrade_allowed(world.coordinator.groups[GROUP], MigrationPolicy.BIDIRECTIONAL, 10)


def test_classic_requests_are_checked_as_kafka_checks_them() -> None:
    world = World()
    mid = world.classic_ids[0]
    stale = world.generation[mid] - 1
    assert world.coordinator.classic_heartbeat(0, GROUP, mid, None, stale) == ErrorCode.ILLEGAL_GENERATION
    assert world.coordinator.classic_heartbeat(0, GROUP, "stranger", None, 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert world.coordinator.classic_sync(0, GROUP, mid, None, world.generation[mid], "consumer", "roundrobin")[0] \
        == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    world.consumer_heartbeat("new")
    assert world.coordinator.classic_sync(0, GROUP, mid, None, world.generation[mid], "consumer", "range")[0] \
        == ErrorCode.REBALANCE_IN_PROGRESS  # the group moved on: join again first
    # A consumer-protocol member's id is no classic member.
    assert world.coordinator.classic_heartbeat(0, GROUP, "new", None, world.epoch["new"]) \
        == ErrorCode.UNKNOWN_MEMBER_ID
    joined = world.coordinator.classic_join(0, GROUP, "", None, "c9", "h", 10_000, 10_000, "consumer",
                                            [("range", subscription())], True, TOPICS)
    assert joined["error_code"] == ErrorCode.MEMBER_ID_REQUIRED and joined["member_id"]
    # A newcomer must share a protocol with every classic member (so that the group can go back).
    alien = world.coordinator.classic_join(0, GROUP, "y", None, "c9", "h", 10_000, 10_000, "consumer",
                                           [("roundrobin", subscription())], True, TOPICS)
    assert alien["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    wrong = world.coordinator.classic_join(0, GROUP, "x", None, "c9", "h", 10_000, 10_000, "connect",
                                           [("range", subscription())], True, TOPICS)
    assert wrong["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert world.coordinator.classic_leave(GROUP, mid, None) == ErrorCode.NONE
    assert mid not in world.coordinator.groups[GROUP].members
    assert world.coordinator.classic_leave(GROUP, mid, None) == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_classic_member_silent_for_its_session_timeout_is_removed() -> None:
    world = World()
    mid = world.classic_ids[0]
    world.coordinator.groups[GROUP].members[mid].last_heard_ms = 0
    assert world.coordinator.tick(10_001) == [GROUP]  # its own session timeout (10 s), from JoinGroup
    assert mid not in world.coordinator.groups[GROUP].members


@pytest.mark.parametrize("version", [0, 1, 3])
def test_the_classic_members_survive_their_records(version: int) -> None:
    world = World()
    world.consumer_heartbeat("new")
    group = world.coordinator.groups[GROUP]
    records = GroupRecords()
    for key, value in snapshot(group).items():
        records.apply(key, value)
    (loaded, _), = records.groups(0, world.coordinator).values()
    for mid, member in group.members.items():
        again = loaded.members[mid]
        assert again.classic == member.classic and again.assigned == member.assigned
        assert again.member_epoch == member.member_epoch
    assert loaded.members["new"].classic is None
    assert write_assignment(frozenset({(T1.topic_id, 1)}), NAMES, version)  # every assignment version writes


def test_a_classic_member_that_does_not_rejoin_or_sync_in_time_is_removed() -> None:
    world = World()
    world.consumer_heartbeat("new")
    slow, other = world.classic_ids
    coordinator = world.coordinator
    # Told to join again at t=1000, it keeps heartbeating but never joins: out after its
    # rebalance timeout (10 s), although its session is alive.
    assert coordinator.classic_heartbeat(1000, GROUP, slow, None, world.generation[slow]) \
        == ErrorCode.REBALANCE_IN_PROGRESS
    assert coordinator.classic_heartbeat(9000, GROUP, slow, None, world.generation[slow]) \
        == ErrorCode.REBALANCE_IN_PROGRESS
    # The other joins at 1000 and syncs: no deadline left for it.
    joined = coordinator.classic_join(1000, GROUP, other, None, "c", "h", 10_000, 10_000, "consumer",
                                      [("range", subscription())], True, TOPICS)
    assert coordinator.classic_sync(1000, GROUP, other, None, joined["generation_id"], "consumer", "range")[0] \
        == ErrorCode.NONE
    coordinator.touch(10_500, GROUP, other)
    coordinator.touch(10_500, GROUP, "new")
    assert coordinator.tick(11_001) == [GROUP]
    assert slow not in coordinator.groups[GROUP].members and other in coordinator.groups[GROUP].members
    # Joined but never synced: out after its rebalance timeout too.
    again = coordinator.classic_join(12_000, GROUP, other, None, "c", "h", 60_000, 5_000, "consumer",
                                     [("range", subscription())], True, TOPICS)
    assert again["error_code"] == ErrorCode.NONE
    coordinator.touch(16_000, GROUP, "new")
    assert coordinator.tick(17_001) == [GROUP]
    assert other not in coordinator.groups[GROUP].members
