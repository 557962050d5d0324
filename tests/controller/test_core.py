"""The controller core on its own: inputs in, fenced znode writes, broker requests and replies out."""

from __future__ import annotations

import uuid

from roost.broker.controller.core import (
    ELECTION_PREFERRED,
    ELECTION_UNCLEAN,
    ClusterSnapshot,
    ControllerCore,
    ControllerSettings,
    PartitionState,
    Ready,
)
from roost.broker.zk.layout import (
    NO_LEADER,
    RECOVERING,
    BrokerRegistration,
    LeaderAndIsr,
    TopicAssignment,
    partition_state_path,
)
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode

TOPIC_ID = uuid.UUID(int=7)


def brokers(*ids: int, epoch: int = 100) -> dict[int, BrokerRegistration]:
    return {b: BrokerRegistration(b, "127.0.0.1", 9000 + b, epoch=epoch + b) for b in ids}


def core_with(assignment: dict[int, list[int]], live: tuple[int, ...] = (1, 2, 3),
              states: dict[int, tuple[LeaderAndIsr, int]] | None = None,
              settings: ControllerSettings | None = None) -> tuple[ControllerCore, Ready]:
    snapshot = ClusterSnapshot(
        brokers=brokers(*live), topics={"t": TopicAssignment(TOPIC_ID, assignment)},
        states={("t", p): PartitionState(s, v) for p, (s, v) in (states or {}).items()})
    core = ControllerCore(1, 5, settings or ControllerSettings(auto_leader_rebalance=False), snapshot, now_ms=0)
    ready = core.ready()
    core.check()
    return core, ready


def requests(ready: Ready, api: ApiKey) -> dict[int, dict]:
    return {r.broker_id: r.body for r in ready.requests if r.api_key == api}


def partition_states(body: dict) -> dict[tuple[str, int], dict]:
    return {(t["topic_name"], p["partition_index"]): p for t in body["topic_states"] for p in t["partition_states"]}


def state(core: ControllerCore, p: int = 0) -> LeaderAndIsr:
    return core.states[("t", p)].state


def test_activation_initializes_new_partitions_and_tells_every_replica() -> None:
    core, ready = core_with({0: [2, 3, 1], 1: [3, 1, 2]})
    assert state(core, 0) == LeaderAndIsr(2, 0, (2, 3, 1), 5)
    assert state(core, 1).leader == 3
    assert [w.op for w in ready.writes] == ["create", "create"]
    assert ready.writes[0].path == partition_state_path("t", 0)
    lai = requests(ready, ApiKey.LEADER_AND_ISR)
    assert set(lai) == {1, 2, 3}
    assert partition_states(lai[1])[("t", 0)]["is_new"] is True
    assert lai[2]["broker_epoch"] == 102 and lai[2]["controller_epoch"] == 5
    # Every broker gets the whole picture in UpdateMetadata.
    um = requests(ready, ApiKey.UPDATE_METADATA)
    assert set(um) == {1, 2, 3} and len(partition_states(um[1])) == 2
    assert [b["id"] for b in um[1]["live_brokers"]] == [1, 2, 3]


def test_leader_failure_elects_the_next_live_isr_member_in_assignment_order() -> None:
    core, _ = core_with({0: [1, 2, 3]}, states={0: (LeaderAndIsr(1, 4, (1, 3, 2), 5), 9)})
    core.brokers_changed(brokers(2, 3))
    ready = core.ready()
    assert state(core) == LeaderAndIsr(2, 5, (3, 2), 5)
    assert core.states[("t", 0)].version == 10
    assert [(w.op, w.version) for w in ready.writes] == [("set", 9)]
    assert set(requests(ready, ApiKey.LEADER_AND_ISR)) == {2, 3}
    um = requests(ready, ApiKey.UPDATE_METADATA)
    assert partition_states(um[2])[("t", 0)]["offline_replicas"] == [1]


def test_a_follower_failure_shrinks_the_isr_and_bumps_the_leader_epoch() -> None:
    core, _ = core_with({0: [1, 2, 3]}, states={0: (LeaderAndIsr(1, 4, (1, 2, 3), 5), 0)})
    core.brokers_changed(brokers(1, 2))
    core.ready()
    assert state(core) == LeaderAndIsr(1, 5, (1, 2), 5)


