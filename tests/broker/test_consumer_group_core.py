"""KIP-848's consumer group core (`roost.broker.group.consumer_protocol`), without I/O.

The safety claim: a partition moves to another member only after its previous owner has
acknowledged the revocation in a heartbeat, so no partition is ever held by two members at
once. The simulated clients below hold a partition from the answer that gives it to them until
the heartbeat that reports it gone (as librdkafka does: it stops fetching, commits, then reports),
and every step checks that no two clients hold the same partition. Epochs only go up.
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass, field

import pytest

from roost.broker.group.assignors import range_assignor, uniform
from roost.broker.group.consumer_protocol import (
    ConsumerGroupConfig,
    ConsumerGroupCoordinator,
    HeartbeatRequest,
    HeartbeatResult,
    TopicMeta,
)
from roost.wire.kafka.errors import ErrorCode

T1 = TopicMeta("orders", uuid.UUID(int=1), 6)
T2 = TopicMeta("payments", uuid.UUID(int=2), 4)
TOPICS = {T1.name: T1, T2.name: T2}
GROUP = "g"


@dataclass
class Client:
    """A consumer as the coordinator sees it: what it holds, what it reports, its epoch."""

    name: str
    topics: tuple[str, ...] = (T1.name,)
    instance_id: str | None = None
    member_id: str = ""
    epoch: int = 0
    holding: frozenset[tuple[uuid.UUID, int]] = frozenset()
    epochs_seen: list[int] = field(default_factory=list)
    # Heartbeats sent (still reporting them) before revoked partitions are given up: librdkafka
    # keeps heartbeating while the application's revocation callback and commit run.
    slow: int = 0
    releasing: frozenset[tuple[uuid.UUID, int]] = frozenset()
    countdown: int = 0

    def request(self, **changes: object) -> HeartbeatRequest:
        joining = self.epoch == 0
        base = HeartbeatRequest(
            GROUP, self.member_id, self.epoch, instance_id=self.instance_id,
            rebalance_timeout_ms=60_000 if joining else -1,
            subscribed_topic_names=self.topics if joining else None,
            owned=frozenset() if joining else self.holding)
        return HeartbeatRequest(**{**base.__dict__, **changes})  # type: ignore[arg-type]

    def heartbeat(self, coordinator: ConsumerGroupCoordinator, now: int,
                  topics: dict[str, TopicMeta] | None = None) -> HeartbeatResult:
        if self.releasing:
            if self.countdown == 0:
                self.holding -= self.releasing
                self.releasing = frozenset()
            else:
                self.countdown -= 1
        result = coordinator.heartbeat(now, self.request(), TOPICS if topics is None else topics)
        assert result.error == ErrorCode.NONE, (self.name, result)
        self.absorb(result)
        return result

    def absorb(self, result: HeartbeatResult) -> None:
        assert result.member_id
        self.member_id = result.member_id
        assert not self.epochs_seen or result.member_epoch >= self.epochs_seen[-1], "member epoch went back"
        self.epochs_seen.append(result.member_epoch)
        self.epoch = result.member_epoch
        if result.assignment is not None:
            # New partitions are held from now on; revoked ones until `slow` more heartbeats.
            gone = self.holding - result.assignment
            if gone != self.releasing:
                self.releasing, self.countdown = gone, self.slow
            self.holding = result.assignment | gone


def new_coordinator(**config: object) -> ConsumerGroupCoordinator:
    return ConsumerGroupCoordinator(ConsumerGroupConfig(heartbeat_interval_ms=1000, session_timeout_ms=10_000,
                                                        **config))  # type: ignore[arg-type]


def assert_disjoint(clients: list[Client]) -> None:
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for client in clients:
        for tp in client.holding:
            assert tp not in seen, f"partition {tp} held by {seen[tp]} and {client.name} at once"
            seen[tp] = client.name


def settle(coordinator: ConsumerGroupCoordinator, clients: list[Client], now: int, rounds: int = 6) -> None:
    for _ in range(rounds):
        for client in clients:
            client.heartbeat(coordinator, now)
            assert_disjoint(clients)


def partitions(topic: TopicMeta) -> set[tuple[uuid.UUID, int]]:
    return {(topic.topic_id, i) for i in range(topic.partitions)}


def test_three_members_share_the_partitions_evenly_and_reach_the_group_epoch() -> None:
    coordinator = new_coordinator()
    clients = [Client(f"c{i}") for i in range(3)]
    settle(coordinator, clients, now=0)
    group = coordinator.groups[GROUP]
    assert sorted(len(c.holding) for c in clients) == [2, 2, 2]
    assert set().union(*(c.holding for c in clients)) == partitions(T1)
    assert {c.epoch for c in clients} == {group.group_epoch} and group.state() == "Stable"
    assert group.assignment_epoch == group.group_epoch


def test_a_partition_moves_only_after_its_owner_acknowledged_the_revocation() -> None:
    coordinator = new_coordinator()
    first, second = Client("first", slow=2), Client("second")
    settle(coordinator, [first], now=0)
    assert first.holding == partitions(T1)
    joined = second.heartbeat(coordinator, 1)
    assert joined.assignment == frozenset(), "nothing is free while the first member holds everything"
    assert coordinator.groups[GROUP].state() == "Reconciling"
    # The second member heartbeats again and again: still nothing, the first has not heard yet.
    for now in range(2, 5):
        assert second.heartbeat(coordinator, now).assignment in (None, frozenset())
    epoch_before = first.epoch
    revoked = first.heartbeat(coordinator, 5)
    assert revoked.assignment is not None and len(revoked.assignment) == 3
    assert revoked.member_epoch == epoch_before, "the epoch moves only once the revocation is acknowledged"
    # Revoking takes the first member two more heartbeats, which still report all six partitions.
    for now in (6, 7):
        assert first.heartbeat(coordinator, now).member_epoch == epoch_before
        second.heartbeat(coordinator, now)
        assert_disjoint([first, second])
        assert second.holding == frozenset()
    # The next one reports three partitions: the other three are free now.
    acked = first.heartbeat(coordinator, 8)
    assert acked.member_epoch > epoch_before
    assert len(second.heartbeat(coordinator, 9).assignment or ()) == 3
    assert_disjoint([first, second])


def test_random_joins_leaves_and_heartbeats_never_share_a_partition() -> None:
    rng = random.Random(848)
    for _ in range(30):
        coordinator = new_coordinator()
        live: list[Client] = []
        group_epochs: list[int] = []
        for step in range(120):
            now = step * 10
            action = rng.random()
            if action < 0.12 and len(live) < 6:
                live.append(Client(f"c{step}", topics=rng.choice([(T1.name,), (T1.name, T2.name), (T2.name,)]),
                                   slow=rng.choice([0, 1, 3])))
                live[-1].heartbeat(coordinator, now)
            elif action < 0.2 and live:
                leaving = live.pop(rng.randrange(len(live)))
                result = coordinator.heartbeat(now, leaving.request(member_epoch=-1), TOPICS)
                assert result.error == ErrorCode.NONE and result.member_epoch == -1
            elif live:
                rng.choice(live).heartbeat(coordinator, now)
            assert_disjoint(live)
            if GROUP in coordinator.groups:
                group_epochs.append(coordinator.groups[GROUP].group_epoch)
        assert group_epochs == sorted(group_epochs), "the group epoch went back"
        settle(coordinator, live, now=10_000, rounds=20)
        if live:
            wanted = set().union(*(partitions(TOPICS[t]) for c in live for t in c.topics))
            assert set().union(*(c.holding for c in live)) == wanted, "every subscribed partition is consumed"


def test_a_member_that_never_revokes_is_removed_after_its_rebalance_timeout() -> None:
    coordinator = new_coordinator()
    stuck, other = Client("stuck"), Client("other")
    settle(coordinator, [stuck], now=0)
    other.heartbeat(coordinator, 1)
    everything = stuck.holding
    told = stuck.heartbeat(coordinator, 2)  # told to give up three; it keeps reporting all six
    assert told.assignment is not None and len(told.assignment) == 3
    stuck_id = stuck.member_id
    now = 2
    while now < 2 + 60_000 - 1000:  # heartbeats keep its session, not its revocation deadline
        now += 1000
        result = coordinator.heartbeat(now, stuck.request(owned=everything), TOPICS)
        assert result.error == ErrorCode.NONE
        other.heartbeat(coordinator, now)
        assert not other.holding & everything, "nothing moves before the revocation is acknowledged"
        coordinator.tick(now)
        assert stuck_id in coordinator.groups[GROUP].members
    coordinator.tick(2 + 60_000 + 1)
    assert stuck_id not in coordinator.groups[GROUP].members
    settle(coordinator, [other], now=60_020)
    assert other.holding == partitions(T1)


def test_a_silent_member_is_removed_after_the_session_timeout() -> None:
    coordinator = new_coordinator()
    alive, silent = Client("alive"), Client("silent")
    settle(coordinator, [alive, silent], now=0)
    for now in range(1000, 11_001, 1000):
        alive.heartbeat(coordinator, now)
        coordinator.tick(now)
    coordinator.tick(11_001)
    assert silent.member_id not in coordinator.groups[GROUP].members
    settle(coordinator, [alive], now=11_002)
    assert alive.holding == partitions(T1)
    fenced = coordinator.heartbeat(11_003, silent.request(), TOPICS)
    assert fenced.error == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_static_member_leaving_for_a_while_keeps_its_partitions_and_gets_them_back() -> None:
    coordinator = new_coordinator()
    static, dynamic = Client("static", instance_id="i-1"), Client("dynamic")
    settle(coordinator, [static, dynamic], now=0)
    kept = static.holding
    epoch = coordinator.groups[GROUP].group_epoch
    left = coordinator.heartbeat(10, static.request(member_epoch=-2), TOPICS)
    assert left.error == ErrorCode.NONE and left.member_epoch == -2
    settle(coordinator, [dynamic], now=20)
    assert coordinator.groups[GROUP].group_epoch == epoch, "a static member's temporary leave is no rebalance"
    assert not dynamic.holding & kept
    back = Client("static again", instance_id="i-1")  # a new process: a new member id
    settle(coordinator, [back, dynamic], now=30)
    assert back.holding == kept and back.member_id != static.member_id


def test_a_static_instance_in_use_cannot_join_twice() -> None:
    coordinator = new_coordinator()
    Client("first", instance_id="i-1").heartbeat(coordinator, 0)
    result = coordinator.heartbeat(1, Client("twin", instance_id="i-1").request(), TOPICS)
    assert result.error == ErrorCode.UNRELEASED_INSTANCE_ID


def test_a_static_member_leaving_for_good_gives_its_partitions_away() -> None:
    coordinator = new_coordinator()
    static, dynamic = Client("static", instance_id="i-1"), Client("dynamic")
    settle(coordinator, [static, dynamic], now=0)
    assert coordinator.heartbeat(5, static.request(member_epoch=-1), TOPICS).member_epoch == -1
    settle(coordinator, [dynamic], now=10)
    assert dynamic.holding == partitions(T1)


@pytest.mark.parametrize(("changes", "code"), [
    ({"group_id": ""}, ErrorCode.INVALID_REQUEST),
    ({"rebalance_timeout_ms": -1}, ErrorCode.INVALID_REQUEST),
    ({"subscribed_topic_names": None}, ErrorCode.INVALID_REQUEST),
    ({"owned": frozenset({(T1.topic_id, 0)})}, ErrorCode.INVALID_REQUEST),
    ({"member_epoch": -3, "member_id": "m"}, ErrorCode.INVALID_REQUEST),
    ({"member_epoch": 4, "member_id": ""}, ErrorCode.INVALID_REQUEST),
    ({"member_epoch": -2, "member_id": "m"}, ErrorCode.INVALID_REQUEST),
    ({"server_assignor": "sticky"}, ErrorCode.UNSUPPORTED_ASSIGNOR),
    ({"subscribed_topic_regex": "orders("}, ErrorCode.INVALID_REGULAR_EXPRESSION),
    ({"subscribed_topic_regex": r"(o)\1"}, ErrorCode.INVALID_REGULAR_EXPRESSION),  # RE2 has no backreferences
    ({"subscribed_topic_regex": "o" * 5000}, ErrorCode.INVALID_REGULAR_EXPRESSION),
    ({"member_epoch": 3, "member_id": "stranger"}, ErrorCode.UNKNOWN_MEMBER_ID),
])
def test_bad_heartbeats_get_kafkas_error_codes(changes: dict[str, object], code: ErrorCode) -> None:
    coordinator = new_coordinator()
    result = coordinator.heartbeat(0, Client("c").request(**changes), TOPICS)
    assert result.error == code, result


def test_epochs_out_of_step_are_fenced_but_a_lost_answer_is_forgiven() -> None:
    coordinator = new_coordinator()
    a, b = Client("a"), Client("b")
    settle(coordinator, [a, b], now=0)
    assert coordinator.heartbeat(1, a.request(member_epoch=a.epoch + 1), TOPICS).error == ErrorCode.FENCED_MEMBER_EPOCH
    c = Client("c")
    c.heartbeat(coordinator, 2)
    previous = a.epoch
    settle(coordinator, [a, b, c], now=3)
    assert a.epoch > previous
    # The answer that raised a's epoch was lost: a heartbeat with the previous epoch and a subset
    # of its partitions is accepted; an older epoch is not.
    member = coordinator.groups[GROUP].members[a.member_id]
    lost = coordinator.heartbeat(4, a.request(member_epoch=member.previous_epoch), TOPICS)
    assert lost.error == ErrorCode.NONE
    older = coordinator.heartbeat(5, a.request(member_epoch=member.previous_epoch - 1), TOPICS)
    assert older.error == ErrorCode.FENCED_MEMBER_EPOCH


def test_a_fenced_member_rejoins_with_epoch_zero_under_its_id() -> None:
    coordinator = new_coordinator()
    a, b = Client("a"), Client("b")
    settle(coordinator, [a, b], now=0)
    a.epoch, a.holding, a.epochs_seen = 0, frozenset(), []
    a.heartbeat(coordinator, 1)
    settle(coordinator, [a, b], now=2)
    assert sorted(len(c.holding) for c in (a, b)) == [3, 3]


def test_the_group_is_full() -> None:
    coordinator = new_coordinator(max_size=2)
    settle(coordinator, [Client("a"), Client("b")], now=0)
    assert coordinator.heartbeat(1, Client("c").request(), TOPICS).error == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_more_partitions_and_new_topics_matching_a_regex_are_assigned() -> None:
    coordinator = new_coordinator()
    a = Client("a", topics=())
    result = coordinator.heartbeat(0, a.request(subscribed_topic_names=(), subscribed_topic_regex="pay.*"), TOPICS)
    a.absorb(result)
    settle(coordinator, [a], now=1)
    assert a.holding == partitions(T2)
    grown = TopicMeta(T2.name, T2.topic_id, 8)
    created = TopicMeta("payouts", uuid.UUID(int=3), 2)
    topics = {**TOPICS, grown.name: grown, created.name: created}
    epoch = coordinator.groups[GROUP].group_epoch
    for now in range(2, 5):
        a.heartbeat(coordinator, now, topics)
    assert coordinator.groups[GROUP].group_epoch == epoch + 1
    assert a.holding == partitions(grown) | partitions(created)


def test_offset_commits_carry_the_member_epoch() -> None:
    coordinator = new_coordinator()
    a = Client("a")
    settle(coordinator, [a], now=0)
    assert coordinator.check_commit(GROUP, a.member_id, a.epoch, 9) == ErrorCode.NONE
    assert coordinator.check_commit(GROUP, a.member_id, a.epoch - 1, 9) == ErrorCode.STALE_MEMBER_EPOCH
    assert coordinator.check_commit(GROUP, "stranger", a.epoch, 9) == ErrorCode.UNKNOWN_MEMBER_ID
    assert coordinator.check_commit(GROUP, a.member_id, a.epoch, 8) == ErrorCode.UNSUPPORTED_VERSION
    assert coordinator.check_commit(GROUP, "", -1, 9) == ErrorCode.UNKNOWN_MEMBER_ID  # members present
    coordinator.heartbeat(1, a.request(member_epoch=-1), TOPICS)
    assert coordinator.check_commit(GROUP, "", -1, 9) == ErrorCode.NONE  # empty: an admin may commit


def test_uniform_is_sticky_and_balanced() -> None:
    counts = {T1.topic_id: 6, T2.topic_id: 4}
    both = frozenset(counts)
    first = uniform({"a": both, "b": both}, counts, {})
    assert sorted(len(p) for p in first.values()) == [5, 5]
    second = uniform({"a": both, "b": both, "c": both}, counts, first)
    assert sorted(len(p) for p in second.values()) == [3, 3, 4]
    moved = sum(len(first[m] - second[m]) for m in ("a", "b"))
    assert moved == len(second["c"]), "only the partitions the new member takes move"


def test_uniform_with_different_subscriptions() -> None:
    counts = {T1.topic_id: 6, T2.topic_id: 4}
    result = uniform({"a": frozenset({T1.topic_id}), "b": frozenset({T1.topic_id, T2.topic_id})}, counts, {})
    assert all(t == T1.topic_id for t, _ in result["a"])
    assert len(result["a"]) + len(result["b"]) == 10 and abs(len(result["a"]) - len(result["b"])) <= 1


def test_range_gives_contiguous_co_partitioned_ranges() -> None:
    counts = {T1.topic_id: 6, T2.topic_id: 6}
    both = frozenset(counts)
    result = range_assignor({"b": both, "a": both, "c": both}, counts, {})
    assert result["a"] == {(T1.topic_id, 0), (T1.topic_id, 1), (T2.topic_id, 0), (T2.topic_id, 1)}
    assert result["c"] == {(T1.topic_id, 4), (T1.topic_id, 5), (T2.topic_id, 4), (T2.topic_id, 5)}


def test_the_range_assignor_is_chosen_by_the_members() -> None:
    coordinator = new_coordinator()
    clients = [Client(f"c{i}") for i in range(3)]
    for client in clients:
        client.absorb(coordinator.heartbeat(0, client.request(server_assignor="range"), TOPICS))
    settle(coordinator, clients, now=1)
    assert coordinator.groups[GROUP].assignor == "range"
    described = coordinator.describe(GROUP)
    assert described is not None and described["assignor_name"] == "range"
    assert sorted(tuple(sorted(i for _, i in c.holding)) for c in clients) == [(0, 1), (2, 3), (4, 5)]


def test_a_pathological_pattern_cannot_stall_the_coordinator() -> None:
    """RE2 matches in linear time: a pattern that backtracks exponentially in Python's `re`."""
    coordinator = new_coordinator()
    long_name = TopicMeta("a" * 200 + "b", uuid.UUID(int=9), 1)
    topics = {**TOPICS, long_name.name: long_name}
    started = time.monotonic()
    result = coordinator.heartbeat(0, Client("c", topics=()).request(
        subscribed_topic_names=(), subscribed_topic_regex="(a+)+$"), topics)
    assert result.error == ErrorCode.NONE
    assert time.monotonic() - started < 10  # Python's re would take longer than the universe
    assert coordinator.groups[GROUP].topics == {}


