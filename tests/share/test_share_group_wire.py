"""Share groups over the wire against a real `roost up` (broker + keeper): ShareGroupHeartbeat
and ShareGroupDescribe as Kafka 4.2 answers them, the GROUP config resource, FindCoordinator's
batched keys and share key type, ListGroups' `share` type and DeleteGroups' NON_EMPTY_GROUP."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.cli.kafka_cli import run_cli, run_json
from tests.support.kafka_wire import WireClient
from tests.support.procs import RoostProcess, start_roost
from tests.support.scrape import scrape, value
from tests.support.share_configs import read_from_earliest

FIND_COORDINATOR, LIST_GROUPS, DELETE_GROUPS, METADATA = 10, 16, 42, 3
DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
HEARTBEAT, DESCRIBE = 76, 77
GROUP_RESOURCE = 32


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    directory = tmp_path_factory.mktemp("share-wire")
    proc = start_roost(["up", "--data-dir", str(directory), "--kafka-port", "0", "--metrics-port", "0",
                        "--group.share.min.record.lock.duration.ms", "1000"], expect=("kafka", "keeper", "metrics"))
    yield proc
    proc.stop()


def topic_id(raw: WireClient, topic: str) -> uuid.UUID:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answer = raw.request(METADATA, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": topic}],
                                            "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": False})
        found = answer["topics"][0]
        if found["error_code"] == 0 and found["partitions"]:
            return found["topic_id"]
        time.sleep(0.2)
    raise AssertionError(f"topic {topic} never appeared")


def coordinator(proc: RoostProcess, group: str) -> WireClient:
    raw = WireClient(proc.address("kafka"))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = raw.request(FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        if found["error_code"] == 0:
            raw.close()
            return WireClient(f"{found['host']}:{found['port']}")
        time.sleep(0.2)
    raise AssertionError("no coordinator")


def heartbeat(raw: WireClient, group: str, member: str, epoch: int, topics: list[str] | None = None,
              rack: str | None = None) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        answer = raw.request(HEARTBEAT, 1, {"group_id": group, "member_id": member, "member_epoch": epoch,
                                            "rack_id": rack, "subscribed_topic_names": topics})
        if answer["error_code"] not in (14, 15, 16) or time.monotonic() > deadline:  # loading, not yet there
            return answer
        time.sleep(0.2)


@pytest.fixture(scope="module")
def orders(broker: RoostProcess) -> str:
    admin = AdminClient({"bootstrap.servers": broker.address("kafka")})
    for future in admin.create_topics([NewTopic("share-orders", 1, 1)]).values():
        future.result(30)
    return "share-orders"


def test_heartbeat_joins_shares_and_leaves(broker: RoostProcess, orders: str) -> None:
    group = "wire-share-1"
    raw = coordinator(broker, group)
    tid = topic_id(raw, orders)
    a, b = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode()[:22], "member-b"
    first = heartbeat(raw, group, a, 0, [orders])
    assert first["error_code"] == 0 and first["member_id"] == a and first["member_epoch"] == 1
    assert first["heartbeat_interval_ms"] == 5000
    assert first["assignment"] == {"topic_partitions": [{"topic_id": tid, "partitions": [0]}]}
    second = heartbeat(raw, group, b, 0, [orders])
    assert second["member_epoch"] == 2 and second["assignment"]["topic_partitions"][0]["partitions"] == [0]
    again = heartbeat(raw, group, a, 1)
    assert again["error_code"] == 0 and again["member_epoch"] == 2 and again["assignment"] is None
    assert heartbeat(raw, group, a, 7)["error_code"] == 110  # FENCED_MEMBER_EPOCH
    assert heartbeat(raw, group, "nobody", 2)["error_code"] == 25  # UNKNOWN_MEMBER_ID
    assert heartbeat(raw, "wire-share-never", "x", 3)["error_code"] in (69, 16)  # unknown group (or elsewhere)
    assert heartbeat(raw, group, "", 0, [orders])["error_code"] == 42
    assert heartbeat(raw, group, "m" * 37, 0, [orders])["error_code"] == 42

    described = raw.request(DESCRIBE, 1, {"group_ids": [group, "wire-share-never"],
                                          "include_authorized_operations": False})
    entry, missing = described["groups"]
    assert entry["error_code"] == 0 and entry["group_state"] == "Stable" and entry["assignor_name"] == "simple"
    assert {m["member_id"] for m in entry["members"]} == {a, b}
    assert entry["members"][0]["assignment"]["topic_partitions"][0]["topic_name"] == orders
    assert missing["error_code"] in (69, 16)

    listed = raw.request(LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["SHARE"]})
    assert {"group_id": group, "protocol_type": "share", "group_state": "Stable", "group_type": "share"} \
        in listed["groups"]
    deleted = raw.request(DELETE_GROUPS, 2, {"groups_names": [group]})
    assert deleted["results"][0]["error_code"] == 68  # NON_EMPTY_GROUP

    # the same through `roost share-group` (kafka-share-groups.sh's --list, --describe, --delete)
    bootstrap = broker.address("kafka")
    assert {"group": group, "state": "stable"} in run_json("share-group", "list", "-b", bootstrap)
    shown = run_json("share-group", "describe", group, "-b", bootstrap)
    assert shown["state"] == "stable" and {m["member"] for m in shown["members"]} == {a, b}
    assert all(m["partitions"] == f"{orders}:0" for m in shown["members"])
    refused = run_cli("share-group", "delete", group, "-b", bootstrap)
    assert refused.returncode != 0 and "NON_EMPTY_GROUP" in refused.stderr
    assert heartbeat(raw, group, a, 2)["member_epoch"] == 2
    assert heartbeat(raw, group, a, -1)["member_epoch"] == -1
    assert heartbeat(raw, group, b, 2)["member_epoch"] == 3
    assert heartbeat(raw, group, b, -1)["member_epoch"] == -1
    assert raw.request(DELETE_GROUPS, 2, {"groups_names": [group]})["results"][0]["error_code"] == 0
    gone = raw.request(DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})
    assert gone["groups"][0]["error_code"] == 69
    raw.close()


def test_find_coordinator_batches_and_share_keys(broker: RoostProcess, orders: str) -> None:
    raw = WireClient(broker.address("kafka"))
    tid = topic_id(raw, orders)
    key = f"g:with:colons:{base64.urlsafe_b64encode(tid.bytes).rstrip(b'=').decode()}:0"
    batched = raw.request(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["a", "b"]})
    assert [c["key"] for c in batched["coordinators"]] == ["a", "b"]
    share = raw.request(FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": [key, "not-a-key"]})
    by_key = {c["key"]: c for c in share["coordinators"]}
    assert by_key["not-a-key"]["error_code"] == 42
    assert by_key[key]["error_code"] in (0, 15)  # the share coordinator, or none yet
    old = raw.request(FIND_COORDINATOR, 5, {"key_type": 2, "coordinator_keys": [key]})
    assert old["coordinators"][0]["error_code"] == 42  # key type 2 needs v6
    raw.close()


def test_group_configs_are_validated_and_described(broker: RoostProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.address("kafka")})
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ResourceType

    def alter(**configs: str) -> None:
        resource = ConfigResource(ResourceType.GROUP, "wire-share-configured", incremental_configs=[
            ConfigEntry(name.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
            for name, value in configs.items()])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(30)

    alter(share_auto_offset_reset="earliest", share_record_lock_duration_ms="1000")
    alter(share_isolation_level="read_committed")
    for bad in ({"share_record_lock_duration_ms": "999"}, {"share_auto_offset_reset": "sometimes"},
                {"share_delivery_count_limit": "3"}, {"share_session_timeout_ms": "1000"}):
        with pytest.raises(Exception, match=r"INVALID_CONFIG|Unknown group config|must be"):
            alter(**bad)
    alter(share_auto_offset_reset="by_duration:PT15M")
    described = admin.describe_configs([ConfigResource(ResourceType.GROUP, "wire-share-configured")])
    entries = next(iter(described.values())).result(30)
    assert entries["share.auto.offset.reset"].value == "by_duration:PT15M"
    assert entries["share.record.lock.duration.ms"].value == "1000"
    assert entries["share.isolation.level"].value == "read_committed"
    assert entries["share.heartbeat.interval.ms"].value == "5000" and entries["share.heartbeat.interval.ms"].is_default


SHARE_FETCH, SHARE_ACKNOWLEDGE, PRODUCE_API = 78, 79, 0


def share_fetch(raw: WireClient, group: str, member: str, epoch: int, topics: list[dict[str, Any]],
                version: int = 1, max_wait_ms: int = 0, forgotten: list[dict[str, Any]] | None = None,
                **extra: Any) -> dict[str, Any]:
    return raw.request(SHARE_FETCH, version, {
        "group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait_ms": max_wait_ms,
        "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500, "topics": topics,
        "forgotten_topics_data": forgotten or [], **extra})


def test_share_sessions_epochs_acknowledgements_and_close(broker: RoostProcess) -> None:
    from confluent_kafka import Producer

    admin = AdminClient({"bootstrap.servers": broker.address("kafka")})
    for future in admin.create_topics([NewTopic("share-sessions", 1, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": broker.address("kafka"), "batch.num.messages": 1})
    for i in range(6):
        producer.produce("share-sessions", value=b"r%d" % i)
    assert producer.flush(30) == 0
    group = "wire-share-sessions"
    read_from_earliest(admin, group)
    raw = WireClient(broker.address("kafka"))
    tid = topic_id(raw, "share-sessions")
    whole = [{"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]

    def acks(first: int, last: int, kind: int) -> list[dict[str, Any]]:
        return [{"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
            {"first_offset": first, "last_offset": last, "acknowledge_types": [kind]}]}]}]

    assert share_fetch(raw, group, "m1", 3, whole)["error_code"] == 122  # no session
    assert share_fetch(raw, group, "", 0, whole)["error_code"] == 42
    assert share_fetch(raw, group, "m1", 0, acks(0, 0, 1))["error_code"] == 42  # acks while opening
    opened = share_fetch(raw, group, "m1", 0, whole, max_wait_ms=5000)
    assert opened["error_code"] == 0 and opened["acquisition_lock_timeout_ms"] == 30000
    part = opened["responses"][0]["partitions"][0]
    assert part["error_code"] == 0 and part["records"]
    acquired = part["acquired_records"]
    assert acquired[0]["first_offset"] == 0 and acquired[-1]["last_offset"] == 5
    assert all(r["delivery_count"] == 1 for r in acquired)
    assert share_fetch(raw, group, "m1", 2, [])["error_code"] == 123  # the session expects 1
    # epoch 1: accept 0-1, release 2; the release comes back at once, with delivery count 2
    fetched = share_fetch(raw, group, "m1", 1, acks(0, 1, 1) + acks(2, 2, 2))
    assert fetched["error_code"] == 0
    entry = fetched["responses"][0]["partitions"][0]
    assert entry["acknowledge_error_code"] == 0
    assert [(r["first_offset"], r["last_offset"], r["delivery_count"]) for r in entry["acquired_records"]] == \
        [(2, 2, 2)]
    # ShareAcknowledge shares the epoch counter (2 now); it cannot open a session
    assert raw.request(SHARE_ACKNOWLEDGE, 1, {"group_id": group, "member_id": "m1", "share_session_epoch": 0,
                                              "topics": []})["error_code"] == 123
    acked = raw.request(SHARE_ACKNOWLEDGE, 1, {"group_id": group, "member_id": "m1", "share_session_epoch": 2,
                                               "topics": acks(3, 3, 3)})
    assert acked["error_code"] == 0 and acked["responses"][0]["partitions"][0]["error_code"] == 0
    # a record no longer Acquired (3 was rejected: archived) is INVALID_RECORD_STATE
    again = raw.request(SHARE_ACKNOWLEDGE, 1, {"group_id": group, "member_id": "m1", "share_session_epoch": 3,
                                               "topics": acks(3, 3, 1)})
    assert again["responses"][0]["partitions"][0]["error_code"] == 121
    # /metrics under Kafka's names: acknowledgements by type, the window, the open session
    samples = scrape(broker.address("metrics"))
    assert value(samples, "kafka_server_sharegroupmetrics_recordacknowledgements_total", ackType="Accept") >= 2
    assert value(samples, "kafka_server_sharegroupmetrics_recordacknowledgements_total", ackType="Reject") >= 1
    assert value(samples, "kafka_server_sharesessioncache_sharesessionscount") >= 1
    assert value(samples, "roost_share_partition_acquired_records", group=group, topic="share-sessions",
                 partition="0") == 3  # 2, 4 and 5
    # another member sees nothing: 2 and 4-5 are still m1's
    other = WireClient(broker.address("kafka"))
    empty = share_fetch(other, group, "m2", 0, whole, max_wait_ms=200)
    assert empty["responses"][0]["partitions"][0]["acquired_records"] == []
    # m1 closes its session (epoch -1): what it still holds goes to m2
    closed = raw.request(SHARE_ACKNOWLEDGE, 1, {"group_id": group, "member_id": "m1", "share_session_epoch": -1,
                                                "topics": acks(2, 2, 1)})
    assert closed["error_code"] == 0
    assert raw.request(SHARE_ACKNOWLEDGE, 1, {"group_id": group, "member_id": "m1", "share_session_epoch": -1,
                                              "topics": []})["error_code"] == 122
    taken = share_fetch(other, group, "m2", 1, [], max_wait_ms=5000)
    ranges = taken["responses"][0]["partitions"][0]["acquired_records"]
    assert [(r["first_offset"], r["last_offset"], r["delivery_count"]) for r in ranges] == [(4, 5, 2)]
    # m2's connection closes: its records are released; m3 takes them (delivery count 3)
    other.close()
    third = WireClient(broker.address("kafka"))
    deadline = time.monotonic() + 20
    ranges = []
    while not ranges and time.monotonic() < deadline:
        got = share_fetch(third, group, "m3", 0, whole, max_wait_ms=1000)
        ranges = got["responses"][0]["partitions"][0]["acquired_records"]
    assert [(r["first_offset"], r["last_offset"], r["delivery_count"]) for r in ranges] == [(4, 5, 3)]
    unknown = share_fetch(third, group, "m4", 0, [{"topic_id": uuid.uuid4(), "partitions": [
        {"partition_index": 0, "acknowledgement_batches": []}]}])
    assert unknown["responses"][0]["partitions"][0]["error_code"] == 100  # UNKNOWN_TOPIC_ID
    third.close()
    raw.close()


def test_record_limit_acquire_mode_splits_a_batch(broker: RoostProcess) -> None:
    """ShareFetch v2 ShareAcquireMode 1 (KIP-1206): never more than MaxRecords, even inside one
    log batch; mode 0 (batch-optimized) finishes the batch it started."""
    from confluent_kafka import Producer

    admin = AdminClient({"bootstrap.servers": broker.address("kafka")})
    for future in admin.create_topics([NewTopic("share-record-limit", 1, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": broker.address("kafka"), "linger.ms": 1000})
    for i in range(10):
        producer.produce("share-record-limit", value=b"r%d" % i)
    assert producer.flush(30) == 0  # one batch, offsets 0-9
    group = "wire-share-record-limit"
    read_from_earliest(admin, group)
    raw, other = WireClient(broker.address("kafka")), WireClient(broker.address("kafka"))
    try:
        tid = topic_id(raw, "share-record-limit")
        whole = [{"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]

        def ranges(answer: dict[str, Any]) -> list[tuple[int, int]]:
            assert answer["error_code"] == 0, answer
            return [(r["first_offset"], r["last_offset"])
                    for r in answer["responses"][0]["partitions"][0]["acquired_records"]]
        assert ranges(share_fetch(raw, group, "m1", 0, whole, version=2, max_wait_ms=5000, max_records=3,
                                  batch_size=3, share_acquire_mode=1)) == [(0, 2)]
        assert ranges(share_fetch(raw, group, "m1", 1, [], version=2, max_records=3, batch_size=3,
                                  share_acquire_mode=1)) == [(3, 5)]
        assert ranges(share_fetch(other, group, "m2", 0, whole, version=2, max_wait_ms=5000, max_records=3,
                                  batch_size=3, share_acquire_mode=0)) == [(6, 9)]
        assert share_fetch(other, group, "m2", 1, [], version=2, share_acquire_mode=7)["error_code"] == 42
    finally:
        raw.close()
        other.close()
