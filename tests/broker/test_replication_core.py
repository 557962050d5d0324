"""Scripted scenarios on the replication core itself (roost.broker.replica.fetcher and .isr), with
no shell: each test drives a fetcher's or the ISR manager's activity by hand, answering the
effects it yields (roost.broker.activity.effects) as a leader or a controller would, on real
partition logs. Two of the bugs the replication simulation found are replayed here exactly (the
interleavings are rare in its random runs); scripts/break_claims.py reverts each fix in src/ and
these tests fail."""

from __future__ import annotations

import types
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from roost.broker.activity.effects import Activity, Request, Sleep, Sync, WaitForWork
from roost.broker.metadata.cache import BrokerEndpoint, MetadataCache
from roost.broker.replica.fetcher import ReplicaFetchers
from roost.broker.replica.isr import IsrManager
from roost.broker.replica.partition import Partition
from roost.broker.replica.state import PartitionState
from roost.config import BrokerConfig
from roost.log import PartitionLog
from roost.storage.log_manager import log_config_from_topic
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import build_batch

ME, LEADER, OTHER, CONTROLLER = 1, 2, 3, 9
FETCH_SETTINGS = {"replica.fetch.wait.max.ms": 100, "replica.fetch.min.bytes": 1,
                  "replica.fetch.response.max.bytes": 1 << 20, "replica.fetch.max.bytes": 1 << 20,
                  "replica.fetch.backoff.ms": 100}


class Recorded:
    """A shell that runs nothing: the test holds the activity and answers its effects."""

    def __init__(self, activity: Activity, name: str) -> None:
        self.activity = activity
        self.name = name
        self.wakes = 0

    def wake(self) -> None:
        self.wakes += 1

    def done(self) -> bool:
        return False

    async def close(self) -> None:
        self.activity.close()


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def _reraise(leader: int, error: BaseException) -> None:
    raise error


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def spawned() -> list[Recorded]:
    return []


def _partition(tmp_path: Path, clock: Clock, state: PartitionState, batches: int, epoch: int) -> Iterator[Partition]:
    configs = BrokerConfig.build([("test", {"broker.id": ME})]).topic_defaults()
    plog = PartitionLog.open(tmp_path / "t-0", log_config_from_topic(configs), clock)
    for offset in range(batches):
        plog.append(bytearray(build_batch([(None, b"v%d" % offset)], base_offset=offset, timestamp_ms=clock.now,
                                          partition_leader_epoch=epoch)), assign_offsets=False)
    partition = Partition("t", 0, plog, configs, state, topic_id=uuid.uuid4())
    yield partition
    plog.close()


# the follower: an out-of-range fetch, then the ListOffsets round trips ----------------------------
@pytest.fixture
def follower(tmp_path: Path, clock: Clock) -> Iterator[Partition]:
    state = PartitionState(ME, (LEADER, ME), LEADER, 1, (), partition_epoch=1, high_watermark=1)
    yield from _partition(tmp_path, clock, state, batches=3, epoch=1)


def _fetchers(clock: Clock, spawned: list[Recorded]) -> ReplicaFetchers:
    def spawn(activity: Activity, name: str) -> Recorded:
        spawned.append(Recorded(activity, name))
        return spawned[-1]

    fetchers = ReplicaFetchers(ME, FETCH_SETTINGS, None, None, clock_ms=clock, spawn=spawn)  # type: ignore[arg-type]
    fetchers.on_bug = _reraise  # a bug applying an answer fails the test (the broker logs it)
    return fetchers


def _out_of_range(partition: Partition) -> dict[str, Any]:
    return {"responses": [{"topic_id": partition.topic_id, "partitions": [
        {"partition_index": 0, "error_code": ErrorCode.OFFSET_OUT_OF_RANGE, "high_watermark": -1,
         "log_start_offset": -1, "records": None}]}]}


def _offset(offset: int) -> dict[str, Any]:
    return {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "error_code": 0, "offset": offset}]}]}