def test_the_last_isr_member_is_kept_and_leads_again_when_it_returns() -> None:
    core, _ = core_with({0: [1, 2, 3]}, states={0: (LeaderAndIsr(1, 4, (1,), 5), 0)})
    core.brokers_changed(brokers(2, 3))
    core.ready()
    assert state(core).leader == NO_LEADER and state(core).isr == (1,)
    core.brokers_changed(brokers(1, 2, 3))
    ready = core.ready()
    assert state(core).leader == 1 and state(core).leader_epoch == 6
    assert 1 in requests(ready, ApiKey.LEADER_AND_ISR)
    core.check()


def test_unclean_election_only_where_allowed() -> None:
    core, _ = core_with({0: [1, 2]}, live=(2,), states={0: (LeaderAndIsr(NO_LEADER, 3, (1,), 5), 0)})
    assert state(core).leader == NO_LEADER
    core.topic_configs_changed("t", {"unclean.leader.election.enable": "true"})
    core.ready()
    assert state(core).leader == 2 and state(core).isr == (2,) and state(core).recovery_state == RECOVERING


def test_alter_partition_checks_in_kafkas_order() -> None:
    core, _ = core_with({0: [1, 2, 3]}, states={0: (LeaderAndIsr(1, 4, (1, 2), 5), 7)})

    def ask(isr: list[int], leader_epoch: int = 4, partition_epoch: int = 7, broker_epoch: int = 101,
            epochs: dict[int, int] | None = None) -> dict:
        request = {"broker_id": 1, "broker_epoch": broker_epoch, "topics": [{"topic_id": TOPIC_ID, "partitions": [{
            "partition_index": 0, "leader_epoch": leader_epoch, "partition_epoch": partition_epoch,
            "leader_recovery_state": 0,
            "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": (epochs or {}).get(b, -1)} for b in isr]}]}]}
        core.alter_partition("token", request, 3)
        (reply,) = core.ready().replies
        assert reply.token == "token"
        if reply.body["error_code"]:
            return reply.body
        return reply.body["topics"][0]["partitions"][0]

    assert ask([1, 2, 3], broker_epoch=999)["error_code"] == ErrorCode.STALE_BROKER_EPOCH
    assert ask([1, 2, 3], leader_epoch=5)["error_code"] == ErrorCode.NOT_CONTROLLER
    assert ask([1, 2, 3], leader_epoch=3)["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
    assert ask([2, 1])["error_code"] == ErrorCode.NONE  # the same set: idempotent, nothing written
    assert ask([1, 2, 3], partition_epoch=6)["error_code"] == ErrorCode.INVALID_UPDATE_VERSION
    assert ask([1, 2, 3], epochs={3: 42})["error_code"] == ErrorCode.INELIGIBLE_REPLICA
    assert ask([2, 3])["error_code"] == ErrorCode.INVALID_REQUEST  # the leader left out
    done = ask([1, 2, 3])
    assert done["error_code"] == ErrorCode.NONE and done["isr"] == [1, 2, 3] and done["partition_epoch"] == 8
    assert state(core) == LeaderAndIsr(1, 4, (1, 2, 3), 5)  # an ISR change asked by the leader keeps the epoch
    core.brokers_changed(brokers(1, 2))
    core.ready()
    assert ask([1, 2, 3], leader_epoch=5, partition_epoch=9)["error_code"] == ErrorCode.INELIGIBLE_REPLICA


def test_alter_partition_writes_before_it_answers() -> None:
    core, _ = core_with({0: [1, 2]}, states={0: (LeaderAndIsr(1, 0, (1,), 5), 0)})
    core.alter_partition("t", {"broker_id": 1, "broker_epoch": 101, "topics": [{"topic_id": TOPIC_ID, "partitions": [
        {"partition_index": 0, "leader_epoch": 0, "partition_epoch": 0, "leader_recovery_state": 0,
         "new_isr_with_epochs": [{"broker_id": 1, "broker_epoch": 101}, {"broker_id": 2, "broker_epoch": 102}]}]}]}, 3)
    ready = core.ready()
    assert [(w.op, w.version) for w in ready.writes] == [("set", 0)]
    assert len(ready.replies) == 1 and ready.requests  # the shell sends both only after the write


def test_controlled_shutdown_moves_leadership_and_reports_what_remains() -> None:
    core, _ = core_with({0: [1, 2, 3], 1: [2, 1, 3], 2: [1]},
                        states={0: (LeaderAndIsr(1, 0, (1, 2, 3), 5), 0), 1: (LeaderAndIsr(2, 0, (2, 1, 3), 5), 0),
                                2: (LeaderAndIsr(1, 0, (1,), 5), 0)})
    core.controlled_shutdown("cs", 1, 101)
    ready = core.ready()
    (reply,) = ready.replies
    assert reply.body["remaining_partitions"] == [{"topic_name": "t", "partition_index": 2}]
    assert state(core, 0).leader == 2 and 1 not in state(core, 0).isr
    assert 1 not in state(core, 1).isr and state(core, 1).leader == 2
    stops = requests(ready, ApiKey.STOP_REPLICA)
    assert set(partition_states(stops[1])) == {("t", 1)}
    # A broker that is shutting down is not taken back into an ISR.
    core.alter_partition("t", {"broker_id": 2, "broker_epoch": 102, "topics": [{"topic_id": TOPIC_ID, "partitions": [
        {"partition_index": 1, "leader_epoch": state(core, 1).leader_epoch,
         "partition_epoch": core.states[("t", 1)].version, "leader_recovery_state": 0,
         "new_isr_with_epochs": [{"broker_id": 2, "broker_epoch": -1}, {"broker_id": 1, "broker_epoch": -1}]}]}]}, 3)
    (reply,) = core.ready().replies
    assert reply.body["topics"][0]["partitions"][0]["error_code"] == ErrorCode.INELIGIBLE_REPLICA


def test_topic_creation_growth_and_deletion() -> None:
    core, _ = core_with({0: [1, 2]})
    core.topics_changed({"t": TopicAssignment(TOPIC_ID, {0: [1, 2], 1: [2, 3]}),
                         "u": TopicAssignment(uuid.UUID(int=8), {0: [3, 1]})})
    ready = core.ready()
    assert {w.path for w in ready.writes} == {partition_state_path("t", 1), partition_state_path("u", 0)}
    assert state(core, 1).leader == 2
    core.delete_requested(["u"])
    ready = core.ready()
    stops = requests(ready, ApiKey.STOP_REPLICA)
    assert set(stops) == {1, 3}
    assert all(p["delete_partition"] and p["leader_epoch"] == -2 for p in partition_states(stops[1]).values())
    assert not ready.writes  # nothing removed until the replicas confirm
    core.stop_replica_answered(3, [("u", 0, 0)])
    assert not core.ready().writes
    core.stop_replica_answered(1, [("u", 0, 0)])
    ready = core.ready()
    assert [(w.op, w.path) for w in ready.writes] == [
        ("delete_tree", "/brokers/topics/u"), ("delete_tree", "/config/topics/u"),
        ("delete_tree", "/admin/delete_topics/u")]
    assert "u" not in core.topics
    um = requests(ready, ApiKey.UPDATE_METADATA)
    assert partition_states(um[1])[("u", 0)]["leader"] == -2


def test_preferred_elections_by_request_and_by_imbalance() -> None:
    core, _ = core_with({0: [1, 2], 1: [1, 2]}, states={0: (LeaderAndIsr(2, 3, (1, 2), 5), 0),
                                                         1: (LeaderAndIsr(2, 3, (2,), 5), 0)})
    core.elect_leaders("e", ELECTION_PREFERRED, [("t", 0), ("t", 1), ("t", 9)])
    (reply,) = core.ready().replies
    codes = {r["partition_id"]: r["error_code"] for r in reply.body["replica_election_results"][0]["partition_result"]}
    assert codes == {0: ErrorCode.NONE, 1: ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                     9: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert state(core, 0) == LeaderAndIsr(1, 4, (1, 2), 5)
    core.elect_leaders("e", ELECTION_UNCLEAN, [("t", 1)])
    (reply,) = core.ready().replies
    assert reply.body["replica_election_results"][0]["partition_result"][0]["error_code"] == \
        ErrorCode.ELECTION_NOT_NEEDED

    rebalancing, _ = core_with({0: [1, 2], 1: [1, 2]}, states={0: (LeaderAndIsr(2, 3, (1, 2), 5), 0),
                                                                1: (LeaderAndIsr(2, 3, (1, 2), 5), 0)},
                               settings=ControllerSettings(imbalance_check_interval_ms=1000))
    rebalancing.tick(100)
    assert state(rebalancing, 0).leader == 2  # not yet time
    rebalancing.tick(5_000)
    assert state(rebalancing, 0).leader == 1 and state(rebalancing, 1).leader == 1


def test_a_bounced_broker_is_failed_then_started() -> None:
    core, _ = core_with({0: [1, 2]}, states={0: (LeaderAndIsr(1, 2, (1, 2), 5), 0)})
    bounced = brokers(1, 2)
    bounced[1] = BrokerRegistration(1, "127.0.0.1", 9001, epoch=555)  # same id, new session
    core.brokers_changed(bounced)
    ready = core.ready()
    assert state(core).leader == 2 and state(core).isr == (2,)
    assert 1 in requests(ready, ApiKey.LEADER_AND_ISR)  # the new incarnation learns it follows


def test_a_reassignment_adds_catches_up_moves_leadership_and_removes() -> None:
    core, _ = core_with({0: [1, 2]}, states={0: (LeaderAndIsr(1, 3, (1, 2), 5), 4)})
    core.reassign("r", {("t", 0): [2, 3]})
    ready = core.ready()
    (reply,) = ready.replies
    assert reply.body["responses"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
    assignment = core.topics["t"]
    assert assignment.partitions[0] == [2, 3, 1] and assignment.adding[0] == [3] and assignment.removing[0] == [1]
    assert set(requests(ready, ApiKey.LEADER_AND_ISR)) == {1, 2, 3}
    listed = core.list_reassignments(None)
    assert listed["topics"][0]["partitions"][0]["adding_replicas"] == [3]
    # The leader reports broker 3 caught up: the move completes.
    core.alter_partition("a", {"broker_id": 1, "broker_epoch": 101, "topics": [{"topic_id": TOPIC_ID, "partitions": [
        {"partition_index": 0, "leader_epoch": 4, "partition_epoch": core.states[("t", 0)].version,
         "leader_recovery_state": 0,
         "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": -1} for b in (1, 2, 3)]}]}]}, 3)
    ready = core.ready()
    assert core.topics["t"].partitions[0] == [2, 3] and not core.topics["t"].adding
    assert state(core).leader == 2 and set(state(core).isr) == {2, 3}
    stops = requests(ready, ApiKey.STOP_REPLICA)
    assert partition_states(stops[1])[("t", 0)]["delete_partition"] is True
    assert core.list_reassignments(None)["topics"] == []
    core.check()


def test_a_reassignment_over_one_in_progress_keeps_the_isr_within_the_replicas() -> None:
    # Found by tests/sim/replication: the superseded reassignment's added replica stayed in the ISR.
    core, _ = core_with({0: [1, 3]}, live=(1, 2, 3, 4), states={0: (LeaderAndIsr(1, 3, (1, 3), 5), 4)})
    core.reassign("r", {("t", 0): [2, 4]})  # adding 2 and 4, removing 1 and 3
    core.ready()
    # Broker 2 catches up and joins the ISR; broker 4 has not yet: the move goes on.
    core.alter_partition("a", {"broker_id": 1, "broker_epoch": 101, "topics": [{"topic_id": TOPIC_ID, "partitions": [
        {"partition_index": 0, "leader_epoch": 4, "partition_epoch": core.states[("t", 0)].version,
         "leader_recovery_state": 0,
         "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": -1} for b in (1, 3, 2)]}]}]}, 3)
    core.ready()
    assert 2 in state(core).isr and core.topics["t"].adding[0] == [2, 4]
    # The operator changes their mind: broker 2 is no longer wanted, but it is in the ISR.
    core.reassign("r", {("t", 0): [1, 3, 4]})
    ready = core.ready()
    core.check()  # the ISR within the replicas
    assert set(state(core).isr) == {1, 3} and state(core).leader == 1
    assert 2 not in core.topics["t"].partitions[0]
    stopped = [r for r in ready.requests if r.api_key == ApiKey.STOP_REPLICA and r.broker_id == 2]
    assert stopped, "the dropped replica is stopped (and its log deleted)"


