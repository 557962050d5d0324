"""The executor's pure core (roost.broker.balance.executor) on random plans, against a simulated
cluster that finishes the moves it is given in a random order: the per-broker bound holds at
every step, every task ends done or refused, a refused target is one that would break a rule,
stopping cancels exactly the tasks in progress, a dead broker stops the execution."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from roost.broker.balance.executor import Executor, Observed, Phase, TaskState
from roost.broker.balance.load import (
    LoadWindows,
    PartitionCounters,
    Placement,
    Sample,
    model_from_loads,
    predicted_rate,
)
from roost.broker.balance.planner import Proposal

BROKERS = list(range(1, 7))


@st.composite
def proposals(draw: st.DrawFn) -> list[Proposal]:
    count = draw(st.integers(1, 40))
    rng = random.Random(draw(st.integers(0, 2**32)))
    found = []
    for index in range(count):
        old = tuple(rng.sample(BROKERS, 3))
        spare = [b for b in BROKERS if b not in old]
        new = list(old)
        for position in rng.sample(range(3), rng.randint(0, 2)):
            new[position] = spare.pop()
        found.append(Proposal(("t", index), old, tuple(new), old[0], new[0]))
    return found


def cluster_of(plan: list[Proposal]) -> dict[tuple[str, int], Observed]:
    return {p.partition: Observed(p.old_replicas, p.old_replicas, p.old_leader, False, 2) for p in plan}


@settings(max_examples=60, deadline=None)
@given(proposals(), st.integers(1, 4), st.integers(0, 2**32))
def test_the_per_broker_bound_holds_and_every_task_ends(plan: list[Proposal], limit: int, seed: int) -> None:
    rng = random.Random(seed)
    executor = Executor(plan, moves_per_broker=limit)
    cluster = cluster_of(plan)
    live = set(BROKERS)
    for _ in range(10 * len(plan) + 10):
        if executor.phase != Phase.INTER_BROKER_REPLICA_MOVEMENT:
            break
        for task in executor.next_batch(cluster, live):
            p = task.proposal
            cluster[task.key] = Observed((*p.new_replicas, *p.removing), p.old_replicas, p.old_leader, True, 2)
        per_broker: dict[int, int] = {}
        for task in executor.in_progress():
            for broker in task.brokers:
                per_broker[broker] = per_broker.get(broker, 0) + 1
        assert all(n <= limit for n in per_broker.values()), per_broker
        for task in executor.in_progress():  # the cluster finishes some moves
            if rng.random() < 0.5:
                p = task.proposal
                cluster[task.key] = Observed(p.new_replicas, p.new_replicas, p.new_replicas[0], False, 2)
        executor.observe(cluster, live)
    assert executor.phase in (Phase.LEADER_MOVEMENT, Phase.COMPLETED), executor.status()
    assert all(t.state == TaskState.DONE for t in executor.tasks)
    assert max(executor.most_in_progress.values(), default=0) <= limit


def test_a_target_below_min_isr_or_on_a_dead_broker_is_refused() -> None:
    small = Proposal(("t", 0), (1, 2, 3), (4,), 1, 4)
    dead = Proposal(("t", 1), (1, 2, 3), (1, 2, 9), 1, 1)
    fine = Proposal(("t", 2), (1, 2, 3), (1, 2, 4), 1, 1)
    executor = Executor([small, dead, fine])
    cluster = cluster_of([small, dead, fine])
    batch = executor.next_batch(cluster, {1, 2, 3, 4})
    assert [t.key for t in batch] == [("t", 2)]
    states = {t.key: (t.state, t.reason) for t in executor.tasks}
    assert states[("t", 0)][0] == TaskState.REFUSED and "min.insync.replicas" in states[("t", 0)][1]
    assert states[("t", 1)][0] == TaskState.REFUSED and "not alive" in states[("t", 1)][1]


def test_an_under_replicated_partition_waits() -> None:
    move = Proposal(("t", 0), (1, 2, 3), (1, 2, 4), 1, 1)
    executor = Executor([move])
    lagging = {("t", 0): Observed((1, 2, 3), (1, 2), 1, False, 2)}
    assert executor.next_batch(lagging, {1, 2, 3, 4}) == []
    assert executor.tasks[0].state == TaskState.PENDING
    assert len(executor.next_batch(cluster_of([move]), {1, 2, 3, 4})) == 1


def test_a_dead_broker_stops_the_execution_and_stop_cancels_what_is_in_progress() -> None:
    moves = [Proposal(("t", i), (1, 2, 3), (1, 2, 4), 1, 1) for i in range(3)]
    executor = Executor(moves, moves_per_broker=2)
    cluster = cluster_of(moves)
    assert len(executor.next_batch(cluster, {1, 2, 3, 4})) == 2
    executor.observe(cluster, {1, 2, 3})  # broker 4 died
    assert executor.phase == Phase.STOPPING and "[4]" in executor.stop_reason
    assert sorted(t.state.value for t in executor.tasks) == ["cancelled", "cancelled", "pending"]
    assert executor.next_batch(cluster, {1, 2, 3}) == []
    executor.stopped()
    assert executor.finished and executor.status()["phase"] == "STOPPED"


def test_throttled_replicas_name_every_old_and_new_replica() -> None:
    executor = Executor([Proposal(("a", 0), (1, 2), (1, 3), 1, 1), Proposal(("a", 1), (2, 3), (2, 3), 2, 3)])
    assert executor.throttled_replicas() == {"a": "0:1,0:2,0:3"}
    assert executor.throttled_brokers() == {1, 2, 3}
    assert [p.partition for p in executor.leadership] == [("a", 1)]


def test_load_windows_ignore_a_spike_and_follow_a_level_and_a_trend() -> None:
    windows = LoadWindows(5)
    total = 0
    for second in range(6):
        total += 1000 if second != 5 else 11_000  # 1 kB/s, then one window at 11 kB/s
        windows.add(Sample(second * 1000, 0.0, {("t", 0): PartitionCounters(True, total, 0, total // 100, total)}))
    assert abs(windows.smoothed()[("t", 0)].bytes_in - 1000) < 1e-6  # the mean would say 3000
    for second in range(6, 11):
        total += 11_000
        windows.add(Sample(second * 1000, 0.0, {("t", 0): PartitionCounters(True, total, 0, 0, total)}))
    assert abs(windows.smoothed()[("t", 0)].bytes_in - 11_000) < 1e-6
    for second in range(11, 16):  # rising by 2 kB/s a window: planned at the next window's rate
        total += 11_000 + (second - 10) * 2000
        windows.add(Sample(second * 1000, 0.0, {("t", 0): PartitionCounters(True, total, 0, 0, total)}))
    assert abs(windows.smoothed()[("t", 0)].bytes_in - 23_000) < 1e-6  # 13..21 kB/s so far; their mean 17


@given(st.lists(st.floats(0, 1e9), min_size=1, max_size=12), st.floats(0, 1e9))
def test_a_predicted_rate_is_never_negative_and_a_constant_rate_predicts_itself(rates: list[float],
                                                                              level: float) -> None:
    assert predicted_rate(rates) >= 0
    for windows in range(1, 8):
        assert abs(predicted_rate([level] * windows) - level) <= 1e-6 * max(1.0, level)


def test_a_predicted_rate_ignores_one_outlier_in_five_windows_wherever_it_is() -> None:
    for where in range(5):
        rates = [1000.0] * 5
        rates[where] = 50_000.0
        assert abs(predicted_rate(rates) - 1000) < 1e-6, (where, predicted_rate(rates))


def test_a_leadership_that_came_mid_window_has_no_rate_until_a_whole_window() -> None:
    windows = LoadWindows(3)
    windows.add(Sample(0, 0.0, {("t", 0): PartitionCounters(False, 0, 0, 0, 10)}))
    windows.add(Sample(1000, 0.5, {("t", 0): PartitionCounters(True, 5000, 0, 50, 10)}))
    assert ("t", 0) not in windows.smoothed()
    windows.add(Sample(2000, 1.0, {("t", 0): PartitionCounters(True, 6000, 0, 60, 10)}))
    assert windows.smoothed()[("t", 0)].bytes_in == 1000
    assert windows.cpu_cores() == 0.5


def test_the_model_shares_a_brokers_cpu_by_weighted_bytes() -> None:
    documents = {1: {"cpu_cores": 1.0, "partitions": [
        {"topic": "t", "partition": 0, "leader": True, "size": 5, "bytes_in": 700.0, "bytes_out": 0.0},
        {"topic": "t", "partition": 1, "leader": True, "size": 7, "bytes_in": 300.0, "bytes_out": 0.0}]}}
    placements = [Placement("t", 0, (1,), 1, (1,)), Placement("t", 1, (1,), 1, (1,))]
    brokers, partitions = model_from_loads({1: "r1", 2: None}, placements, documents)
    assert [b.broker_id for b in brokers] == [1, 2] and brokers[0].rack == "r1"
    assert [round(p.load.cpu, 6) for p in partitions] == [0.7, 0.3]
    assert [p.load.disk for p in partitions] == [5.0, 7.0]