def _fetch_out_of_range_until_latest(partition: Partition, activity: Activity) -> Request:
    """Drive the fetcher to its ListOffsets(latest) request; returns it unanswered."""
    fetch = activity.send(None)
    assert isinstance(fetch, Request) and fetch.api_key == ApiKey.FETCH and fetch.broker == LEADER
    [topic] = fetch.body["topics"]
    assert topic["partitions"][0]["fetch_offset"] == 3
    earliest = activity.send(_out_of_range(partition))
    assert isinstance(earliest, Request) and earliest.api_key == ApiKey.LIST_OFFSETS
    latest = activity.send(_offset(0))
    assert isinstance(latest, Request) and latest.api_key == ApiKey.LIST_OFFSETS
    return latest


def test_a_follower_past_the_leaders_end_truncates_to_it(follower: Partition, clock: Clock,
                                                         spawned: list[Recorded]) -> None:
    # The control case: nothing changed while the ListOffsets were out, so the log is cut.
    fetchers = _fetchers(clock, spawned)
    fetchers.follow(follower)
    [task] = spawned
    _fetch_out_of_range_until_latest(follower, task.activity)
    after = task.activity.send(_offset(2))
    assert follower.log.log_end_offset == 2
    assert isinstance(after, Request) and after.api_key == ApiKey.FETCH  # and it fetches on from there


def test_a_follower_that_became_leader_during_its_list_offsets_keeps_its_log(
        follower: Partition, clock: Clock, spawned: list[Recorded]) -> None:
    # The replication simulation's bug: a fetcher truncated after its ListOffsets round trips
    # although this broker had become the leader meanwhile, cutting committed records.
    fetchers = _fetchers(clock, spawned)
    fetchers.follow(follower)
    [task] = spawned
    _fetch_out_of_range_until_latest(follower, task.activity)
    follower.state.become_leader(2, 2, (LEADER, ME), (ME,), follower.log.log_end_offset, clock.now)
    after = task.activity.send(_offset(1))  # the old leader's answer, about a log that is not ours now
    assert follower.log.log_end_offset == 3
    assert isinstance(after, WaitForWork)  # nothing left to fetch: it leads


def test_a_follower_that_follows_a_new_epoch_after_its_list_offsets_keeps_its_log(
        follower: Partition, clock: Clock, spawned: list[Recorded]) -> None:
    fetchers = _fetchers(clock, spawned)
    fetchers.follow(follower)
    [task] = spawned
    _fetch_out_of_range_until_latest(follower, task.activity)
    follower.state.become_follower(OTHER, 2, 2, (LEADER, ME, OTHER))
    task.activity.send(_offset(1))
    assert follower.log.log_end_offset == 3