def test_a_group_written_as_records_comes_back_the_same() -> None:
    """Kafka's record layouts in __consumer_offsets: snapshot, replay, the same group; the
    difference between two snapshots is what changed plus tombstones."""
    from roost.broker.group.consumer_protocol_records import GroupRecords, delta, snapshot

    coordinator = new_coordinator()
    a, b, c = Client("a", instance_id="i-a"), Client("b", slow=2), Client("c", topics=(T1.name, T2.name))
    settle(coordinator, [a, b], now=0)
    c.heartbeat(coordinator, 1)
    a.heartbeat(coordinator, 2)
    b.heartbeat(coordinator, 3)  # b is revoking (slow): partitions pending revocation are written too
    group = coordinator.groups[GROUP]
    written = snapshot(group)
    replay = GroupRecords()
    for key, value in delta({}, written):
        replay.apply(key, value)
    (loaded, records), = replay.groups(100, new_coordinator()).values()
    assert records == written
    assert (loaded.group_epoch, loaded.assignment_epoch) == (group.group_epoch, group.assignment_epoch)
    assert loaded.target == group.target and loaded.owners == group.owners and loaded.static == group.static
    for member_id, member in group.members.items():
        back = loaded.members[member_id]
        assert (back.member_epoch, back.previous_epoch, back.state, back.assigned, back.revoking) == \
            (member.member_epoch, member.previous_epoch, member.state, member.assigned, member.revoking)
        assert (back.subscribed_names, back.instance_id, back.rebalance_timeout_ms) == \
            (member.subscribed_names, member.instance_id, member.rebalance_timeout_ms)
    # c leaves: its records go (tombstones), the others' change.
    coordinator.heartbeat(4, c.request(member_epoch=-1), TOPICS)
    changes = delta(written, snapshot(group))
    tombstones = [key for key, value in changes if value is None]
    assert len(tombstones) == 3  # c's metadata, current assignment and target
    for key, value in changes:
        replay.apply(key, value)
    (again, _), = replay.groups(200, new_coordinator()).values()
    assert set(again.members) == set(group.members) and again.group_epoch == group.group_epoch


def test_topics_a_pattern_matches_but_the_member_may_not_describe_are_left_out() -> None:
    coordinator = new_coordinator()
    a = Client("a", topics=())
    visible = {T1.name}
    result = coordinator.heartbeat(0, a.request(subscribed_topic_names=(), subscribed_topic_regex=".*",
                                                may_describe=lambda topic: topic in visible), TOPICS)
    a.absorb(result)
    settle(coordinator, [a], now=1)
    assert a.holding == partitions(T1)
    visible.add(T2.name)  # an ACL granted: the next heartbeat takes the topic in
    a.absorb(coordinator.heartbeat(2, a.request(may_describe=lambda topic: topic in visible), TOPICS))
    settle(coordinator, [a], now=3)
    assert a.holding == partitions(T1) | partitions(T2)
