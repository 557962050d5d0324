"""The group coordinator state machine, driven directly with a hand-held clock (no I/O)."""

from __future__ import annotations

from typing import Any

from roost.broker.group.classic_protocol import GroupCoordinator, GroupLimits, GroupState
from roost.wire.kafka.errors import ErrorCode

LIMITS = GroupLimits(min_session_timeout_ms=1000, max_session_timeout_ms=60000,
                     initial_rebalance_delay_ms=0, max_size=10)
PROTOCOLS = [("range", b"range-meta"), ("roundrobin", b"rr-meta")]


class Answers:
    """Collects the coordinator's delayed replies."""

    def __init__(self) -> None:
        self.replies: list[dict[str, Any]] = []

    def __call__(self, response: dict[str, Any]) -> None:
        self.replies.append(response)

    @property
    def last(self) -> dict[str, Any]:
        assert self.replies, "no answer yet"
        return self.replies[-1]


def join(coordinator: GroupCoordinator, now: int, member_id: str = "", *, instance: str | None = None,
         protocols: list[tuple[str, bytes]] = PROTOCOLS, session: int = 10000, rebalance: int = 5000,
         known_required: bool = False, group: str = "g") -> Answers:
    answers = Answers()
    coordinator.join(now, group_id=group, member_id=member_id, instance_id=instance, client_id="c",
                     client_host="127.0.0.1", session_timeout_ms=session, rebalance_timeout_ms=rebalance,
                     protocol_type="consumer", protocols=protocols, require_known_member_id=known_required,
                     reply=answers)
    return answers


def sync(coordinator: GroupCoordinator, now: int, member_id: str, generation: int,
         assignments: list[tuple[str, bytes]] = (), instance: str | None = None) -> Answers:
    answers = Answers()
    coordinator.sync(now, group_id="g", generation=generation, member_id=member_id, instance_id=instance,
                     assignments=list(assignments), reply=answers)
    return answers


def test_member_id_required_then_join_sync_stable() -> None:
    coordinator = GroupCoordinator(LIMITS)
    first = join(coordinator, 0, known_required=True)
    assert first.last["error_code"] == ErrorCode.MEMBER_ID_REQUIRED
    member = first.last["member_id"]
    assert member
    second = join(coordinator, 1, member, known_required=True)
    response = second.last
    assert response["error_code"] == 0 and response["generation_id"] == 1
    assert response["leader"] == member and response["protocol_name"] == "range"
    assert [m["member_id"] for m in response["members"]] == [member]
    synced = sync(coordinator, 2, member, 1, [(member, b"assignment-1")])
    assert synced.last["assignment"] == b"assignment-1"
    assert coordinator.groups["g"].state == GroupState.STABLE
    assert coordinator.heartbeat(3, group_id="g", generation=1, member_id=member, instance_id=None) == 0


def test_second_member_triggers_rebalance_and_both_get_assignments() -> None:
    coordinator = GroupCoordinator(LIMITS)
    a = join(coordinator, 0).last["member_id"]
    sync(coordinator, 1, a, 1, [(a, b"all")])
    joining = join(coordinator, 2)
    assert not joining.replies  # waits for the existing member to rejoin
    assert coordinator.heartbeat(3, group_id="g", generation=1, member_id=a, instance_id=None) == \
        ErrorCode.REBALANCE_IN_PROGRESS
    rejoin = join(coordinator, 4, a)
    assert rejoin.last["generation_id"] == 2 and joining.last["generation_id"] == 2
    b = joining.last["member_id"]
    assert len(rejoin.last["members"]) == 2 and joining.last["members"] == []  # only the leader sees members
    follower_sync = sync(coordinator, 5, b, 2)
    assert not follower_sync.replies  # waits for the leader's assignment
    sync(coordinator, 6, a, 2, [(a, b"p0"), (b, b"p1")])
    assert follower_sync.last["assignment"] == b"p1"
    assert sync(coordinator, 7, a, 1).last["error_code"] == ErrorCode.ILLEGAL_GENERATION


def test_member_that_does_not_rejoin_is_removed_after_the_rebalance_timeout() -> None:
    coordinator = GroupCoordinator(LIMITS)
    a = join(coordinator, 0, rebalance=3000).last["member_id"]
    sync(coordinator, 0, a, 1, [(a, b"x")])
    b_answers = join(coordinator, 100, rebalance=3000)
    coordinator.tick(2000)
    assert not b_answers.replies
    coordinator.tick(3200)  # a never rejoined
    assert b_answers.last["generation_id"] == 2
    assert list(coordinator.groups["g"].members) == [b_answers.last["member_id"]]
    assert coordinator.heartbeat(3300, group_id="g", generation=1, member_id=a, instance_id=None) == \
        ErrorCode.UNKNOWN_MEMBER_ID