def test_reassignment_errors_and_cancel() -> None:
    core, _ = core_with({0: [1, 2]}, states={0: (LeaderAndIsr(1, 3, (1, 2), 5), 4)})
    core.reassign("r", {("t", 7): [1], ("t", 0): [1, 1]})
    (reply,) = core.ready().replies
    codes = {p["partition_index"]: p["error_code"] for p in reply.body["responses"][0]["partitions"]}
    assert codes == {0: ErrorCode.INVALID_REPLICA_ASSIGNMENT, 7: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    core.reassign("r", {("t", 0): None})
    (reply,) = core.ready().replies
    assert reply.body["responses"][0]["partitions"][0]["error_code"] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    core.reassign("r", {("t", 0): [1, 3]})
    core.ready()
    core.reassign("r", {("t", 0): None})
    ready = core.ready()
    assert core.topics["t"].partitions[0] == [1, 2] and not core.topics["t"].adding
    assert partition_states(requests(ready, ApiKey.STOP_REPLICA)[3])[("t", 0)]["delete_partition"] is True


def test_a_cancel_that_would_leave_the_isr_outside_the_replicas_waits() -> None:
    # Moving [1, 2] to [3, 4]: 3 caught up, 4 not yet, then 1 and 2 died: the ISR is [3] alone.
    core, _ = core_with({0: [1, 2]}, live=(1, 2, 3, 4), states={0: (LeaderAndIsr(1, 3, (1, 2), 5), 4)})
    core.reassign("r", {("t", 0): [3, 4]})
    core.ready()
    core.alter_partition("a", {"broker_id": 1, "broker_epoch": 101, "topics": [
        {"topic_name": "t", "partitions": [{"partition_index": 0, "leader_epoch": state(core).leader_epoch,
                                            "new_isr": [1, 2, 3], "partition_epoch": core.states[("t", 0)].version}]}]}, 1)
    core.ready()
    core.brokers_changed(brokers(3, 4))
    core.ready()
    assert state(core).isr == (3,) and state(core).leader == 3
    core.reassign("r", {("t", 0): None})
    (reply,) = core.ready().replies
    assert reply.body["responses"][0]["partitions"][0]["error_code"] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    core.check()


# Fast failure detection (controller/liveness.py): a broker declared dead before its session ends.
def test_a_broker_declared_dead_is_handled_as_its_registration_deleted() -> None:
    core, _ = core_with({0: [2, 3, 1], 1: [3, 2, 1]}, states={0: (LeaderAndIsr(2, 4, (2, 3, 1), 5), 7),
                                                            1: (LeaderAndIsr(3, 1, (3, 2, 1), 5), 2)})
    core.broker_suspected_dead(2, 102, "refused twice")
    ready = core.ready()
    # The registration goes first (fenced like every write), then the states, in one event.
    assert (ready.writes[0].op, ready.writes[0].path) == ("delete_if_present", "/brokers/ids/2")
    assert [(w.op, w.version) for w in ready.writes[1:]] == [("set", 7), ("set", 2)]
    assert state(core, 0) == LeaderAndIsr(3, 5, (3, 1), 5)  # a new leader, a new leader epoch
    assert state(core, 1) == LeaderAndIsr(3, 2, (3, 1), 5)  # a follower leaves the ISR
    assert 2 not in requests(ready, ApiKey.LEADER_AND_ISR)  # the suspect is told nothing
    metadata = requests(ready, ApiKey.UPDATE_METADATA)
    assert set(metadata) == {1, 3} and [b["id"] for b in metadata[3]["live_brokers"]] == [1, 3]
    core.check()


def test_a_suspicion_about_another_incarnation_or_the_controller_itself_changes_nothing() -> None:
    core, _ = core_with({0: [2, 3, 1]}, states={0: (LeaderAndIsr(2, 4, (2, 3, 1), 5), 7)})
    core.broker_suspected_dead(2, 99, "refused twice")  # an older registration of broker 2
    core.broker_suspected_dead(1, 101, "refused twice")  # the controller's own broker
    core.broker_suspected_dead(7, 107, "refused twice")  # not registered
    assert core.ready().empty() and state(core).leader == 2


def test_a_broker_declared_dead_stays_dead_until_it_registers_again() -> None:
    core, _ = core_with({0: [2, 3, 1]}, states={0: (LeaderAndIsr(2, 4, (2, 3, 1), 5), 7)})
    core.broker_suspected_dead(2, 102, "refused twice")
    core.ready()
    # A read of /brokers/ids made before the deletion still shows the old registration: ignored.
    core.brokers_changed(brokers(1, 2, 3))
    assert core.ready().empty() and state(core).leader == 3 and 2 not in core.brokers
    # Alive after all, it registers again (a new broker epoch): a bounce, never its old leadership.
    again = brokers(1, 2, 3)
    again[2] = BrokerRegistration(2, "127.0.0.1", 9002, epoch=900)
    core.brokers_changed(again)
    ready = core.ready()
    assert 2 in core.brokers and state(core).leader == 3 and state(core).leader_epoch == 5
    assert partition_states(requests(ready, ApiKey.LEADER_AND_ISR)[2])[("t", 0)]["leader"] == 3
    assert core.suspected == {}


def test_declaring_the_last_isr_member_dead_keeps_it_in_the_isr_without_a_leader() -> None:
    # A live suspect that alone is in sync may still acknowledge writes (min.insync.replicas 1):
    # nobody outside the ISR may lead, or they would be lost.
    core, _ = core_with({0: [2, 3]}, states={0: (LeaderAndIsr(2, 4, (2,), 5), 7)})
    core.broker_suspected_dead(2, 102, "refused twice")
    core.ready()
    assert state(core).leader == NO_LEADER and state(core).isr == (2,)
