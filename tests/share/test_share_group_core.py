"""The share group coordinator's pure core (group/share_group.py): epochs, the "simple" assignor,
fencing, and the records a new coordinator rebuilds the groups from."""

from __future__ import annotations

import math
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from roost.broker.group.consumer_protocol import TopicMeta
from roost.broker.group.share_group import ShareGroupCoordinator, ShareHeartbeatRequest, simple_assign
from roost.broker.group.share_records import ShareGroupRecords, snapshot
from roost.wire.kafka.errors import ErrorCode

TOPIC = TopicMeta("orders", uuid.UUID(int=7), 1)
TOPICS = {"orders": TOPIC}


def beat(core: ShareGroupCoordinator, member: str, epoch: int, now: int = 0, names: tuple[str, ...] | None = None,
         group: str = "g") -> tuple[ErrorCode, int, frozenset | None]:
    result = core.heartbeat(now, ShareHeartbeatRequest(group, member, epoch, subscribed_topic_names=names), TOPICS,
                            5000)
    return result.error, result.member_epoch, result.assignment


def test_members_join_with_their_own_ids_and_share_one_partition() -> None:
    core = ShareGroupCoordinator()
    error, epoch_a, assigned_a = beat(core, "a" * 22, 0, names=("orders",))
    assert error == ErrorCode.NONE and epoch_a == 1 and assigned_a == {(TOPIC.topic_id, 0)}
    error, epoch_b, assigned_b = beat(core, "b" * 22, 0, names=("orders",))
    assert error == ErrorCode.NONE and epoch_b == 2 and assigned_b == {(TOPIC.topic_id, 0)}
    # a's next heartbeat moves it to the new epoch; its partitions did not change: no assignment
    assert beat(core, "a" * 22, epoch_a) == (ErrorCode.NONE, 2, None)
    assert core.groups["g"].state() == "Stable"


def test_epoch_rules() -> None:
    core = ShareGroupCoordinator()
    assert beat(core, "m", 3)[0] == ErrorCode.GROUP_ID_NOT_FOUND  # unknown group at epoch != 0
    assert beat(core, "", 0, names=("orders",))[0] == ErrorCode.INVALID_REQUEST
    assert beat(core, "x" * 37, 0, names=("orders",))[0] == ErrorCode.INVALID_REQUEST
    assert beat(core, "m", 0)[0] == ErrorCode.INVALID_REQUEST  # a join needs a subscription
    assert beat(core, "m", -2)[0] == ErrorCode.INVALID_REQUEST
    _, epoch, _ = beat(core, "m", 0, names=("orders",))
    assert beat(core, "other", 1)[0] == ErrorCode.UNKNOWN_MEMBER_ID
    assert beat(core, "m", epoch + 1)[0] == ErrorCode.FENCED_MEMBER_EPOCH
    beat(core, "n", 0, names=("orders",))
    _, newer, _ = beat(core, "m", epoch)
    assert newer == epoch + 1
    assert beat(core, "m", epoch)[0] == ErrorCode.NONE  # its previous epoch: a lost answer
    beat(core, "o", 0, names=("orders",))
    assert beat(core, "m", newer)[:2] == (ErrorCode.NONE, newer + 1)
    assert beat(core, "m", epoch)[0] == ErrorCode.FENCED_MEMBER_EPOCH  # neither current nor previous
    # epoch 0 with a known id rejoins (never GROUP_ID_NOT_FOUND, which librdkafka treats as fatal)
    error, _, assigned = beat(core, "m", 0, names=("orders",))
    assert error == ErrorCode.NONE and assigned is not None
    assert beat(core, "m", -1)[:2] == (ErrorCode.NONE, -1)
    assert beat(core, "m", -1)[0] == ErrorCode.UNKNOWN_MEMBER_ID


def test_silent_members_are_fenced_after_the_session_timeout() -> None:
    core = ShareGroupCoordinator()
    beat(core, "a", 0, now=0, names=("orders",))
    beat(core, "b", 0, now=0, names=("orders",))
    assert core.tick(40_000, {}, 45_000) == []
    beat(core, "b", core.groups["g"].members["b"].member_epoch, now=40_000)
    assert core.tick(46_000, {}, 45_000) == ["g"]
    assert list(core.groups["g"].members) == ["b"]
    assert core.tick(46_000, {"g": 1000}, 45_000) == ["g"]  # the group's own session timeout
    assert core.groups["g"].state() == "Empty"


def test_the_group_comes_back_from_its_records() -> None:
    core = ShareGroupCoordinator()
    beat(core, "a", 0, names=("orders",))
    beat(core, "b", 0, names=("orders",))
    records = ShareGroupRecords()
    for key, value in snapshot(core.groups["g"]).items():
        records.apply(key, value)
    (group, written), = records.groups(now=0).values()
    assert set(group.members) == {"a", "b"} and group.group_epoch == core.groups["g"].group_epoch
    assert group.members["b"].member_epoch == core.groups["g"].members["b"].member_epoch
    assert written == snapshot(core.groups["g"])


@settings(max_examples=200, deadline=None)
@given(members=st.integers(1, 12), partitions=st.integers(1, 8), seed=st.integers(0, 3))
def test_the_simple_assignor_shares_and_balances(members: int, partitions: int, seed: int) -> None:
    topic = uuid.UUID(int=1)
    subscriptions = {f"m{i}": frozenset({topic}) for i in range(members)}
    previous = simple_assign({f"m{i}": frozenset({topic}) for i in range(max(1, members - seed))},
                             {topic: max(1, partitions - seed)}, {})
    assigned = simple_assign(subscriptions, {topic: partitions}, previous)
    sharing = max(1, math.ceil(members / partitions))
    counts = [len(p) for p in assigned.values()]
    assert max(counts) - min(counts) <= 1, assigned
    for index in range(partitions):
        holders = sum(1 for p in assigned.values() if (topic, index) in p)
        assert holders == min(sharing, members), (index, assigned)
    assert all(counts), "every member gets work"


def test_no_member_joins_a_group_while_its_deletion_runs() -> None:
    """DeleteGroups marks an empty share group deleting while its share state goes: a join then
    is told to retry (and its offsets cannot be altered), and once the group is gone the same
    join makes a new group."""
    core = ShareGroupCoordinator()
    assert beat(core, "m", 0, names=("orders",))[0] == ErrorCode.NONE
    assert beat(core, "m", -1)[0] == ErrorCode.NONE  # left: the group is empty
    core.deleting.add("g")
    assert beat(core, "n", 0, names=("orders",))[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert core.group_for_offsets("g", create=True) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert beat(core, "n", 0, names=("orders",), group="other")[0] == ErrorCode.NONE  # other groups go on
    assert core.remove_empty("g")
    core.deleting.discard("g")
    error, new_epoch, assigned = beat(core, "n", 0, names=("orders",))
    assert error == ErrorCode.NONE and new_epoch == 1 and assigned == {(TOPIC.topic_id, 0)}