def test_session_timeout_removes_a_silent_member_and_rebalances() -> None:
    coordinator = GroupCoordinator(LIMITS)
    a = join(coordinator, 0, session=2000).last["member_id"]
    sync(coordinator, 0, a, 1, [(a, b"x")])
    b_join = join(coordinator, 10, session=2000)
    join(coordinator, 20, a, session=2000)
    b = b_join.last["member_id"]
    sync(coordinator, 30, b, 2)
    sync(coordinator, 30, a, 2, [(a, b"1"), (b, b"2")])
    for now in range(500, 4000, 500):  # b heartbeats, a stays silent
        coordinator.heartbeat(now, group_id="g", generation=2, member_id=b, instance_id=None)
        coordinator.tick(now)
    group = coordinator.groups["g"]
    assert a not in group.members
    assert group.state == GroupState.PREPARING_REBALANCE
    rejoin = join(coordinator, 4000, b, session=2000)
    assert rejoin.last["generation_id"] == 3 and rejoin.last["leader"] == b


def test_leave_empties_the_group() -> None:
    coordinator = GroupCoordinator(LIMITS)
    a = join(coordinator, 0).last["member_id"]
    sync(coordinator, 0, a, 1, [(a, b"x")])
    assert coordinator.leave(1, group_id="g", member_id=a, instance_id=None) == 0
    assert coordinator.groups["g"].state == GroupState.EMPTY
    assert coordinator.leave(2, group_id="g", member_id=a, instance_id=None) == ErrorCode.UNKNOWN_MEMBER_ID


def test_static_member_rejoins_without_rebalance_and_the_old_id_is_fenced() -> None:
    coordinator = GroupCoordinator(LIMITS)
    old = join(coordinator, 0, instance="host-1").last["member_id"]
    sync(coordinator, 0, old, 1, [(old, b"mine")])
    generation = coordinator.groups["g"].generation
    # The process restarts: a new member id for the same group.instance.id, same protocols.
    back = join(coordinator, 100, instance="host-1")
    new = back.last["member_id"]
    assert new != old and back.last["generation_id"] == generation
    assert coordinator.groups["g"].state == GroupState.STABLE
    assert sync(coordinator, 101, new, generation, instance="host-1").last["assignment"] == b"mine"
    assert coordinator.heartbeat(102, group_id="g", generation=generation, member_id=old,
                                 instance_id="host-1") == ErrorCode.FENCED_INSTANCE_ID


def test_a_restarted_static_leader_with_new_metadata_neither_rebalances_nor_leads() -> None:
    """As Kafka 3.9 (tests/referees/test_kafka_differential_groups.py): only a change of the
    selected protocol makes a rebalance; the answer names the old leader id and no members."""
    coordinator = GroupCoordinator(LIMITS)
    old = join(coordinator, 0, instance="host-1").last["member_id"]
    sync(coordinator, 0, old, 1, [(old, b"mine")])
    back = join(coordinator, 100, instance="host-1", protocols=[("range", b"new-meta"), ("roundrobin", b"rr")]).last
    assert (back["error_code"], back["generation_id"], back["leader"], back["members"]) == (0, 1, old, [])
    group = coordinator.groups["g"]
    assert group.state == GroupState.STABLE and group.leader == back["member_id"]
    assert group.members[back["member_id"]].metadata_for("range") == b"new-meta"
    # A protocol the group would select otherwise does make one (its only member has rejoined,
    # so it completes at once).
    again = join(coordinator, 200, instance="host-1", protocols=[("roundrobin", b"rr")]).last
    assert (again["generation_id"], again["protocol_name"], again["leader"]) == (2, "roundrobin", again["member_id"])