def test_a_follower_reports_an_append_only_after_its_fsync(follower: Partition, clock: Clock,
                                                           spawned: list[Recorded]) -> None:
    follower.configs = {**follower.configs, "flush.messages": 1}
    fetchers = _fetchers(clock, spawned)
    fetchers.follow(follower)
    [task] = spawned
    task.activity.send(None)
    records = build_batch([(None, b"new")], base_offset=3, timestamp_ms=clock.now, partition_leader_epoch=1)
    answer = {"responses": [{"topic_id": follower.topic_id, "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 3, "log_start_offset": 0, "records": records}]}]}
    sync = task.activity.send(answer)
    assert isinstance(sync, Sync) and sync.logs == (follower.log,)
    assert follower.log.log_end_offset == 4
    fetch = task.activity.send([None])
    assert isinstance(fetch, Request) and fetch.body["topics"][0]["partitions"][0]["fetch_offset"] == 4
    # A failed fsync: the partition is no longer followed (its next fetch would claim the records).
    sync = task.activity.send({"responses": [{"topic_id": follower.topic_id, "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 4, "log_start_offset": 0,
         "records": build_batch([(None, b"more")], base_offset=4, timestamp_ms=clock.now,
                                partition_leader_epoch=1)}]}]})
    assert isinstance(sync, Sync)
    assert isinstance(task.activity.send([OSError("disk gone")]), WaitForWork)


# the leader: an ISR expansion whose answer is fenced, or for another leader epoch -----------------
@pytest.fixture
def leader(tmp_path: Path, clock: Clock) -> Iterator[Partition]:
    state = PartitionState(ME, (ME, OTHER), -1, 0, ())
    state.become_leader(1, 1, (ME, OTHER), (ME,), 3, clock.now)
    yield from _partition(tmp_path, clock, state, batches=3, epoch=1)


def _isr_manager(partition: Partition, clock: Clock, spawned: list[Recorded]) -> IsrManager:
    def spawn(activity: Activity, name: str) -> Recorded:
        spawned.append(Recorded(activity, name))
        return spawned[-1]

    replicas = types.SimpleNamespace(hosted=lambda: [partition], broker_epoch=7, clock_ms=clock,
                                     on_follower_caught_up=None)
    metadata = MetadataCache()
    metadata.set_brokers([BrokerEndpoint(CONTROLLER, "127.0.0.1", 9092)], CONTROLLER)
    return IsrManager(ME, {"replica.lag.time.max.ms": 30_000}, replicas, metadata, None,  # type: ignore[arg-type]
                      spawn=spawn)


def _isr_answer(partition: Partition, code: int, leader_epoch: int, isr: list[int]) -> dict[str, Any]:
    return {"error_code": 0, "topics": [{"topic_id": partition.topic_id, "partitions": [
        {"partition_index": 0, "error_code": code, "leader_id": ME, "leader_epoch": leader_epoch, "isr": isr,
         "partition_epoch": 2, "leader_recovery_state": 0}]}]}


def _expand_and_answer(partition: Partition, clock: Clock, answer: dict[str, Any]) -> None:
    spawned: list[Recorded] = []
    isr = _isr_manager(partition, clock, spawned)
    partition.state.record_follower_fetch(OTHER, 3, partition.log.log_end_offset, clock.now)
    isr.expand(partition, OTHER)
    [task] = spawned
    request = task.activity.send(None)
    assert isinstance(request, Request) and request.api_key == ApiKey.ALTER_PARTITION
    assert request.broker == CONTROLLER
    assert request.body["topics"][0]["partitions"][0]["new_isr_with_epochs"] == [
        {"broker_id": ME, "broker_epoch": -1}, {"broker_id": OTHER, "broker_epoch": -1}]
    with pytest.raises(StopIteration):
        task.activity.send(answer)


def _hw_after_an_append(partition: Partition, clock: Clock) -> int:
    partition.log.append(bytearray(build_batch([(None, b"acked?")], timestamp_ms=clock.now)), leader_epoch=1)
    partition.state.advance_high_watermark(partition.log.log_end_offset)
    return partition.high_watermark


@pytest.mark.parametrize("code", [ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION])
def test_a_fenced_isr_expansion_stays_pending_and_holds_the_high_watermark(leader: Partition, clock: Clock,
                                                                           code: ErrorCode) -> None:
    # The replication simulation's bug: the controller may have committed the change; forgetting
    # it let the HW pass the replica being added, and acknowledged writes were lost when it led.
    _expand_and_answer(leader, clock, _isr_answer(leader, code, 1, []))
    assert leader.state.pending_isr == {ME, OTHER}
    assert _hw_after_an_append(leader, clock) == 3  # waits for OTHER, which holds 3 records


def test_an_isr_answer_for_another_leader_epoch_stays_pending(leader: Partition, clock: Clock) -> None:
    _expand_and_answer(leader, clock, _isr_answer(leader, ErrorCode.NONE, 5, [ME, OTHER]))
    assert leader.state.pending_isr == {ME, OTHER}
    assert _hw_after_an_append(leader, clock) == 3


def test_an_accepted_isr_expansion_takes_effect(leader: Partition, clock: Clock) -> None:
    _expand_and_answer(leader, clock, _isr_answer(leader, ErrorCode.NONE, 1, [ME, OTHER]))
    assert leader.state.pending_isr is None and leader.state.isr == {ME, OTHER}
    assert _hw_after_an_append(leader, clock) == 3


def test_the_shrink_check_sleeps_half_the_lag_then_reads_the_clock(leader: Partition, clock: Clock) -> None:
    spawned: list[Recorded] = []
    isr = _isr_manager(leader, clock, spawned)
    isr.start()
    [task] = spawned
    assert task.activity.send(None) == Sleep(15_000)
    assert task.activity.send(None) == Sleep(15_000)  # nobody lags: nothing asked
