"""The share group page's pure part (roost.console.share_view): the leaders' /metrics read into
per-partition figures, several brokers' merged, and the page's rows built from ShareGroupDescribe,
those figures and the end offsets."""

from __future__ import annotations

from roost.admin.share_groups import DEAD_LETTER_TOPIC_CONFIG as ADMIN_NAME
from roost.broker.share.dead_letter import DEAD_LETTER_TOPIC_CONFIG as BROKER_NAME
from roost.console.share_view import LeaderFigures, leader_figures, merge_figures, share_group_view

METRICS = """\
# HELP kafka_server_sharepartitionmetrics_inflightmessagecount Records in a share-partition's in-flight window
# TYPE kafka_server_sharepartitionmetrics_inflightmessagecount gauge
kafka_server_sharepartitionmetrics_inflightmessagecount{group="email",partition="0",topic="jobs"} 15.0
kafka_server_sharepartitionmetrics_inflightmessagecount{group="other",partition="0",topic="jobs"} 3.0
# TYPE roost_share_partition_acquired_records gauge
roost_share_partition_acquired_records{group="email",partition="0",topic="jobs"} 10.0
# TYPE roost_share_partition_start_offset gauge
roost_share_partition_start_offset{group="email",partition="0",topic="jobs"} 5.0
# TYPE roost_share_partition_records_by_delivery_count gauge
roost_share_partition_records_by_delivery_count{delivery_count="1",group="email",partition="0",topic="jobs"} 12.0
roost_share_partition_records_by_delivery_count{delivery_count="3",group="email",partition="0",topic="jobs"} 2.0
# TYPE kafka_server_replicamanager_underreplicatedpartitions gauge
kafka_server_replicamanager_underreplicatedpartitions 0.0
"""

DESCRIBED = {"group": "email", "state": "stable", "group_epoch": 3, "assignment_epoch": 3, "assignor": "simple",
             "members": [
                 {"member": "m1", "client_id": "w1", "host": "/10.0.0.1", "member_epoch": 3, "subscribed": "jobs",
                  "assignment": [{"topic": "jobs", "partitions": [0, 1]}]},
                 {"member": "m2", "client_id": "", "host": "/10.0.0.2", "member_epoch": 3, "subscribed": "jobs",
                  "assignment": [{"topic": "jobs", "partitions": [0]}]}]}


def test_the_dead_letter_config_name_is_the_brokers():
    assert ADMIN_NAME == BROKER_NAME


def test_leader_figures_are_read_per_group_topic_and_partition():
    figures = leader_figures(METRICS, "email")
    assert figures == {("email", "jobs", 0): LeaderFigures(start_offset=5, in_flight=15, acquired=10,
                                                           by_delivery_count={1: 12, 3: 2})}
    assert set(leader_figures(METRICS)) == {("email", "jobs", 0), ("other", "jobs", 0)}
    assert leader_figures("", "email") == {}


def test_while_leadership_moves_the_later_start_offset_wins():
    old = {("g", "t", 0): LeaderFigures(start_offset=4, in_flight=9)}
    new = {("g", "t", 0): LeaderFigures(start_offset=7, in_flight=2)}
    assert merge_figures([old, new])[("g", "t", 0)].start_offset == 7
    assert merge_figures([new, old])[("g", "t", 0)].start_offset == 7


def test_rows_join_members_leader_figures_and_end_offsets():
    view = share_group_view(DESCRIBED, leader_figures(METRICS, "email"), {("jobs", 0): 20, ("jobs", 1): 7},
                            "jobs-dlq", [], True)
    by_partition = {row["partition"]: row for row in view["partitions"]}
    zero, one = by_partition[0], by_partition[1]
    assert (zero["start_offset"], zero["end_offset"], zero["lag"], zero["in_flight"], zero["acquired"]) == \
        (5, 20, 15, 15, 10)
    assert zero["members"] == ["m2", "w1"]  # shared; a member without a client id by its member id
    assert zero["delivery_counts"] == [{"delivery_count": 1, "records": 12}, {"delivery_count": 3, "records": 2}]
    # partition 1: assigned, but no leader has loaded its state yet: unknown, not zero
    assert (one["start_offset"], one["lag"], one["in_flight"], one["acquired"]) == (None, None, None, None)
    assert view["total_lag"] == 15 and view["dead_letter_topic"] == "jobs-dlq"
    assert view["delivery_counts"] == [{"delivery_count": 1, "records": 12}, {"delivery_count": 3, "records": 2}]
    assert view["members"][0]["assignment"] == [{"topic": "jobs", "partition": 0}, {"topic": "jobs", "partition": 1}]


def test_a_partition_in_flight_on_a_leader_shows_with_no_member_left():
    empty = {**DESCRIBED, "state": "empty", "members": []}
    view = share_group_view(empty, leader_figures(METRICS, "email"), {("jobs", 0): 5}, None, ["x: refused"], True)
    assert [(r["topic"], r["partition"], r["members"], r["lag"]) for r in view["partitions"]] == [("jobs", 0, [], 0)]
    assert view["metrics"] == {"configured": True, "problems": ["x: refused"]}