def test_a_request_naming_an_instance_is_checked_by_the_instance_first() -> None:
    """Kafka's validateCurrentMember: a known instance held by another id is FENCED_INSTANCE_ID
    (whether or not the id is a member); an unknown instance is UNKNOWN_MEMBER_ID."""
    coordinator = GroupCoordinator(LIMITS)
    old = join(coordinator, 0, instance="host-1").last["member_id"]
    sync(coordinator, 0, old, 1, [(old, b"mine")])
    new = join(coordinator, 100, instance="host-1").last["member_id"]
    assert coordinator.check_commit("g", 1, old, "host-1") == ErrorCode.FENCED_INSTANCE_ID
    assert coordinator.heartbeat(101, group_id="g", generation=1, member_id=new, instance_id="host-2") == \
        ErrorCode.UNKNOWN_MEMBER_ID
    assert sync(coordinator, 102, new, 1, instance="host-2").last["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    assert coordinator.heartbeat(103, group_id="g", generation=1, member_id=new, instance_id="host-1") == 0


def test_the_generation_is_checked_before_the_state() -> None:
    """A heartbeat of another generation while a rebalance is prepared, and a commit of the old
    generation before the new one's sync, are ILLEGAL_GENERATION, as in Kafka."""
    coordinator = GroupCoordinator(LIMITS)
    a = join(coordinator, 0).last["member_id"]
    sync(coordinator, 0, a, 1, [(a, b"all")])
    pending_b = join(coordinator, 1)
    assert not pending_b.replies and coordinator.groups["g"].state == GroupState.PREPARING_REBALANCE
    assert coordinator.heartbeat(2, group_id="g", generation=7, member_id=a, instance_id=None) == \
        ErrorCode.ILLEGAL_GENERATION
    assert coordinator.heartbeat(2, group_id="g", generation=1, member_id=a, instance_id=None) == \
        ErrorCode.REBALANCE_IN_PROGRESS
    join(coordinator, 3, a)
    assert coordinator.groups["g"].state == GroupState.COMPLETING_REBALANCE
    assert coordinator.check_commit("g", 1, a, None) == ErrorCode.ILLEGAL_GENERATION
    assert coordinator.check_commit("g", 2, a, None) == ErrorCode.REBALANCE_IN_PROGRESS


def test_a_sync_naming_another_protocol_is_refused() -> None:
    coordinator = GroupCoordinator(LIMITS)
    a = join(coordinator, 0).last["member_id"]
    answers = Answers()
    coordinator.sync(1, group_id="g", generation=1, member_id=a, instance_id=None, assignments=[], reply=answers,
                     protocol_type="consumer", protocol_name="roundrobin")
    assert answers.last["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    coordinator.sync(2, group_id="g", generation=1, member_id=a, instance_id=None, assignments=[], reply=answers,
                     protocol_type="connect", protocol_name="range")
    assert answers.last["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    coordinator.sync(3, group_id="g", generation=1, member_id=a, instance_id=None, assignments=[(a, b"x")],
                     reply=answers, protocol_type="consumer", protocol_name="range")
    assert answers.last["error_code"] == 0


def test_inconsistent_protocols_and_bad_session_timeouts_are_refused() -> None:
    coordinator = GroupCoordinator(LIMITS)
    join(coordinator, 0)
    assert join(coordinator, 1, protocols=[("sticky", b"")]).last["error_code"] == \
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert join(coordinator, 2, session=10).last["error_code"] == ErrorCode.INVALID_SESSION_TIMEOUT
    assert join(coordinator, 3, group="").last["error_code"] == ErrorCode.INVALID_GROUP_ID
    assert join(coordinator, 4, "ghost", group="nobody").last["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID


def test_commit_rules() -> None:
    coordinator = GroupCoordinator(LIMITS)
    assert coordinator.check_commit("solo", -1, "", None) == 0  # assign() consumers, no group
    a = join(coordinator, 0).last["member_id"]
    assert coordinator.check_commit("g", 1, a, None) == ErrorCode.REBALANCE_IN_PROGRESS  # awaiting sync
    sync(coordinator, 0, a, 1, [(a, b"x")])
    assert coordinator.check_commit("g", 1, a, None) == 0
    assert coordinator.check_commit("g", 0, a, None) == ErrorCode.ILLEGAL_GENERATION
    assert coordinator.check_commit("g", 1, "stranger", None) == ErrorCode.UNKNOWN_MEMBER_ID
    assert coordinator.check_commit("g", -1, "", None) == ErrorCode.UNKNOWN_MEMBER_ID
    join(coordinator, 1)  # a second member: PreparingRebalance; a may still commit what it consumed
    assert coordinator.check_commit("g", 1, a, None) == 0


def test_initial_rebalance_delay_gathers_members() -> None:
    coordinator = GroupCoordinator(GroupLimits(1000, 60000, initial_rebalance_delay_ms=3000, max_size=10))
    first, second = join(coordinator, 0), join(coordinator, 500)
    coordinator.tick(1000)
    assert not first.replies and not second.replies
    coordinator.tick(3100)
    assert first.last["generation_id"] == second.last["generation_id"] == 1
    assert len(coordinator.groups["g"].members) == 2
